"""What a call costs: a model's prices, per million tokens in the installation's currency
(settings.CURRENCY), and the cost of a call's tokens at those prices.

Money is counted in whole COST_UNITS (10^-10 of the currency), as integers everywhere: on the usage
record (`cost_units`), in the spool's lines, in the spend counters and in the daily roll-up. A price
has at most four decimals per million tokens, so a token costs a whole number of units and a call's
cost is exact (no rounding, no float), on SQLite as on PostgreSQL, whose sums of integers are exact
too. A signed 64-bit count of units reaches 922 million of the currency: far past any account's
month.

A model without a price (`Price.NONE`) costs nothing, and says so (`priced` false).

Of a call's input tokens, some may have been read from the provider's prompt cache (cheaper: the cached
input price) and some written to it (dearer at Anthropic and on Bedrock, 1.25 times the input price for a
five-minute cache: the cache-write price); each price left empty is the input price."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

COST_UNITS_PER_CURRENCY = 10**10
PRICE_DECIMALS = 4  # of a price per million tokens: 10^-4 per 10^6 tokens = 10^-10 per token, one unit
_PRICE_SCALE = 10**PRICE_DECIMALS
DEFAULT_BATCH_DISCOUNT_PERCENT = 50


@dataclass(frozen=True)
class Price:
    """Per million tokens, in units of 10^-4 of the currency (integers): what a token costs in
    COST_UNITS. None: no price for that kind of token."""

    input: int | None = None
    cached_input: int | None = None  # None: the input price
    output: int | None = None
    cache_write: int | None = None  # None: the input price
    batch_discount_percent: int = DEFAULT_BATCH_DISCOUNT_PERCENT  # off a batch line's cost, 0 to 100

    @property
    def priced(self) -> bool:
        return self.input is not None or self.output is not None

    def cost_units(self, *, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0,
                   cache_write_input_tokens: int = 0) -> int:
        """The cost of a call's tokens, in COST_UNITS. `cached_input_tokens` and `cache_write_input_tokens`
        are parts of `input_tokens` (those the provider read from its prompt cache, and those it wrote to
        it) and cost the cached input and the cache-write price. A count past what the input holds is cut
        to it (the reads first): no token is priced twice."""
        cached = min(max(cached_input_tokens, 0), input_tokens)
        written = min(max(cache_write_input_tokens, 0), input_tokens - cached)
        cached_rate = self.cached_input if self.cached_input is not None else self.input
        write_rate = self.cache_write if self.cache_write is not None else self.input
        return ((input_tokens - cached - written) * (self.input or 0) + cached * (cached_rate or 0)
                + written * (write_rate or 0) + output_tokens * (self.output or 0))

    def batch_cost_units(self, full_cost_units: int) -> int:
        """A batch line's cost, of what the same call costs live: the discount off, rounded down."""
        return full_cost_units * (100 - self.batch_discount_percent) // 100

    def through(self, own: Price, batch_discount_percent: int | None) -> Price:
        """This price (a model's) as an alias deployment charges it: each of the deployment's `own`
        prices that it has, and its own batch discount when it has one; the rest are this price's."""
        return Price(self.input if own.input is None else own.input,
                     self.cached_input if own.cached_input is None else own.cached_input,
                     self.output if own.output is None else own.output,
                     self.cache_write if own.cache_write is None else own.cache_write,
                     self.batch_discount_percent if batch_discount_percent is None else batch_discount_percent)


NO_PRICE = Price()


def price_step(value: Decimal | None) -> int | None:
    """A price per million tokens (a Decimal of at most four places, as the models store it) as an
    integer count of 10^-4."""
    if value is None:
        return None
    return int(Decimal(value) * _PRICE_SCALE)


def price_of(*, input_price: Decimal | None, cached_input_price: Decimal | None,
             output_price: Decimal | None, cache_write_price: Decimal | None = None,
             batch_discount_percent: int | None = None) -> Price:
    """The prices as the models store them; no batch discount given: the default."""
    return Price(price_step(input_price), price_step(cached_input_price), price_step(output_price),
                 price_step(cache_write_price),
                 DEFAULT_BATCH_DISCOUNT_PERCENT if batch_discount_percent is None else int(batch_discount_percent))


def money(units: int) -> Decimal:
    """COST_UNITS as an amount of the currency (exact)."""
    return Decimal(int(units)).scaleb(-10)


def units_of(amount: Decimal | int | str) -> int:
    """An amount of the currency (a budget) as COST_UNITS; -1 stays -1 (none)."""
    value = Decimal(amount)
    if value < 0:
        return -1
    return int(value * COST_UNITS_PER_CURRENCY)


def money_text(units: int, places: int = 6) -> str:
    """An amount for people and JSON: the currency's amount as a decimal string, `places` decimals at
    least, more where the amount has them (a call of a cheap model costs a fraction of a cent)."""
    amount = money(units).normalize()
    exponent = amount.as_tuple().exponent
    return f"{amount:.{max(places, -exponent if isinstance(exponent, int) else 0)}f}"
