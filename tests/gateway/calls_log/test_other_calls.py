"""The calls log on embeddings, audio, native chat and the agent, and the refusals before any
model (credential, ceiling, quota, the group's models), through a running gateway and the reference upstream."""

import httpx
import openai
import pytest

from gateway.models import CallRecord, UsageRecord
from tests.factories import ModelFactory
from tests.gateway.calls_log.conftest import HELLO, call_of, facts, rid, timed, usage_of
from tests.native.conftest import sse_events


def row(world, surface, model, *, usage=None, asked=None, **changes):
    usage = usage or UsageRecord()
    return {"account": world.account.pk, "group": world.group.pk, "surface": surface,
            "model_requested": model if asked is None else asked, "model": model, "status": 200, "outcome": "ok",
            "error_code": "", "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "cost_units": usage.cost_units, "cached": False, "fall_throughs": 0,
            "chain": [(model, model.split("/")[0], "ok", 200)] if model else [], **changes}


@pytest.fixture
def embedder(world):
    return ModelFactory(server=world.oa, name="embed-1", supports_chat=False, supports_embeddings=True)


@pytest.fixture
def whisper(world):
    return ModelFactory(server=world.oa, name="whisper-1", supports_chat=False, supports_audio=True)


def test_embeddings_answered_and_failed_on_both_surfaces(world, embedder):
    result = world.openai.embeddings.create(model="oa/embed-1", input=["one two"], extra_headers=rid("emb-ok"))
    call = call_of("emb-ok")
    assert facts(call) == row(world, "embeddings", "oa/embed-1", usage=usage_of("emb-ok"))
    assert call.input_tokens == result.usage.prompt_tokens
    timed(call)
    r = world.http.post("/api/v1/embeddings", json={"input": "three four", "model": "oa/embed-1"},
                        headers=rid("native-emb-ok"))
    assert r.status_code == 200
    assert facts(call_of("native-emb-ok")) == row(world, "native_embeddings", "oa/embed-1",
                                                  usage=usage_of("native-emb-ok"))

    world.upstream.configure(fail_status=503)
    with pytest.raises(openai.InternalServerError):
        world.openai.embeddings.create(model="oa/embed-1", input=["one two"], extra_headers=rid("emb-503"))
    call = call_of("emb-503")
    assert facts(call) == row(world, "embeddings", "", asked="oa/embed-1", status=503, outcome="failed",
                              error_code="service_unavailable", chain=[("oa/embed-1", "oa", "unavailable", 503)])
    timed(call, first_token=False)


def test_audio_speech_and_transcriptions_answered_and_failed(world, whisper):
    world.openai.audio.speech.create(model="oa/whisper-1", voice="alloy", input="hello there",
                                     extra_headers=rid("speech-ok"))
    assert facts(call_of("speech-ok")) == row(world, "audio.speech", "oa/whisper-1", usage=usage_of("speech-ok"))
    text = world.openai.audio.transcriptions.create(model="oa/whisper-1", file=("clip.wav", b"RIFF" + b"\0" * 96),
                                                    extra_headers=rid("transcribe-ok"))
    assert text.text == "transcribed 100 bytes of clip.wav"
    call = call_of("transcribe-ok")
    assert facts(call) == row(world, "audio.transcriptions", "oa/whisper-1", usage=usage_of("transcribe-ok"))
    timed(call)

    world.upstream.configure(fail_status=500)
    with pytest.raises(openai.InternalServerError):
        world.openai.audio.speech.create(model="oa/whisper-1", voice="alloy", input="hello",
                                         extra_headers=rid("speech-503"))
    assert facts(call_of("speech-503")) == row(world, "audio.speech", "", asked="oa/whisper-1", status=503,
                                               outcome="failed", error_code="service_unavailable",
                                               chain=[("oa/whisper-1", "oa", "unavailable", 500)])


def test_native_chat_streamed_answered_and_failed_inside_the_stream(world):
    r = world.http.post("/api/v1/chat", json={"message": "hello there"}, headers=rid("native-ok"))
    assert [name for name, _ in sse_events(r)] == ["meta", "delta", "delta", "delta", "done"]
    call = call_of("native-ok")
    assert facts(call) == row(world, "native_chat", "oa/echo-1", usage=usage_of("native-ok"))
    timed(call)

    world.upstream.configure(fail_status=503)
    r = world.http.post("/api/v1/chat", json={"message": "hello there"}, headers=rid("native-503"))
    assert r.status_code == 200 and sse_events(r)[1][1]["codigo"] == "modelo_indisponivel"
    call = call_of("native-503")
    assert facts(call) == row(world, "native_chat", "", asked="oa/echo-1", outcome="failed",
                              error_code="modelo_indisponivel", chain=[("oa/echo-1", "oa", "unavailable", 503)])
    timed(call, first_token=False)


def test_native_chat_whole_and_its_quota_refusal(world):
    r = world.http.post("/api/v1/chat", json={"message": "hello there", "stream": False}, headers=rid("whole"))
    assert r.status_code == 200
    assert facts(call_of("whole")) == row(world, "native_chat", "oa/echo-1", usage=usage_of("whole"))
    world.group.daily_tokens = 1
    world.group.save()
    streamed = world.http.post("/api/v1/chat", json={"message": "more"}, headers=rid("quota-stream"))
    assert sse_events(streamed)[1][1]["codigo"] == "limite_perfil"
    whole = world.http.post("/api/v1/chat", json={"message": "more", "stream": False}, headers=rid("quota-whole"))
    assert whole.status_code == 403
    refused = row(world, "native_chat", "", asked="oa/echo-1", outcome="refused", error_code="limite_perfil")
    assert facts(call_of("quota-stream")) == refused
    assert facts(call_of("quota-whole")) == {**refused, "status": 403}


def test_agent_chat_and_run_answered_and_failed(world):
    r = world.http.post("/api/v1/agent/chat", json={"message": "one two", "tools": []}, headers=rid("agent-ok"))
    assert r.status_code == 200, r.text
    call = call_of("agent-ok")
    assert facts(call) == row(world, "native_agent", "oa/echo-1", usage=usage_of("agent-ok"))
    timed(call)
    r = world.http.post("/api/v1/agent/run", json={"task": "three four", "tools": []}, headers=rid("run-ok"))
    assert r.status_code == 200, r.text
    assert facts(call_of("run-ok")) == row(world, "native_agent_run", "oa/echo-1", usage=usage_of("run-ok"))

    world.upstream.configure(fail_status=503)
    r = world.http.post("/api/v1/agent/chat", json={"message": "one two", "model": "oa/echo-1", "tools": []},
                        headers=rid("agent-503"))
    assert r.status_code == 503
    assert facts(call_of("agent-503")) == row(world, "native_agent", "", asked="oa/echo-1", status=503,
                                              outcome="failed", error_code="service_unavailable",
                                              chain=[("oa/echo-1", "oa", "unavailable", 503)])


def test_refusals_before_any_model_are_calls_too(world):
    world.group.all_models = False
    world.group.save()
    with pytest.raises(openai.PermissionDeniedError):
        world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO, extra_headers=rid("not-allowed"))
    assert facts(call_of("not-allowed")) == row(world, "chat.completions", "", asked="oa/echo-1", status=403,
                                                outcome="refused", error_code="permission_denied")
    bad = httpx.post(f"{world.base}/v1/chat/completions", json={"model": "oa/echo-1", "messages": HELLO},
                     headers={"Authorization": "Bearer svc_usr_1_nope", **rid("bad-key")}, timeout=10)
    assert bad.status_code == 401
    assert facts(call_of("bad-key")) == {**row(world, "chat.completions", ""), "account": None, "group": None,
                                         "model_requested": "", "status": 401, "outcome": "refused",
                                         "error_code": "invalid_api_key"}
    assert not world.upstream.requests  # no model was called


def test_a_ceiling_refusal_is_a_call_of_its_account(world, settings):
    limited = [world.http.post("/v1/chat/completions", json={"model": "oa/echo-1", "messages": HELLO},
                               headers={"Accept": "application/json", **rid(f"burst-{n}")}) for n in range(21)]
    assert [r.status_code for r in limited].count(429) == 1 and limited[-1].status_code == 429
    call = call_of("burst-20")
    assert facts(call) == row(world, "chat.completions", "", asked="", status=429, outcome="refused",
                              error_code="rate_limit_exceeded")
    assert CallRecord.objects.filter(account=world.account, outcome="ok").count() == 20
