"""Fuzzing the running gateway from its own OpenAPI document.

`fuzz_world` starts a gateway process (uvicorn on loopback, the test database, request ceilings
raised so the fuzzing is not stopped at 429) in front of the reference upstream and a stand-in for
the Telegram and WhatsApp APIs, and seeds what lets a fuzzed request get past a 401 or a 404: an
account with an API key, a second one whose session token the session-only routes use (so a
generated or revoked key, or a logout, never takes the first one's credential away), models on the
upstream, and one routine, conversation, collection with a document, inbox message and channel
(tests/fuzz/seeding.py).

`FuzzWorld.prepare` gives each case its credential and, on two cases in three, real values where
the document can only say "an integer" or "a string": ids of the seeded objects (made again when a
fuzzed DELETE took them), a model the caller may use, the right password; on one in three also a
well-formed turn (messages, input, task; an MCP method in a session; a WhatsApp number with the code
just sent to it), so that the generated options around it reach the upstream. `FuzzWorld.exercise`
sends the case, checks the answer (schemathesis' checks, then tests/contract.py's) and counts it in
`STATS`, which `pytest_terminal_summary` prints.
"""

from __future__ import annotations

import copy
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.factories import PASSWORD
from tests.fuzz.seeding import FuzzSeed
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

TELEGRAM_SECRET = "tg-hook-" + "f0" * 16
BODY_EXCERPT = 300


@dataclass
class FuzzFailure:
    method: str
    path: str
    status: int | None
    check: str
    message: str
    body: str

    def __str__(self) -> str:
        return (f"{self.method} {self.path} -> {self.status if self.status is not None else 'no answer'}: "
                f"{self.check}: {self.message[:400]}\n    body: {self.body}")


@dataclass
class FuzzStats:
    """What one fuzz run sent and found, for the terminal summary and the test's verdict."""

    requests: int = 0
    server_errors: int = 0
    unanswered: int = 0
    violations: int = 0
    invalid_http: int = 0  # refused by the HTTP server before the application (not HTTP at all)
    statuses: dict[int, int] = field(default_factory=dict)
    succeeded: dict[str, int] = field(default_factory=dict)  # operation -> its 2xx answers
    failures: list[FuzzFailure] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def operations(self) -> set[str]:
        return set(self.succeeded)

    def line(self) -> str:
        unanswered = f", unanswered = {self.unanswered}" if self.unanswered else ""
        if self.invalid_http:
            unanswered += f", refused by uvicorn as invalid HTTP = {self.invalid_http}"
        return (f"fuzz: {self.requests:,} requests over {len(self.operations)} operations in {self.seconds:.0f} s, "
                f"5xx = {self.server_errors}{unanswered}, schema violations = {self.violations}")


STATS = FuzzStats()
INVALID_HTTP = b"Invalid HTTP request received."  # uvicorn's own answer to bytes that are not HTTP


def pytest_terminal_summary(terminalreporter):
    if STATS.requests:
        terminalreporter.write_sep("-", "fuzzing (tests/fuzz)")
        terminalreporter.write_line(STATS.line())
        spread = ", ".join(f"{status}: {count:,}" for status, count in sorted(STATS.statuses.items()))
        terminalreporter.write_line(f"fuzz: answers by status {spread}")
        never = sorted(operation for operation, count in STATS.succeeded.items() if not count)
        if never:
            terminalreporter.write_line(f"fuzz: no 2xx answer for {', '.join(never)}")


def _excerpt(content: bytes | None) -> str:
    if not content:
        return "(empty)"
    text = content[:BODY_EXCERPT].decode("utf-8", errors="replace")
    return text + ("…" if len(content) > BODY_EXCERPT else "")


# path parameters the seeded objects give a real value
REAL_PATH_VALUES = {
    "routine_id": lambda world: world._routine().pk,
    "conversation_id": lambda world: world._conversation(),
    "collection_id": lambda world: world._collection(),
    "document_id": lambda world: world._document(),
    "message_id": lambda world: world._inbox_message(),
    "channel_id": lambda world: world._channel(),
    "token": lambda world: world._hook_token(),
    "secret": lambda world: TELEGRAM_SECRET,
}
MODEL_FOR_PATH = {
    "/v1/messages": "an/claude-echo",
    "/v1/messages/count_tokens": "an/claude-echo",
    "/api/v1/embeddings": "oa/embed-1",
    "/v1/audio/transcriptions": "oa/whisper-1",
    "/v1/audio/translations": "oa/whisper-1",
    "/v1/audio/speech": "oa/whisper-1",
}

MCP_TOOLS = ("chat", "list_models", "search_collection", "list_routines", "start_routine")
HELLO = [{"role": "user", "content": "hello"}]
WELL_FORMED = {
    "/v1/chat/completions": {"messages": HELLO},
    "/v1/messages": {"messages": HELLO},
    "/v1/messages/count_tokens": {"messages": HELLO},
    "/v1/responses": {"input": "hello"},
    "/v1/responses/input_tokens": {"input": "hello"},
    "/v1/audio/speech": {"input": "hello", "voice": "alloy"},
    "/api/v1/chat": {"message": "hello"},
    "/api/v1/agent/chat": {"message": "hello"},
    "/api/v1/agent/run": {"task": "say hello"},
    "/api/v1/embeddings": {"input": "hello world"},
    "/v1/moderations": {"input": "hello"},
    "/api/v1/routines": {"delivery_targets": ["inapp"], "schedule": "0 8 * * 1-5"},
    "/api/v1/routines/{routine_id}": {"delivery_targets": ["inapp"], "schedule": "0 8 * * 1-5"},
    "/api/v1/channels/whatsapp": {"number": "+5511999990001"},
}


class FuzzWorld(FuzzSeed):
    """The fuzzed gateway, its seeded data, and the per-case preparation and verdict."""

    def __init__(self, base: str, reference, provider) -> None:
        import requests

        self.base = base
        self.upstream = reference  # the reference upstream's controller
        self.provider = provider  # the Telegram and WhatsApp stand-in: it sees the codes sent
        self.http = requests.Session()
        self.cases = 0
        self._seed()  # tests/fuzz/seeding.py

    # --- one case -----------------------------------------------------------------------------

    def prepare(self, case) -> None:
        """The case's credential; then, of every three cases, one goes as generated, one with real
        ids, model and password, and one with those and a well-formed turn (messages, input, task...)
        besides its generated fields, so that fuzzed options reach the upstream."""
        from accounts.sessions import session_create

        self.cases += 1
        path = case.operation.path
        security = case.operation.definition.raw.get("security")
        headers = dict(case.headers or {})
        if security == [{"session": []}]:
            if path == "/api/v1/auth/logout":  # each logout ends a session of its own
                headers["Authorization"] = f"Bearer {session_create(account=self.holder, remember=False).token}"
            else:
                headers["Authorization"] = f"Bearer {self.session}"
        elif security != []:
            headers["Authorization"] = f"Bearer {self.key}"
        case.headers = headers
        if path == "/api/v1/auth/api-key/generate":
            self._unlock(self.holder)
        kind = self.cases % 3
        if kind == 0:
            return  # as generated
        for name in list(case.path_parameters or {}):
            if name in REAL_PATH_VALUES:
                case.path_parameters[name] = REAL_PATH_VALUES[name](self)
        body = case.body
        if not isinstance(body, dict):
            return
        if isinstance(body.get("model"), str) or (kind == 2 and "model" not in body and path in MODEL_FOR_PATH):
            body["model"] = MODEL_FOR_PATH.get(path, "oa/echo-1")
        if isinstance(body.get("password"), str):
            body["password"] = PASSWORD
        if path == "/api/v1/auth/login" and isinstance(body.get("email"), str):
            body["email"] = self.holder.email
        if isinstance(body.get("conversation_id"), int):
            body["conversation_id"] = self._conversation()
        if kind == 2:
            body.update(copy.deepcopy(WELL_FORMED.get(path, {})))
            if path == "/api/v1/mcp":  # a real method in a session, the params as generated
                method = ("tools/call", "tools/list", "ping", "initialize")[self.cases // 3 % 4]
                body.update(jsonrpc="2.0", id=self.cases, method=method)
                if method == "tools/call" and isinstance(body.get("params"), dict):
                    body["params"]["name"] = MCP_TOOLS[self.cases // 12 % len(MCP_TOOLS)]
                if method != "initialize":
                    case.headers.update(self._mcp_session())
            if path == "/v1/messages" and not isinstance(body.get("max_tokens"), int):
                body["max_tokens"] = 16
            if path == "/api/v1/channels/whatsapp/verify":
                body.update(self._whatsapp_code())

    def _whatsapp_code(self) -> dict[str, str]:
        """A number of its own with the code the gateway just sent it (as the stand-in saw it)."""
        import re

        number = f"+5511{self.cases:09d}"
        sent = self.http.post(f"{self.base}/api/v1/channels/whatsapp", json={"number": number}, timeout=10,
                              headers={"Authorization": f"Bearer {self.key}"})
        assert sent.status_code == 201, sent.text
        code = re.search(r"\b(\d{6})\b", self.provider.requests[-1]["json"]["text"]["body"]).group(1)
        return {"number": number, "code": code}

    def _mcp_session(self) -> dict[str, str]:
        """The headers of an initialized MCP session (made once)."""
        if self._mcp is None:
            started = self.http.post(f"{self.base}/api/v1/mcp", timeout=10, headers={
                "Authorization": f"Bearer {self.key}", "Accept": "application/json, text/event-stream"},
                json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "fuzz", "version": "1"}}})
            self._mcp = {"Mcp-Session-Id": started.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25",
                         "Accept": "application/json, text/event-stream"}
        return self._mcp

    def _unlock(self, account) -> None:
        from accounts.models import Account

        Account.objects.filter(pk=account.pk).update(failed_logins=0, locked_until=None)

    def exercise(self, case) -> None:
        """Send the case and judge the answer; every failure is kept in STATS, none is raised here."""
        import requests
        from schemathesis.core.failures import FailureGroup

        from tests.contract import ContractViolation, check_response

        self.prepare(case)
        method, path = case.method.upper(), case.formatted_path
        operation = f"{case.operation.method.upper()} {case.operation.path}"
        STATS.succeeded.setdefault(operation, 0)
        STATS.requests += 1
        try:
            response = case.call(base_url=self.base, session=self.http, timeout=30)
        except requests.RequestException as exc:  # the connection dropped, or no answer in 30 s
            STATS.unanswered += 1
            STATS.failures.append(FuzzFailure(method, path, None, "no answer", repr(exc), "(none)"))
            return
        status = response.status_code
        STATS.statuses[status] = STATS.statuses.get(status, 0) + 1
        if status == 400 and response.content == INVALID_HTTP:
            # uvicorn refused the bytes as HTTP (a generated header value with a control character):
            # the application never saw the request, so the document does not apply; counted apart
            STATS.invalid_http += 1
            return
        STATS.succeeded[operation] += 200 <= status < 300
        body = _excerpt(response.content)
        # The upstream is healthy and every other service is up: a 5xx is a bug, except a 501 (a
        # feature this gateway does not offer, e.g. tools on /v1/responses), which the document's
        # 5XX answer covers and the checks below still hold to it.
        if status >= 500 and status != 501:
            STATS.server_errors += 1
            STATS.failures.append(FuzzFailure(method, path, status, "not_a_server_error", "a 5xx answer", body))
        violated = False
        try:
            case.validate_response(response, checks=CHECKS)
        except FailureGroup as group:
            for failure in group.exceptions:
                name = ",".join(type(failure).checks) or type(failure).__name__
                if name == "not_a_server_error":
                    continue  # judged above
                violated = True
                STATS.failures.append(FuzzFailure(method, path, status, name, f"{failure.title}: {failure.message}",
                                                  body))
        headers = _headers(response.headers)
        streamed = "text/event-stream" in headers.get("Content-Type", "")
        try:
            check_response(method, _path_info(response.request.url), status, headers,
                           None if streamed else response.content, streamed=streamed)
        except ContractViolation as exc:
            violated = True
            STATS.failures.append(FuzzFailure(method, path, status, "tests/contract.py", str(exc), body))
        if violated:
            STATS.violations += 1

    def close(self) -> None:
        self.http.close()


def _path_info(url: str) -> str:
    """The path as Django routes it (percent-decoded)."""
    from urllib.parse import unquote, urlsplit

    return unquote(urlsplit(url).path)


def _headers(wire: dict) -> dict:
    from requests.structures import CaseInsensitiveDict

    return CaseInsensitiveDict({name: values[0] if isinstance(values, list) else values
                                for name, values in wire.items()})


def _checks():
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        response_headers_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    return [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
            response_schema_conformance]


CHECKS = _checks()


RATE_LIMITS = ("V1", "CHAT", "AGENT_CHAT", "AGENT_RUN", "EMBEDDINGS", "PROFILES", "VERSION", "CONVERSATION_PURGE",
               "LOGIN", "COLLECTION_WRITE", "COLLECTION_SEARCH", "COLLECTION_REINDEX", "GENERAL", "HOOKS")


@pytest.fixture
def fuzz_world(transactional_db, upstream, settings):  # noqa: F811
    from hypothesis.configuration import set_hypothesis_home_dir

    from tests.routines.test_channels import ProviderStandIn
    from tests.servers import wait_for_quiet_database, web_process

    set_hypothesis_home_dir(Path(settings.VAR_DIR) / "hypothesis")  # not .hypothesis/ in the project folder
    provider = ProviderStandIn()
    try:
        with tempfile.TemporaryDirectory(prefix="fuzz-") as var_dir:
            env = {
                **{f"RATE_LIMIT_{name}": "100000" for name in RATE_LIMITS},  # 429s would stop the fuzzing short
                "REGISTRY_TTL_SECONDS": "0",
                "GATEWAY_VAR_DIR": var_dir,  # its own spool, and its own folder of queued tasks:
                "CELERY_BROKER_URL": "filesystem://",  # no worker another test starts takes the fuzzed runs
                "TELEGRAM_API_BASE": provider.base,
                "TELEGRAM_BOT_TOKEN": "123456:fuzz-bot-token",
                "TELEGRAM_BOT_USERNAME": "gw_fuzz_bot",
                "TELEGRAM_WEBHOOK_SECRET": TELEGRAM_SECRET,
                "WHATSAPP_API_BASE": provider.base + "/v21.0",
                "WHATSAPP_PHONE_NUMBER_ID": "1098765",
                "WHATSAPP_TOKEN": "fuzz-whatsapp-token",
                "WHATSAPP_NUMBERS_PER_ACCOUNT": "100000",  # a number of its own for each confirmation
            }
            with web_process(**env) as base:
                world = FuzzWorld(base, upstream, provider)
                yield world
                world.close()
    finally:
        provider.close()
        set_hypothesis_home_dir(None)
        wait_for_quiet_database()


@pytest.fixture
def fuzz_schema(fuzz_world):
    """The document as the running gateway serves it, loaded by schemathesis."""
    import schemathesis
    from schemathesis.config import SchemathesisConfig

    config = SchemathesisConfig.from_dict({
        "seed": int(os.environ.get("GATEWAY_FUZZ_SEED") or 12),
        "base-url": fuzz_world.base,
        "generation": {"mode": "all", "deterministic": True},
    })
    return schemathesis.openapi.from_url(f"{fuzz_world.base}/api/v1/openapi.json", config=config, timeout=10)
