"""Prices and costs for the dashboard: list prices from the model registry, costs of records the
database could not price in bulk.
"""

from __future__ import annotations

from decimal import Decimal

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import Least

import optimizer

DEFAULT_TRIGGER_RATIO = 0.8  # optimizer.PackConfig.trigger_ratio, for records without stats


def as_float(value: Decimal | float | None) -> float | None:
    return None if value is None else float(value)


def model_prices(model: str) -> dict[str, float | None] | None:
    """Registry prices (USD per token) via the optimizer, which reads litellm's bundled table."""
    info = optimizer.model_info(model)
    if info is None:
        return None
    return {
        "input": info.input_cost_per_token,
        "cached_input": info.cached_input_cost_per_token,
        "output": info.output_cost_per_token,
    }


def _cost(model: str, *, prompt_tokens: int, cached_tokens: int = 0) -> float | None:
    return optimizer.cost_usd(model, prompt_tokens=prompt_tokens, cached_tokens=cached_tokens)


def unpriced_costs(records: QuerySet) -> tuple[float, float, int]:
    """Full/sent costs of records stored without cost figures, priced per model from the registry.

    Prices are linear in tokens, so one grouped sum per model is exact. What the provider reported
    serving from its prompt cache (provider_cached_tokens) is billed at the cached-input price, as the
    request path does for the records it prices itself.
    """
    full = sent = 0.0
    unknown = 0
    rows = (
        records.filter(Q(cost_full_usd__isnull=True) | Q(cost_sent_usd__isnull=True))
        .values("model")
        .annotate(
            n=Count("id"),
            full=Sum("tokens_full"),
            sent=Sum("tokens_sent"),
            cached=Sum(Least("provider_cached_tokens", "tokens_sent"), filter=Q(provider_cached_tokens__isnull=False)),
        )
        .order_by()
    )
    for row in rows:
        cost_full = _cost(row["model"], prompt_tokens=row["full"] or 0)
        cost_sent = _cost(row["model"], prompt_tokens=row["sent"] or 0, cached_tokens=row["cached"] or 0)
        if cost_full is None or cost_sent is None:
            unknown += row["n"]
            continue
        full += cost_full
        sent += cost_sent
    return full, sent, unknown
