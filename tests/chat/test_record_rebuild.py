"""Optimization records rebuild exactly what the model received (issue 5), summary and compression included."""

from __future__ import annotations

import pytest

import optimizer
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation, OptimizationRecord
from chatapp.dashboard.turns import dashboard_record_context
from tests.support.chat import make_config, seed_messages, send
from tests.support.records import record_rebuild

pytestmark = pytest.mark.django_db


def _record_of(result) -> OptimizationRecord:
    assert result.names[-1] == "done", result.events
    return OptimizationRecord.objects.get(reply_id=result.named("start")[0]["assistant_message"]["id"])


def test_turn_with_a_summary_rebuilds_exactly_and_names_the_summary(user, conversation, fake_openai):
    ids = seed_messages(conversation, 20)
    summary = message_append(
        conversation=conversation,
        role="system",
        kind="summary",
        content="[Conversation summary — covers messages 1-10]\n\nWe chose PostgreSQL and a GIN index.",
        covers_from_id=ids[0],
        covers_through_id=ids[9],
    )
    # As a manual compaction leaves it: the window starts after what the summary covers.
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[10])
    fake_openai.reset()

    record = _record_of(send(user, conversation, "Which index did we pick?"))

    received = fake_openai.completions[-1].messages
    assert record_rebuild(record) == received
    [entry] = [e for e in record.sent if e["origin"] == "summary"]
    assert entry["summary_id"] == summary.pk == record.summary_id
    assert entry["source_ids"] == [summary.pk]
    assert ids[9] not in {i for e in record.sent for i in e["source_ids"]}
    # The dashboard's "what the model saw" shows the summary's text for it, not a chat message's.
    shown = dashboard_record_context(conversation=conversation, record_id=record.pk)["entries"]
    [summary_shown] = [e for e in shown if e["origin"] == "summary"]
    assert summary_shown["content"] == summary.content
    # on the wire it rides in the one leading system message (optimizer.shape)
    assert received[0] == {"role": "system", "content": summary.content}


def test_turn_with_a_compressed_message_rebuilds_exactly(user, fake_openai):
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=4_000, max_output=500)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    first = message_append(conversation=conversation, role="user", content="Paste of the server log follows.")
    log = "\n".join(f"line {i}: worker {i % 7} handled request {i * 13} in {i % 50} ms" for i in range(400))
    huge = message_append(conversation=conversation, role="assistant", content=log)
    message_append(conversation=conversation, role="user", content="Anything slow in there?")
    message_append(conversation=conversation, role="assistant", content="Worker 3 looks slow.")
    budget = optimizer.compute_budget(context_window=4_000, max_output_tokens=500)
    assert huge.token_count > budget * 0.25  # above the optimizer's oversize line
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=first.pk)
    conversation.refresh_from_db()
    fake_openai.reset()

    record = _record_of(send(user, conversation, "How many workers are there?"))

    received = fake_openai.completions[-1].messages
    [entry] = [e for e in record.sent if e["origin"] == "compressed"]
    assert entry["source_ids"] == [huge.pk]
    assert entry["content"] != huge.content and len(entry["content"]) < len(huge.content)
    assert record_rebuild(record) == received
    # Only compressed entries carry their text: the others are rebuilt from the stored messages.
    assert all("content" not in e for e in record.sent if e["origin"] != "compressed")
