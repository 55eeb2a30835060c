"""The one output layer: one timestamp shape on every route, one JSON writer."""

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

from gateway.web.output import encode, respond, timestamp, timestamp_with_offset

ROOT = Path(__file__).resolve().parents[3]
PRODUCT_APPS = ("accounts", "compat", "gateway", "native", "routines")
SHAPE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def test_a_timestamp_always_has_microseconds_and_z_whatever_the_moment():
    whole_second = datetime(2026, 11, 22, 10, 0, 0, tzinfo=timezone.utc)
    assert timestamp(whole_second) == "2026-11-22T10:00:00.000000Z"
    assert timestamp(whole_second.replace(microsecond=120)) == "2026-11-22T10:00:00.000120Z"
    sao_paulo = timezone(timedelta(hours=-3))
    assert timestamp(datetime(2026, 11, 22, 7, 0, 0, tzinfo=sao_paulo)) == "2026-11-22T10:00:00.000000Z"
    assert timestamp(None) is None


def test_verify_checked_at_is_the_one_field_written_with_an_offset():
    assert timestamp_with_offset(datetime(2026, 11, 22, 10, 0, 0, 999, tzinfo=timezone.utc)) == \
        "2026-11-22T10:00:00+00:00"


def test_respond_writes_every_datetime_with_the_one_writer():
    moment = datetime(2026, 11, 22, 10, 0, 0, tzinfo=timezone.utc)
    response = respond({"at": moment, "nested": [{"at": moment}], "none": None}, status=201)
    assert response.status_code == 201
    assert response["Content-Type"] == "application/json"
    body = json.loads(response.content)
    assert body == {"at": "2026-11-22T10:00:00.000000Z", "nested": [{"at": "2026-11-22T10:00:00.000000Z"}],
                    "none": None}
    assert json.loads(encode([moment])) == ["2026-11-22T10:00:00.000000Z"]


def test_no_product_module_formats_a_datetime_itself():
    """Only gateway/web/output.py turns a datetime into text for a client (the console's CSV export
    included). The others write no client's answer: the usage spool's own line format (read back
    by the spool only), log lines, the console's HTML and SVG for people, a day as a database
    parameter."""
    allowed = {"gateway/web/output.py", "gateway/usage/writer.py", "gateway/telemetry/logjson.py",
               "gateway/console/server_admin.py", "gateway/console/usage_chart.py", "gateway/console/usage_reads.py",
               "gateway/usage/call_failures.py", "gateway/console/home/chart.py"}
    writers = re.compile(r"\.isoformat\(|\.strftime\(")
    found = []
    for app in PRODUCT_APPS:
        for path in (ROOT / app).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if "/migrations/" in rel or rel in allowed:
                continue
            found += [f"{rel}:{n}" for n, line in enumerate(path.read_text().splitlines(), 1) if writers.search(line)]
    assert found == []


def test_every_timestamp_in_the_document_has_the_one_shape():
    """The document's timestamp schemas carry the shape, so every response a test receives is held
    to it (tests/contract.py); checked_at (spec 4.4) is the named exception. What a client sends (a query
    parameter, a request body's schema) may be any RFC 3339 time: the one shape is the gateway's answers'."""
    from gateway.openapi import cached_document

    document = cached_document()
    sent = {ref.rsplit("/", 1)[-1] for ref in re.findall(r"'\$ref': '([^']+)'", str(
        [operation.get("requestBody") for item in document["paths"].values() for operation in item.values()
         if isinstance(operation, dict)]))}
    seen = []

    def walk(node, where):
        if isinstance(node, dict):
            if node.get("format") == "date-time":
                seen.append(where)
                if not where.endswith("checked_at"):
                    assert node.get("pattern") and re.compile(node["pattern"]).match("2026-11-22T10:00:00.000000Z")
                    assert not re.compile(node["pattern"]).match("2026-11-22T10:00:00+00:00"), where
            for key, value in node.items():
                if key not in ("parameters", "requestBody") and not (where == "/components/schemas" and key in sent):
                    walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}/{i}")

    walk(document, "")
    assert len(seen) >= 10
    assert SHAPE.match(timestamp(datetime.now(timezone.utc)))
