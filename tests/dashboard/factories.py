"""Small, hand-checkable dashboard data. Long seeded conversations come from the
`seed_long_conversation` management command (chatapp/chat/management/commands/)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from chatapp.chat.models import Conversation, Message, OptimizationRecord, SummaryJob


def make_conversation(*, owner, title: str = "Chat") -> Conversation:
    return Conversation.objects.create(owner=owner, title=title)


def make_message(*, conversation: Conversation, role: str = "user", content: str = "hello", tokens: int = 10,
                 **fields: Any) -> Message:
    return Message.objects.create(
        conversation=conversation, role=role, content=content, token_count=tokens, char_count=len(content), **fields
    )


def make_summary(*, conversation: Conversation, covers: tuple[Message, Message], covered: int, content: str,
                 tokens: int = 40, **fields: Any) -> Message:
    return Message.objects.create(
        conversation=conversation, role="system", kind="summary", content=content, token_count=tokens,
        char_count=len(content), covers_from_id=covers[0].pk, covers_through_id=covers[1].pk,
        covered_message_count=covered, **fields,
    )


def sent_entry(origin: str, *messages: Message, tokens: int | None = None) -> dict:
    return {
        "source_ids": [str(m.pk) for m in messages],
        "origin": origin,
        "tokens": tokens if tokens is not None else sum(m.token_count for m in messages),
    }


def make_record(*, conversation: Conversation, tokens_full: int, tokens_sent: int, strategy: str = "none",
                triggered: bool = False, budget: int = 1000, cost_full: str | None = None,
                cost_sent: str | None = None, provider: int | None = None, model: str = "gpt-4o-mini",
                **fields: Any) -> OptimizationRecord:
    return OptimizationRecord.objects.create(
        conversation=conversation, preference="balanced", model=model, context_window=budget + 200,
        budget=budget, triggered=triggered, strategy=strategy, tokens_full=tokens_full, tokens_sent=tokens_sent,
        provider_prompt_tokens=provider,
        cost_full_usd=Decimal(cost_full) if cost_full is not None else None,
        cost_sent_usd=Decimal(cost_sent) if cost_sent is not None else None,
        **fields,
    )


def make_job(*, conversation: Conversation, summary: Message | None, cost: str | None, seconds: float = 2.0,
             **fields: Any) -> SummaryJob:
    from datetime import timedelta

    from django.utils import timezone

    finished = timezone.now()
    return SummaryJob.objects.create(
        conversation=conversation, status=SummaryJob.Status.DONE, summary=summary,
        cost_usd=Decimal(cost) if cost is not None else None,
        started_at=finished - timedelta(seconds=seconds), finished_at=finished, **fields,
    )
