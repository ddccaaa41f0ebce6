"""Across conversations: the user's totals and the conversations that saved the most, both read from
the conversations' stored totals (one row each), never from their records.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, F, Sum

from chatapp.chat.models import Conversation, Message, SummaryJob
from chatapp.dashboard.costs import as_float
from chatapp.dashboard.figures import dashboard_totals_heal
from chatapp.dashboard.headline import savings_known, token_figures
from chatapp.dashboard.models import DashboardTotals

_SUMMED = (
    "turns", "tokens_full", "tokens_sent", "dropped_tokens", "dropped_measured", "cost_full_usd", "cost_sent_usd",
    "registry_full_usd", "registry_sent_usd", "unpriced_records", "refused_turns", "optimized_turns",
)


def dashboard_overview(*, user, top: int = 10) -> dict[str, Any]:
    """Totals over the user's conversations and the conversations that saved most (tokens)."""
    dashboard_totals_heal(owner=user)
    rows = DashboardTotals.objects.filter(conversation__owner=user, turns__gt=0)
    sums = rows.aggregate(conversations_with_records=Count("pk"), **{name: Sum(name) for name in _SUMMED})
    # PostgreSQL sums big integers as numeric: ints back, as each row holds them.
    totals: dict[str, Any] = {name: sums[name] or 0 for name in _SUMMED}
    for name in ("turns", "tokens_full", "tokens_sent", "dropped_tokens", "dropped_measured", "unpriced_records",
                 "refused_turns", "optimized_turns"):
        totals[name] = int(totals[name])
    totals["tokens_saved"] = totals["tokens_full"] - totals["tokens_sent"]
    cost_full = float(totals["cost_full_usd"]) + totals["registry_full_usd"]
    cost_sent = float(totals["cost_sent_usd"]) + totals["registry_sent_usd"]
    jobs = SummaryJob.objects.filter(conversation__owner=user).aggregate(n=Count("id"), cost=Sum("cost_usd"))
    summaries_made = Message.objects.filter(
        conversation__owner=user, kind=Message.Kind.SUMMARY, edited_from__isnull=True
    ).count()
    savings = dashboard_conversation_savings(user=user, healed=True)
    # The net is the sum of the conversations' known nets: a conversation with no priced and billed
    # request (a local model, or every request refused) has an unknown saving ("—" in the list), so
    # what its summaries cost is not taken from the others' savings either (its full and sent costs
    # add nothing to the gross).
    known = [row for row in savings if row["net_saved_usd"] is not None]
    summary_cost = sum(row["summary_cost_usd"] for row in known)
    return {
        "conversations": Conversation.objects.filter(owner=user).count(),
        "conversations_with_records": sums["conversations_with_records"],
        "turns": totals["turns"],
        "tokens": token_figures(totals),
        "money": {
            "full_usd": cost_full,
            "sent_usd": cost_sent,
            # what summarizing the conversations with a known saving cost
            "summary_cost_usd": summary_cost,
            # Unknown when no request could be priced, as for one conversation's below.
            "net_saved_usd": cost_full - cost_sent - summary_cost if known else None,
            # and what summarizing the others cost (no request priced and billed, or none yet): spent
            # all the same, named beside the net rather than left out of the page.
            "summary_cost_other_usd": max(0.0, (as_float(jobs["cost"]) or 0.0) - summary_cost),
            "unpriced_records": totals["unpriced_records"],
            "refused_turns": totals["refused_turns"],
        },
        "summaries": {"made": summaries_made, "jobs": jobs["n"]},
        "optimized_turns": totals["optimized_turns"],
        "top": savings[:top],
    }


def dashboard_conversation_savings(*, user, healed: bool = False) -> list[dict[str, Any]]:
    """Per-conversation savings, most tokens saved first: the conversations' totals rows, their
    summary jobs' costs (one grouped query) and titles."""
    if not healed:
        dashboard_totals_heal(owner=user)
    rows = list(
        DashboardTotals.objects.filter(conversation__owner=user, turns__gt=0)
        .annotate(title=F("conversation__title"), archived_at=F("conversation__archived_at"),
                  saved=F("tokens_full") - F("tokens_sent"))
        .order_by("-saved", "conversation_id")
        .values("conversation_id", "title", "archived_at", "turns", "optimized_turns", "tokens_full", "tokens_sent",
                "cost_full_usd", "cost_sent_usd", "registry_full_usd", "registry_sent_usd", "unpriced_records",
                "refused_turns")
    )
    job_cost = dict(
        SummaryJob.objects.filter(conversation__owner=user, conversation_id__in=[r["conversation_id"] for r in rows])
        .values("conversation_id")
        .annotate(c=Sum("cost_usd"))
        .values_list("conversation_id", "c")
        .order_by()
    )
    out = []
    for row in rows:
        full, sent = row["tokens_full"], row["tokens_sent"]
        summary_cost = as_float(job_cost.get(row["conversation_id"])) or 0.0
        # No money figure when no request of the conversation could be priced, or was billed.
        priced = savings_known(row)
        cost_full = float(row["cost_full_usd"]) + row["registry_full_usd"]
        cost_sent = float(row["cost_sent_usd"]) + row["registry_sent_usd"]
        out.append({
            "id": row["conversation_id"],
            "title": row["title"],
            "archived": row["archived_at"] is not None,
            "turns": row["turns"],
            "optimized_turns": row["optimized_turns"],
            "tokens_full": full,
            "tokens_sent": sent,
            "tokens_saved": full - sent,
            "saved_share": (full - sent) / full if full else 0.0,
            "net_saved_usd": cost_full - cost_sent - summary_cost if priced else None,
            "summary_cost_usd": summary_cost,
        })
    return out
