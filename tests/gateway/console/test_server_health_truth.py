"""What the console says of a model server's health is about the server as it is now: a changed address
drops what was seen of the old one, a failed "Test connection" is its last failure, a successful discovery its
last success; and the "Key" column says a local server needs none rather than marking it as an error. Read
through the admin's pages, as an operator reads them."""

import re
import time
from datetime import datetime, timezone

import pytest
from django.core.cache import cache

from gateway.models import ModelServer
from gateway.registry import server_health
from tests import console_html
from tests.factories import AccountFactory, ModelFactory, ModelServerFactory
from tests.gateway.console.test_server_health_admin import LIST, change_fields, list_rows, moment, server_form
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

pytestmark = pytest.mark.usefixtures("redis_url")


@pytest.fixture
def operator(client, transactional_db):
    client.force_login(AccountFactory(is_staff=True, is_superuser=True, role="admin"))
    return client


def home_servers(client) -> dict[str, list[str]]:
    """The home's "Model server health" rows: server name → [state, last success, last failure]."""
    page = client.get("/admin/").content.decode()
    table = page.split('id="home-servers"')[1].split("</table>")[0]
    return {name: [console_html.text(cell) for cell in re.findall(r"<td>(.*?)</td>", row, re.S)[1:]]
            for name, row in re.findall(r'<tr data-server="([^"]+)">(.*?)</tr>', table, re.S)}


def test_a_changed_address_drops_what_was_seen_of_the_old_one(operator, upstream, closed_port):  # noqa: F811
    server = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")
    ModelFactory(server=server, name="echo-1")
    old = time.time() - 60
    server_health.succeeded(server)  # the old address answered a call
    server_health.flush()
    assert list_rows(operator.get(LIST))["oa"]["last_success"] != "never seen"

    response = operator.post(f"{LIST}{server.pk}/change/",
                             server_form(base_url=f"http://127.0.0.1:{closed_port}/v1"), follow=True)
    assert response.status_code == 200
    assert ModelServer.objects.get(pk=server.pk).base_url.endswith(f":{closed_port}/v1")
    # another process that saw the old address answer writes it late: it is not the new address's either
    cache.set(server_health._key(server.pk, "ok"), old, timeout=60)

    row = list_rows(operator.get(LIST))["oa"]
    assert row["last_success"] == "never seen"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: model discovery: .+", row["last_failure"]), row
    assert home_servers(operator)["oa"][1] == "never seen"


def test_a_failed_test_connection_is_the_server_s_last_failure(operator, closed_port):
    server = ModelServerFactory(name="gone", base_url=f"http://127.0.0.1:{closed_port}/v1")
    ModelFactory(server=server, name="m")
    before = datetime.now(timezone.utc).replace(microsecond=0)

    operator.post(f"{LIST}{server.pk}/test-connection/", follow=True)

    page = change_fields(operator.get(f"{LIST}{server.pk}/change/"))
    assert page["last_success"] == "never seen"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: Test connection: Chat call to gone/m failed: 503 "
                        r"The model server could not be reached\. \(connect failed \(.+\)\)",
                        page["last_failure"]), page
    assert moment(page["last_failure"]) >= before
    assert list_rows(operator.get(LIST))["gone"]["last_failure"] == page["last_failure"]
    state, last_success, last_failure = home_servers(operator)["gone"]
    assert state.startswith("failing") and last_success == "never seen"
    assert last_failure.startswith(f"{page['last_failure'][:19]} Test connection: Chat call to gone/m failed: 503")


def test_a_successful_test_connection_is_the_server_s_last_success(operator, upstream):  # noqa: F811
    server = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")
    ModelFactory(server=server, name="echo-1")

    operator.post(f"{LIST}{server.pk}/test-connection/", follow=True)

    assert change_fields(operator.get(f"{LIST}{server.pk}/change/"))["last_success"] != "never seen"


def test_right_after_a_successful_discovery_the_last_success_is_known(operator, upstream):  # noqa: F811
    upstream.configure(models=["echo-1"])
    before = datetime.now(timezone.utc).replace(microsecond=0)

    response = operator.post(f"{LIST}add/", server_form(base_url=f"{upstream.url}/v1"), follow=True)

    assert response.status_code == 200
    row = list_rows(operator.get(LIST))["oa"]
    assert row["last_success"] != "never seen" and moment(row["last_success"]) >= before
    assert row["last_failure"] == "none seen"
    assert home_servers(operator)["oa"][:2] == ["healthy", row["last_success"][:19]]


def test_the_key_column_says_a_local_server_needs_none(operator):
    ModelServerFactory(name="local", base_url="http://127.0.0.1:11434/v1", api_key="", is_remote=False)
    ModelServerFactory(name="cloud", base_url="https://api.example.test/v1", api_key="", is_remote=True)
    ModelServerFactory(name="keyed", base_url="https://api.example.test/v1", api_key="sk-test-123", is_remote=True)

    response = operator.get(LIST)
    page = response.content.decode()

    rows = list_rows(response)
    assert (rows["local"]["key_set"], rows["cloud"]["key_set"], rows["keyed"]["key_set"]) == (
        "not needed", "none", "set")
    local = re.search(r'<tr class="data-row[^"]*"[^>]*>(?:(?!</tr>).)*>local<(?:(?!</tr>).)*</tr>', page, re.S).group(0)
    key_cell = re.search(r'<td class="field-key_set[^"]*"[^>]*>(.*?)</td>', local, re.S).group(1)
    assert "red" not in key_cell and "close" not in key_cell  # no red mark, no ✗ icon
    assert "sk-test-123" not in page
