"""For the POST /api/v1/chat tests: the paths, the chat requests the reference upstream received,
and the `{detail}` refusal."""

CHAT = "/api/v1/chat"
UPSTREAM_CHAT = "/v1/chat/completions"


def chat_requests(world):
    return [r for r in world.upstream.requests if r.path == UPSTREAM_CHAT]


def assert_detail(response, status):
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"detail"}, body
    return body["detail"]
