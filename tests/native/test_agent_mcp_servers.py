"""`POST /api/v1/agent/chat` and the MCP servers a group sees through a running gateway: servers
granted to other groups, to the group, remote ones, disabled ones; and the operator registering
MCP servers in the admin (the auth header value never shown, bad servers refused)."""

import pytest

from tests.factories import McpServerFactory
from tests.native.agent_support import AGENT_CHAT, agent_fixture, mcp_server_fixture, offered  # noqa: F401

# ---- which MCP servers a group sees --------------------------------------------------------------

def test_a_server_granted_to_other_groups_is_neither_offered_nor_usable(agent):
    agent.calc.groups.add(agent.world.others)
    r = agent.api.post(AGENT_CHAT, {"message": "hi"})
    assert r.status_code == 200
    assert sorted(offered(agent.upstream.requests[0])) == ["search_collection", "start_routine"]
    r = agent.api.post(AGENT_CHAT, {"message": "hi", "tools": ["calc__add"]})
    assert r.status_code == 403 and set(r.json()) == {"detail"}
    agent.upstream.reset()
    r = agent.world.outsider_api.post(AGENT_CHAT, {"message": "hi", "tools": ["calc"]})
    assert r.status_code == 200
    assert sorted(offered(agent.upstream.requests[0])) == ["calc__add", "calc__explode", "calc__weather"]


def test_a_server_granted_to_the_group_is_offered(agent):
    agent.calc.groups.add(agent.world.group)
    agent.api.post(AGENT_CHAT, {"message": "hi"})
    assert "calc__add" in offered(agent.upstream.requests[0])


def test_a_group_without_remote_servers_gets_only_local_ones(agent):
    agent.calc.is_remote = True
    agent.calc.save()
    agent.world.group.remote_servers_allowed = False
    agent.world.group.save()
    r = agent.api.post(AGENT_CHAT, {"message": "hi"})
    assert r.status_code == 200
    assert sorted(offered(agent.upstream.requests[0])) == ["search_collection", "start_routine"]
    assert agent.mcp.calls == [] and agent.mcp.refused == 0
    r = agent.api.post(AGENT_CHAT, {"message": "hi", "tools": ["calc"]})
    assert r.status_code == 403
    assert r.json() == {"detail": "Your account group may not use remote servers ('calc')."}


def test_a_disabled_server_does_not_exist(agent):
    agent.calc.enabled = False
    agent.calc.save()
    r = agent.api.post(AGENT_CHAT, {"message": "hi", "tools": ["calc"]})
    assert r.status_code == 400


# ---- the operator registers MCP servers ----------------------------------------------------------

MCP_SECRET = "Bearer mcp-stored-secret-0123456789"


@pytest.fixture
def admin_client(client, db):
    from tests.factories import AccountFactory

    client.force_login(AccountFactory(is_staff=True, is_superuser=True, email="operator@example.test"))
    return client


def _mcp_form(server, **overrides):
    data = {"name": server.name, "url": server.url, "auth_header_name": server.auth_header_name,
            "auth_header_value": "", "is_remote": "", "enabled": "on", "timeout": "30"}
    data.update(overrides)
    return data


def test_the_admin_never_shows_the_auth_header_value_and_keeps_it_when_left_empty(admin_client):
    server = McpServerFactory(name="tools", url="http://127.0.0.1:9000/mcp", auth_header_value=MCP_SECRET)
    page = admin_client.get(f"/admin/native/mcpserver/{server.pk}/change/")
    assert page.status_code == 200
    assert MCP_SECRET not in page.content.decode() and "mcp-stored-secret" not in page.content.decode()
    assert MCP_SECRET not in admin_client.get("/admin/native/mcpserver/").content.decode()
    r = admin_client.post(f"/admin/native/mcpserver/{server.pk}/change/", _mcp_form(server, timeout="12"))
    assert r.status_code == 302
    server.refresh_from_db()
    assert (server.auth_header_value, server.timeout) == (MCP_SECRET, 12.0)
    r = admin_client.post(f"/admin/native/mcpserver/{server.pk}/change/",
                          _mcp_form(server, clear_auth_header_value="on"))
    assert r.status_code == 302
    server.refresh_from_db()
    assert server.auth_header_value == ""


@pytest.mark.parametrize("field, value", [("url", "ftp://example.test/mcp"), ("timeout", "0"), ("name", "no spaces")])
def test_the_admin_refuses_a_bad_mcp_server(admin_client, field, value):
    from native.models import McpServer

    r = admin_client.post("/admin/native/mcpserver/add/",
                          {"name": "tools", "url": "http://127.0.0.1:9000/mcp", "auth_header_name": "Authorization",
                           "enabled": "on", "timeout": "30", field: value})
    assert r.status_code == 200  # the form again, with the error
    assert not McpServer.objects.exists()
