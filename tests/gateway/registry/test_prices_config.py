"""Prices and budgets in `manage.py applyconfig`: a model's and an alias deployment's prices per million
tokens, a group's budgets; numbers or decimal strings, exact, and any other value refused by the
name of its place, writing nothing."""

import textwrap
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import AccountGroup
from gateway.models import AliasDeployment, Model
from gateway.registry.prices import Price
from gateway.registry.snapshot import registry

pytestmark = pytest.mark.django_db

FILE = """
servers:
  - name: cloud
    base_url: https://api.example.test/v1
    models:
      - name: gpt
        input_price: 0.15
        cached_input_price: "0.075"
        cache_write_price: 0.1875     # 1.25 times the input price
        output_price: 0.6
      - name: mini
        output_price: 2
  - name: local
    base_url: http://127.0.0.1:9/v1
    models: [{name: llama}]
aliases:
  - name: assistant
    deployments:
      - {model: cloud/gpt, input_price: "0.2", cache_write_price: "0.25"}
      - local/llama
groups:
  - name: staff
    daily_budget: 5
    weekly_budget: "25.50"
  - name: interns
"""


@pytest.fixture
def apply(tmp_path):
    def run(text: str, *args) -> str:
        path = tmp_path / "gateway.yaml"
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        out = StringIO()
        call_command("applyconfig", str(path), *args, stdout=out)
        return out.getvalue()

    return run


def prices(name: str) -> tuple:
    return tuple(Model.objects.filter(name=name).values_list("input_price", "cached_input_price", "cache_write_price",
                                                             "output_price")[0])


def budgets(name: str) -> tuple:
    return tuple(AccountGroup.objects.filter(name=name).values_list("daily_budget", "weekly_budget",
                                                                     "monthly_budget")[0])


def test_it_sets_prices_and_budgets_exactly_and_again_changes_nothing(apply):
    apply(FILE)
    assert prices("gpt") == (Decimal("0.15"), Decimal("0.075"), Decimal("0.1875"), Decimal("0.6"))
    assert prices("mini") == (None, None, None, Decimal("2"))
    assert prices("llama") == (None, None, None, None)
    assert list(AliasDeployment.objects.order_by("id").values_list("model__name", "input_price", "cache_write_price",
                                                                   "output_price")) \
        == [("gpt", Decimal("0.2"), Decimal("0.25"), None), ("llama", None, None, None)]
    assert budgets("staff") == (Decimal("5"), Decimal("25.5"), Decimal("-1"))
    assert budgets("interns") == (Decimal("-1"), Decimal("-1"), Decimal("-1"))
    reg = registry()
    assert reg.by_public_id["cloud/gpt"].price == Price(input=1500, cached_input=750, output=6000, cache_write=1875)
    assert [d.target.price for d in reg.pools["assistant"].deployments] == [
        Price(input=2000, cached_input=750, output=6000, cache_write=2500), Price()]

    out = apply(FILE.replace("0.15", '"0.1500"').replace("weekly_budget: \"25.50\"", "weekly_budget: 25.5"))
    assert "Everything unchanged" in out, out


def test_a_price_or_budget_left_out_is_none_again(apply):
    apply(FILE)
    out = apply(FILE.replace("        input_price: 0.15\n", "").replace('input_price: "0.2"', "weight: 1")
                .replace("    daily_budget: 5\n", ""))
    assert "models: 1 updated, 2 unchanged" in out and "aliases: 1 updated" in out and "groups: 1 updated" in out
    assert prices("gpt") == (None, Decimal("0.075"), Decimal("0.1875"), Decimal("0.6"))
    assert AliasDeployment.objects.get(model__name="gpt").input_price is None
    assert budgets("staff")[0] == Decimal("-1")


def test_null_is_no_price_and_minus_one_no_budget(apply):
    apply(FILE)
    apply(FILE.replace("output_price: 2", "output_price: null").replace("daily_budget: 5", "daily_budget: -1"))
    assert prices("mini") == (None, None, None, None)
    assert budgets("staff")[0] == Decimal("-1")


PRICE_ERROR = ("must be a price of at least 0 and below 100000000 with at most 4 decimals, as a number or a "
               'decimal string (0.15, "0.15"), or null for none')
BUDGET_ERROR = ("must be -1 (no budget) or an amount of at least 0 and below 10000000000 with at most 4 decimals, "
                'as a number or a decimal string (25.5, "25.50")')


@pytest.mark.parametrize("before, after, message", [
    ("input_price: 0.15", "input_price: -0.15", f"servers[0].models[0].input_price: {PRICE_ERROR}"),
    ("input_price: 0.15", "input_price: 0.00001", f"servers[0].models[0].input_price: {PRICE_ERROR}"),
    ("input_price: 0.15", 'input_price: "cheap"', f"servers[0].models[0].input_price: {PRICE_ERROR}"),
    ("input_price: 0.15", "input_price: .nan", f"servers[0].models[0].input_price: {PRICE_ERROR}"),
    ("input_price: 0.15", "input_price: true", f"servers[0].models[0].input_price: {PRICE_ERROR}"),
    ("input_price: 0.15", "input_price: 100000000", f"servers[0].models[0].input_price: {PRICE_ERROR}"),
    ('cached_input_price: "0.075"', "cached_input_price: [1]",
     f"servers[0].models[0].cached_input_price: {PRICE_ERROR}"),
    ("output_price: 2", "output_price: 2.00005", f"servers[0].models[1].output_price: {PRICE_ERROR}"),
    ("cache_write_price: 0.1875", "cache_write_price: -1.25",
     f"servers[0].models[0].cache_write_price: {PRICE_ERROR}"),
    ("cache_write_price: 0.1875", "cache_write_price: 0.18755",
     f"servers[0].models[0].cache_write_price: {PRICE_ERROR}"),
    ('cache_write_price: "0.25"', 'cache_write_price: "a quarter"',
     f"aliases[0].deployments[0].cache_write_price: {PRICE_ERROR}"),
    ('input_price: "0.2"', 'input_price: "-1"', f"aliases[0].deployments[0].input_price: {PRICE_ERROR}"),
    ("daily_budget: 5", "daily_budget: -2", f"groups[0].daily_budget: {BUDGET_ERROR}"),
    ("daily_budget: 5", "daily_budget: -0.5", f"groups[0].daily_budget: {BUDGET_ERROR}"),
    ('weekly_budget: "25.50"', 'weekly_budget: "25.12345"', f"groups[0].weekly_budget: {BUDGET_ERROR}"),
    ('weekly_budget: "25.50"', "weekly_budget: 10000000000", f"groups[0].weekly_budget: {BUDGET_ERROR}"),
    ("daily_budget: 5", "daily_budget: five", f"groups[0].daily_budget: {BUDGET_ERROR}"),
    ("daily_budget: 5", "daily_budget: 5\n    monthly_spend: 3", "groups[0].monthly_spend: unknown key"),
    ("      - local/llama", "      - {model: local/llama, output_cost: 1}",
     "aliases[0].deployments[1].output_cost: unknown key; expected one of model, weight, input_price, "
     "cached_input_price, cache_write_price, output_price"),
])
def test_a_bad_price_or_budget_is_refused_by_its_place_and_writes_nothing(apply, before, after, message):
    assert before in FILE
    with pytest.raises(CommandError) as refused:
        apply(FILE.replace(before, after, 1))
    assert message in str(refused.value)
    assert not Model.objects.exists() and not AccountGroup.objects.filter(name="staff").exists()
