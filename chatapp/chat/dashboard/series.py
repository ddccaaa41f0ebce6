"""Per-turn series for the charts, read as plain tuples of the few columns a chart needs; the prompt
cache estimate for turns whose provider did not report one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models.fields.json import KT

from chatapp.chat.dashboard.costs import DEFAULT_TRIGGER_RATIO, model_prices
from chatapp.chat.models import Conversation, OptimizationRecord

# Per-turn strategy codes of the series; "window" = no new decision, the earlier window still applies.
STRATEGY_CODES: tuple[str, ...] = ("none", "window", "truncate", "summarize")


# OpenAI caches prompt prefixes from this length on; shorter prompts are never served from cache.
PROMPT_CACHE_MIN_TOKENS = 1024


@dataclass
class _CacheEstimate:
    """Cost of what was sent if the provider's prompt cache served the stable prefix.

    Between two triggers the request path keeps the window, so each request starts with the whole
    previous request (same model, same summary): that prefix is billed at the cached-input price
    where the model has one. An estimate — the cache also expires when the conversation idles — used
    only for turns whose endpoint did not report its cached prompt tokens.
    """

    cached_tokens: int = 0
    sent_usd: float = 0.0
    sent_usd_with_cache: float = 0.0
    priced: bool = True
    # Turns whose cached figure is the provider's (OptimizationRecord.provider_cached_tokens).
    reported_turns: int = 0

    def add(self, *, model: str, tokens: int, cached: int, prices: dict[str, Any]) -> None:
        price = prices.get(model)
        if price is None:
            price = model_prices(model) or {}
            prices[model] = price
        input_price: float | None = price.get("input")
        if input_price is None:
            self.priced = False
            return
        cached_price: float | None = price.get("cached_input")
        if cached_price is None:  # 0.0 is a price (a free cache hit), not a missing one
            cached_price = input_price
        self.cached_tokens += cached
        self.sent_usd += tokens * input_price
        self.sent_usd_with_cache += (tokens - cached) * input_price + cached * cached_price


def dashboard_series(*, conversation: Conversation) -> dict[str, Any]:
    """Columnar per-turn data for the charts: one array per field, one entry per record in turn order."""
    rows = (
        OptimizationRecord.objects.filter(conversation=conversation)
        .order_by("id")
        .values_list(
            "id", "tokens_full", "tokens_sent", "budget", "strategy", "triggered", "provider_prompt_tokens",
            KT("stats__trigger_tokens"), "model", "summary_id", "provider_cached_tokens", "recall_tokens",
        )
    )
    ids: list[int] = []
    full: list[int] = []
    sent: list[int] = []
    budget: list[int] = []
    trigger: list[int] = []
    provider: list[int | None] = []
    strategy: list[int] = []
    saved_cumulative: list[int] = []
    recall: list[int] = []
    running = 0
    first_optimized: int | None = None
    code = {name: i for i, name in enumerate(STRATEGY_CODES)}
    cache = _CacheEstimate()
    prices: dict[str, Any] = {}
    previous: tuple[str, int | None, int] | None = None
    for (rid, t_full, t_sent, t_budget, strat, triggered, t_provider, t_trigger, model, summary_id, t_cached,
         t_recall) in rows:
        ids.append(rid)
        recall.append(t_recall)
        full.append(t_full)
        sent.append(t_sent)
        budget.append(t_budget)
        try:
            trigger.append(int(float(t_trigger)))
        except (TypeError, ValueError):
            # Records written without stats: the optimizer's default trigger share of the budget.
            trigger.append(int(t_budget * DEFAULT_TRIGGER_RATIO))
        provider.append(t_provider)
        optimized = t_sent < t_full
        if first_optimized is None and (optimized or triggered):
            first_optimized = len(ids) - 1
        if strat in ("truncate", "summarize"):
            strategy.append(code[strat])
        else:
            strategy.append(code["window"] if optimized else code["none"])
        running += t_full - t_sent
        saved_cumulative.append(running)
        cached = 0
        if t_cached is not None:
            # The provider said how much of this prompt its cache served: a measurement beats the estimate.
            cached = min(t_cached, t_sent)
            cache.reported_turns += 1
        elif (
            previous is not None and not triggered and previous[0] == model and previous[1] == summary_id
            and previous[2] >= PROMPT_CACHE_MIN_TOKENS
        ):
            cached = min(previous[2], t_sent)
        cache.add(model=model, tokens=t_sent, cached=cached, prices=prices)
        previous = (model, summary_id, t_sent)
    return {
        "count": len(ids),
        "strategy_codes": list(STRATEGY_CODES),
        "first_optimized_index": first_optimized,
        "ids": ids,
        "tokens_full": full,
        "tokens_sent": sent,
        "budget": budget,
        "trigger": trigger,
        "provider_prompt_tokens": provider,
        "strategy": strategy,
        "saved_cumulative": saved_cumulative,
        # Tokens of the recall block inside `tokens_sent` (0: none sent that turn).
        "recall_tokens": recall,
        "prompt_cache_estimate": {
            "cached_tokens": cache.cached_tokens,
            "cached_share": cache.cached_tokens / sum(sent) if sent else 0.0,
            "sent_usd": cache.sent_usd if cache.priced else None,
            "sent_usd_with_cache": cache.sent_usd_with_cache if cache.priced else None,
            "provider_reported_turns": cache.reported_turns,
        },
    }
