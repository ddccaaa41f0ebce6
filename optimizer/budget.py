"""Budget, trigger and target arithmetic.

Budget = context window - tokens reserved for the reply - a safety margin. Optimization triggers at
``trigger_ratio`` of the budget and then cuts down to ``target_ratio`` of it (defaults 0.8 / 0.5),
well below the trigger, so that the next several requests append to an unchanged prefix instead of
shifting the window on every turn: providers cache a stable prompt prefix and bill it at a fraction
of the price.

How each preference uses them: "fast" promises the smallest context, so it trims earlier: its trigger
and target are both `fast_headroom` (0.1) of the budget lower (0.7 / 0.4 by default). The gap between
them, which sets how many turns append before the next cut, is the same for all three, so fast's
prefix is as stable as the others'. Balanced and quality share the configured ratios and differ only
in how they weigh truncation against summarization (see `selector`); their summaries shrink what
they keep, so without the lower line fast sent more than balanced on small windows. At a cut the
summary in use shares the target with the window; a summary written at that moment (inline, or by a
worker for the next turn) lands above the window, under the trigger, until the next cut.
"""

from __future__ import annotations

import math

from .registry import model_info
from .types import DEFAULT_CONFIG, PackConfig

DEFAULT_CONTEXT_WINDOW = 8192  # for a model the registry does not know
# The largest budget taken: trigger and target are shares of it in floating point, which holds every
# integer up to 2**53 exactly and none past about 1.8e308 (an OverflowError, not a refusal).
MAX_BUDGET = 2**53


def budget_problem(budget: object) -> str | None:
    """Why `budget` is not a budget `pack` takes (None when it is one): an integer from 1 to MAX_BUDGET."""
    if isinstance(budget, bool) or not isinstance(budget, int) or not 0 < budget <= MAX_BUDGET:
        return f"budget must be a positive integer up to {MAX_BUDGET:,}, got {repr(budget)[:40]}"
    return None


def compute_budget(*, context_window: int, max_output_tokens: int, safety_margin: int = 0) -> int:
    """Prompt budget: window - reserved output - margin, never below 0 (0 means nothing fits)."""
    return max(0, int(context_window) - max(0, int(max_output_tokens)) - max(0, int(safety_margin)))


def budget_for_model(model: str, *, config: PackConfig = DEFAULT_CONFIG) -> int:
    """Budget for `model` from the registry's context window and the config's reserve and margin."""
    info = model_info(model)
    window = info.context_window if info else DEFAULT_CONTEXT_WINDOW
    return compute_budget(
        context_window=window, max_output_tokens=config.reserved_output, safety_margin=config.safety_margin
    )


def _headroom(config: PackConfig, preference: str | None) -> float:
    return config.fast_headroom if preference == "fast" else 0.0


def _share(budget: int, ratio: float) -> float:
    # Rounded: 0.8 - 0.1 is 0.7000000000000001 in binary floating point, and the product would then
    # round up a whole token past 70 % of a budget whose 70 % is a whole number.
    return round(budget * max(0.0, ratio), 6)


def trigger_tokens(budget: int, config: PackConfig, *, preference: str | None = None) -> int:
    """History at or above this many tokens triggers optimization (lower for "fast")."""
    return math.ceil(_share(budget, config.trigger_ratio - _headroom(config, preference)))


def target_tokens(budget: int, config: PackConfig, *, preference: str | None = None) -> int:
    """When optimization triggers, the context is cut down to at most this many tokens (when possible)."""
    return max(1, math.floor(_share(budget, config.target_ratio - _headroom(config, preference))))
