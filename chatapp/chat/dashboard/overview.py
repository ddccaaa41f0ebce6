"""Across conversations: the user's totals and the conversations that saved the most.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, F, Q, Sum

from chatapp.chat.dashboard.costs import as_float
from chatapp.chat.dashboard.headline import record_totals, token_figures
from chatapp.chat.models import Conversation, Message, OptimizationRecord, SummaryJob


def dashboard_overview(*, user, top: int = 10) -> dict[str, Any]:
    """Totals over the user's conversations and the conversations that saved most (tokens)."""
    records = OptimizationRecord.objects.filter(conversation__owner=user)
    totals = record_totals(records)
    jobs = SummaryJob.objects.filter(conversation__owner=user).aggregate(n=Count("id"), cost=Sum("cost_usd"))
    summaries_made = Message.objects.filter(
        conversation__owner=user, kind=Message.Kind.SUMMARY, edited_from__isnull=True
    ).count()
    conversations = Conversation.objects.filter(owner=user).count()
    summary_cost = as_float(jobs["cost"]) or 0.0
    return {
        "conversations": conversations,
        "conversations_with_records": records.values("conversation_id").distinct().count(),
        "turns": totals["turns"],
        "tokens": token_figures(totals),
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
        cost_full, cost_sent = as_float(row["cost_full"]), as_float(row["cost_sent"])
        summary_cost = as_float(job_cost.get(cid)) or 0.0
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
