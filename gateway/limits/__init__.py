"""Ceilings, quotas and budgets: request ceilings per minute (`ratelimit`, spec 8.1-8.3), token quotas
per window (`quotas`, spec 8.4), budgets in money in the same windows (`budgets`, counted
and checked with the quotas) and what `GET /api/v1/usage` reads of them (`usage_report`).

May import: `gateway.usage` and below."""
