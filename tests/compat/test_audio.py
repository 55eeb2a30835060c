"""/v1/audio/* through the openai SDK, passed to a model with the audio capability."""

import io
import warnings

import openai
import pytest
from django.test import override_settings

from tests.factories import ModelFactory, bearer


@pytest.fixture
def whisper(world):
    return ModelFactory(server=world.oa, name="whisper-1", supports_chat=False, supports_audio=True)


def test_a_transcription_round_trip(world, whisper):
    result = world.openai.audio.transcriptions.create(model="oa/whisper-1", file=("clip.wav", b"RIFF" + b"\0" * 96))
    assert result.text == "transcribed 100 bytes of clip.wav"
    sent = world.upstream.last
    assert sent.path == "/v1/audio/transcriptions"
    assert b'name="model"\r\n\r\nwhisper-1' in sent.body


def test_a_translation_round_trip(world, whisper):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        result = world.openai.audio.translations.create(model="oa/whisper-1", file=("c.mp3", b"x" * 10))
    assert result.text == "transcribed 10 bytes of c.mp3"


def test_text_response_format_comes_back_as_text(world, whisper):
    text = world.openai.audio.transcriptions.create(model="oa/whisper-1", file=("c.wav", b"x" * 5),
                                                    response_format="text")
    assert text.strip() == "transcribed 5 bytes of c.wav"


def test_speech_returns_audio(world, whisper):
    audio = world.openai.audio.speech.create(model="oa/whisper-1", voice="alloy", input="hello there",
                                             response_format="wav")
    content = audio.read()
    assert content[:4] == b"RIFF" and content[8:12] == b"WAVE"


def test_a_model_without_audio_is_a_bad_request(world, whisper):
    with pytest.raises(openai.BadRequestError):
        world.openai.audio.transcriptions.create(model="oa/echo-1", file=("c.wav", b"x"))


@override_settings(MAX_AUDIO_UPLOAD_BYTES=1000)
def test_an_upload_over_the_limit_is_413(client, transactional_db, owner):
    """In-process: the async view's checks run on a worker thread's connection, so the data is
    committed (transactional_db)."""
    from tests.factories import api_key_for

    ModelFactory(name="whisper-1", supports_audio=True)
    headers = bearer(api_key_for(owner))
    ok = client.post("/v1/audio/transcriptions", {"model": "whisper-1", "file": io.BytesIO(b"x" * 10)},
                     headers=headers)
    assert ok.status_code != 413
    r = client.post("/v1/audio/transcriptions", {"model": "whisper-1", "file": io.BytesIO(b"x" * 2000)},
                    headers=headers)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "request_too_large"
