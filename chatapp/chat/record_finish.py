"""What a turn's optimization record learns when the turn ends: the tokens it dropped without a
summary, the provider's prompt figures, whether the prompts changed; the dashboard's totals follow."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from django.core.cache import cache
from django.db.models import Q, Sum

import optimizer
from chatapp.chat.context import live_chat_q, offline_reply_q
from chatapp.chat.models import Message, OptimizationRecord
from chatapp.chat.turn_types import ChatTurn
from chatapp.dashboard.costs import money
from chatapp.dashboard.totals import PreviousRequest, dashboard_totals_record_finish

_DROPPED_CACHE_SECONDS = 3600


def dropped_tokens_sum(
    *, conversation_id: int, ranges: Sequence[Sequence[int]], offline_replies: bool = True
) -> int:
    """Tokens of the live messages in `ranges` (a record's dropped ranges), counted by the database;
    without the offline demo model's replies for a real model (`offline_replies=False`: never its history).

    The ranges lie below the window, and they stay the same from one turn to the next until the
    window moves (every few turns): the sum is kept in the cache under the ranges it was made for,
    so a turn reads it instead of summing every dropped message again — 40-60 ms on PostgreSQL for a
    100,000-message conversation, on every turn. The messages in them do not change (a regenerate or a
    stop touches only the newest exchange, which is always sent); a pin moves its message out of the
    ranges, and so changes the key.
    """
    if not ranges:
        return 0
    digest = hashlib.sha256(json.dumps([list(r) for r in ranges]).encode()).hexdigest()[:32]
    key = f"chat:dropped-tokens:{conversation_id}:{digest}:{int(offline_replies)}"
    cached = cache.get(key)
    if cached is not None:
        return int(cached)
    within = Q()
    for first, last in ranges:
        within |= Q(id__gte=first, id__lte=last)
    live = Message.objects.filter(within, live_chat_q(), conversation_id=conversation_id)
    if not offline_replies:
        live = live.exclude(offline_reply_q())
    total = live.aggregate(total=Sum("token_count"))["total"] or 0
    cache.set(key, total, timeout=_DROPPED_CACHE_SECONDS)
    return int(total)


def record_finish(*, turn: ChatTurn, usage: Any, billed: bool = True) -> None:
    """What the record learns when its turn ends, in one UPDATE: the tokens it dropped without a
    summary (`dropped_tokens_sum` over the dropped ranges) and the provider's prompt figures; a
    provider prompt-cache hit lowers the sent cost (priced on our own count, like the full-history
    cost, so the two stay comparable). A request the endpoint refused (`billed=False`: an error
    before any reply text, with no usage) cost nothing: both its costs become zero, and the money
    figures leave it out; its tokens stay what the optimizer packed."""
    whole = dropped_tokens_sum(conversation_id=turn.conversation_id, ranges=turn.dropped_ranges,
                               offline_replies=turn.target.offline)
    # Never below zero, should a quoted message's count have changed since the cached sum was made.
    dropped = max(0, whole - turn.dropped_less)
    fields: dict[str, Any] = {"dropped_tokens": dropped}
    if not billed:
        if turn.record_facts is None or turn.record_facts["cost_sent_usd"] is not None:
            fields.update(cost_sent_usd=money(0.0), cost_full_usd=money(0.0))  # an unpriced one stays unpriced
    elif getattr(usage, "prompt_tokens", None) is not None and not turn.target.offline:
        # (the offline demo's "usage" is our own count handed back: no provider's figure to compare)
        tokens_full = turn.record_facts["tokens_full"] if turn.record_facts is not None else None
        fields.update(_usage_fields(tokens_sent=int(turn.context["tokens"]), tokens_full=tokens_full,
                                    model=turn.target.model, usage=usage,
                                    provider=optimizer.provider_for_base_url(turn.target.base_url)))
    if turn.record_id is not None and turn.record_facts is not None:
        stats = _prompt_change_stats(record_id=turn.record_id, facts=turn.record_facts, previous=turn.record_previous)
        if stats is not None:
            fields["stats"] = stats
        # And the dashboard's totals, from the record as they counted it.
        dashboard_totals_record_finish(facts=turn.record_facts, previous=turn.record_previous, fields=fields)


def _prompt_change_stats(
    *, record_id: int, facts: dict[str, Any], previous: PreviousRequest | None
) -> dict[str, Any] | None:
    """The record's `stats` with `system_prompt_changed: true` when its prompts differ from the
    previous record's of the conversation (None: unchanged, or no previous record).

    The two fingerprints are in hand: the record's as counted, the previous request's from the
    totals row (`DashboardTotals.last_prompt_hash`, read under its lock when the record was
    counted); the stats themselves are read only on a change. Records from before prompts existed
    have no fingerprint: they sent none ("").
    """
    if previous is None or (previous.prompt_hash or "") == (facts.get("prompt_hash") or ""):
        return None
    stats = OptimizationRecord.objects.filter(pk=record_id).values_list("stats", flat=True).get()
    return {**(stats or {}), "system_prompt_changed": True}


def _usage_fields(
    *, tokens_sent: int, tokens_full: int | None, model: str, usage: Any, provider: str | None
) -> dict[str, Any]:
    """The provider's prompt figures, and both costs at the cached price for the tokens its cache served.

    The full history is priced with the same cache hit: the provider would have cached at least that
    prefix of it too, so a cache hit is no saving of the optimizer's (a request sent whole costs the
    same both ways), and the saving stays a lower bound."""
    reported = getattr(usage, "cached_tokens", None)
    fields: dict[str, Any] = {"provider_prompt_tokens": usage.prompt_tokens}
    if reported is not None:
        fields["provider_cached_tokens"] = int(reported)
    cached = min(int(reported or 0), tokens_sent)
    if cached:
        cost = optimizer.cost_usd(model, prompt_tokens=tokens_sent, cached_tokens=cached, provider=provider)
        full = (optimizer.cost_usd(model, prompt_tokens=tokens_full, cached_tokens=cached, provider=provider)
                if tokens_full else None)
        if cost is not None and full is not None:
            fields.update(cost_sent_usd=money(cost), cost_full_usd=money(full))
    return fields


