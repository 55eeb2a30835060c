"""Every operation of the OpenAPI document, fuzzed against the running gateway.

schemathesis loads the document from the server (`GET /api/v1/openapi.json`) and, per operation,
sends its coverage cases (boundary and invalid values of every parameter and body field) and then
`MAX_EXAMPLES` generated ones, valid and invalid alike (generation mode "all"), with a fixed seed so
every run sends the same requests. Each answer must be no 5xx (the upstream is healthy: a 5xx is a
bug; a 501, a feature the gateway does not offer, is the one exception) and inside the document:
status, content type, headers and body (schemathesis' checks and tests/contract.py's). Failures are
collected, not raised mid-run, so one run lists them all; the terminal summary counts them.
The seven bad inputs that once answered a 500 have their own named tests: tests/compat/test_bad_input.py,
tests/native/test_bad_input.py, tests/native/test_mcp_bad_params.py.
"""

import os
import time

from hypothesis import HealthCheck, Phase, settings

from tests.fuzz.conftest import STATS, FuzzFailure

# Generated cases per operation, after the coverage phase's: sized so that the whole file takes
# about 90 s on a 2-core machine. An operation that takes no input at all (no parameter, no body)
# has little to vary, and gets a few.
# GATEWAY_FUZZ_EXAMPLES and GATEWAY_FUZZ_SEED change both for a longer hunt by hand.
MAX_EXAMPLES = int(os.environ.get("GATEWAY_FUZZ_EXAMPLES") or 80)
MAX_EXAMPLES_WITHOUT_INPUT = 5
SETTINGS = {"deadline": None, "derandomize": True, "database": None, "suppress_health_check": list(HealthCheck),
            "phases": [Phase.explicit, Phase.generate]}  # no shrinking: every failure is listed as sent


def _documented_operations(document):
    return {f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item
            if method != "parameters"}


def _takes_input(ctx) -> bool:
    """Whether the operation (as schemathesis' filters see it: its path and raw definition) takes a
    body, a path parameter or another parameter."""
    operation = ctx.operation
    raw = operation.definition.raw
    return "{" in operation.path or "requestBody" in raw or bool(raw.get("parameters"))


def _operation_tests(schema, test_func, selected):
    """(operation, Hypothesis test) per operation that `selected` picks, each test running
    schemathesis' phases (coverage, then fuzzing) with `test_func` as the body. This is what
    `schema.parametrize()` runs under pytest; `schemathesis.pytest.from_fixture` itself cannot be used
    with pytest 9.2 (it sets `Node._nodeid`, which pytest 9.2 no longer has), so the loop is here.
    `selected` is an include filter: with one, schemathesis also fuzzes the operation that served
    the document it loaded (GET /api/v1/openapi.json), which it leaves out otherwise."""
    from schemathesis.pytest.lazy import get_all_tests

    schema = schema.include(selected).clone(test_function=test_func)
    return get_all_tests(schema=schema, test_func=test_func, settings=None, given_kwargs={})


def test_fuzzing_every_operation_finds_no_5xx_and_no_answer_outside_the_document(fuzz_world, fuzz_schema):
    def fuzz_one(examples):
        @settings(max_examples=examples, **SETTINGS)
        def test_body(case):
            fuzz_world.exercise(case)

        return test_body

    document = fuzz_world.http.get(f"{fuzz_world.base}/api/v1/openapi.json", timeout=10).json()
    started = time.monotonic()
    for selected, examples in ((_takes_input, MAX_EXAMPLES),
                               (lambda ctx: not _takes_input(ctx), MAX_EXAMPLES_WITHOUT_INPUT)):
        for result in _operation_tests(fuzz_schema, fuzz_one(examples), selected):
            operation, test = result.ok()  # an operation schemathesis cannot read raises here
            try:
                test()
            except Exception as exc:  # noqa: BLE001 — kept as a failure of the operation, the run goes on
                STATS.failures.append(FuzzFailure(operation.method.upper(), operation.path, None, "fuzzing",
                                                  f"{type(exc).__name__}: {exc}", "(none)"))
    STATS.seconds += time.monotonic() - started

    documented = _documented_operations(document)
    assert STATS.operations == documented, (f"not fuzzed: {sorted(documented - STATS.operations)}; "
                                            f"not in the document: {sorted(STATS.operations - documented)}")
    assert not STATS.failures, (
        f"{STATS.line()}\n" + "\n".join(str(failure) for failure in STATS.failures[:60])
        + (f"\n… and {len(STATS.failures) - 60} more" if len(STATS.failures) > 60 else ""))
