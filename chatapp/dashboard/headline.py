"""The conversation's headline cards: the totals stored as records are written (tokens sent and
saved, cost, accuracy, strategies, recall), the summaries, the latest request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db.models import Count, Q, Sum
from django.shortcuts import get_object_or_404

from chatapp.chat.models import Conversation, OptimizationRecord, SummaryJob
from chatapp.dashboard.costs import as_float, model_prices
from chatapp.dashboard.figures import dashboard_totals_get, totals_tokens
from chatapp.dashboard.ledger import ledger_read
from chatapp.dashboard.models import DashboardTotals


def dashboard_conversation_get(*, user, pk: int) -> Conversation:
    """The user's conversation or Http404: someone else's answers exactly like a missing one."""
    return get_object_or_404(
        Conversation.objects.only(
            "id", "owner_id", "title", "window_start_id", "live_message_count", "live_token_count",
            "summary_count", "truncation_count", "offline_reply_count", "updated_at",
        ),
        pk=pk,
        owner=user,
    )


def totals_figures(totals: DashboardTotals) -> dict[str, Any]:
    """The stored totals as the headline and the overview use them (costs: stored plus registry-priced)."""
    return {
        **totals_tokens(totals),
        "dropped_tokens": totals.dropped_tokens,
        "dropped_measured": totals.dropped_measured,
        "cost_full_usd": float(totals.cost_full_usd) + totals.registry_full_usd,
        "cost_sent_usd": float(totals.cost_sent_usd) + totals.registry_sent_usd,
        "unpriced_records": totals.unpriced_records,
        "refused_turns": totals.refused_turns,
        "optimized": totals.optimized_turns,
    }


def savings_known(totals: Mapping[str, Any]) -> bool:
    """Whether some request was priced and billed, so that a money saving can be said (`totals` as
    totals_figures gives them, or a row of the same sums)."""
    return totals["unpriced_records"] + totals["refused_turns"] < totals["turns"]


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
    """The numbers of the headline cards: the stored totals, the summary jobs' aggregate, one read of
    the summary messages and the latest record of the path shown; nothing that grows with the number of records."""
    stored = dashboard_totals_get(conversation=conversation)
    totals = totals_figures(stored)
    jobs = SummaryJob.objects.filter(conversation=conversation).aggregate(
        jobs=Count("id"),
        done=Count("id", filter=Q(status=SummaryJob.Status.DONE)),
        failed=Count("id", filter=Q(status=SummaryJob.Status.FAILED)),
        cost=Sum("cost_usd"),
    )
    summaries = ledger_read(conversation_id=conversation.pk, totals=stored, live=True)
    # The latest request of the path shown, as the message map's: after a regeneration switched back
    # from (or an edit's), the newest request may be another branch's.
    latest = (
        OptimizationRecord.objects.filter(conversation=conversation)
        .filter(Q(reply__isnull=True) | Q(reply__superseded=False)).order_by("-id")
        .values("id", "model", "registry_provider", "budget", "context_window", "tokens_sent", "tokens_full",
                "strategy", "provider_prompt_tokens", "estimated", "created_at")
        .first()
    )
    # Why the latest failed job failed: one that wrote no summary is otherwise told only by the chat
    # page's banner, at the time.
    latest_failure = (
        SummaryJob.objects.filter(conversation=conversation, status=SummaryJob.Status.FAILED)
        .order_by("-id").values_list("error", flat=True).first()
        if jobs["failed"] else None
    )
    summary_cost = as_float(jobs["cost"]) or 0.0
    # Nothing priced (a local model the registry has no price for) or billed (every request refused
    # by the endpoint): the saving is unknown, not minus what summarizing cost.
    priced = savings_known(totals)
    gross_saved = totals["cost_full_usd"] - totals["cost_sent_usd"] if priced else None
    accuracy = None
    if stored.provider_turns and stored.provider_theirs:
        accuracy = {
            "requests": stored.provider_turns,
            "ours": stored.provider_ours,
            "provider": stored.provider_theirs,
            # Mean absolute error relative to the provider's own count, over all reported requests.
            "error_share": stored.provider_abs_error / stored.provider_theirs,
            "bias_share": (stored.provider_ours - stored.provider_theirs) / stored.provider_theirs,
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
            "net_saved_usd": gross_saved - summary_cost if gross_saved is not None else None,
            "unpriced_records": stored.unpriced_records,
            "refused_turns": stored.refused_turns,
            "prices": model_prices(latest["model"], provider=latest["registry_provider"] or None) if latest else None,
        },
        "strategies": {
            "optimized_turns": stored.optimized_turns,
            "triggered_turns": stored.triggered_turns,
            "truncate": stored.truncate_turns,
            "summarize": stored.summarize_turns,
            "first_optimized_turn": stored.first_optimized_turn,
        },
        "summaries": {
            "made": summaries.made,
            "live": summaries.live,
            # every summary row set aside: discarded, or replaced by an edit of it (edits are not "made")
            "discarded": len(summaries.ids) - (summaries.live or 0),
            "extractive": summaries.extractive,
            "edited": summaries.edited,
            "jobs": jobs["jobs"],
            "jobs_done": jobs["done"],
            "jobs_failed": jobs["failed"],
            "latest_failure": latest_failure or None,
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
        "estimated_turns": stored.estimated_turns,
        # Old messages quoted back by recall blocks: sent (as quotes) on those turns, so not "dropped".
        # Their tokens are part of `tokens.sent`.
        "recall": {
            "turns": stored.recall_turns,
            "messages": stored.recall_messages,
            "tokens": stored.recall_tokens,
        },
    }
