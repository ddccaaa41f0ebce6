"""The charts' series: at most MAX_POINTS points over a range of turns (the whole conversation by
default). Up to MAX_POINTS turns, one point per turn, read from the records; beyond, each point is a
bucket of consecutive turns: from the records up to RECORD_TURNS, else made of whole turn blocks
(DashboardTurnBlock, kept as records are written), so a 50,000-turn conversation reads ~3,000 small
rows, never its records. Totals and the prompt-cache estimate come from the stored totals, exact
over every record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import BigIntegerField, ExpressionWrapper, F, IntegerField, Max, Min, Sum
from django.db.models.fields.json import KT

from chatapp.chat.models import Conversation, OptimizationRecord
from chatapp.dashboard.figures import dashboard_totals_get, totals_tokens
from chatapp.dashboard.models import DashboardTotals, DashboardTurnBlock
from chatapp.dashboard.totals import (
    BLOCK_TURNS,
    PROMPT_CACHE_MIN_TOKENS,
    STRATEGY_CODES,
    new_block,
)

__all__ = ["MAX_POINTS", "PROMPT_CACHE_MIN_TOKENS", "STRATEGY_CODES", "dashboard_series"]

# Points per series: what a chart can draw distinctly across a screen, and what the page downloads.
MAX_POINTS = 2000

# Ranges up to this many turns are read from their records (buckets of 2-4 turns when over
# MAX_POINTS); longer ones from the turn blocks, whose whole-block buckets leave at least 500 points.
RECORD_TURNS = 4 * MAX_POINTS

# The per-point arrays, in the answer's order (serializers.SeriesSerializer documents each).
POINT_FIELDS = (
    "ids", "turn_first", "turn_last", "tokens_full", "tokens_full_sum", "tokens_sent", "tokens_sent_min",
    "tokens_sent_sum", "budget", "trigger", "provider_prompt_tokens", "strategy", "truncations", "summarizations",
    "saved_cumulative", "recall_tokens", "recall_tokens_sum",
)

_RECORD_FIELDS = (
    "id", "tokens_full", "tokens_sent", "budget", "strategy", "triggered", "provider_prompt_tokens", "recall_tokens",
)


def dashboard_series(
    *, conversation: Conversation, first: int | None = None, last: int | None = None
) -> dict[str, Any]:
    """Columnar chart data over turns `first` … `last` (1-based, inclusive; default: all), one array per
    field and one entry per point; a point is one turn, or a bucket of consecutive turns when the
    range holds more than MAX_POINTS (its first and last turn in `turn_first` / `turn_last`)."""
    totals = dashboard_totals_get(conversation=conversation)
    n = totals.turns
    lo = min(max(1, first or 1), max(n, 1))
    hi = min(max(lo, last or n), n)
    span = hi - lo + 1 if n else 0
    blocks: list[dict[str, Any]] = []
    size = 1
    if span > RECORD_TURNS:
        blocks, size = _bucket_points(conversation=conversation, lo=lo, hi=hi)
    elif span:
        size = -(-span // MAX_POINTS)  # turns per bucket, rounded up
        blocks = _buckets(_turn_points(conversation=conversation, lo=lo, hi=hi), size=size)
    points: dict[str, list[Any]] = {name: [] for name in POINT_FIELDS}
    saved = 0
    if blocks:
        saved = _saved_before(conversation=conversation, turn=blocks[0]["turn_first"] - 1)
    for point in blocks:
        saved += point["tokens_full_sum"] - point["tokens_sent_sum"]
        _append(points, point, saved=saved)
    first_opt = totals.first_optimized_turn
    index = None
    if first_opt is not None and blocks and points["turn_first"][0] <= first_opt <= points["turn_last"][-1]:
        index = next(i for i, end in enumerate(points["turn_last"]) if end >= first_opt)
    return {
        "count": n,
        "points": len(points["ids"]),
        "bucket_size": size,
        "first_turn": points["turn_first"][0] if blocks else 0,
        "last_turn": points["turn_last"][-1] if blocks else 0,
        "strategy_codes": list(STRATEGY_CODES),
        "first_optimized_turn": first_opt,
        "first_optimized_index": index,
        **points,
        "totals": _totals(totals),
        "prompt_cache_estimate": _cache_estimate(totals),
    }


def _append(points: dict[str, list[Any]], point: Mapping[str, Any], *, saved: int) -> None:
    points["ids"].append(point["last_record_id"])
    points["turn_first"].append(point["turn_first"])
    points["turn_last"].append(point["turn_first"] + point["turns"] - 1)
    points["tokens_full"].append(point["tokens_full_max"])
    points["tokens_full_sum"].append(point["tokens_full_sum"])
    points["tokens_sent"].append(point["tokens_sent_max"])
    points["tokens_sent_min"].append(point["tokens_sent_min"])
    points["tokens_sent_sum"].append(point["tokens_sent_sum"])
    points["budget"].append(point["budget_last"])
    points["trigger"].append(point["trigger_last"])
    points["provider_prompt_tokens"].append(point["provider_max"])
    points["strategy"].append(point["strategy_max"])
    points["truncations"].append(point["truncations"])
    points["summarizations"].append(point["summarizations"])
    points["saved_cumulative"].append(saved)
    points["recall_tokens"].append(point["recall_max"])
    points["recall_tokens_sum"].append(point["recall_sum"])


def _turn_points(*, conversation: Conversation, lo: int, hi: int) -> list[dict[str, Any]]:
    """One point per turn lo … hi, from the records (read from the first record of lo's block)."""
    number = (lo - 1) // BLOCK_TURNS
    start = (
        DashboardTurnBlock.objects.filter(conversation_id=conversation.pk, number=number)
        .values_list("first_record_id", flat=True)
        .first()
    )
    records = (
        OptimizationRecord.objects.filter(conversation_id=conversation.pk)
        .order_by("id")
        .annotate(trigger_tokens=KT("stats__trigger_tokens"))
        .values(*_RECORD_FIELDS, "trigger_tokens")
    )
    skip = lo - 1 - number * BLOCK_TURNS
    rows: Iterable[dict[str, Any]] = (
        records[lo - 1 : hi] if start is None else records.filter(id__gte=start)[skip : skip + hi - lo + 1]
    )
    points = []
    for turn, row in enumerate(rows, start=lo):
        point = new_block(row)
        point["turn_first"] = turn
        points.append(point)
    return points


def _buckets(turns: list[dict[str, Any]], *, size: int) -> list[dict[str, Any]]:
    """Consecutive turns folded into buckets of `size` (the last may hold fewer)."""
    if size == 1:
        return turns
    buckets: list[dict[str, Any]] = []
    for k, point in enumerate(turns):
        if k % size:
            _bucket_merge(buckets[-1], point)
        else:
            buckets.append(point)
    return buckets


def _bucket_points(*, conversation: Conversation, lo: int, hi: int) -> tuple[list[dict[str, Any]], int]:
    """Buckets of whole blocks covering turns lo … hi (widened to block bounds), at most MAX_POINTS,
    and the turns per bucket (the last bucket may hold fewer): grouped by the database, one row per
    bucket."""
    first, last = (lo - 1) // BLOCK_TURNS, (hi - 1) // BLOCK_TURNS
    per = -(-(last - first + 1) // MAX_POINTS)  # blocks per bucket, rounded up
    # A bucket's last block has its largest number: packed above a value, the bucket's largest
    # packed key carries the value of its last block (budgets and triggers are below 2**32).
    packed = {name: Max(ExpressionWrapper(F("number") * _PACK + F(name), output_field=BigIntegerField()))
              for name in ("budget_last", "trigger_last")}
    reduced = {
        "number": Min("number"), "turns": Sum("turns"), "last_record_id": Max("last_record_id"),
        "tokens_full_max": Max("tokens_full_max"), "tokens_full_sum": Sum("tokens_full_sum"),
        "tokens_sent_max": Max("tokens_sent_max"), "tokens_sent_min": Min("tokens_sent_min"),
        "tokens_sent_sum": Sum("tokens_sent_sum"), "provider_max": Max("provider_max"),
        "strategy_max": Max("strategy_max"), "truncations": Sum("truncations"), "summarizations": Sum("summarizations"),
        "recall_max": Max("recall_max"), "recall_sum": Sum("recall_sum"), **packed,
    }
    rows = (
        DashboardTurnBlock.objects.filter(conversation_id=conversation.pk, number__gte=first, number__lte=last)
        .annotate(bucket=ExpressionWrapper((F("number") - first) / per, output_field=IntegerField()))
        .values("bucket")
        # (named apart from the columns they reduce: an annotation may not take a column's name)
        .annotate(**{f"b_{name}": value for name, value in reduced.items()})
        .order_by("bucket")
    )
    buckets: list[dict[str, Any]] = []
    for row in rows:
        values: dict[str, Any] = dict(row)
        # PostgreSQL sums big integers as numeric: back to int, as the other points hold them.
        point: dict[str, Any] = {
            name: None if values[f"b_{name}"] is None else int(values[f"b_{name}"]) for name in reduced
        }
        point["turn_first"] = point["number"] * BLOCK_TURNS + 1
        for name in packed:
            point[name] %= _PACK
        buckets.append(point)
    return buckets, per * BLOCK_TURNS


_PACK = 2**32


def _bucket_merge(bucket: dict[str, Any], block: Mapping[str, Any]) -> None:
    """Fold a later block into a bucket: sums add, extremes widen, `_last` fields take the block's."""
    for name in ("turns", "tokens_full_sum", "tokens_sent_sum", "truncations", "summarizations", "recall_sum"):
        bucket[name] += block[name]
    for name in ("tokens_full_max", "tokens_sent_max", "strategy_max", "recall_max"):
        bucket[name] = max(bucket[name], block[name])
    bucket["tokens_sent_min"] = min(bucket["tokens_sent_min"], block["tokens_sent_min"])
    if block["provider_max"] is not None:
        bucket["provider_max"] = max(bucket["provider_max"] or 0, block["provider_max"])
    for name in ("last_record_id", "budget_last", "trigger_last"):
        bucket[name] = block[name]


def _saved_before(*, conversation: Conversation, turn: int) -> int:
    """Tokens not sent over turns 1 … `turn` (the cumulative line's start): whole blocks summed by
    the database, the rest of a partial block from its records."""
    if turn <= 0:
        return 0
    whole = turn // BLOCK_TURNS
    saved = DashboardTurnBlock.objects.filter(conversation_id=conversation.pk, number__lt=whole).aggregate(
        s=Sum(F("tokens_full_sum") - F("tokens_sent_sum"))
    )["s"] or 0
    rest = turn - whole * BLOCK_TURNS
    if rest:
        block = _turn_points(conversation=conversation, lo=whole * BLOCK_TURNS + 1, hi=turn)
        saved += sum(p["tokens_full_sum"] - p["tokens_sent_sum"] for p in block)
    return int(saved)


def _totals(totals: DashboardTotals) -> dict[str, int]:
    return {
        **totals_tokens(totals),
        "recall_tokens": totals.recall_tokens,
        "optimized_turns": totals.optimized_turns,
        "triggered_turns": totals.triggered_turns,
        "truncations": totals.truncate_turns,
        "summarizations": totals.summarize_turns,
    }


def _cache_estimate(totals: DashboardTotals) -> dict[str, Any]:
    # The priced turns' figures, the others counted: one turn on a local model (no input price) does
    # not make the rest unknown. Unknown only when no turn is priced.
    priced = totals.cache_unpriced_turns < totals.turns
    return {
        "cached_tokens": totals.cache_cached_tokens,
        "cached_share": totals.cache_cached_tokens / totals.tokens_sent if totals.tokens_sent else 0.0,
        "sent_usd": totals.cache_sent_usd if priced else None,
        "sent_usd_with_cache": totals.cache_sent_usd_with_cache if priced else None,
        "provider_reported_turns": totals.cache_reported_turns,
        "unpriced_turns": totals.cache_unpriced_turns,
        # Billed nothing, so nothing of them is estimated (totals._add_cache_estimate): the line says
        # "reported" when every other turn's endpoint reported its cached tokens.
        "refused_turns": totals.refused_turns,
    }
