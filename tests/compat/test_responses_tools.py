"""POST /v1/responses with function tools (RESPONSES_TOOLS on), driven by the official openai SDK against
the reference upstream: the model calls a tool, the client sends its output back, the model answers; and
what the model servers received (chat tools on the OpenAI kind, Anthropic tools on the Anthropic kind).

The setting is read by the gateway process, which runs apart from the tests (tests/servers.py), so these
tests start a second gateway with RESPONSES_TOOLS=true in its environment; `world.openai` is the
default one, where the setting is off."""

import json

import openai
import pytest

from tests.compat.conftest import world  # noqa: F401 — the fixture: an account, servers oa and an
from tests.servers import web_process
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture `world` uses

MODELS = ["oa/echo-1", "an/claude-echo"]
PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather of a city.", "strict": False,
           "parameters": PARAMETERS}
ARGUMENTS = {"city": "Paris"}
QUESTION = {"role": "user", "content": "Weather in Paris?"}


@pytest.fixture(scope="module")
def tools_gateway(django_db_setup, django_db_blocker):
    """A gateway process with RESPONSES_TOOLS on, on the test database."""
    with django_db_blocker.unblock():
        with web_process(REGISTRY_TTL_SECONDS="0", RESPONSES_TOOLS="true") as base:
            yield base


@pytest.fixture
def client(world, tools_gateway):  # noqa: F811
    world.upstream.configure(tool_arguments=ARGUMENTS)
    return openai.OpenAI(base_url=f"{tools_gateway}/v1", api_key=world.key, max_retries=0)


def ask(client, model, items, stream, **options):
    """The response, and the types of the stream's events (None when not streamed)."""
    if not stream:
        return client.responses.create(model=model, input=items, **options), None
    with client.responses.stream(model=model, input=items, **options) as events:
        seen = [event.type for event in events]
        return events.get_final_response(), seen


def upstream_tools(model):
    if model.startswith("oa/"):
        return [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
                                                  "parameters": PARAMETERS, "strict": False}}]
    return [{"name": "get_weather", "description": "Weather of a city.", "input_schema": PARAMETERS, "strict": False}]


def upstream_tool_turn(model, call_id):
    """The last two messages of the second request: the model's call and the tool's output."""
    if model.startswith("oa/"):
        return [{"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {
                    "name": "get_weather", "arguments": json.dumps(ARGUMENTS, separators=(",", ":"))}}]},
                {"role": "tool", "tool_call_id": call_id, "content": "sunny"}]
    return [{"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": "get_weather",
                                               "input": ARGUMENTS}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "sunny"}]}]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("model", MODELS)
def test_a_function_tool_round_trip(world, client, model, stream):  # noqa: F811
    first, events = ask(client, model, [QUESTION], stream, tools=[WEATHER])
    assert first.status == "completed" and first.output_text == ""
    assert [item.type for item in first.output] == ["function_call"]
    call = first.output[0]
    assert (call.name, json.loads(call.arguments), call.status, call.namespace) == \
        ("get_weather", ARGUMENTS, "completed", None)
    assert call.call_id.startswith("call_" if model.startswith("oa/") else "toolu_")
    if stream:
        assert events == ["response.created", "response.in_progress", "response.output_item.added",
                          "response.function_call_arguments.delta", "response.function_call_arguments.delta",
                          "response.function_call_arguments.done", "response.output_item.done",
                          "response.completed"]

    output = {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}
    second, _ = ask(client, model, [QUESTION, call.to_dict(), output], stream, tools=[WEATHER])
    assert second.status == "completed" and second.output_text == "Tool said: sunny"
    assert [item.type for item in second.output] == ["message"]

    sent = [request.json for request in world.upstream.requests]
    assert len(sent) == 2
    assert sent[0]["tools"] == sent[1]["tools"] == upstream_tools(model)
    assert sent[1]["messages"][-2:] == upstream_tool_turn(model, call.call_id)


@pytest.mark.parametrize("model", MODELS)
def test_the_tool_choice_reaches_the_model(world, client, model):  # noqa: F811
    response = client.responses.create(model=model, input="Weather?", tools=[WEATHER], parallel_tool_calls=False,
                                       tool_choice={"type": "function", "name": "get_weather"})
    assert response.output[0].name == "get_weather"
    assert (response.tool_choice.name, response.parallel_tool_calls) == ("get_weather", False)
    body = world.upstream.requests[0].json
    if model.startswith("oa/"):
        assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
        assert body["parallel_tool_calls"] is False
    else:
        assert body["tool_choice"] == {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True}


def test_a_namespaced_function_is_called_by_its_own_name(world, client):  # noqa: F811
    agents = {"type": "namespace", "name": "agents", "description": "Sub-agents.",
              "tools": [{"type": "function", "name": "spawn", "description": "Start one.", "parameters": PARAMETERS}]}
    response = client.responses.create(model="oa/echo-1", input="Start an agent.", tools=[agents])
    call = response.output[0]
    assert (call.type, call.namespace, call.name, json.loads(call.arguments)) == \
        ("function_call", "agents", "spawn", ARGUMENTS)
    assert world.upstream.requests[0].json["tools"] == [{"type": "function", "function": {
        "name": "agents__spawn", "description": "(agents: Sub-agents.)\n\nStart one.", "parameters": PARAMETERS}}]


@pytest.mark.parametrize("hosted, where", [({"type": "web_search", "external_web_access": False}, "tools.1"),
                                           ({"type": "file_search", "vector_store_ids": ["vs_1"]}, "tools.1")])
def test_hosted_tools_are_refused_by_name(world, client, hosted, where):  # noqa: F811
    with pytest.raises(openai.BadRequestError) as exc:
        client.responses.create(model="oa/echo-1", input="x", tools=[WEATHER, hosted])
    assert exc.value.status_code == 400
    assert exc.value.body["param"] == where and exc.value.body["type"] == "invalid_request_error"
    assert exc.value.body["message"].startswith(f"{where}: tools of type {hosted['type']!r} are not carried")
    assert world.upstream.requests == []


def test_input_tokens_count_the_tools(client):
    bare = client.responses.input_tokens.count(model="oa/echo-1", input="Weather in Paris?")
    with_tools = client.responses.input_tokens.count(model="oa/echo-1", input="Weather in Paris?", tools=[WEATHER])
    assert with_tools.input_tokens > bare.input_tokens > 0


@pytest.mark.parametrize("items", [[QUESTION, {"type": "function_call_output", "call_id": "c", "output": "sunny"}],
                                   [QUESTION, {"type": "function_call", "call_id": "c", "name": "f", "arguments": ""}]])
def test_with_the_setting_off_tool_items_answer_501(world, items):  # noqa: F811
    with pytest.raises(openai.APIStatusError) as exc:
        world.openai.responses.create(model="oa/echo-1", input=items)
    assert exc.value.status_code == 501
    assert exc.value.body["message"] == "Tools are not supported on the Responses endpoint."
    assert world.upstream.requests == []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_tool_call_cut_midway_keeps_what_arrived(world, client, stream):  # noqa: F811
    world.upstream.configure(cut_after_tokens=2)  # the call's name and the first half of its arguments
    arguments = json.dumps(ARGUMENTS, separators=(",", ":"))
    half = arguments[:len(arguments) // 2]
    if not stream:
        with pytest.raises(openai.APIStatusError) as exc:
            client.responses.create(model="oa/echo-1", input=[QUESTION], tools=[WEATHER])
        assert exc.value.status_code == 502 and exc.value.body["code"] == "upstream_disconnected"
        partial = exc.value.response.json()["partial"]
        assert [(i["type"], i["name"], i["arguments"]) for i in partial["output"]] == \
            [("function_call", "get_weather", half)]
        return
    with client.responses.create(model="oa/echo-1", input=[QUESTION], tools=[WEATHER], stream=True) as events:
        seen = list(events)
    assert [event.type for event in seen[-4:]] == ["response.function_call_arguments.delta",
                                                   "response.function_call_arguments.done",
                                                   "response.output_item.done", "response.failed"]
    failed = seen[-1].response
    assert failed.status == "failed" and "disconnected" in failed.error.message
    assert [(i.type, i.name, i.arguments, i.status) for i in failed.output] == \
        [("function_call", "get_weather", half, "incomplete")]
