"""The conversation's headline cards: totals aggregated by the database (tokens sent and saved, cost,
cache, summaries), whatever the number of records.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, F, IntegerField, Min, Q, QuerySet, Sum
from django.db.models.functions import Abs, Cast
from django.shortcuts import get_object_or_404

from chatapp.chat.dashboard.costs import as_float, model_prices, unpriced_costs
from chatapp.chat.models import Conversation, Message, OptimizationRecord, SummaryJob


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


def record_totals(records: QuerySet) -> dict[str, Any]:
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
    cost_full = as_float(agg.pop("cost_full")) or 0.0
    cost_sent = as_float(agg.pop("cost_sent")) or 0.0
    unpriced_models = 0
    if agg["unpriced"]:
        extra_full, extra_sent, unpriced_models = unpriced_costs(records)
        cost_full += extra_full
        cost_sent += extra_sent
    agg["cost_full_usd"] = cost_full
    agg["cost_sent_usd"] = cost_sent
    agg["unpriced_records"] = unpriced_models
    agg["tokens_saved"] = agg["tokens_full"] - agg["tokens_sent"]
    return agg


def token_figures(totals: dict[str, Any]) -> dict[str, Any]:
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
    totals = record_totals(records)
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

    summary_cost = as_float(jobs["cost"]) or 0.0
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
        "tokens": token_figures(totals),
        "money": {
            "full_usd": totals["cost_full_usd"],
            "sent_usd": totals["cost_sent_usd"],
            "gross_saved_usd": gross_saved,
            "summary_cost_usd": summary_cost,
            "net_saved_usd": gross_saved - summary_cost,
            "unpriced_records": totals["unpriced_records"],
            "prices": model_prices(latest["model"]) if latest else None,
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
