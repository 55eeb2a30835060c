"""The one table of paths: for every path the gateway answers, which error shape it speaks (its
surface, spec 7.1), whether it takes the hot way through Django (gateway/web/hotpath.py), and
which middleware it goes through (gateway/web/surfaces.py): the API's, the console's, or none
for a probe. The error renderer, the hot path and the surface middleware read it here; nothing
else writes a list of paths. The URLconfs say which view answers a path; this table says how
(tests/gateway/web/test_paths.py holds the two together).

A row is an exact path or a prefix (`under`). The longest row that matches a path decides all
three answers, an exact row before a prefix of the same length; the empty prefix at the end
matches every path. The lookups the requests use (`surface_of`, `is_hot`, `is_api_path`,
`PROBE_PATHS`) are derived from the table once, at import, as frozensets and tuples of prefixes,
so a request never walks the rows: a set look-up, a `startswith` on a tuple, and for the error
surface the few prefixes that change it, tested in turn. `row_for` reads the table itself, for
the tests and for anyone who wants the whole row.
"""

from __future__ import annotations

from typing import NamedTuple

# Surfaces: the error shapes of spec 7.1, rendered by gateway/web/errors.py.
ANTHROPIC = "anthropic"  # {type: 'error', error: {type, message}}
OPENAI = "openai"  # {error: {message, type, param, code}}
NATIVE_AUTH = "native-auth"  # {status: 'error', message, errors}
NATIVE_STATUS = "native-status"  # {status: 'error', message}
NATIVE_COLLECTIONS = "native-collections"  # {status: 'error', code, message}
NATIVE = "native"  # {detail}
GEMINI = "gemini"  # Google's {error: {code, message, status}}, for every error (/v1beta/: not the spec's)
GEMINI_V1 = "gemini-v1"  # Google's shape, but a 401 and the framework's errors as on every /v1 path (7.1)
V1_SURFACES = frozenset({OPENAI, ANTHROPIC, GEMINI_V1})  # the compatibility surfaces under /v1
COMPAT_SURFACES = V1_SURFACES | {GEMINI}  # the surfaces of other APIs' shapes, /v1 and Google's /v1beta

# Stacks: the middleware a request goes through (gateway/web/surfaces.py).
API = "api"  # the security middleware's redirect and headers inline, no console middleware
CONSOLE = "console"  # CONSOLE_MIDDLEWARE: sessions, CSRF, authentication, messages, static files
PROBE = "probe"  # straight to the view: no https redirect, no Host check, no session


class Row(NamedTuple):
    path: str  # the exact path, or the prefix when `prefix`
    prefix: bool
    surface: str
    stack: str
    hot: bool


def exact(path: str, surface: str, stack: str, *, hot: bool = False) -> Row:
    return Row(path, False, surface, stack, hot)


def under(prefix: str, surface: str, stack: str, *, hot: bool = False) -> Row:
    return Row(prefix, True, surface, stack, hot)


PATHS: tuple[Row, ...] = (
    # The OpenAI-style API (compat/urls.py).
    exact("/v1", OPENAI, API),
    under("/v1/", OPENAI, API),
    exact("/v1/chat/completions", OPENAI, API, hot=True),
    exact("/v1/responses", OPENAI, API, hot=True),
    exact("/v1/responses/input_tokens", OPENAI, API, hot=True),
    exact("/v1/models", OPENAI, API, hot=True),
    # The Anthropic-style API (compat/urls.py); a 401 still speaks OpenAI there (rule 7.1.1).
    under("/v1/messages", ANTHROPIC, API),
    exact("/v1/messages", ANTHROPIC, API, hot=True),
    exact("/v1/messages/count_tokens", ANTHROPIC, API, hot=True),
    # Google's Gemini API (compat/urls.py): `/v1/models/{model}:{method}` on /v1, everything on /v1beta.
    under("/v1/models/", GEMINI_V1, API),
    exact("/v1beta", GEMINI, API),
    under("/v1beta/", GEMINI, API),
    # The native API (native/, accounts/ and routines/ URLconfs, the OpenAPI document).
    under("/api/", NATIVE, API),
    under("/api/v1/auth/", NATIVE_AUTH, API),
    under("/api/v1/conversations", NATIVE_STATUS, API),
    under("/api/v1/collections", NATIVE_COLLECTIONS, API),
    exact("/api/v1/chat", NATIVE, API, hot=True),
    under("/api/v1/hooks/", NATIVE, API, hot=True),  # a routine's webhook: the token is in the path
    # The probes and the scrape (gateway/ops/health.py, gateway/ops/metrics_view.py).
    exact("/livez", NATIVE, PROBE),
    exact("/readyz", NATIVE, PROBE),
    exact("/metrics", NATIVE, PROBE),
    # The operator's console: the admin (and its login in accounts/urls.py); the root and `/admin`
    # redirect a browser to it (gateway/urls.py).
    exact("/", NATIVE, CONSOLE),
    exact("/admin", NATIVE, CONSOLE),
    under("/admin/", NATIVE, CONSOLE),
    # The console's playground: its call is the API's, and so are its refusals (the chat completions' shape).
    exact("/admin/playground/reply", OPENAI, CONSOLE),
    # The account holders' own pages (account_pages/): a session of their own, the console's middleware.
    exact("/account", NATIVE, CONSOLE),
    under("/account/", NATIVE, CONSOLE),
    # Everything else (the console's static files, unknown paths): the console's middleware.
    under("", NATIVE, CONSOLE),
)


def row_for(path: str) -> Row:
    """The table's row for `path`: the longest that matches, an exact one first."""
    for row in sorted(PATHS, key=lambda row: (len(row.path), not row.prefix), reverse=True):
        if path == row.path or (row.prefix and path.startswith(row.path)):
            return row
    raise LookupError(f"no row of PATHS matches {path!r}")  # the empty prefix matches every path


def _prefix_rows() -> list[Row]:
    return [row for row in PATHS if row.prefix]


def _cover(row: Row) -> Row:
    """The longest other prefix row that contains the prefix `row` (the empty one at least): the
    row that would decide for its paths without it."""
    covers = [other for other in _prefix_rows() if other is not row and row.path.startswith(other.path)]
    return max(covers, key=lambda other: len(other.path))


def _specific_first(prefixes: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The prefixes in the table's order, except that each comes before every shorter prefix it
    starts with, so the first that matches is the longest."""
    ordered: list[tuple[str, str]] = []
    for prefix, value in prefixes:
        at = next((i for i, (placed, _) in enumerate(ordered) if prefix.startswith(placed)), len(ordered))
        ordered.insert(at, (prefix, value))
    return tuple(ordered)


def _least(prefixes: list[str]) -> tuple[str, ...]:
    """The prefixes without those another of them already covers."""
    return tuple(p for p in prefixes if not any(p != q and p.startswith(q) for q in prefixes))


_DEFAULT_SURFACE = row_for("").surface
_SURFACE_OF_PATH = {row.path: row.surface for row in PATHS if not row.prefix}
# Only the prefixes whose surface differs from that of the prefix containing them, the most
# specific first: the same tests, in the same order, as the error renderer made before this table.
_SURFACE_PREFIXES = _specific_first([(row.path, row.surface) for row in _prefix_rows()
                                     if row.path and row.surface != _cover(row).surface])

HOT_PATHS = frozenset(row.path for row in PATHS if row.hot and not row.prefix)
HOT_PREFIXES = _least([row.path for row in _prefix_rows() if row.hot])
API_PREFIXES = _least([row.path for row in _prefix_rows() if row.stack == API])
API_PATHS = frozenset(row.path for row in PATHS
                      if row.stack == API and not row.prefix and not row.path.startswith(API_PREFIXES))
PROBE_PATHS = frozenset(row.path for row in PATHS if row.stack == PROBE and not row.prefix)


def surface_of(path: str) -> str:
    """The error shape of `path` (spec 7.1): one of the surfaces above. Called on every error and
    every JSON body: a dictionary look-up for the table's exact paths (the hot routes among them),
    then the prefixes in turn."""
    surface = _SURFACE_OF_PATH.get(path)
    if surface is None:
        for prefix, surface in _SURFACE_PREFIXES:
            if path.startswith(prefix):
                return surface
        return _DEFAULT_SURFACE
    return surface


def is_hot(path: str) -> bool:
    """Whether `path` takes the hot way through Django (gateway/web/hotpath.py): on every request."""
    return path in HOT_PATHS or path.startswith(HOT_PREFIXES)


def is_api_path(path: str) -> bool:
    """Whether `path` goes through the API's middleware rather than the console's (a probe aside:
    `PROBE_PATHS`, which gateway/web/surfaces.py asks first)."""
    return path.startswith(API_PREFIXES) or path in API_PATHS
