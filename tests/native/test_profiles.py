"""`GET /api/v1/profiles` and `POST /api/v1/profiles/refresh` through HTTP: the caller's profiles
and whether their model can answer, a refresh against two reference upstreams (one OpenAI
`/v1/models`, one Ollama `/api/tags` only) and one that is down, the 60-per-minute ceiling on the
shared counter, and the error shapes."""

import html
import re
import time
from types import SimpleNamespace

import pytest
import time_machine
from django.utils import timezone

from accounts.models import Account
from accounts.principal_cache import forget_all
from gateway.models import Model
from native.models import Profile
from tests.contract import (
    assert_detail,
    assert_limit_headers,
    assert_native_unauthenticated,
    assert_too_many_attempts,
)
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    CollectionFactory,
    ModelFactory,
    ModelServerFactory,
    ProfileFactory,
    api_key_for,
    bearer,
    session_for,
)
from tests.servers import free_port
from tests.upstream import running_upstream
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

PROFILES = "/api/v1/profiles"
REFRESH = "/api/v1/profiles/refresh"


@pytest.fixture
def ollama():
    with running_upstream(ollama_only=True, models=["qwen2:7b", "nomic-embed-text:latest"]) as server:
        yield server


@pytest.fixture
def presets(group, owner, outsider, upstream):  # noqa: F811
    """`oa` (OpenAI `/v1/models`, its echo-1 the default) on the shared upstream; the owner's group
    has the profiles `writer` (default model), `coder` (oa/echo-1) and a disabled `draft`; the
    outsider's group has `support`."""
    oa = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")
    echo = ModelFactory(server=oa, name="echo-1", is_default=True)
    docs = CollectionFactory(account=owner, name="Handbook")
    writer = ProfileFactory(name="writer", title="Writer", description="Drafts text.", temperature=0.7)
    coder = ProfileFactory(name="coder", title="Coder", model=echo, tools=["web_search"],
                           system_prompt="You write code.")
    coder.collections.add(docs)
    draft = ProfileFactory(name="draft", model=echo, enabled=False)
    support = ProfileFactory(name="support", model=echo)
    for profile in (writer, coder, draft):
        profile.groups.add(group)
    support.groups.add(outsider.group)
    ProfileFactory(name="nobody", model=echo)  # granted to no group
    return SimpleNamespace(oa=oa, echo=echo, docs=docs, writer=writer, coder=coder, support=support,
                                  key=api_key_for(owner), outsider_key=api_key_for(outsider))


def listed(client, key):
    response = client.get(PROFILES, headers=bearer(key))
    assert response.status_code == 200, response.content
    return response.json()["profiles"]


def by_name(profiles):
    return {p["name"]: p for p in profiles}


def test_it_lists_the_callers_enabled_profiles(client, presets, upstream):  # noqa: F811
    response = client.get(PROFILES, headers=bearer(presets.key))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"profiles": [
        {"name": "coder", "title": "Coder", "description": "", "model": "oa/echo-1", "temperature": None,
         "tools": ["web_search"], "collections": [presets.docs.pk], "available": True},
        {"name": "writer", "title": "Writer", "description": "Drafts text.", "model": "oa/echo-1",
         "temperature": 0.7, "tools": [], "collections": [], "available": True},
    ], "aliases": []}  # no alias defined (tests/native/test_profile_aliases.py lists them)
    assert upstream.requests == []  # listing never calls a model server


def test_each_group_sees_only_its_own_profiles(client, presets, outsider):
    assert [p["name"] for p in listed(client, presets.outsider_key)] == ["support"]
    assert [p["name"] for p in listed(client, presets.key)] == ["coder", "writer"]


def test_a_session_token_sees_the_same_list(client, presets, owner):
    assert [p["name"] for p in listed(client, session_for(owner))] == ["coder", "writer"]


def test_a_disabled_profile_is_hidden_and_shown_again_when_enabled(client, presets):
    Profile.objects.filter(name="coder").update(enabled=False)
    assert [p["name"] for p in listed(client, presets.key)] == ["writer"]
    Profile.objects.filter(name="coder").update(enabled=True)
    assert [p["name"] for p in listed(client, presets.key)] == ["coder", "writer"]


def test_available_flips_when_the_model_is_disabled(client, presets):
    presets.echo.enabled = False
    presets.echo.save()
    profiles = by_name(listed(client, presets.key))
    assert profiles["coder"]["available"] is False
    assert profiles["coder"]["model"] == "oa/echo-1"
    assert profiles["writer"]["available"] is False  # the default model is the disabled one

    presets.echo.enabled = True
    presets.echo.save()
    assert by_name(listed(client, presets.key))["coder"]["available"] is True


def test_available_follows_the_server_and_the_groups_limits(client, presets, group, owner):
    presets.oa.enabled = False
    presets.oa.save()
    assert by_name(listed(client, presets.key))["coder"]["available"] is False
    presets.oa.enabled = True
    presets.oa.save()

    other = ModelFactory(server=presets.oa, name="other")
    group.all_models = False
    group.save()
    group.allowed_models.add(other)
    assert by_name(listed(client, presets.key))["coder"]["available"] is False  # echo-1 not allowed
    group.allowed_models.add(presets.echo)
    assert by_name(listed(client, presets.key))["coder"]["available"] is True

    presets.oa.is_remote = True
    presets.oa.api_key = "sk-x"
    presets.oa.save()
    group.remote_servers_allowed = False
    group.save()
    assert by_name(listed(client, presets.key))["coder"]["available"] is False


def test_a_model_without_chat_or_not_listed_is_not_available(client, presets):
    embedder = ModelFactory(server=presets.oa, name="embedder", supports_chat=False, supports_embeddings=True)
    Profile.objects.filter(name="coder").update(model=embedder)
    assert by_name(listed(client, presets.key))["coder"]["available"] is False

    Profile.objects.filter(name="coder").update(model=presets.echo)
    Model.objects.filter(pk=presets.echo.pk).update(unlisted_since=timezone.now())
    assert by_name(listed(client, presets.key))["coder"]["available"] is False


def test_without_a_default_model_a_profile_without_model_has_none(client, presets):
    Model.objects.filter(pk=presets.echo.pk).update(is_default=False)
    writer = by_name(listed(client, presets.key))["writer"]
    assert (writer["model"], writer["available"]) == (None, False)


def test_refresh_asks_both_servers_and_reports_the_one_that_is_down(client, presets, upstream, ollama):  # noqa: F811
    upstream.configure(models=["echo-1", "llama3"])
    ol = ModelServerFactory(name="ol", base_url=f"{ollama.url}/v1")
    qwen = ModelFactory(server=ol, name="qwen2:7b", unlisted_since=timezone.now())
    stale = ModelFactory(server=ol, name="removed-model")
    ModelServerFactory(name="down", base_url=f"http://127.0.0.1:{free_port()}/v1", connect_timeout=2)
    Profile.objects.filter(name="coder").update(model=qwen)
    assert by_name(listed(client, presets.key))["coder"]["available"] is False

    response = client.post(REFRESH, headers=bearer(presets.key))

    assert response.status_code == 200, response.content
    assert_limit_headers(response, 60, 58)
    body = response.json()
    assert body["servers"] == [
        {"server": "down", "models": None, "added": 0, "unlisted": 0,
         "error": "The model server could not be reached."},
        {"server": "oa", "models": 2, "added": 1, "unlisted": 0, "error": None},
        {"server": "ol", "models": 2, "added": 1, "unlisted": 1, "error": None},
    ]
    assert body["profiles"] == listed(client, presets.key)
    assert by_name(body["profiles"])["coder"] == {
        "name": "coder", "title": "Coder", "description": "", "model": "ol/qwen2:7b", "temperature": None,
        "tools": ["web_search"], "collections": [presets.docs.pk], "available": True,
    }
    models = {m.public_id: m for m in Model.objects.select_related("server")}
    assert set(models) == {"oa/echo-1", "oa/llama3", "ol/qwen2:7b", "ol/nomic-embed-text:latest",
                           "ol/removed-model"}
    assert models["oa/llama3"].supports_chat and not models["oa/llama3"].supports_embeddings
    assert models["ol/nomic-embed-text:latest"].supports_embeddings
    assert not models["ol/nomic-embed-text:latest"].supports_chat
    assert models["ol/removed-model"].unlisted_since is not None and models["ol/removed-model"].enabled
    assert models["ol/qwen2:7b"].unlisted_since is None
    assert [(r.method, r.path) for r in ollama.requests] == [("GET", "/v1/models"), ("GET", "/api/tags")]
    assert [(r.method, r.path) for r in upstream.requests] == [("GET", "/v1/models")]
    assert stale.pk == models["ol/removed-model"].pk  # kept, not deleted


def test_a_failed_refresh_makes_the_servers_profiles_unavailable(client, presets, upstream):  # noqa: F811
    upstream.configure(fail_status=503)
    body = client.post(REFRESH, headers=bearer(presets.key)).json()
    assert body["servers"] == [{"server": "oa", "models": None, "added": 0, "unlisted": 0,
                                "error": "GET /models answered 503; GET /api/tags answered 503."}]
    assert [p["available"] for p in body["profiles"]] == [False, False]

    upstream.configure(fail_status=None)
    body = client.post(REFRESH, headers=bearer(presets.key)).json()
    assert body["servers"][0]["error"] is None
    assert [p["available"] for p in body["profiles"]] == [True, True]


def test_refresh_lists_only_the_callers_profiles(client, presets, upstream):  # noqa: F811
    body = client.post(REFRESH, headers=bearer(presets.outsider_key)).json()
    assert [p["name"] for p in body["profiles"]] == ["support"]


@pytest.fixture
def frozen():
    with time_machine.travel(time.time(), tick=False) as traveller:
        yield traveller


def test_the_60th_call_is_answered_and_the_61st_refused(client, presets, upstream, frozen):  # noqa: F811
    now = int(time.time())
    for i in range(59):
        response = client.get(PROFILES, headers=bearer(presets.key))
        assert response.status_code == 200
        assert_limit_headers(response, 60, 60 - (i + 1))
    last = client.post(REFRESH, headers=bearer(presets.key))  # refresh shares the count
    assert last.status_code == 200
    assert_limit_headers(last, 60, 0)

    assert_too_many_attempts(client.get(PROFILES, headers=bearer(presets.key)), 60, now=now)
    assert_too_many_attempts(client.post(REFRESH, headers=bearer(presets.key)), 60, now=now)
    assert len(upstream.requests) == 1  # the refused refresh asked no server
    assert_too_many_attempts(client.get("/api/v1/version", headers=bearer(presets.key)), 60, now=now)
    assert listed(client, presets.outsider_key)  # another account's window is its own

    frozen.shift(61)
    assert client.get(PROFILES, headers=bearer(presets.key)).status_code == 200


def test_profile_calls_do_not_feed_the_300_counter(client, presets, frozen):
    for _ in range(60):
        assert client.get(PROFILES, headers=bearer(presets.key)).status_code == 200
    usage = client.get("/api/v1/usage", headers=bearer(presets.key))
    assert usage.status_code == 200
    assert_limit_headers(usage, 300, 299)


def test_without_a_credential_the_answer_is_401_unauthenticated(client, presets):
    assert_native_unauthenticated(client.get(PROFILES))
    assert_native_unauthenticated(client.post(REFRESH))
    assert_native_unauthenticated(client.post(REFRESH, headers=bearer("svc_usr_1_wrong")))


def test_a_session_of_a_group_without_api_access_gets_403_detail(client, presets, owner):
    token = session_for(owner)
    owner.group.api_access = False
    owner.group.save()
    assert_detail(client.get(PROFILES, headers=bearer(token)), 403)
    assert_detail(client.post(REFRESH, headers=bearer(token)), 403)


def test_a_method_the_route_does_not_take_is_405(client, presets):
    response = client.delete(PROFILES, headers=bearer(presets.key))
    assert response.status_code == 405
    assert response.json() == {"message": "Method Not Allowed."}
    assert response["Allow"] == "GET"
    assert client.get(REFRESH, headers=bearer(presets.key)).status_code == 405


def test_a_deactivated_accounts_key_is_refused(client, presets, owner):
    Account.objects.filter(pk=owner.pk).update(is_active=False)
    forget_all()  # the process's credential cache: an update() sends no signal
    assert_native_unauthenticated(client.get(PROFILES, headers=bearer(presets.key)))


def test_a_profile_granted_to_several_groups_shows_in_each(client, presets, outsider):
    presets.writer.groups.add(outsider.group)
    assert [p["name"] for p in listed(client, presets.outsider_key)] == ["support", "writer"]
    third = AccountFactory(group=AccountGroupFactory(name="third", api_access=True))
    assert listed(client, api_key_for(third)) == []


def test_operators_define_and_grant_profiles_in_the_admin(client, presets, group):
    operator = AccountFactory(is_staff=True, is_superuser=True, role="admin")
    client.force_login(operator)
    page = client.get("/admin/native/profile/add/")
    assert page.status_code == 200
    for name in ("groups", "collections"):  # filter_horizontal widgets (as the console's theme writes them)
        assert re.search(rf'<select name="{name}" class="selectfilter"[^>]* data-field-name="{name}"',
                         page.content.decode())

    form = {"name": "analyst", "title": "Analyst", "description": "", "enabled": "on", "model": presets.echo.pk,
            "system_prompt": "Be precise.", "temperature": "3", "tools": '["web_search"]',
            "collections": [presets.docs.pk], "groups": [group.pk]}
    refused = client.post("/admin/native/profile/add/", form)
    assert refused.status_code == 200
    assert "Between 0 and 2" in refused.content.decode()

    form["temperature"] = "0.2"
    assert client.post("/admin/native/profile/add/", form).status_code == 302
    analyst = by_name(listed(client, presets.key))["analyst"]
    assert analyst == {"name": "analyst", "title": "Analyst", "description": "", "model": "oa/echo-1",
                       "temperature": 0.2, "tools": ["web_search"], "collections": [presets.docs.pk],
                       "available": True}
    assert client.get(f"/admin/gateway/modelserver/{presets.oa.pk}/change/").status_code == 200


def test_the_profile_form_says_which_model_empty_means(db, client):
    """A profile without a model chats with the default model: its form names it, or says that none is set."""
    client.force_login(AccountFactory(is_staff=True, is_superuser=True, role="admin"))

    assert labels_help(client.get("/admin/native/profile/add/")) == (
        'Empty: the default model. None is set, so a chat with this profile cannot run: tick "Is default" on a chat '
        "model (Models).")
    ModelFactory(server=ModelServerFactory(name="oa"), name="echo-1", is_default=True)
    assert labels_help(client.get("/admin/native/profile/add/")) == "Empty: the default model (oa/echo-1)."


def labels_help(response) -> str:
    """The help text under the profile form's model field."""
    page = response.content.decode().split('id="id_model"')[1]  # the first help text after the field is its own
    return html.unescape(re.search(r'<div class="leading-relaxed mt-2 text-xs">\s*(.*?)\s*</div>', page, re.S).group(1))
