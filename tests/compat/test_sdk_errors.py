"""Each SDK raises its own exception class for each refusal (spec 5.3, 7.2, 8.3, 8.4)."""

import anthropic
import httpx
import openai
import pytest

from accounts.models import AccountGroup

HELLO = [{"role": "user", "content": "hi"}]


def clients(world, key):
    return (openai.OpenAI(base_url=f"{world.base}/v1", api_key=key, max_retries=0),
            anthropic.Anthropic(base_url=world.base, api_key=key, max_retries=0))


def test_a_bad_key_is_authentication_error_in_both_sdks(world):
    oa, an = clients(world, "svc_usr_1_" + "x" * 32)
    with pytest.raises(openai.AuthenticationError) as exc:
        oa.chat.completions.create(model="oa/echo-1", messages=HELLO)
    assert exc.value.code == "invalid_api_key"
    with pytest.raises(anthropic.AuthenticationError) as exc:
        an.messages.create(model="oa/echo-1", max_tokens=5, messages=HELLO)
    # /v1/messages answers a 401 in the chat-completions shape (spec 7.1.1)
    assert exc.value.body["error"]["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        oa.responses.create(model="oa/echo-1", input="x")


def test_a_model_the_group_may_not_use_is_permission_denied(world):
    AccountGroup.objects.filter(pk=world.group.pk).update(all_models=False)
    world.group.allowed_models.add(world.default)
    with pytest.raises(openai.PermissionDeniedError) as exc:
        world.openai.chat.completions.create(model="an/claude-echo", messages=HELLO)
    assert exc.value.code == "permission_denied"
    with pytest.raises(anthropic.PermissionDeniedError) as exc:
        world.anthropic.messages.create(model="an/claude-echo", max_tokens=5, messages=HELLO)
    assert exc.value.body["error"]["type"] == "permission_error"
    assert world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO).model == "oa/echo-1"


def test_a_used_up_quota_is_permission_denied_on_every_surface(world):
    AccountGroup.objects.filter(pk=world.group.pk).update(daily_tokens=0)
    with pytest.raises(openai.PermissionDeniedError) as exc:
        world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO)
    assert exc.value.code == "permission_denied" and "daily" in exc.value.message
    with pytest.raises(openai.PermissionDeniedError) as exc:
        world.openai.responses.create(model="oa/echo-1", input="x")
    assert exc.value.code == "permission_denied"
    with pytest.raises(anthropic.PermissionDeniedError) as exc:
        world.anthropic.messages.create(model="oa/echo-1", max_tokens=5, messages=HELLO)
    assert exc.value.body["error"]["type"] == "permission_error"
    assert world.upstream.requests == []  # refused before any model was called


def test_a_quota_is_refused_once_the_calls_have_used_it(world):
    AccountGroup.objects.filter(pk=world.group.pk).update(daily_tokens=4)
    first = world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO)
    assert first.usage.total_tokens == 3  # "hi" in, "Echo: hi" out, as the upstream counts
    _wait_used(world, 3)  # 3 of 4 used: the next call is still allowed
    second = world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO)
    _wait_used(world, first.usage.total_tokens + second.usage.total_tokens)
    with pytest.raises(openai.PermissionDeniedError):
        world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO)


def test_a_server_that_lacks_the_model_is_not_found(world):
    with pytest.raises(openai.NotFoundError) as exc:
        world.openai.chat.completions.create(model="oa/no-such-model", messages=HELLO)
    assert exc.value.code == "model_not_found"
    with pytest.raises(anthropic.NotFoundError) as exc:
        world.anthropic.messages.create(model="oa/no-such-model", max_tokens=5, messages=HELLO)
    assert exc.value.body["error"]["type"] == "not_found_error"


def test_a_bare_name_that_does_not_exist_is_answered_by_the_default(world):
    completion = world.openai.chat.completions.create(model="gpt-17-ultra", messages=HELLO)
    assert completion.model == "oa/echo-1"


def test_the_request_ceiling_is_rate_limit_error(world):
    for _ in range(20):
        world.openai.models.list()
    with pytest.raises(openai.RateLimitError) as exc:
        world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO)
    assert exc.value.response.headers["retry-after"]
    assert exc.value.body == {"message": "Too Many Attempts."}
    with pytest.raises(anthropic.RateLimitError):
        world.anthropic.messages.create(model="oa/echo-1", max_tokens=5, messages=HELLO)


def test_a_server_failure_is_internal_server_error(world):
    world.upstream.configure(fail_status=500)
    with pytest.raises(openai.InternalServerError) as exc:
        world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO)
    assert exc.value.status_code == 503
    with pytest.raises(anthropic.InternalServerError):
        world.anthropic.messages.create(model="an/claude-echo", max_tokens=5, messages=HELLO)


def test_too_many_messages_is_a_bad_request(world):
    with pytest.raises(openai.BadRequestError) as exc:
        world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO * 201)
    assert exc.value.param == "messages"
    assert world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO * 200).choices


def test_a_message_over_200000_characters_is_a_bad_request(world):
    last_allowed = world.openai.chat.completions.create(
        model="oa/echo-1", messages=[{"role": "user", "content": "a" * 200000}])
    assert last_allowed.choices[0].message.content.startswith("Echo: aaa")
    with pytest.raises(openai.BadRequestError):
        world.openai.chat.completions.create(model="oa/echo-1", messages=[{"role": "user", "content": "a" * 200001}])
    with pytest.raises(anthropic.BadRequestError):
        world.anthropic.messages.create(model="oa/echo-1", max_tokens=5,
                                        messages=[{"role": "user", "content": "a" * 200001}])


def _wait_used(world, at_least, timeout=5.0):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        used = httpx.get(f"{world.base}/api/v1/usage", headers={"Authorization": f"Bearer {world.key}"}).json()
        if used["day"]["used"] >= at_least:
            return
        time.sleep(0.05)
    raise AssertionError(f"usage did not reach {at_least}")
