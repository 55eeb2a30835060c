"""The one table of paths (gateway/web/paths.py): its lookups answer as the error
renderer, the hot path and the surface middleware did before it, they agree with the table's
rows, the table agrees with the URLconfs, and every API route's errors have spec 7.1's shape."""

import ast
import json
import re
from pathlib import Path

import pytest
from django.test import RequestFactory
from django.urls import URLResolver, get_resolver

from gateway.web import errors, hotpath, paths, surfaces
from gateway.web.errors import ApiError, render_error
from gateway.web.paths import API, CONSOLE, PATHS, PROBE, PROBE_PATHS, is_api_path, is_hot, row_for, surface_of

# What each lookup answered before the table, for the paths it distinguishes and their edges:
# (path, error surface, hot, middleware stack).
BEFORE = [
    ("", "native", False, "console"),
    ("/", "native", False, "console"),
    ("/v1", "openai", False, "api"),
    ("/v1/", "openai", False, "api"),
    ("/v1x", "native", False, "console"),
    ("/v1/messages", "anthropic", True, "api"),
    ("/v1/messagesx", "anthropic", False, "api"),
    ("/v1/messages/", "anthropic", False, "api"),
    ("/v1/messages/count_tokens", "anthropic", True, "api"),
    ("/v1/messages/batches", "anthropic", False, "api"),
    ("/v1/chat/completions", "openai", True, "api"),
    ("/v1/chat/completions/x", "openai", False, "api"),
    ("/v1/responses", "openai", True, "api"),
    ("/v1/responses/input_tokens", "openai", True, "api"),
    ("/v1/models", "openai", True, "api"),
    ("/v1/models/x", "gemini-v1", False, "api"),  # Google's `models/{model}:{method}` since its surface came
    ("/v1/models/a/b:generateContent", "gemini-v1", False, "api"),
    ("/v1beta", "gemini", False, "api"),
    ("/v1beta/models", "gemini", False, "api"),
    ("/v1beta/models/a/b:streamGenerateContent", "gemini", False, "api"),
    ("/v1betax", "native", False, "console"),
    ("/v1/embeddings", "openai", False, "api"),
    ("/v1/audio/speech", "openai", False, "api"),
    ("/v1/nowhere", "openai", False, "api"),
    ("/api", "native", False, "console"),
    ("/api/", "native", False, "api"),
    ("/api/auth/me", "native", False, "api"),
    ("/api/v1/auth/login", "native-auth", False, "api"),
    ("/api/v1/auth", "native", False, "api"),
    ("/api/v1/authx", "native", False, "api"),
    ("/api/v1/conversations", "native-status", False, "api"),
    ("/api/v1/conversations/7/permanent", "native-status", False, "api"),
    ("/api/v1/conversationsx", "native-status", False, "api"),
    ("/api/v1/collections", "native-collections", False, "api"),
    ("/api/v1/collections/7/search", "native-collections", False, "api"),
    ("/api/v1/chat", "native", True, "api"),
    ("/api/v1/chat/", "native", False, "api"),
    ("/api/v1/hooks/", "native", True, "api"),
    ("/api/v1/hooks/" + "a" * 48, "native", True, "api"),
    ("/api/v1/hooks/a/b", "native", True, "api"),
    ("/api/v1/hooks", "native", False, "api"),
    ("/api/v1/routines", "native", False, "api"),
    ("/api/v1/mcp", "native", False, "api"),
    ("/api/v1/openapi.json", "native", False, "api"),
    ("/livez", "native", False, "probe"),
    ("/readyz", "native", False, "probe"),
    ("/metrics", "native", False, "probe"),
    ("/livez/", "native", False, "console"),
    ("/metricsx", "native", False, "console"),
    ("/admin/", "native", False, "console"),
    ("/admin/login/", "native", False, "console"),
    ("/static/admin/css/base.css", "native", False, "console"),
    ("/nowhere", "native", False, "console"),
    ("/V1/models", "native", False, "console"),
    ("v1/models", "native", False, "console"),
]


def stack_of(path: str) -> str:
    """The middleware SurfaceMiddleware chooses for `path`, in its order: probes first."""
    return PROBE if path in PROBE_PATHS else API if is_api_path(path) else CONSOLE


def routes() -> list[str]:
    """Every route of the project's URLconf as a path a client would send: a parameter as `7` or
    `abc`, an included URLconf with a prefix (the admin's) as that prefix."""
    def walk(resolver: URLResolver, prefix: str):
        for entry in resolver.url_patterns:
            if isinstance(entry, URLResolver) and not str(entry.pattern) and not entry.namespace:
                yield from walk(entry, prefix)
            else:
                yield prefix + str(entry.pattern)

    sample = re.compile(r"<(?:(\w+):)?\w+>")
    return ["/" + sample.sub(lambda m: "7" if m[1] == "int" else "abc", route) for route in walk(get_resolver(), "")]


@pytest.mark.parametrize(("path", "surface", "hot", "stack"), BEFORE)
def test_the_lookups_answer_as_before_the_table(path, surface, hot, stack):
    assert (surface_of(path), is_hot(path), stack_of(path)) == (surface, hot, stack)


def test_the_error_renderer_the_hot_path_and_the_surface_middleware_read_the_table():
    assert errors.surface_of is surface_of
    assert hotpath.is_hot is is_hot
    assert (surfaces.is_api_path, surfaces.PROBE_PATHS) == (is_api_path, PROBE_PATHS)


@pytest.mark.parametrize("module", [errors, hotpath, surfaces])
def test_its_readers_write_no_path_of_their_own(module):
    """No string in their code (docstrings aside) is a path of the table or under /v1 or /api."""
    tree = ast.parse(Path(module.__file__).read_text())
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    table = {row.path for row in PATHS if row.path not in ("", "/")}  # "/" alone: also every path's separator
    written = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and id(node) not in docstrings
               and isinstance(node.value, str) and (node.value in table or node.value.startswith(("/v1", "/api")))]
    assert written == []


def neighbours() -> set[str]:
    """Every path the table or the URLconfs name, and the paths around each: one character
    more, one less, one segment more."""
    named = {row.path for row in PATHS} | set(routes()) | {path for path, *_ in BEFORE}
    return named | {p + "x" for p in named} | {p + "/x" for p in named} | {p[:-1] for p in named if p}


def test_the_fast_lookups_agree_with_the_table():
    """The lookups are derived from the rows at import; the longest row that matches decides."""
    checked = sorted(neighbours())
    assert len(checked) > 200
    disagree = [path for path in checked if (surface_of(path), is_hot(path), stack_of(path))
                != (row_for(path).surface, row_for(path).hot, row_for(path).stack)]
    assert disagree == []


def test_the_longest_row_decides():
    assert row_for("/v1/messages") == paths.exact("/v1/messages", "anthropic", API, hot=True)
    assert row_for("/v1/messages/batches") == paths.under("/v1/messages", "anthropic", API)
    assert row_for("/v1/embeddings") == paths.under("/v1/", "openai", API)
    assert row_for("/api/v1/hooks/abc") == paths.under("/api/v1/hooks/", "native", API, hot=True)
    assert row_for("/nowhere") == row_for("") == paths.under("", "native", CONSOLE)


def test_every_hot_path_is_a_route_django_resolves():
    resolver = get_resolver()
    hot_rows = [row for row in PATHS if row.hot]
    assert hot_rows
    for row in hot_rows:
        if row.prefix:
            under = [route for route in routes() if route.startswith(row.path)]
            assert under, row  # a route lies under the hot prefix
            for route in under:
                assert resolver.resolve(route).route.startswith(row.path[1:]), route
        else:
            assert resolver.resolve(row.path).route == row.path[1:], row


def test_every_probe_is_a_route_django_resolves():
    probes = [row for row in PATHS if row.stack == PROBE]
    assert probes
    for row in probes:
        assert get_resolver().resolve(row.path).route == row.path[1:], row


def test_every_route_of_the_urlconfs_has_a_row_of_its_own():
    """No route is left to the empty prefix's "everything else": a new route lands in the table
    on purpose. The API's are on the API's stack, the probes on none, the admin on the console's."""
    catch_all = row_for("")
    found = {route: row_for(route) for route in routes()}
    assert [route for route, row in found.items() if row == catch_all] == []
    for route, row in found.items():
        on_api = route.startswith(("/v1/", "/v1beta/", "/api/"))
        expected = API if on_api else PROBE if route in PROBE_PATHS else CONSOLE
        assert row.stack == expected, route
    assert {row.stack for row in found.values()} == {API, PROBE, CONSOLE}


# Spec 7.1's table, read by path segments: the body of a plain 400 refusal on each surface.
REFUSED = ApiError(400, "Refused.", code="refused")
# with the request's id, as Anthropic's own errors carry it (a bare RequestFactory request has none)
ANTHROPIC_BODY = {"type": "error", "error": {"type": "invalid_request_error", "message": "Refused."},
                  "request_id": None}
OPENAI_BODY = {"error": {"message": "Refused.", "type": "invalid_request_error", "param": None, "code": "refused"}}
LOGIN_BODY = {"status": "error", "message": "Refused.", "errors": {}}
CONVERSATIONS_BODY = {"status": "error", "message": "Refused."}
COLLECTIONS_BODY = {"status": "error", "code": "refused", "message": "Refused."}
DETAIL_BODY = {"detail": "Refused."}
GOOGLE_BODY = {"error": {"code": 400, "message": "Refused.", "status": "INVALID_ARGUMENT"}}  # beyond the spec


def spec_body(path: str) -> dict:
    segments = path.strip("/").split("/")
    if segments[:2] == ["v1", "messages"]:
        return ANTHROPIC_BODY
    if segments[0] == "v1beta" or segments[:2] == ["v1", "models"] and len(segments) > 2:
        return GOOGLE_BODY
    if segments[0] == "v1":
        return OPENAI_BODY
    if segments[:3] == ["api", "v1", "auth"]:
        return LOGIN_BODY
    if segments[:3] == ["api", "v1", "conversations"]:
        return CONVERSATIONS_BODY
    if segments[:3] == ["api", "v1", "collections"]:
        return COLLECTIONS_BODY
    assert segments[0] == "api", path
    return DETAIL_BODY


def test_every_api_routes_error_has_spec_7_1s_shape():
    api_routes = [route for route in routes() if row_for(route).stack == API]
    assert len(api_routes) > 40
    shapes = set()
    for route in api_routes:
        response = render_error(RequestFactory().post(route), REFUSED)
        assert (response.status_code, response["Content-Type"]) == (400, "application/json"), route
        assert json.loads(response.content) == spec_body(route), route
        shapes.add(json.dumps(spec_body(route)))
    assert len(shapes) == 7  # every surface has a route
