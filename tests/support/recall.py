"""Recall through the request path in tests: a conversation with an old fact outside the window,
and the recall source pinned to the core's in-memory BM25 over the stored messages (so a test does
not depend on how the database source ranks)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import optimizer
from chatapp.chat.models import Conversation, Message
from optimizer.recall import MemorySource, RecallItem

# An old exchange the window has left behind, and what the newest message asks about it.
FACT_QUESTION = "Which database index should the search page use?"
FACT_ANSWER = "Use a GIN index on the tsvector column in PostgreSQL; BRIN was too coarse for it."
QUESTION = "Remind me: which index did we pick for PostgreSQL search?"


def live_items(conversation: Conversation) -> list[RecallItem]:
    rows = Message.objects.filter(
        conversation=conversation, kind=Message.Kind.CHAT, status=Message.Status.COMPLETE, superseded=False,
    ).order_by("id").values_list("id", "role", "content", "created_at")
    return [RecallItem(id=str(pk), role=role, content=text, position=pk, created_at=at) for pk, role, text, at in rows]


@pytest.fixture
def memory_recall(monkeypatch):
    """Every pack of the request path recalls through MemorySource over the stored messages."""
    real_pack = optimizer.pack

    def pack(messages, **kwargs):
        if kwargs.get("recall_source") is not None or kwargs.get("window_start") is not None:
            conversation_id = Message.objects.filter(pk=int(messages[-1].id)).values_list(
                "conversation_id", flat=True
            ).first()
            kwargs["recall_source"] = MemorySource(live_items(Conversation.objects.get(pk=conversation_id)))
        return real_pack(messages, **kwargs)

    monkeypatch.setattr(optimizer, "pack", pack)


def seed_with_fact(conversation: Conversation, *, count: int = 30) -> list[int]:
    """`count` alternating messages over two days, the fact at positions 6/7, window from position 16."""
    start = timezone.now() - timedelta(days=2)
    rows = []
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        if i == 6:
            content = FACT_QUESTION
        elif i == 7:
            content = FACT_ANSWER
        else:
            content = f"note {i}: " + " ".join(f"chatter{(i * 5 + j) % 41}" for j in range(14))
        rows.append(Message(
            conversation=conversation, role=role, content=content, char_count=len(content),
            token_count=optimizer.count_message({"role": role, "content": content}, model="fake-echo"),
        ))
    created = Message.objects.bulk_create(rows)
    ids = [m.pk for m in created] if created[0].pk else list(
        Message.objects.filter(conversation=conversation).order_by("id").values_list("id", flat=True)
    )
    for k, pk in enumerate(ids):
        # Two calendar days, so the block carries more than one date line.
        Message.objects.filter(pk=pk).update(created_at=start + timedelta(hours=2 * k))
    Conversation.objects.filter(pk=conversation.pk).update(
        live_message_count=count,
        live_char_count=sum(r.char_count for r in rows),
        live_token_count=sum(r.token_count for r in rows),
        window_start_id=ids[16],
    )
    conversation.refresh_from_db()
    return ids


