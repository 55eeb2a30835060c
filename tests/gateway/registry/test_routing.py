"""Resolving a model id and planning the chain (docs/design.md, "Models"; spec 7.2, 8.5)."""

import pytest

from accounts.models import AccountGroup
from gateway.registry.routing import plan_chain
from gateway.web.errors import ApiError
from tests.factories import AccountGroupFactory, ModelFactory, ModelFallbackFactory, ModelServerFactory


@pytest.fixture
def models(db):
    local = ModelServerFactory(name="local")
    cloud = ModelServerFactory(name="cloud", is_remote=True, api_key="sk-x")
    llama = ModelFactory(server=local, name="llama3")
    qwen = ModelFactory(server=local, name="qwen")
    gpt = ModelFactory(server=cloud, name="gpt")
    default = ModelFactory(server=local, name="default-model", is_default=True)
    ModelFallbackFactory(model=llama, fallback=gpt, position=1)
    ModelFallbackFactory(model=llama, fallback=qwen, position=0)
    return {"llama": llama, "qwen": qwen, "gpt": gpt, "default": default}


def ids(chain):
    return [t.public_id for t in chain]


def test_the_chain_is_the_model_its_fallbacks_in_order_then_the_default(models, group):
    assert ids(plan_chain("local/llama3", group=group)) == [
        "local/llama3", "local/qwen", "cloud/gpt", "local/default-model"]


def test_a_bare_name_finds_its_model(models, group):
    assert ids(plan_chain("qwen", group=group)) == ["local/qwen", "local/default-model"]


def test_a_bare_name_no_server_has_is_answered_by_the_default(models, group):
    assert ids(plan_chain("gpt-17-ultra", group=group)) == ["local/default-model"]


def test_a_server_that_lacks_the_model_is_404(models, group):
    with pytest.raises(ApiError) as exc:
        plan_chain("local/gpt-17-ultra", group=group)
    assert exc.value.status == 404 and exc.value.code == "model_not_found"


def test_a_name_with_a_slash_that_names_no_server_is_a_bare_name(models, group):
    assert ids(plan_chain("meta-llama/Llama-3-70B", group=group)) == ["local/default-model"]


def test_a_model_the_group_may_not_use_is_403_and_others_are_left_out_of_the_chain(models, group):
    AccountGroup.objects.filter(pk=group.pk).update(all_models=False)
    group.refresh_from_db()
    group.allowed_models.add(models["llama"], models["gpt"])
    with pytest.raises(ApiError) as exc:
        plan_chain("local/qwen", group=group)
    assert exc.value.status == 403
    assert ids(plan_chain("local/llama3", group=group)) == ["local/llama3", "cloud/gpt"]


def test_a_group_without_remote_servers_cannot_ask_for_one_nor_fall_back_to_one(models, db):
    group = AccountGroupFactory(remote_servers_allowed=False)
    with pytest.raises(ApiError) as exc:
        plan_chain("cloud/gpt", group=group)
    assert exc.value.status == 403
    assert ids(plan_chain("local/llama3", group=group)) == ["local/llama3", "local/qwen", "local/default-model"]


def test_disabled_models_and_servers_are_absent(models, group):
    models["qwen"].enabled = False
    models["qwen"].save()
    with pytest.raises(ApiError) as exc:
        plan_chain("local/qwen", group=group)
    assert exc.value.status == 404
    assert ids(plan_chain("local/llama3", group=group)) == ["local/llama3", "cloud/gpt", "local/default-model"]


def test_a_capability_the_model_lacks_is_400(models, group):
    with pytest.raises(ApiError) as exc:
        plan_chain("local/llama3", group=group, capability="audio")
    assert exc.value.status == 400


def test_without_a_default_an_unknown_bare_name_is_404(db, group):
    ModelFactory(server=ModelServerFactory(name="solo"), name="only")
    with pytest.raises(ApiError) as exc:
        plan_chain("nothing-like-it", group=group)
    assert exc.value.status == 404


@pytest.mark.parametrize("url", ["http://ollama:11434/v1", "http://127.0.0.1:9100/v1", "https://api.anthropic.com",
                                 "http://[::1]:8080/v1", "http://localhost/v1"])
def test_a_server_url_may_name_any_host(url):
    from gateway.models import validate_server_url

    validate_server_url(url)


@pytest.mark.parametrize("url", ["ftp://host/v1", "http://", "ollama:11434", "http://host:99999/v1",
                                 "http://ho st/v1", "not a url"])
def test_a_server_url_must_be_http_with_a_host(url):
    from django.core.exceptions import ValidationError

    from gateway.models import validate_server_url

    with pytest.raises(ValidationError):
        validate_server_url(url)
