"""The google-genai SDK pointed at the running gateway (tests/compat/conftest.py `world`), in API-key
mode with the gateway's key: the Gemini surface as Google's own client sends and reads it."""

import pytest
from google import genai
from google.genai import types


def client_for(world, *, api_version: str = "v1beta", key: str | None = None) -> genai.Client:
    options = types.HttpOptions(base_url=world.base, api_version=api_version,
                                retry_options=types.HttpRetryOptions(attempts=1))
    return genai.Client(api_key=key or world.key, http_options=options)


@pytest.fixture
def gemini(world):
    return client_for(world)
