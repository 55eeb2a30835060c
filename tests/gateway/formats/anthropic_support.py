"""For the Anthropic translation tests: requests checked against the official SDKs' own types, and the
SDK clients over httpx MockTransport."""

import anthropic
import httpx2
import openai
from anthropic.types.message_create_params import MessageCreateParams
from pydantic import TypeAdapter

from tests.sdk_types import CHAT_REQUEST, deep

ANTHROPIC_REQUEST = TypeAdapter(MessageCreateParams)
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def valid_chat_request(req):
    deep(CHAT_REQUEST.validate_python(req))
    return req


def valid_anthropic_request(req):
    deep(ANTHROPIC_REQUEST.validate_python(req))
    return req


def anthropic_client(handler):
    transport = httpx2.MockTransport(handler)
    return anthropic.Anthropic(api_key="k", base_url="http://gw.test", max_retries=0,
                               http_client=httpx2.Client(transport=transport))


def openai_client(handler):
    transport = httpx2.MockTransport(handler)
    return openai.OpenAI(api_key="k", base_url="http://gw.test/v1", max_retries=0,
                         http_client=httpx2.Client(transport=transport))
