"""Reads for the optimization dashboard (issue 5).

Everything here is sized for long conversations (10,000 messages, 5,000 records): totals are
aggregated by the database, per-turn series are read as plain tuples of the few columns a chart
needs, and the message map is run-length encoded so a page never carries one row per message.
Only the record being inspected ("what the model saw") has its `sent` list and message texts read.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from itertools import groupby
from typing import Any

from django.db.models import Case, Count, F, IntegerField, Min, Q, QuerySet, Sum, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Abs, Cast, Least
from django.shortcuts import get_object_or_404

import optimizer
from chatapp.chat.models import Conversation, Message, OptimizationRecord, SummaryJob
from chatapp.chat.selectors import message_numbers, summary_numbers

# Message map statuses, in legend order; the map sends the index, not the name.
MAP_STATUSES: tuple[str, ...] = (
    "verbatim",  # sent as is
    "pinned",  # sent with origin "pinned" (an unpinned static message, e.g. the first user one, is "verbatim")
    "compressed",  # sent as head + tail
    "recalled",  # outside the window, quoted by the recall block for the newest message
    "summarized",  # not sent, covered by the summary that was sent
    "dropped",  # not sent and not covered
    "summary",  # a summary message itself
    "excluded",  # never sendable: a regenerated-away, stopped or failed reply, or a discarded summary
    "new",  # written after the latest request (its reply, or later)
    "unsent",  # older than the window and not accounted for by the record (old records)
)
MAP_STATUS_LABELS: dict[str, str] = {
    "verbatim": "Sent verbatim",
    "pinned": "Pinned / kept",
    "compressed": "Sent compressed",
    "recalled": "Recalled (quoted for the newest message)",
    "summarized": "Summarized",
    "dropped": "Dropped",
    "summary": "Summary message",
    "excluded": "Never sent (regenerated, stopped, failed)",
    "new": "After the latest request",
    "unsent": "Not sent",
}
_STATUS_INDEX = {name: i for i, name in enumerate(MAP_STATUSES)}
_ROLE_CHARS = {"user": "u", "assistant": "a", "system": "s"}

# Per-turn strategy codes of the series; "window" = no new decision, the earlier window still applies.
STRATEGY_CODES: tuple[str, ...] = ("none", "window", "truncate", "summarize")

DEFAULT_TRIGGER_RATIO = 0.8  # optimizer.PackConfig.trigger_ratio, for records without stats


def _f(value: Decimal | float | None) -> float | None:
    return None if value is None else float(value)


def _model_prices(model: str) -> dict[str, float | None] | None:
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


def dashboard_conversation_get(*, user, pk: int) -> Conversation:
    """The user's conversation or Http404: someone else's answers exactly like a missing one."""
    return get_object_or_404(
        Conversation.objects.only(
            "id", "owner_id", "title", "window_start_id", "live_message_count", "live_token_count",
            "summary_count", "truncation_count", "updated_at",
        ),
        pk=pk,
        owner=user,
    )


# --- Headline cards ------------------------------------------------------------------------------


def _unpriced_costs(records: QuerySet) -> tuple[float, float, int]:
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


def _record_totals(records: QuerySet) -> dict[str, Any]:
    priced = Q(cost_full_usd__isnull=False, cost_sent_usd__isnull=False)
    provider = Q(provider_prompt_tokens__isnull=False)
    agg = records.aggregate(
        turns=Count("id"),
        sum_full=Sum("tokens_full"),
        sum_sent=Sum("tokens_sent"),
        cost_full=Sum("cost_full_usd", filter=priced),
        cost_sent=Sum("cost_sent_usd", filter=priced),
        unpriced=Count("id", filter=~priced),
        optimized=Count("id", filter=Q(tokens_sent__lt=F("tokens_full"))),
        n_triggered=Count("id", filter=Q(triggered=True)),
        truncate=Count("id", filter=Q(strategy="truncate")),
        summarize=Count("id", filter=Q(strategy="summarize")),
        n_estimated=Count("id", filter=Q(estimated=True)),
        provider_n=Count("id", filter=provider),
        provider_ours=Sum("tokens_sent", filter=provider),
        provider_theirs=Sum("provider_prompt_tokens", filter=provider),
        provider_abs_error=Sum(
            Abs(Cast("tokens_sent", IntegerField()) - Cast("provider_prompt_tokens", IntegerField())),
            filter=provider,
        ),
        first_optimized_id=Min("id", filter=Q(tokens_sent__lt=F("tokens_full")) | Q(triggered=True)),
        recall_turns=Count("id", filter=Q(recall_message_count__gt=0)),
        recall_messages=Sum("recall_message_count"),
        recall_tokens=Sum("recall_tokens"),
        sum_dropped=Sum("dropped_tokens"),
        dropped_measured=Count("id", filter=Q(dropped_tokens__isnull=False)),
    )
    agg["tokens_full"] = agg.pop("sum_full")
    agg["tokens_sent"] = agg.pop("sum_sent")
    agg["dropped_tokens"] = agg.pop("sum_dropped")
    for key in ("tokens_full", "tokens_sent", "provider_ours", "provider_theirs", "provider_abs_error",
                "recall_messages", "recall_tokens", "dropped_tokens"):
        agg[key] = agg[key] or 0
    cost_full = _f(agg.pop("cost_full")) or 0.0
    cost_sent = _f(agg.pop("cost_sent")) or 0.0
    unpriced_models = 0
    if agg["unpriced"]:
        extra_full, extra_sent, unpriced_models = _unpriced_costs(records)
        cost_full += extra_full
        cost_sent += extra_sent
    agg["cost_full_usd"] = cost_full
    agg["cost_sent_usd"] = cost_sent
    agg["unpriced_records"] = unpriced_models
    agg["tokens_saved"] = agg["tokens_full"] - agg["tokens_sent"]
    return agg


def _token_figures(totals: dict[str, Any]) -> dict[str, Any]:
    """Tokens not sent, split by kind: `dropped` were left out with no summary standing in (recall
    may quote them back when asked about; they are not a saving of the same kind), `summarized` is
    the rest of the difference: what summaries (and head + tail compression) replaced, net of what
    they and recall quotes cost. `dropped_unmeasured` turns ended before the split was measured."""
    full, saved = totals["tokens_full"], totals["tokens_saved"]
    dropped = min(max(0, totals["dropped_tokens"]), max(0, saved)) if saved > 0 else 0
    return {
        "full": full,
        "sent": totals["tokens_sent"],
        "saved": saved,
        "saved_share": saved / full if full else 0.0,
        "dropped": dropped,
        "summarized": saved - dropped,
        "dropped_unmeasured": totals["turns"] - totals["dropped_measured"],
    }


def dashboard_headline(*, conversation: Conversation) -> dict[str, Any]:
    """The numbers of the headline cards, from three aggregate queries and two single-row reads."""
    records = OptimizationRecord.objects.filter(conversation=conversation)
    totals = _record_totals(records)
    jobs = SummaryJob.objects.filter(conversation=conversation).aggregate(
        jobs=Count("id"),
        done=Count("id", filter=Q(status=SummaryJob.Status.DONE)),
        failed=Count("id", filter=Q(status=SummaryJob.Status.FAILED)),
        cost=Sum("cost_usd"),
    )
    # An edit is a new summary message replacing the old one (edited_from): not another summary made.
    original = Q(edited_from__isnull=True)
    summaries = Message.objects.filter(conversation=conversation, kind=Message.Kind.SUMMARY).aggregate(
        made=Count("id", filter=original),
        live=Count("id", filter=Q(discarded=False)),
        extractive=Count("id", filter=original & Q(extractive=True)),
        edited=Count("id", filter=Q(edited=True)),
    )
    latest = (
        records.order_by("-id")
        .values("id", "model", "budget", "context_window", "tokens_sent", "tokens_full", "strategy",
                "provider_prompt_tokens", "estimated", "created_at")
        .first()
    )
    first_turn = None
    if totals["first_optimized_id"] is not None:
        first_turn = records.filter(id__lte=totals["first_optimized_id"]).count()

    summary_cost = _f(jobs["cost"]) or 0.0
    gross_saved = totals["cost_full_usd"] - totals["cost_sent_usd"]
    accuracy = None
    if totals["provider_n"] and totals["provider_theirs"]:
        accuracy = {
            "requests": totals["provider_n"],
            "ours": totals["provider_ours"],
            "provider": totals["provider_theirs"],
            # Mean absolute error relative to the provider's own count, over all reported requests.
            "error_share": totals["provider_abs_error"] / totals["provider_theirs"],
            "bias_share": (totals["provider_ours"] - totals["provider_theirs"]) / totals["provider_theirs"],
        }
    return {
        "conversation": {"id": conversation.pk, "title": conversation.title},
        "turns": totals["turns"],
        "tokens": _token_figures(totals),
        "money": {
            "full_usd": totals["cost_full_usd"],
            "sent_usd": totals["cost_sent_usd"],
            "gross_saved_usd": gross_saved,
            "summary_cost_usd": summary_cost,
            "net_saved_usd": gross_saved - summary_cost,
            "unpriced_records": totals["unpriced_records"],
            "prices": _model_prices(latest["model"]) if latest else None,
        },
        "strategies": {
            "optimized_turns": totals["optimized"],
            "triggered_turns": totals["n_triggered"],
            "truncate": totals["truncate"],
            "summarize": totals["summarize"],
            "first_optimized_turn": first_turn,
        },
        "summaries": {
            "made": summaries["made"],
            "live": summaries["live"],
            "extractive": summaries["extractive"],
            "edited": summaries["edited"],
            "jobs": jobs["jobs"],
            "jobs_done": jobs["done"],
            "jobs_failed": jobs["failed"],
        },
        "usage": None if latest is None else {
            "record_id": latest["id"],
            "model": latest["model"],
            "tokens": latest["tokens_sent"],
            "budget": latest["budget"],
            "context_window": latest["context_window"],
            "ratio": (latest["tokens_sent"] / latest["budget"]) if latest["budget"] else None,
            "full": latest["tokens_full"],
            "estimated": latest["estimated"],
            "at": latest["created_at"].isoformat(),
        },
        "accuracy": accuracy,
        "estimated_turns": totals["n_estimated"],
        # Old messages quoted back by recall blocks: sent (as quotes) on those turns, so not "dropped".
        # Their tokens are part of `tokens.sent`.
        "recall": {
            "turns": totals["recall_turns"],
            "messages": totals["recall_messages"],
            "tokens": totals["recall_tokens"],
        },
    }


# --- Per-turn series -------------------------------------------------------------------------------


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
            price = _model_prices(model) or {}
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


# --- Message map -------------------------------------------------------------------------------------


def _map_status_expression(*, origin_ids: dict[str, list[int]], horizon: int | None,
                           covered: tuple[int, int] | None, dropped: list[tuple[int, int]]) -> Case:
    """Each message's status index, computed by the database (first matching rule wins)."""
    code = _STATUS_INDEX
    whens = [
        When(kind=Message.Kind.SUMMARY, discarded=True, then=Value(code["excluded"])),
        When(kind=Message.Kind.SUMMARY, then=Value(code["summary"])),
    ]
    for origin, status in (("pinned", "pinned"), ("compressed", "compressed"), ("verbatim", "verbatim"),
                           ("recall", "recalled")):
        if origin_ids.get(origin):
            whens.append(When(id__in=origin_ids[origin], then=Value(code[status])))
    whens.append(When(
        Q(superseded=True) | Q(status__in=[Message.Status.STOPPED, Message.Status.ERROR]),
        then=Value(code["excluded"]),
    ))
    if horizon is None:
        return Case(*whens, default=Value(code["new"]), output_field=IntegerField())
    whens.append(When(id__gt=horizon, then=Value(code["new"])))
    if covered is not None:
        whens.append(When(id__gte=covered[0], id__lte=covered[1], then=Value(code["summarized"])))
    if dropped:
        in_dropped = Q()
        for lo, hi in dropped:
            in_dropped |= Q(id__gte=lo, id__lte=hi)
        whens.append(When(in_dropped, then=Value(code["dropped"])))
    return Case(*whens, default=Value(code["unsent"]), output_field=IntegerField())


def _origin_ids(sent: list[dict[str, Any]]) -> dict[str, list[int]]:
    """The ids a record's sent entries quote, by how they were sent (summaries apart)."""
    # Recalled messages have their own status, ahead of "summarized" and "dropped": a quote was sent.
    origin_ids: dict[str, list[int]] = {"verbatim": [], "pinned": [], "compressed": [], "recall": []}
    for entry in sent:
        origin = entry.get("origin", "verbatim")
        if origin == "summary":
            continue
        bucket = origin_ids.get(origin, origin_ids["verbatim"])
        for sid in entry.get("source_ids", []):
            with contextlib.suppress(TypeError, ValueError):
                bucket.append(int(sid))
    return origin_ids


def _dropped_pairs(ranges: list[Any]) -> list[tuple[int, int]]:
    dropped = []
    for pair in ranges:
        with contextlib.suppress(TypeError, ValueError, IndexError):
            dropped.append((int(pair[0]), int(pair[1])))
    return dropped


def dashboard_message_map(*, conversation: Conversation) -> dict[str, Any]:
    """Every message's status in the latest request, run-length encoded.

    `id_runs` = [[first_id, length], ...] over consecutive ids; `roles` = one character per message
    (u/a/s); `status_runs` = [[status_index, length], ...]. Together they address every message in
    chronological order at a few bytes per run instead of a row per message. The database classifies
    the messages; Python only reads (id, role, status) tuples and counts runs.
    """
    latest = (
        OptimizationRecord.objects.filter(conversation=conversation)
        .order_by("-id")
        .only("id", "sent", "dropped_ranges", "summary_id", "window_start_id")
        .first()
    )
    origin_ids = _origin_ids(latest.sent or [] if latest is not None else [])
    horizon = None
    dropped = _dropped_pairs(latest.dropped_ranges or [] if latest is not None else [])
    covered: tuple[int, int] | None = None
    if latest is not None:
        if latest.summary_id is not None:
            cover = (
                Message.objects.filter(pk=latest.summary_id)
                .values_list("covers_from_id", "covers_through_id")
                .first()
            )
            if cover and cover[0] is not None and cover[1] is not None:
                covered = (cover[0], cover[1])
        # The latest request saw everything up to its newest message; its reply and later come after.
        sent_ids = [i for ids in origin_ids.values() for i in ids]
        horizon = max([*sent_ids, *(hi for _, hi in dropped), latest.window_start_id or 0, *(covered or ())])

    status = _map_status_expression(origin_ids=origin_ids, horizon=horizon, covered=covered, dropped=dropped)
    rows = list(
        Message.objects.filter(conversation=conversation)
        .order_by("id")
        .annotate(map_status=status)
        .values_list("id", "role", "map_status", "kind")
    )
    id_runs: list[list[int]] = []
    prev_id = None
    for mid, *_ in rows:
        if prev_id is not None and mid == prev_id + 1:
            id_runs[-1][1] += 1
        else:
            id_runs.append([mid, 1])
        prev_id = mid
    status_runs = [[code, sum(1 for _ in group)] for code, group in groupby(row[2] for row in rows)]
    counts = [0] * len(MAP_STATUSES)
    for code, length in status_runs:
        counts[code] += length
    return {
        "count": len(rows),
        "record_id": latest.pk if latest else None,
        "summary_id": latest.summary_id if latest else None,
        "statuses": list(MAP_STATUSES),
        "status_labels": [MAP_STATUS_LABELS[s] for s in MAP_STATUSES],
        "status_counts": dict(zip(MAP_STATUSES, counts, strict=True)),
        "id_runs": id_runs,
        # u/a/s per chat message, "S" per summary (summaries are not numbered: see message_numbers)
        "roles": "".join("S" if row[3] == Message.Kind.SUMMARY else _ROLE_CHARS.get(row[1], "s") for row in rows),
        "status_runs": status_runs,
    }


# --- Records, summaries, "what the model saw" ------------------------------------------------------


RECORD_LIST_FIELDS = (
    "id", "created_at", "reply_id", "preference", "model", "context_window", "budget", "triggered",
    "window_start_id", "strategy", "reason", "tokens_full", "tokens_sent", "provider_prompt_tokens",
    "estimated", "summary_id", "messages_before", "messages_after", "pack_ms", "cost_sent_usd",
    "cost_full_usd", "recall_tokens", "recall_message_count",
)


def dashboard_record_list(*, conversation: Conversation) -> QuerySet:
    """A conversation's records in turn order, without the heavy JSON columns (paginate it)."""
    return OptimizationRecord.objects.filter(conversation=conversation).order_by("id").values(*RECORD_LIST_FIELDS)


def dashboard_summary_list(*, conversation: Conversation) -> QuerySet:
    """Summary messages, newest first (paginate it, then decorate the page with dashboard_summary_details)."""
    return (
        Message.objects.filter(conversation=conversation, kind=Message.Kind.SUMMARY)
        .order_by("-id")
        .values(
            "id", "content", "token_count", "char_count", "covers_from_id", "covers_through_id",
            "covered_message_count", "source_chars", "extractive", "discarded", "edited", "edited_from_id", "model",
            "cost_usd", "created_at",
        )
    )


def dashboard_summary_details(*, conversation: Conversation, summaries: list[dict]) -> list[dict]:
    """Attach each summary's job (duration, cost, model), how many requests used it and users' numbers:
    four queries per page."""
    ids = [s["id"] for s in summaries]
    jobs = {
        j["summary_id"]: j
        for j in SummaryJob.objects.filter(conversation=conversation, summary_id__in=ids).values(
            "id", "summary_id", "model", "cost_usd", "prompt_tokens", "completion_tokens", "trigger",
            "started_at", "finished_at",
        )
    }
    used = dict(
        OptimizationRecord.objects.filter(conversation=conversation, summary_id__in=ids)
        .values("summary_id")
        .annotate(n=Count("id"))
        .values_list("summary_id", "n")
    )
    ordinals = summary_numbers(conversation_id=conversation.pk)
    numbers = message_numbers(
        conversation_id=conversation.pk,
        ids=[i for s in summaries for i in (s["covers_from_id"], s["covers_through_id"]) if i is not None],
    )
    out = []
    for s in summaries:
        job = jobs.get(s["id"])
        duration = None
        if job and job["started_at"] and job["finished_at"]:
            duration = (job["finished_at"] - job["started_at"]).total_seconds()
        cost = job["cost_usd"] if job and job["cost_usd"] is not None else s["cost_usd"]
        model = (job["model"] if job else "") or s["model"]
        out.append({
            **s,
            "cost_usd": _f(cost),
            "method": "extractive" if s["extractive"] else (model or "model"),
            "model": model,
            "job_id": job["id"] if job else None,
            "trigger": job["trigger"] if job else None,
            "duration_s": duration,
            "prompt_tokens": job["prompt_tokens"] if job else None,
            "completion_tokens": job["completion_tokens"] if job else None,
            "used_by_requests": used.get(s["id"], 0),
            # Users' numbering (selectors.message_numbers) and the one character count: the body's,
            # as the summary's own header says.
            "number": ordinals.get(s["id"]),
            "edited_from_number": ordinals.get(s["edited_from_id"]),
            "covers_from_number": numbers.get(s["covers_from_id"]),
            "covers_through_number": numbers.get(s["covers_through_id"]),
            "summary_chars": len(optimizer.summary_body(s["content"])),
        })
    return out


def dashboard_turn_number(*, conversation: Conversation, record_id: int) -> int:
    return OptimizationRecord.objects.filter(conversation=conversation, id__lte=record_id).count()


def _int_ids(values: Any) -> list[int]:
    out = []
    for value in values or []:
        try:
            out.append(int(value))
        except (TypeError, ValueError):
            continue
    return out


def _entry_source_ids(entry: dict[str, Any], *, record: OptimizationRecord) -> list[int]:
    """The stored messages whose text stands for one `sent` entry.

    A summary entry names its summary message (`summary_id`); records written before that key
    existed carry the optimizer's last covered id in `source_ids`, so they fall back to the summary
    the record used.
    """
    if entry.get("origin") == "summary":
        summary_id = _int_ids([entry.get("summary_id") or record.summary_id])
        if summary_id:
            return summary_id
    return _int_ids(entry.get("source_ids"))


def _recall_text(entry: dict[str, Any], messages: dict[int, dict[str, Any]]) -> tuple[str, bool]:
    """A recall entry's text as sent, and whether that is exact (False: a quoted message is gone).

    The record keeps either the text itself or its `layout`: the pieces around the quotes with each
    quoted message's id in its place (turn_records._recall_layout), which the stored contents fill.
    """
    if isinstance(entry.get("content"), str):
        return entry["content"], True
    parts: list[str] = []
    exact = True
    for part in entry.get("layout") or []:
        if isinstance(part, str):
            parts.append(part)
        elif part in messages:
            parts.append(messages[part]["content"])
        else:
            exact = False
            parts.append(f"[message #{part} is no longer stored]")
    return "".join(parts), exact


def _recall_details(entry: dict[str, Any], source_ids: list[int],
                    messages: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Why a recall block quoted what it did: the query terms and, per quoted message, whether the
    search matched it (a hit) or it came along as a hit's neighbour."""
    hit_ids = _int_ids(entry.get("hit_ids"))
    rank = {pk: k for k, pk in enumerate(hit_ids, start=1)}
    quotes = []
    for pk in source_ids:
        m = messages.get(pk)
        quotes.append({
            "id": pk,
            "role": m["role"] if m else None,
            "created_at": m["created_at"].isoformat() if m and m["created_at"] else None,
            "tokens": m["token_count"] if m else None,
            "hit": pk in rank,
            # 1 = the best match.
            "rank": rank.get(pk),
        })
    return {"terms": [str(t) for t in entry.get("terms") or []], "hit_ids": hit_ids, "quotes": quotes}


def dashboard_record_context(*, conversation: Conversation, record_id: int) -> dict[str, Any]:
    """What the model saw on one turn: the sent messages in order with their tokens and origin.

    Rebuilt from the record's `sent` list and the stored messages (the summary is a message too,
    and an edit never changes it: it makes a new one). A compressed entry shows the head + tail text
    the record kept; records written before it kept that show the original, with both token counts.
    A recall entry is rebuilt from its layout and the quoted messages, exactly as sent, and says why
    (`recall`: the query terms and which quotes were hits).
    """
    record = get_object_or_404(OptimizationRecord, conversation=conversation, pk=record_id)
    sent = record.sent or []
    per_entry = [_entry_source_ids(entry, record=record) for entry in sent]
    wanted = {i for ids in per_entry for i in ids}
    if record.summary_id:
        wanted.add(record.summary_id)
    messages: dict[int, Any] = {
        m["id"]: m
        for m in Message.objects.filter(conversation=conversation, pk__in=wanted).values(
            "id", "role", "kind", "content", "token_count", "pinned", "created_at", "updated_at", "edited",
            "edited_from_id", "covers_from_id", "covers_through_id", "covered_message_count",
        )
    }
    summary_ids = [i for i, m in messages.items() if m["kind"] == Message.Kind.SUMMARY]
    replaced_by = dict(
        Message.objects.filter(conversation=conversation, edited_from_id__in=summary_ids)
        .values_list("edited_from_id", "id")
    ) if summary_ids else {}
    entries = []
    for position, (entry, source_ids) in enumerate(zip(sent, per_entry, strict=True), start=1):
        found = [messages[i] for i in source_ids if i in messages]
        origin = entry.get("origin", "verbatim")
        first = found[0] if found else None
        sent_text = entry.get("content") if origin == "compressed" else None
        exact = sent_text is not None or origin != "compressed"
        recall = None
        if origin == "recall":
            sent_text, exact = _recall_text(entry, messages)
            recall = _recall_details(entry, source_ids, messages)
        summary_first = first if first is not None and first["kind"] == Message.Kind.SUMMARY else None
        entries.append({
            "position": position,
            "origin": origin,
            "tokens": entry.get("tokens"),
            "source_ids": source_ids,
            # A recall block is one system message whatever its quotes' roles.
            "role": entry.get("role", "system") if recall else first["role"] if first else entry.get("role", "system"),
            "content": sent_text if sent_text is not None else "\n\n".join(m["content"] for m in found),
            "original_tokens": sum(m["token_count"] for m in found),
            "compressed": origin == "compressed",
            # Whether `content` is exactly the text sent (False: a compressed message's original is
            # shown, or a recalled message is no longer stored).
            "content_is_sent_text": exact,
            "recall": recall,
            "missing": len(found) < len(source_ids),
            # Summaries once were edited in place, so the text shown may be newer than the one sent.
            # Today an edit is a new message, and discarding touches updated_at without changing text.
            "edited_after": any(
                m["edited"] and m["edited_from_id"] is None and m["updated_at"] > record.created_at for m in found
            ),
            # The sent summary was a user's edit of an earlier one.
            "edited": bool(summary_first is not None and summary_first["edited"]),
            # The edit that replaced this summary after this request (the text shown is still what was sent).
            "replaced_by_id": replaced_by.get(summary_first["id"]) if summary_first is not None else None,
            "covers": (
                [summary_first["covers_from_id"], summary_first["covers_through_id"],
                 summary_first["covered_message_count"]]
                if summary_first is not None else None
            ),
        })
    summary = messages.get(record.summary_id) if record.summary_id else None
    entry_tokens = sum(e["tokens"] or 0 for e in entries)
    recalled_ids = sorted({i for e in entries if e["recall"] for i in e["source_ids"]})
    ordinals = summary_numbers(conversation_id=conversation.pk)
    shown = {i for e in entries if e["origin"] != "summary" for i in e["source_ids"]}
    shown.update(i for e in entries if e["covers"] for i in e["covers"][:2] if i is not None)
    shown.update(i for pair in record.dropped_ranges or [] for i in _int_ids(pair[:2]))
    if record.window_start_id:
        shown.add(record.window_start_id)
    return {
        "record": {
            "id": record.pk,
            "turn": dashboard_turn_number(conversation=conversation, record_id=record.pk),
            "created_at": record.created_at.isoformat(),
            "reply_id": record.reply_id,
            "preference": record.preference,
            "model": record.model,
            "context_window": record.context_window,
            "budget": record.budget,
            "triggered": record.triggered,
            "window_start_id": record.window_start_id,
            "strategy": record.strategy,
            "reason": record.reason,
            "scores": record.scores,
            "tokens_full": record.tokens_full,
            "tokens_sent": record.tokens_sent,
            "provider_prompt_tokens": record.provider_prompt_tokens,
            "estimated": record.estimated,
            "messages_before": record.messages_before,
            "messages_after": record.messages_after,
            "pack_ms": record.pack_ms,
            "cost_sent_usd": _f(record.cost_sent_usd),
            "cost_full_usd": _f(record.cost_full_usd),
            "recall_tokens": record.recall_tokens,
            "recall_message_count": record.recall_message_count,
        },
        "entries": entries,
        # Old messages quoted on this turn: sent as quotes, so never among `dropped_ranges`.
        "recalled_ids": recalled_ids,
        # The chat format adds a fixed reply priming to the per-message counts.
        "entry_tokens": entry_tokens,
        # How these entries were joined into a request every chat template accepts (optimizer.shape);
        # `record.tokens_sent` counts that request.
        "request_shape": list((record.stats or {}).get("request_shape") or []),
        "dropped_ranges": record.dropped_ranges or [],
        # Users' numbering of every message and summary above, by id (selectors.message_numbers).
        "numbers": {str(k): v for k, v in message_numbers(conversation_id=conversation.pk, ids=shown).items()},
        "summary_numbers": {str(k): v for k, v in ordinals.items()},
        "summary": None if summary is None else {
            "id": summary["id"],
            "covers_from_id": summary["covers_from_id"],
            "covers_through_id": summary["covers_through_id"],
            "covered_message_count": summary["covered_message_count"],
        },
    }


# --- Overview across conversations ---------------------------------------------------------------


def dashboard_overview(*, user, top: int = 10) -> dict[str, Any]:
    """Totals over the user's conversations and the conversations that saved most (tokens)."""
    records = OptimizationRecord.objects.filter(conversation__owner=user)
    totals = _record_totals(records)
    jobs = SummaryJob.objects.filter(conversation__owner=user).aggregate(n=Count("id"), cost=Sum("cost_usd"))
    summaries_made = Message.objects.filter(
        conversation__owner=user, kind=Message.Kind.SUMMARY, edited_from__isnull=True
    ).count()
    conversations = Conversation.objects.filter(owner=user).count()
    summary_cost = _f(jobs["cost"]) or 0.0
    return {
        "conversations": conversations,
        "conversations_with_records": records.values("conversation_id").distinct().count(),
        "turns": totals["turns"],
        "tokens": _token_figures(totals),
        "money": {
            "full_usd": totals["cost_full_usd"],
            "sent_usd": totals["cost_sent_usd"],
            "summary_cost_usd": summary_cost,
            "net_saved_usd": totals["cost_full_usd"] - totals["cost_sent_usd"] - summary_cost,
            "unpriced_records": totals["unpriced_records"],
        },
        "summaries": {"made": summaries_made, "jobs": jobs["n"]},
        "optimized_turns": totals["optimized"],
        "top": dashboard_conversation_savings(user=user)[:top],
    }


def dashboard_conversation_savings(*, user) -> list[dict[str, Any]]:
    """Per-conversation savings, most tokens saved first (three grouped queries, no per-row queries)."""
    per = {
        row["conversation_id"]: row
        for row in OptimizationRecord.objects.filter(conversation__owner=user)
        .values("conversation_id")
        .annotate(
            turns=Count("id"),
            full=Sum("tokens_full"),
            sent=Sum("tokens_sent"),
            cost_full=Sum("cost_full_usd"),
            cost_sent=Sum("cost_sent_usd"),
            optimized=Count("id", filter=Q(tokens_sent__lt=F("tokens_full"))),
        )
        .order_by()
    }
    job_cost = dict(
        SummaryJob.objects.filter(conversation__owner=user, conversation_id__in=list(per))
        .values("conversation_id")
        .annotate(c=Sum("cost_usd"))
        .values_list("conversation_id", "c")
        .order_by()
    )
    titles = dict(Conversation.objects.filter(owner=user, pk__in=list(per)).values_list("id", "title"))
    out = []
    for cid, row in per.items():
        full, sent = row["full"] or 0, row["sent"] or 0
        cost_full, cost_sent = _f(row["cost_full"]), _f(row["cost_sent"])
        summary_cost = _f(job_cost.get(cid)) or 0.0
        out.append({
            "id": cid,
            "title": titles.get(cid, ""),
            "turns": row["turns"],
            "optimized_turns": row["optimized"],
            "tokens_full": full,
            "tokens_sent": sent,
            "tokens_saved": full - sent,
            "saved_share": (full - sent) / full if full else 0.0,
            "net_saved_usd": (
                None if cost_full is None or cost_sent is None else cost_full - cost_sent - summary_cost
            ),
        })
    out.sort(key=lambda r: (-r["tokens_saved"], r["id"]))
    return out


# --- Export ---------------------------------------------------------------------------------------


EXPORT_FIELDS: tuple[str, ...] = (
    *RECORD_LIST_FIELDS, "scores", "sent", "dropped_ranges", "stats",
)


@dataclass(frozen=True)
class ExportRow:
    turn: int
    data: dict[str, Any]


def dashboard_record_export(*, conversation: Conversation, chunk_size: int = 500) -> Iterator[ExportRow]:
    """Every record with every field, streamed in turn order (server-side cursor where supported)."""
    rows = (
        OptimizationRecord.objects.filter(conversation=conversation)
        .order_by("id")
        .values(*EXPORT_FIELDS)
        .iterator(chunk_size=chunk_size)
    )
    for turn, row in enumerate(rows, start=1):
        for key in ("cost_sent_usd", "cost_full_usd"):
            row[key] = _f(row[key])
        row["created_at"] = row["created_at"].isoformat()
        row["tokens_saved"] = row["tokens_full"] - row["tokens_sent"]
        yield ExportRow(turn=turn, data=row)


def export_json_value(value: Any) -> str:
    """A JSON column as compact text for a CSV cell."""
    return json.dumps(value, separators=(",", ":"), default=str)
