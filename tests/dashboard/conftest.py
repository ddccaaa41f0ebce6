"""Dashboard fixtures: two users and a small conversation whose figures can be checked by hand."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from chatapp.chat.models import Conversation, Message, OptimizationRecord
from tests.dashboard.factories import (
    make_conversation,
    make_job,
    make_message,
    make_record,
    make_summary,
    sent_entry,
)
from tests.support.accounts import no_rate_limit, other_user, user

__all__ = ["no_rate_limit", "other_user", "user"]


@pytest.fixture
def owner_client(client, user):
    client.force_login(user)
    return client


@dataclass
class Small:
    conversation: Conversation
    m: list[Message]  # m[0] .. m[8], chat messages in order
    summary: Message
    superseded: Message
    records: list[OptimizationRecord]


@pytest.fixture
def small(user) -> Small:
    """Nine chat messages, one summary, three requests.

    Turn 1: everything sent (100 tokens).  Turn 2: truncate, 300 → 150.  Turn 3: summarize, 500 → 200;
    its `sent`: m0 (first user) verbatim, m2 pinned, the summary (covers m1..m3), m5 compressed,
    m6 and m7 verbatim; m4 dropped; m8 is the reply (after the request); one superseded reply.
    """
    c = make_conversation(owner=user, title="Small one")
    m = []
    for i in range(8):
        role = "user" if i % 2 == 0 else "assistant"
        m.append(make_message(conversation=c, role=role, content=f"message {i}", tokens=10 + i, pinned=(i == 2)))
    superseded = make_message(conversation=c, role="assistant", content="old reply", tokens=5, superseded=True)
    summary = make_summary(conversation=c, covers=(m[1], m[3]), covered=3, content="[Summary] m1..m3",
                           tokens=40, model="gpt-4o-mini", cost_usd="0.000400")
    m.append(make_message(conversation=c, role="assistant", content="reply to turn 3", tokens=30))
    r1 = make_record(conversation=c, tokens_full=100, tokens_sent=100, cost_full="0.001000", cost_sent="0.001000",
                     sent=[sent_entry("verbatim", m[0])], stats={"trigger_tokens": 700})
    r2 = make_record(conversation=c, tokens_full=300, tokens_sent=150, strategy="truncate", triggered=True,
                     cost_full="0.003000", cost_sent="0.001500", provider=152,
                     sent=[sent_entry("verbatim", m[0])], stats={"trigger_tokens": 800})
    r3 = make_record(
        conversation=c, tokens_full=500, tokens_sent=200, strategy="summarize", triggered=True,
        cost_full="0.005000", cost_sent="0.002000", provider=198, summary=summary, window_start_id=m[5].pk,
        reply=m[8],
        sent=[
            sent_entry("verbatim", m[0]),
            sent_entry("pinned", m[2]),
            sent_entry("summary", summary),
            sent_entry("compressed", m[5], tokens=7),
            sent_entry("verbatim", m[6]),
            sent_entry("verbatim", m[7]),
        ],
        dropped_ranges=[[m[4].pk, m[4].pk]],
        reason="Summarize the evicted span.",
    )
    make_job(conversation=c, summary=summary, cost="0.000500", seconds=3.0, model="gpt-4o-mini")
    return Small(conversation=c, m=m, summary=summary, superseded=superseded, records=[r1, r2, r3])
