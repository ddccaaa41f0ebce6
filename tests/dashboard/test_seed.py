"""The seeding command produces records that obey the request path's invariants."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from chatapp.chat.management.commands.seed_long_conversation import conversation_seed_long
from chatapp.chat.models import Message, OptimizationRecord, SummaryJob
from chatapp.dashboard.headline import dashboard_headline

pytestmark = pytest.mark.django_db


def test_seeded_conversation_is_consistent():
    user = get_user_model().objects.create_user(username="seedy")
    c = conversation_seed_long(owner=user, messages=400, seed=5)
    records = list(OptimizationRecord.objects.filter(conversation=c).order_by("id"))
    assert len(records) == 200
    chat = Message.objects.filter(conversation=c, kind="chat").count()
    assert chat == 400 == c.live_message_count
    assert not records[0].triggered
    assert any(r.strategy == "truncate" for r in records)
    assert any(r.strategy == "summarize" for r in records)
    for r in records:
        assert sum(e["tokens"] for e in r.sent) + 3 == r.tokens_sent
        assert r.tokens_sent <= r.budget
        assert r.tokens_sent <= r.tokens_full
        assert r.reply_id is not None
    # Once a summary exists, later requests send it and mark what it covers.
    with_summary = [r for r in records if r.summary_id]
    assert with_summary
    summary = Message.objects.get(pk=with_summary[-1].summary_id)
    assert summary.kind == "summary"
    assert summary.covers_from_id < summary.covers_through_id < with_summary[-1].window_start_id
    assert any(e["origin"] == "summary" for e in with_summary[-1].sent)
    jobs = SummaryJob.objects.filter(conversation=c)
    assert jobs.count() == Message.objects.filter(conversation=c, kind="summary").count()
    assert all(j.finished_at > j.started_at for j in jobs)
    h = dashboard_headline(conversation=c)
    assert h["tokens"]["saved"] == sum(r.tokens_full - r.tokens_sent for r in records)
    assert h["strategies"]["first_optimized_turn"] == next(i for i, r in enumerate(records, 1) if r.triggered)


def test_a_seeded_demo_chat_counts_the_demo_replies_apart():
    """Seeded with the offline demo model, its replies are counted apart as the request path counts
    them, so hiding one (what Regenerate does) takes them off the totals it was added to."""
    from django.db import transaction

    from chatapp.chat.branch_services import branch_hide
    from chatapp.chat.context import live_chat_q, offline_reply_q

    user = get_user_model().objects.create_user(username="seed-demo")
    c = conversation_seed_long(owner=user, messages=40, seed=3, model="offline-demo")

    def rows() -> tuple[int, int, int]:
        live = Message.objects.filter(live_chat_q(), offline_reply_q(), conversation=c)
        chars, tokens = live.values_list("char_count", flat=True), live.values_list("token_count", flat=True)
        return live.count(), sum(chars), sum(tokens)

    def totals() -> tuple[int, int, int]:
        c.refresh_from_db()
        return c.offline_reply_count, c.offline_reply_chars, c.offline_reply_tokens

    assert totals() == rows() and rows()[0] == 20
    last = Message.objects.filter(live_chat_q(), offline_reply_q(), conversation=c).latest("id")
    with transaction.atomic():
        branch_hide(conversation_id=c.pk, start_id=last.pk)
    assert totals() == rows() and rows()[0] == 19
