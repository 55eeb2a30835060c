"""Batch prices: a model's batch discount (percent off a batch line's cost, 50 unless set), an alias
deployment's own (else the model's), as `manage.py applyconfig` and the admin set them and the registry's
`Price` carries them; a batch line's cost is the full cost less the discount, rounded down."""

import textwrap
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from gateway.models import AliasDeployment, Model
from gateway.registry.prices import Price
from gateway.registry.snapshot import registry
from tests.console_html import labels, section_titles
from tests.factories import AccountFactory, AliasDeploymentFactory, AliasFactory, ModelFactory, ModelServerFactory

FILE = """
servers:
  - name: cloud
    base_url: https://api.example.test/v1
    models:
      - name: gpt
        input_price: 3
        output_price: 15
        batch_discount_percent: 40
      - name: mini
        output_price: 2
      - name: free-batch
        output_price: 2
        batch_discount_percent: 100
      - name: no-discount
        output_price: 2
        batch_discount_percent: 0
aliases:
  - name: assistant
    deployments:
      - {model: cloud/gpt, batch_discount_percent: 10}
      - {model: cloud/mini, input_price: 1}
"""


@pytest.fixture
def apply(tmp_path):
    def run(text: str) -> str:
        path = tmp_path / "gateway.yaml"
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        out = StringIO()
        call_command("applyconfig", str(path), stdout=out)
        return out.getvalue()

    return run


def discounts() -> dict[str, int]:
    return dict(Model.objects.values_list("name", "batch_discount_percent"))


@pytest.mark.parametrize("percent, full, batch", [
    (50, 0, 0), (50, 1, 0), (50, 3, 1), (50, 10, 5), (50, 15_000_001, 7_500_000),
    (40, 7, 4),  # 4.2 rounded down
    (0, 12_345, 12_345), (100, 12_345, 0), (1, 99, 98), (99, 99, 0), (99, 101, 1),
])
def test_a_batch_lines_cost_is_the_full_cost_less_the_discount_rounded_down(percent, full, batch):
    assert Price(output=1, batch_discount_percent=percent).batch_cost_units(full) == batch


def test_a_price_has_half_off_for_batches_unless_set():
    assert Price().batch_discount_percent == 50
    assert Price(input=1).batch_cost_units(1_000) == 500


@pytest.mark.django_db
def test_applyconfig_sets_each_discount_and_again_changes_nothing(apply):
    apply(FILE)
    assert discounts() == {"gpt": 40, "mini": 50, "free-batch": 100, "no-discount": 0}
    assert list(AliasDeployment.objects.order_by("id").values_list("model__name", "batch_discount_percent")) == [
        ("gpt", 10), ("mini", None)]
    reg = registry()
    assert reg.by_public_id["cloud/gpt"].price == Price(input=30_000, output=150_000, batch_discount_percent=40)
    assert reg.by_public_id["cloud/mini"].price.batch_discount_percent == 50
    assert reg.by_public_id["cloud/free-batch"].price.batch_discount_percent == 100
    assert reg.by_public_id["cloud/no-discount"].price.batch_discount_percent == 0
    # through the alias: the deployment's own discount, else the model's (with its own input price)
    assert [d.target.price for d in reg.pools["assistant"].deployments] == [
        Price(input=30_000, output=150_000, batch_discount_percent=10),
        Price(input=10_000, output=20_000, batch_discount_percent=50)]

    assert "Everything unchanged" in apply(FILE)
    out = apply(FILE.replace("        batch_discount_percent: 40\n", "").replace(", batch_discount_percent: 10", ""))
    assert "models: 1 updated, 3 unchanged" in out and "aliases: 1 updated" in out, out
    assert discounts()["gpt"] == 50  # left out: the default again
    assert AliasDeployment.objects.get(model__name="gpt").batch_discount_percent is None
    assert registry().pools["assistant"].deployments[0].target.price.batch_discount_percent == 50


@pytest.mark.django_db
def test_a_deployment_with_only_its_own_discount_keeps_the_models_prices(apply):
    apply(FILE)
    (gpt, _mini) = registry().pools["assistant"].deployments
    assert gpt.target.price.cost_units(input_tokens=10, output_tokens=2) == 10 * 30_000 + 2 * 150_000
    assert gpt.target.price.batch_cost_units(600_000) == 540_000


DISCOUNT_ERROR = "must be a whole number of percent from 0 to 100"


@pytest.mark.django_db
@pytest.mark.parametrize("before, after, where", [
    ("batch_discount_percent: 40", "batch_discount_percent: 101", "servers[0].models[0].batch_discount_percent"),
    ("batch_discount_percent: 40", "batch_discount_percent: -1", "servers[0].models[0].batch_discount_percent"),
    ("batch_discount_percent: 40", "batch_discount_percent: 12.5", "servers[0].models[0].batch_discount_percent"),
    ("batch_discount_percent: 40", 'batch_discount_percent: "40"', "servers[0].models[0].batch_discount_percent"),
    ("batch_discount_percent: 40", "batch_discount_percent: true", "servers[0].models[0].batch_discount_percent"),
    ("batch_discount_percent: 40", "batch_discount_percent: null", "servers[0].models[0].batch_discount_percent"),
    ("batch_discount_percent: 100", "batch_discount_percent: 1000", "servers[0].models[2].batch_discount_percent"),
    ("batch_discount_percent: 10}", "batch_discount_percent: 150}",
     "aliases[0].deployments[0].batch_discount_percent"),
    ("batch_discount_percent: 10}", "batch_discount_percent: half}",
     "aliases[0].deployments[0].batch_discount_percent"),
])
def test_a_discount_out_of_range_is_refused_by_its_place_and_writes_nothing(apply, before, after, where):
    assert before in FILE
    with pytest.raises(CommandError) as refused:
        apply(FILE.replace(before, after, 1))
    assert f"{where}: {DISCOUNT_ERROR}" in str(refused.value)
    assert not Model.objects.exists() and not AliasDeployment.objects.exists()


@pytest.mark.django_db
def test_the_admin_shows_the_discount_with_the_prices_and_refuses_one_out_of_range(client):
    client.force_login(AccountFactory(is_staff=True, is_superuser=True, email="operator@example.test"))
    model = ModelFactory(server=ModelServerFactory(name="cloud"), name="gpt", output_price="0.6")
    url = reverse("admin:gateway_model_change", args=[model.pk])
    html = client.get(url).content.decode()
    assert labels(html)["id_batch_discount_percent"] == "Batch discount (%)"
    assert 'name="batch_discount_percent" value="50"' in html
    prices = html.index("Price per million tokens (USD)")
    assert prices < html.index('name="output_price"') < html.index('name="batch_discount_percent"')
    assert "Price per million tokens (USD)" in section_titles(html)
    form = {"server": model.server_id, "name": "gpt", "supports_chat": "on", "enabled": "on",
            "context_window": model.context_window, "output_price": "0.6", "fallback_links-TOTAL_FORMS": "0",
            "fallback_links-INITIAL_FORMS": "0", "_save": "Save"}
    for wrong, message in (("101", "Ensure this value is less than or equal to 100."),
                           ("-1", "Ensure this value is greater than or equal to 0."),
                           ("", "This field is required.")):
        response = client.post(url, {**form, "batch_discount_percent": wrong})
        assert response.status_code == 200 and message in response.content.decode()
    response = client.post(url, {**form, "batch_discount_percent": "0"})
    assert response.status_code == 302
    assert registry().by_public_id["cloud/gpt"].price == Price(output=6000, batch_discount_percent=0)


@pytest.mark.django_db
def test_an_alias_deployment_takes_its_own_discount_in_the_alias_page(client):
    client.force_login(AccountFactory(is_staff=True, is_superuser=True, email="operator@example.test"))
    model = ModelFactory(server=ModelServerFactory(name="cloud"), name="gpt", output_price="0.6",
                         batch_discount_percent=30)
    alias = AliasFactory(name="assistant")
    first = AliasDeploymentFactory(alias=alias, model=model)
    url = reverse("admin:gateway_alias_change", args=[alias.pk])
    assert 'name="deployments-0-batch_discount_percent"' in client.get(url).content.decode()
    assert registry().pools["assistant"].deployments[0].target.price.batch_discount_percent == 30  # the model's
    data = {"name": "assistant", "policy": "weighted", "affinity": "none", "enabled": "on",
            "deployments-TOTAL_FORMS": "1", "deployments-INITIAL_FORMS": "1", "deployments-MIN_NUM_FORMS": "0",
            "deployments-MAX_NUM_FORMS": "1000", "deployments-0-id": first.pk, "deployments-0-alias": alias.pk,
            "deployments-0-model": model.pk, "deployments-0-weight": "1",
            "deployments-0-batch_discount_percent": "75",
            "fallback_links-TOTAL_FORMS": "0", "fallback_links-INITIAL_FORMS": "0",
            "fallback_links-MIN_NUM_FORMS": "0", "fallback_links-MAX_NUM_FORMS": "1000"}
    response = client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    (deployment,) = registry().pools["assistant"].deployments
    assert deployment.target.price == Price(output=6000, batch_discount_percent=75)
    assert registry().by_public_id["cloud/gpt"].price == Price(output=6000, batch_discount_percent=30)
    response = client.post(url, {**data, "deployments-0-batch_discount_percent": "101"})
    assert response.status_code == 200 and "Ensure this value is less than or equal to 100." in \
        response.content.decode()
