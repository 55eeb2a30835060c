"""Gemini CLI straight at a fake Gemini API: what it sends and how it runs a tool, the reference for running it
through the gateway's Gemini surface (test_gemini_cli_gateway.py).

The fake is scripted to make it call its write_file tool once; Gemini CLI writes the file, sends the tool's
answer back as a functionResponse, and prints the model's final text ("Tool said: <the answer>"). It runs
offline: a proxy refuses, and records, every connection beyond loopback."""

import pytest

from tests.clients.claude_code_support import differences
from tests.clients.gemini_cli_support import (
    FILE_NAME,
    FILE_TEXT,
    MODEL,
    PROMPT,
    TOOL_ARGUMENTS,
    TOOL_NAME,
    comparable,
    declared,
    run_gemini,
    tool_turns,
)
from tests.clients.gemini_fake import fake_gemini

pytestmark = pytest.mark.serial

KEY = "AIza-straight-at-the-fake"
PATH = f"/v1beta/models/{MODEL}:streamGenerateContent"


@pytest.fixture
def gemini():
    with fake_gemini() as fake:
        yield fake.configure(key=KEY, tool_name=TOOL_NAME, tool_arguments=TOOL_ARGUMENTS)


def test_gemini_cli_runs_its_write_file_tool_against_a_gemini_server(gemini, tmp_path):
    run = run_gemini(gemini.url, KEY, MODEL, tmp_path)
    assert run.returncode == 0, f"gemini exited {run.returncode}:\n{run.stderr}\n{run.stdout}"
    assert run.outside == []
    assert (run.work / FILE_NAME).read_text() == FILE_TEXT
    requests = gemini.requests
    assert [(r.method, r.path, r.query) for r in requests] == [("POST", PATH, "alt=sse")] * 2
    for request in requests:
        assert request.headers["x-goog-api-key"] == KEY
        assert request.headers["user-agent"].startswith(f"GeminiCLI-tui/0.61.0/{MODEL} (")
        # usage statistics off: no installation id goes with the calls
        assert "x-gemini-api-privileged-user-id" not in request.headers and "authorization" not in request.headers
        assert sorted(request.json) == ["contents", "generationConfig", "systemInstruction", "tools"]
        assert request.json["generationConfig"] == {"temperature": 1, "topP": 0.95, "topK": 64, "thinkingConfig": {
            "includeThoughts": True, "thinkingBudget": 8192}}
    first, second = (r.json for r in requests)
    assert TOOL_NAME in declared(first) and "run_shell_command" in declared(first)
    # its tools declare their parameters as JSON Schema (parametersJsonSchema), not as OpenAPI `parameters`
    write_file = next(d for tool in first["tools"] for d in tool["functionDeclarations"] if d["name"] == TOOL_NAME)
    assert sorted(write_file) == ["description", "name", "parametersJsonSchema"]
    assert sorted(write_file["parametersJsonSchema"]["properties"]) == ["content", "file_path"]
    assert tool_turns(first) == ([], [])
    assert first["contents"][-1]["role"] == "user" and first["contents"][-1]["parts"][-1] == {"text": PROMPT}
    assert second["contents"][:len(first["contents"])] == first["contents"]
    calls, results = tool_turns(second)
    # it names the call itself (Gemini 2.5 sends no id), and marks the call's part with a thought signature
    # that tells Gemini to skip checking it
    assert [(c["name"], c["args"]) for c in calls] == [(TOOL_NAME, TOOL_ARGUMENTS)]
    assert calls[0]["id"].startswith(f"{TOOL_NAME}_")
    assert second["contents"][-2] == {"role": "model", "parts": [
        {"functionCall": calls[0], "thoughtSignature": "skip_thought_signature_validator"}]}
    assert [(r["id"], r["name"], sorted(r["response"])) for r in results] == [(calls[0]["id"], TOOL_NAME, ["output"])]
    output = results[0]["response"]["output"]
    assert output == f"{run.written()}\n{FILE_TEXT}"
    assert run.stdout == f"Tool said: {output}"


def test_two_straight_runs_differ_only_where_the_comparison_allows(gemini, tmp_path):
    """The comparison of what a Gemini server receives finds no difference between two runs in the same folders,
    so a difference it finds through the gateway is the gateway's."""
    first = run_gemini(gemini.url, KEY, MODEL, tmp_path)
    first_requests = gemini.requests
    gemini.reset().configure(key=KEY, tool_name=TOOL_NAME, tool_arguments=TOOL_ARGUMENTS)
    second = run_gemini(gemini.url, KEY, MODEL, tmp_path)
    assert (first.returncode, second.returncode) == (0, 0), second.stderr
    assert len(first_requests) == len(gemini.requests) == 2
    assert differences(comparable(first_requests), comparable(gemini.requests)) == []
    assert second.stdout == first.stdout


def test_gemini_cli_refused_ends_at_once_with_the_servers_message(gemini, tmp_path):
    """One attempt per request (its settings' maxAttempts): a refused key ends the run after one call, with the
    message of Google's error body on its standard error."""
    run = run_gemini(gemini.url, "AIza-not-the-key", MODEL, tmp_path)
    assert run.returncode != 0 and run.outside == []
    assert "API key not valid. Please pass a valid API key." in run.stderr
    assert [(r.path, r.headers["x-goog-api-key"]) for r in gemini.requests] == [(PATH, "AIza-not-the-key")]
    assert not (run.work / FILE_NAME).exists()
