"""Prices for the dashboard: list prices from the model registry (records stored without cost
figures are priced with them when counted: totals.record_contribution).
"""

from __future__ import annotations

from decimal import Decimal

import optimizer

DEFAULT_TRIGGER_RATIO = 0.8  # optimizer.PackConfig.trigger_ratio, for records without stats


def as_float(value: Decimal | float | None) -> float | None:
    return None if value is None else float(value)


def money(value: float | None) -> Decimal | None:
    """A cost in USD as stored (six decimals), None kept."""
    return None if value is None else Decimal(str(round(value, 6)))


def model_prices(model: str, *, provider: str | None = None) -> dict[str, float | None] | None:
    """Registry prices (USD per token) via the optimizer, which reads litellm's bundled table
    (`provider`: a record's registry_provider, the prefix its endpoint's host named)."""
    info = optimizer.model_info(model, provider=provider)
    if info is None:
        return None
    return {
        "input": info.input_cost_per_token,
        "cached_input": info.cached_input_cost_per_token,
        "output": info.output_cost_per_token,
    }
