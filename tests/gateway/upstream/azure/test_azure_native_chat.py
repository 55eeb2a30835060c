"""An Azure OpenAI deployment behind native chat (`POST /api/v1/chat`): the reply whole and streamed, metered
once; a reply cut midway is saved and answered in part; Azure's content filter refusing the prompt is the
`requisicao_recusada` error (an event inside the stream, a 400 without streaming) with Azure's words."""

from __future__ import annotations

from native.models import Message
from tests.gateway.upstream.azure.fake_azure import FILTER_MESSAGE, FILTERED_PROMPT
from tests.gateway.upstream.azure.test_azure_surfaces import AZ, metered
from tests.native.conftest import sse_events

CHAT = "/api/v1/chat"


def test_native_chat_whole_and_streamed(cloud):
    whole = cloud.api.post(CHAT, json={"message": "hello azure", "stream": False})
    assert whole.status_code == 200
    body = whole.json()
    assert (body["model"], body["text"], body["usage"]) == (
        AZ, "Echo: hello azure", {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5})
    events = sse_events(cloud.api.post(CHAT, json={"message": "hello azure"}))
    assert [name for name, _ in events] == ["meta", "delta", "delta", "delta", "done"]
    assert events[0][1]["model"] == AZ
    assert "".join(p["text"] for name, p in events if name == "delta") == "Echo: hello azure"
    assert events[-1][1]["usage"]["total_tokens"] == 5
    assert [(s, m) for s, m, _, _ in metered(cloud, 2)] == [("native_chat", AZ)] * 2


def test_a_reply_cut_midway_is_saved_and_answered_in_part(cloud):
    cloud.azure.upstream.configure(cut_after_tokens=2)
    events = sse_events(cloud.api.post(CHAT, json={"message": "hello azure"}))
    assert [name for name, _ in events] == ["meta", "delta", "delta", "error", "done"]
    assert events[3][1]["codigo"] == "resposta_interrompida"
    assistant = Message.objects.get(role="assistant")
    assert (assistant.content, assistant.status) == ("Echo: hello ", "partial")
    r = cloud.api.post(CHAT, json={"message": "hello azure", "stream": False})
    assert r.status_code == 502
    assert r.json()["partial"]["text"] == "Echo: hello "


def test_a_prompt_the_content_filter_refuses_is_requisicao_recusada_with_azures_words(cloud):
    events = sse_events(cloud.api.post(CHAT, json={"message": FILTERED_PROMPT}))
    assert [name for name, _ in events] == ["meta", "error", "done"]
    assert (events[1][1]["codigo"], events[1][1]["message"]) == ("requisicao_recusada", FILTER_MESSAGE)
    r = cloud.api.post(CHAT, json={"message": FILTERED_PROMPT, "stream": False})
    assert r.status_code == 400
    assert (r.json()["codigo"], r.json()["detail"]) == ("requisicao_recusada", FILTER_MESSAGE)
    assert not Message.objects.filter(role="assistant").exists()
