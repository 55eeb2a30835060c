"""Prices and costs in integer COST_UNITS: a price of at most four decimals per million tokens
makes a token cost a whole number of units, so no cost is ever rounded."""

from decimal import Decimal

import pytest

from gateway.registry.prices import NO_PRICE, Price, money, money_text, price_of, units_of


def test_a_price_per_million_tokens_costs_exactly_to_the_smallest_step():
    price = price_of(input_price=Decimal("0.0375"), cached_input_price=None, output_price=Decimal("0.15"))
    assert price == Price(input=375, cached_input=None, output=1500)
    assert money(price.cost_units(input_tokens=1, output_tokens=0)) == Decimal("0.0000000375")
    assert money(price.cost_units(input_tokens=1_234_567, output_tokens=89)) == Decimal("0.0462962625") + \
        Decimal("0.00001335")


def test_cached_input_tokens_cost_the_cached_price_or_the_input_price():
    price = Price(input=30_000, cached_input=3_000, output=150_000)
    assert price.cost_units(input_tokens=10, output_tokens=0, cached_input_tokens=4) == 6 * 30_000 + 4 * 3_000
    without = Price(input=30_000, output=150_000)
    assert without.cost_units(input_tokens=10, output_tokens=0, cached_input_tokens=4) == 10 * 30_000
    assert price.cost_units(input_tokens=3, output_tokens=0, cached_input_tokens=9) == 3 * 3_000  # never past the input


def test_cache_writes_cost_the_cache_write_price():
    price = Price(input=30_000, cached_input=3_000, output=150_000, cache_write=37_500)  # 3, 0.3, 15, 3.75
    cost = price.cost_units(input_tokens=100, output_tokens=7, cached_input_tokens=20, cache_write_input_tokens=50)
    assert cost == 30 * 30_000 + 20 * 3_000 + 50 * 37_500 + 7 * 150_000
    assert money(price.cost_units(input_tokens=1_000_000, output_tokens=0,
                                  cache_write_input_tokens=1_000_000)) == Decimal("3.75")


def test_without_a_cache_write_price_a_write_costs_the_input_price():
    price = Price(input=30_000, cached_input=3_000, output=150_000)
    assert price.cost_units(input_tokens=100, output_tokens=0, cached_input_tokens=20, cache_write_input_tokens=50) \
        == 80 * 30_000 + 20 * 3_000
    assert price.cost_units(input_tokens=100, output_tokens=0, cache_write_input_tokens=100) \
        == price.cost_units(input_tokens=100, output_tokens=0)


def test_with_neither_a_cache_write_nor_an_input_price_a_write_costs_nothing():
    price = Price(cached_input=3_000, output=150_000)
    assert price.cost_units(input_tokens=100, output_tokens=2, cached_input_tokens=10, cache_write_input_tokens=90) \
        == 10 * 3_000 + 2 * 150_000


def test_reads_and_writes_are_never_priced_past_the_input():
    price = Price(input=10, cached_input=1, cache_write=100)
    # the reads first, then what is left for the writes; none below 0
    assert price.cost_units(input_tokens=5, output_tokens=0, cached_input_tokens=3, cache_write_input_tokens=9) \
        == 3 * 1 + 2 * 100
    assert price.cost_units(input_tokens=5, output_tokens=0, cached_input_tokens=8, cache_write_input_tokens=9) \
        == 5 * 1
    assert price.cost_units(input_tokens=5, output_tokens=0, cache_write_input_tokens=-4) == 5 * 10
    assert price.cost_units(input_tokens=0, output_tokens=0, cache_write_input_tokens=9) == 0


def test_a_cache_write_price_is_read_as_the_others():
    price = price_of(input_price=Decimal("3"), cached_input_price=Decimal("0.3"), output_price=Decimal("15"),
                     cache_write_price=Decimal("3.75"))
    assert price == Price(input=30_000, cached_input=3_000, output=150_000, cache_write=37_500)
    assert price_of(input_price=None, cached_input_price=None, output_price=None).cache_write is None


def test_no_price_costs_nothing_and_says_so():
    assert NO_PRICE.cost_units(input_tokens=10**9, output_tokens=10**9) == 0
    assert NO_PRICE.cost_units(input_tokens=10, output_tokens=1, cached_input_tokens=2, cache_write_input_tokens=3) == 0
    assert not NO_PRICE.priced and Price(output=1).priced


@pytest.mark.parametrize("units, text", [(0, "0.000000"), (10**10, "1.000000"), (375, "0.0000000375"),
                                         (123 * 10**10 + 45 * 10**8, "123.450000")])
def test_money_is_exact_decimal_text(units, text):
    assert money_text(units) == text


def test_a_budget_amount_is_units_and_minus_one_stays_none():
    assert units_of(Decimal("2.5")) == 25 * 10**9
    assert units_of("-1") == -1 and units_of(Decimal("-1.0000")) == -1
