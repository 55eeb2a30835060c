"""The prompt and reply of a call are kept only for a group that asks (off by default), redacted and cut to
CALL_CAPTURE_MAX_BYTES; the calls log and its kept text are swept after their retentions by beat."""

import json
from datetime import timedelta

import pytest
from celery.schedules import crontab
from django.utils import timezone

from gateway.celery import app, sweep_call_log
from gateway.models import CallCapture, CallRecord
from gateway.usage.call_records import call_log_sweep, insert_lines
from tests.factories import AccountGroupFactory, CallCaptureFactory, CallRecordFactory
from tests.gateway.calls_log.conftest import call_of, rid

SECRET = "sk-ant-api03-Zq7xK2mP9wR4tY6uI8oL1aS3dF5gH7jK"


def test_a_group_keeps_no_text_by_default(world):
    assert AccountGroupFactory().capture_calls is False
    world.openai.chat.completions.create(model="oa/echo-1", messages=[{"role": "user", "content": "hello"}],
                                         extra_headers=rid("not-kept"))
    call = call_of("not-kept")
    assert not CallCapture.objects.filter(call=call).exists()


def test_a_group_that_keeps_text_gets_the_prompt_and_reply_redacted(world):
    world.group.capture_calls = True
    world.group.save()
    message = f"my key is {SECRET} and the word is blue"
    completion = world.openai.chat.completions.create(model="oa/echo-1",
                                                      messages=[{"role": "user", "content": message}],
                                                      extra_headers=rid("kept"))
    assert SECRET in completion.choices[0].message.content  # the echo carries it back
    capture = call_of("kept").capture
    assert json.loads(capture.prompt) == {"model": "oa/echo-1", "messages": [
        {"role": "user", "content": "my key is [redacted] and the word is blue"}]}  # the body as it came
    assert capture.reply == "Echo: my key is [redacted] and the word is blue"
    assert SECRET not in capture.prompt + capture.reply

    r = world.http.post("/api/v1/chat", json={"message": f"native {SECRET}", "stream": False},
                        headers=rid("kept-native"))
    assert r.status_code == 200
    native = call_of("kept-native").capture
    assert native.reply == "Echo: native [redacted]"
    assert json.loads(native.prompt) == {"message": "native [redacted]", "stream": False}


def test_a_failed_call_keeps_its_prompt_and_no_reply(world):
    world.group.capture_calls = True
    world.group.save()
    world.upstream.configure(fail_status=503)
    r = world.http.post("/v1/chat/completions", json={"model": "oa/echo-1",
                                                      "messages": [{"role": "user", "content": "why"}]},
                        headers=rid("kept-failed"))
    assert r.status_code == 503
    capture = call_of("kept-failed").capture
    assert json.loads(capture.prompt) == {"model": "oa/echo-1", "messages": [{"role": "user", "content": "why"}]}
    assert capture.reply == ""


def line(key, **fields):
    return {"k": key, "t": timezone.now().timestamp(), "a": None, "s": "chat.completions", "st": 200, "o": "ok",
            "l": 12.5, "r": key, **fields}


@pytest.mark.django_db
def test_kept_text_is_cut_at_its_bound_after_redaction(settings):
    settings.CALL_CAPTURE_MAX_BYTES = 300
    long_prompt = "é" * 100 + f" {SECRET} " + "x" * 5000  # a two-byte letter, then the key across nothing
    insert_lines([line("long", cp=long_prompt, cpn=len(long_prompt.encode()), cr="short reply", crn=0)])
    capture = CallCapture.objects.get(call__key="long")
    kept, marker = capture.prompt.rsplit("\n", 1)
    assert marker == f"[… cut: {len(long_prompt.encode())} bytes in all]"
    assert len(kept.encode()) <= 300 and kept.startswith("é" * 100 + " [redacted] x")
    assert capture.reply == "short reply"


@pytest.mark.django_db
def test_the_sweep_deletes_calls_and_kept_text_past_their_retentions(settings):
    settings.CALL_LOG_RETENTION_DAYS, settings.CALL_CAPTURE_RETENTION_DAYS = 30, 7
    now = timezone.now()
    old = CallRecordFactory(created_at=now - timedelta(days=30, minutes=1))
    CallCaptureFactory(call=old)
    week_old = CallRecordFactory(created_at=now - timedelta(days=8))
    CallCaptureFactory(call=week_old)
    fresh = CallRecordFactory(created_at=now - timedelta(days=6))
    CallCaptureFactory(call=fresh)
    assert call_log_sweep(now=now) == 1
    assert set(CallRecord.objects.values_list("pk", flat=True)) == {week_old.pk, fresh.pk}
    assert list(CallCapture.objects.values_list("call_id", flat=True)) == [fresh.key]


@pytest.mark.django_db
def test_the_sweep_is_an_hourly_beat_task(settings):
    CallRecordFactory(created_at=timezone.now() - timedelta(days=settings.CALL_LOG_RETENTION_DAYS + 1))
    entry = app.conf.beat_schedule["sweep-call-log"]
    assert entry["task"] == "gateway.sweep_call_log" and entry["task"] in app.tasks
    assert entry["schedule"] == crontab(minute=29)
    assert sweep_call_log() == 1
    assert not CallRecord.objects.exists()
