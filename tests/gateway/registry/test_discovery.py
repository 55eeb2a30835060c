"""Model discovery (gateway/registry/discovery.py) against the reference upstream: OpenAI `/v1/models`,
Ollama `/api/tags`, Anthropic `/v1/models`; failures per server; what it writes and never writes."""

import pytest

from gateway.models import Model, ModelServer
from gateway.registry.default_model import chosen_text
from gateway.registry.discovery import Found, capabilities_for, discover_models
from gateway.registry.snapshot import registry
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory
from tests.servers import free_port
from tests.upstream import running_upstream
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture


@pytest.fixture
def ollama():
    """A second upstream that lists its models only as Ollama does."""
    with running_upstream(ollama_only=True, models=["qwen2:7b", "nomic-embed-text:latest"]) as server:
        yield server


def rows(server):
    return {m.name: m for m in Model.objects.filter(server=server)}


def caps(model):
    return (model.supports_chat, model.supports_embeddings, model.supports_audio)


def paths(server):
    return [(r.method, r.path) for r in server.requests]


def test_it_adds_the_models_an_openai_compatible_server_lists(db, upstream):  # noqa: F811
    upstream.configure(models=["echo-1", "llama3", "text-embedding-3-small", "whisper-1"])
    oa = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")
    ModelFactory(server=oa, name="echo-1", supports_chat=False, supports_embeddings=True)  # operator's choice

    [report] = discover_models()

    assert report.as_dict() == {"server": "oa", "models": 4, "added": 3, "unlisted": 0, "error": None}
    assert sorted(report.added) == ["llama3", "text-embedding-3-small", "whisper-1"]
    found = rows(oa)
    assert caps(found["echo-1"]) == (False, True, False)  # an existing row is left as it is
    assert caps(found["llama3"]) == (True, False, False)
    assert caps(found["text-embedding-3-small"]) == (False, True, False)
    assert caps(found["whisper-1"]) == (False, False, True)
    assert all(m.enabled and m.unlisted_since is None for m in found.values())
    # there was no default: the only chat model became it (gateway/registry/default_model.py)
    assert [name for name, m in found.items() if m.is_default] == ["llama3"]
    assert paths(upstream) == [("GET", "/v1/models")]
    oa.refresh_from_db()
    assert oa.discovered_at is not None and oa.discovery_error == ""


def test_an_ollama_server_is_read_from_api_tags_when_v1_models_is_missing(db, ollama):
    server = ModelServerFactory(name="ol", base_url=f"{ollama.url}/v1")

    [report] = discover_models()

    assert report.as_dict() == {"server": "ol", "models": 2, "added": 2, "unlisted": 0, "error": None}
    assert paths(ollama) == [("GET", "/v1/models"), ("GET", "/api/tags")]
    found = rows(server)
    assert caps(found["qwen2:7b"]) == (True, False, False)
    assert caps(found["nomic-embed-text:latest"]) == (False, True, False)


def test_an_anthropic_server_is_asked_with_its_headers(db, upstream):  # noqa: F811
    upstream.configure(models=["claude-echo", "claude-echo-2"], require_key="sk-ant-right")
    server = ModelServerFactory(name="an", kind="anthropic", base_url=upstream.url, api_key="sk-ant-right",
                                is_remote=True)

    [report] = discover_models()

    assert report.error is None and sorted(report.added) == ["claude-echo", "claude-echo-2"]
    request = upstream.last
    assert (request.method, request.path) == ("GET", "/v1/models")
    assert request.headers["x-api-key"] == "sk-ant-right"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert set(rows(server)) == {"claude-echo", "claude-echo-2"}


def test_a_server_that_is_down_is_reported_and_the_others_are_still_asked(db, upstream, ollama):  # noqa: F811
    oa = ModelServerFactory(name="a-oa", base_url=f"{upstream.url}/v1")
    down = ModelServerFactory(name="b-down", base_url=f"http://127.0.0.1:{free_port()}/v1", connect_timeout=2)
    ol = ModelServerFactory(name="c-ol", base_url=f"{ollama.url}/v1")
    kept = ModelFactory(server=down, name="kept")

    reports = [r.as_dict() for r in discover_models()]

    assert reports == [
        {"server": "a-oa", "models": 1, "added": 1, "unlisted": 0, "error": None},
        {"server": "b-down", "models": None, "added": 0, "unlisted": 0,
         "error": "The model server could not be reached."},
        {"server": "c-ol", "models": 2, "added": 2, "unlisted": 0, "error": None},
    ]
    assert set(rows(oa)) == {"echo-1"} and set(rows(ol)) == {"qwen2:7b", "nomic-embed-text:latest"}
    kept.refresh_from_db()
    assert kept.enabled and kept.unlisted_since is None  # a failure says nothing about the models
    down.refresh_from_db()
    assert down.discovery_error == "The model server could not be reached."


def test_a_server_answering_with_errors_is_reported_without_the_providers_text(db, upstream):  # noqa: F811
    upstream.configure(require_key="the-right-key")
    server = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1", api_key="sk-wrong-secret")

    [report] = discover_models()

    assert report.error == "GET /models answered 401; GET /api/tags answered 401."
    assert "sk-wrong" not in report.summary()
    server.refresh_from_db()
    assert server.discovery_error == report.error

    upstream.configure(require_key=None)
    [again] = discover_models()
    assert again.error is None
    server.refresh_from_db()
    assert server.discovery_error == ""


def test_a_model_no_longer_listed_is_marked_and_keeps_every_setting(db, upstream):  # noqa: F811
    upstream.configure(models=["echo-1", "gone"])
    oa = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")
    default = ModelFactory(server=oa, name="echo-1", is_default=True)
    gone = ModelFactory(server=oa, name="gone", supports_embeddings=True)
    gone.fallbacks.add(default)
    group = AccountGroupFactory(name="picky", all_models=False)
    group.allowed_models.add(gone)
    discover_models()
    assert Model.objects.get(pk=gone.pk).unlisted_since is None

    upstream.configure(models=["echo-1"])
    [report] = discover_models()

    assert report.as_dict() == {"server": "oa", "models": 1, "added": 0, "unlisted": 1, "error": None}
    gone.refresh_from_db()
    assert gone.unlisted_since is not None
    assert gone.enabled and gone.supports_embeddings and list(gone.fallbacks.all()) == [default]
    assert list(group.allowed_models.all()) == [gone]
    assert Model.objects.get(pk=default.pk).is_default

    upstream.configure(models=["echo-1", "gone"])
    [back] = discover_models()
    assert back.relisted == ["gone"] and back.added == []
    gone.refresh_from_db()
    assert gone.unlisted_since is None


def test_a_remote_server_without_a_key_is_not_asked(db, upstream):  # noqa: F811
    ModelServerFactory(name="cloud", base_url=f"{upstream.url}/v1", is_remote=True, api_key="")
    [report] = discover_models()
    assert report.error == "No API key is configured for this server."
    assert upstream.requests == []


def test_disabled_servers_are_left_alone(db, upstream):  # noqa: F811
    ModelServerFactory(name="off", base_url=f"{upstream.url}/v1", enabled=False)
    assert discover_models() == []
    assert upstream.requests == [] and not Model.objects.exists()


def test_the_registry_sees_new_models_at_once(db, upstream, settings):  # noqa: F811
    settings.REGISTRY_TTL_SECONDS = 3600
    upstream.configure(models=["echo-1", "fresh"])
    ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")
    assert "oa/fresh" not in registry().by_public_id  # read and cached now
    discover_models()
    assert "oa/fresh" in registry().by_public_id


@pytest.mark.parametrize("name, expected", [
    ("llama3.1:8b", (True, False, False)),
    ("gpt-4o", (True, False, False)),
    ("text-embedding-3-large", (False, True, False)),
    ("mxbai-embed-large:latest", (False, True, False)),
    ("bge-m3", (False, True, False)),
    ("all-minilm:l6-v2", (False, True, False)),
    ("whisper-large-v3", (False, False, True)),
    ("gpt-4o-mini-tts", (False, False, True)),
    ("gpt-4o-transcribe", (False, False, True)),
])
def test_capabilities_are_guessed_from_the_name(name, expected):
    c = capabilities_for(Found(name))
    assert (c["supports_chat"], c["supports_embeddings"], c["supports_audio"]) == expected


def test_an_ollama_bert_family_model_is_an_embedding_model():
    assert capabilities_for(Found("granite-small:latest", embeddings_family=True))["supports_embeddings"]


def test_the_admin_action_discovers_the_selected_servers(db, client, upstream):  # noqa: F811
    operator = AccountFactory(is_staff=True, is_superuser=True, role="admin")
    client.force_login(operator)
    upstream.configure(models=["echo-1", "llama3"])
    chosen = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1")
    ModelServerFactory(name="other", base_url=f"http://127.0.0.1:{free_port()}/v1")

    response = client.post("/admin/gateway/modelserver/",
                           {"action": "discover_models", "_selected_action": [chosen.pk]}, follow=True)

    assert response.status_code == 200
    shown = [str(m) for m in response.context["messages"]]
    assert shown == ["oa: 2 model(s) listed, 2 added, 0 no longer listed, 0 listed again.",
                     chosen_text("oa/echo-1")]  # the first chat model, there being no default
    assert set(rows(chosen)) == {"echo-1", "llama3"}
    assert not ModelServer.objects.get(name="other").discovered_at
