"""Small, hand-checkable dashboard data. Long seeded conversations come from the
`seed_long_conversation` management command (chatapp/chat/management/commands/)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from chatapp.chat.models import Conversation, Message, OptimizationRecord, SummaryJob
from chatapp.dashboard.totals import dashboard_totals_rebuild, dashboard_totals_record_add


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
    record = OptimizationRecord.objects.create(
        conversation=conversation, preference="balanced", model=model, context_window=budget + 200,
        budget=budget, triggered=triggered, strategy=strategy, tokens_full=tokens_full, tokens_sent=tokens_sent,
        provider_prompt_tokens=provider,
        cost_full_usd=Decimal(cost_full) if cost_full is not None else None,
        cost_sent_usd=Decimal(cost_sent) if cost_sent is not None else None,
        **fields,
    )
    # Counted as the request path counts its records (turn_records.record_create).
    dashboard_totals_record_add(record=record)
    return record


def make_job(*, conversation: Conversation, summary: Message | None, cost: str | None, seconds: float = 2.0,
             status: str = SummaryJob.Status.DONE, **fields: Any) -> SummaryJob:
    from datetime import timedelta

    from django.utils import timezone

    finished = timezone.now()
    return SummaryJob.objects.create(
        conversation=conversation, status=status, summary=summary,
        cost_usd=Decimal(cost) if cost is not None else None,
        started_at=finished - timedelta(seconds=seconds), finished_at=finished, **fields,
    )


@dataclass
class RecallTurns:
    conversation: Conversation
    m: list[Message]
    record: OptimizationRecord  # the latest request, which sent a recall block
    block: str  # the recall block's text as sent


def make_recall_turns(*, owner) -> RecallTurns:
    """Two requests on messages m0..m11; the second, with the window from m8, sent m0 (the first user
    message), m8..m10, a recall block quoting m2, m3 and m5 (hits m3 then m5; m2 is m3's neighbour,
    and the gap before m5 shows as "…"), then m11. m1, m4, m6 and m7 were dropped."""
    from optimizer.recall import HEADER

    c = make_conversation(owner=owner, title="Recall")
    m = []
    for i in range(12):
        role = "user" if i % 2 == 0 else "assistant"
        text = {3: "We chose a GIN index.", 5: "The GIN index build took 40 minutes."}.get(i, f"message {i}")
        m.append(make_message(conversation=c, role=role, content=text, tokens=10 + i))
    day = "Mon 1 January 2024"
    block = f"{HEADER}\n{day}\nuser: {m[2].content}\nassistant: {m[3].content}\n…\nassistant: {m[5].content}"
    recall = {
        **sent_entry("recall", m[2], m[3], m[5], tokens=61), "role": "system", "hit_ids": [m[3].pk, m[5].pk],
        "terms": ["gin", "index", "build"],
        "layout": [f"{HEADER}\n{day}\nuser: ", m[2].pk, "\nassistant: ", m[3].pk, "\n…\nassistant: ", m[5].pk, ""],
    }
    make_record(conversation=c, tokens_full=200, tokens_sent=200, sent=[sent_entry("verbatim", m[0])])
    record = make_record(
        conversation=c, tokens_full=400, tokens_sent=250, strategy="truncate", triggered=True,
        window_start_id=m[8].pk, recall_tokens=61, recall_message_count=3,
        sent=[
            {**sent_entry("verbatim", m[0]), "role": "user"},
            *({**sent_entry("verbatim", x), "role": x.role} for x in m[8:11]),
            recall,
            {**sent_entry("verbatim", m[11]), "role": "user"},
        ],
        # As the request path writes them: the quoted messages cut out of what was dropped.
        dropped_ranges=[[m[1].pk, m[1].pk], [m[4].pk, m[4].pk], [m[6].pk, m[7].pk]],
        stats={"trigger_tokens": 800, "recall_tokens": 61},
    )
    return RecallTurns(conversation=c, m=m, record=record, block=block)


def make_long_conversation(*, owner, turns: int, seed: int = 3) -> Conversation:
    """`turns` records written in bulk (as the seed command does), then counted by the rebuild."""
    rng = random.Random(seed)
    c = make_conversation(owner=owner, title="Long")
    records = []
    full = 0
    for k in range(turns):
        full += rng.randint(50, 400)
        sent = min(full, rng.randint(1500, 3000))
        strategy = rng.choice(["none"] * 8 + ["truncate", "summarize"])
        recall = rng.choice([0, 0, 0, rng.randint(10, 90)])
        records.append(OptimizationRecord(
            conversation=c, preference="balanced", model="gpt-4o-mini", context_window=4200,
            budget=4000 if k < turns // 2 else 3600, triggered=strategy != "none", strategy=strategy,
            tokens_full=full, tokens_sent=sent, provider_prompt_tokens=sent + 3 if k % 3 else None,
            recall_tokens=recall, recall_message_count=2 if recall else 0,
            cost_full_usd=Decimal("0.000150") * full / 1000, cost_sent_usd=Decimal("0.000150") * sent / 1000,
            stats={"trigger_tokens": 3200 + (k % 5)},
        ))
    OptimizationRecord.objects.bulk_create(records, batch_size=500)
    dashboard_totals_rebuild(conversation=c)
    return c
