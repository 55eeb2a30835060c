"""Prices in the model admin: a model's prices per million tokens in a section named with the
installation's currency, an alias deployment's own prices in the alias page, both reaching the
registry (its stamp moves as for any other change), and each usage record's cost in the list."""

from decimal import Decimal

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from gateway.models import AliasDeployment, Model
from gateway.registry.prices import Price
from gateway.registry.snapshot import read_stamps, registry
from tests.console_html import labels, list_cells, list_rows, section_titles
from tests.factories import (
    AccountFactory,
    AliasDeploymentFactory,
    AliasFactory,
    ModelFactory,
    ModelServerFactory,
    UsageRecordFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(AccountFactory(is_staff=True, is_superuser=True, email="operator@example.test"))
    return client


@pytest.fixture
def model():
    return ModelFactory(server=ModelServerFactory(name="cloud"), name="gpt", output_price="0.6")


def model_form(model: Model, **prices) -> dict:
    data = {"server": model.server_id, "name": model.name, "supports_chat": "on", "enabled": "on",
            "context_window": model.context_window, "batch_discount_percent": model.batch_discount_percent,
            "fallback_links-TOTAL_FORMS": "0",
            "fallback_links-INITIAL_FORMS": "0", "fallback_links-MIN_NUM_FORMS": "0",
            "fallback_links-MAX_NUM_FORMS": "1000", "_save": "Save"}
    return {**data, **prices}


def test_the_prices_have_a_section_named_with_the_currency(admin_client, model, settings):
    url = reverse("admin:gateway_model_change", args=[model.pk])
    html = admin_client.get(url).content.decode()
    assert "Price per million tokens (USD)" in section_titles(html)
    assert labels(html)["id_input_price"] == "Input (USD)"
    assert labels(html)["id_cached_input_price"] == "Cached input (USD)"
    assert 'name="output_price" value="0.6"' in html  # as written, not 0.6000
    response = admin_client.post(url, model_form(model, output_price="0.6"))  # sent back as shown
    assert response.status_code == 302
    assert LogEntry.objects.get(object_id=str(model.pk)).get_change_message() == "No fields changed."
    settings.CURRENCY = "EUR"
    html = admin_client.get(url).content.decode()
    assert "Price per million tokens (EUR)" in section_titles(html)
    assert labels(html)["id_output_price"] == "Output (EUR)"
    assert "Per million output tokens, in EUR; empty: output costs nothing." in html


def test_a_price_set_in_the_admin_reaches_the_registry_and_moves_its_stamp(
        admin_client, model, settings, django_capture_on_commit_callbacks):
    settings.REGISTRY_TTL_SECONDS = 3600  # only the stamp (or this process's own change) reads it again
    assert registry().by_public_id["cloud/gpt"].price == Price(None, None, 6000)
    url = reverse("admin:gateway_model_change", args=[model.pk])
    for wrong, message in (("-0.1", "Ensure this value is greater than or equal to 0."),
                           ("0.00001", "Ensure that there are no more than 4 decimal places.")):
        response = admin_client.post(url, model_form(model, input_price=wrong, output_price="0.6"))
        assert response.status_code == 200 and message in response.content.decode()
    before = read_stamps()[0]
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(url, model_form(model, input_price="0.15", cached_input_price="0.075",
                                                     output_price="0.6"))
    assert response.status_code == 302, response.content.decode()[:2000]
    model.refresh_from_db()
    assert (model.input_price, model.cached_input_price, model.output_price) == (
        Decimal("0.15"), Decimal("0.075"), Decimal("0.6"))
    assert read_stamps()[0] > before
    assert registry().by_public_id["cloud/gpt"].price == Price(1500, 750, 6000)
    assert LogEntry.objects.get(object_id=str(model.pk)).get_change_message() == \
        "Changed Input (USD) and Cached input (USD)."


def test_the_model_list_says_which_models_have_no_price(admin_client, model):
    ModelFactory(server=model.server, name="free")
    html = admin_client.get(reverse("admin:gateway_model_changelist")).content.decode()
    assert {row["__str__"]: row["prices"] for row in list_rows(html)} == {"cloud/free": "no price",
                                                                         "cloud/gpt": "out 0.6 USD"}


def test_an_alias_deployment_takes_its_own_prices_in_the_alias_page(admin_client, model):
    other = ModelFactory(server=ModelServerFactory(name="local"), name="llama")
    alias = AliasFactory(name="assistant")
    first = AliasDeploymentFactory(alias=alias, model=model)
    url = reverse("admin:gateway_alias_change", args=[alias.pk])
    html = admin_client.get(url).content.decode()
    assert 'name="deployments-0-input_price"' in html
    assert "Input (USD)" in html and "Per million tokens through this alias, in USD; empty = the model" in html
    data = {"name": "assistant", "policy": "weighted", "affinity": "none", "enabled": "on",
            "deployments-TOTAL_FORMS": "2", "deployments-INITIAL_FORMS": "1", "deployments-MIN_NUM_FORMS": "0",
            "deployments-MAX_NUM_FORMS": "1000",
            "deployments-0-id": first.pk, "deployments-0-alias": alias.pk, "deployments-0-model": model.pk,
            "deployments-0-weight": "1", "deployments-0-input_price": "0.2",
            "deployments-1-alias": alias.pk, "deployments-1-model": other.pk, "deployments-1-weight": "1",
            "deployments-1-output_price": "0.01",
            "fallback_links-TOTAL_FORMS": "0", "fallback_links-INITIAL_FORMS": "0",
            "fallback_links-MIN_NUM_FORMS": "0", "fallback_links-MAX_NUM_FORMS": "1000"}
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert list(AliasDeployment.objects.filter(alias=alias).order_by("id").values_list(
        "model__name", "input_price", "output_price")) == [("gpt", Decimal("0.2"), None),
                                                           ("llama", None, Decimal("0.01"))]
    pool = registry().pools["assistant"]
    assert {d.target.public_id: d.target.price for d in pool.deployments} == {
        "cloud/gpt": Price(2000, None, 6000),  # its own input price, the model's output price
        "local/llama": Price(None, None, 100)}
    assert registry().by_public_id["cloud/gpt"].price == Price(None, None, 6000)  # by its own name: the model's


def test_the_usage_list_shows_each_records_cost(admin_client):
    UsageRecordFactory(account=AccountFactory(email="metered@example.test"), cost_units=12_345)
    html = admin_client.get(reverse("admin:gateway_usagerecord_changelist")).content.decode()
    assert list_cells(html, "cost") == ["0.0000012345 USD"]


def test_the_cache_write_price_is_beside_the_others_and_reaches_the_registry(admin_client, model, settings):
    settings.REGISTRY_TTL_SECONDS = 3600
    url = reverse("admin:gateway_model_change", args=[model.pk])
    html = admin_client.get(url).content.decode()
    assert labels(html)["id_cache_write_price"] == "Cache write (USD)"
    assert "Per million input tokens the provider wrote to its prompt cache" in html
    assert html.index('name="cached_input_price"') < html.index('name="cache_write_price"') \
        < html.index('name="output_price"')  # in the prices' section, between the cached input and the output
    response = admin_client.post(url, model_form(model, cache_write_price="-1", output_price="0.6"))
    assert response.status_code == 200 and "Ensure this value is greater than or equal to 0." in \
        response.content.decode()
    response = admin_client.post(url, model_form(model, input_price="3", cache_write_price="3.75", output_price="15"))
    assert response.status_code == 302, response.content.decode()[:2000]
    model.refresh_from_db()
    assert model.cache_write_price == Decimal("3.75")
    assert registry().by_public_id["cloud/gpt"].price == Price(input=30_000, output=150_000, cache_write=37_500)
    html = admin_client.get(reverse("admin:gateway_model_changelist")).content.decode()
    assert {row["__str__"]: row["prices"] for row in list_rows(html)} == {"cloud/gpt": "in 3 · write 3.75 · out 15 USD"}


def test_an_alias_deployment_takes_its_own_cache_write_price(admin_client, model):
    model.cache_write_price = Decimal("1")
    model.save()
    alias = AliasFactory(name="assistant")
    first = AliasDeploymentFactory(alias=alias, model=model)
    url = reverse("admin:gateway_alias_change", args=[alias.pk])
    assert 'name="deployments-0-cache_write_price"' in admin_client.get(url).content.decode()
    data = {"name": "assistant", "policy": "weighted", "affinity": "none", "enabled": "on",
            "deployments-TOTAL_FORMS": "1", "deployments-INITIAL_FORMS": "1", "deployments-MIN_NUM_FORMS": "0",
            "deployments-MAX_NUM_FORMS": "1000",
            "deployments-0-id": first.pk, "deployments-0-alias": alias.pk, "deployments-0-model": model.pk,
            "deployments-0-weight": "1", "deployments-0-cache_write_price": "2.5",
            "fallback_links-TOTAL_FORMS": "0", "fallback_links-INITIAL_FORMS": "0",
            "fallback_links-MIN_NUM_FORMS": "0", "fallback_links-MAX_NUM_FORMS": "1000"}
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    first.refresh_from_db()
    assert first.cache_write_price == Decimal("2.5")
    (deployment,) = registry().pools["assistant"].deployments
    assert deployment.target.price == Price(output=6000, cache_write=25_000)  # its own write price, the model's output
    assert registry().by_public_id["cloud/gpt"].price == Price(output=6000, cache_write=10_000)
