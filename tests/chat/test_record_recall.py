"""Recall in the optimization record, the SSE context event and the offline model's note.

The record must rebuild the recall block exactly (its text is kept as a layout of the quoted
messages' ids), say which quotes were hits and why (terms), and never count a quoted message as
dropped. The recall source is pinned to the core's in-memory BM25 over the conversation's stored
messages, so these tests do not depend on how the database source ranks.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import optimizer
from chatapp.chat.models import OptimizationRecord
from chatapp.chat.turn_records import _ranges_without, _recall_layout, _sent_entry, turn_context_note
from chatapp.dashboard.turns import dashboard_record_context
from optimizer.recall import HEADER, MemorySource, RecallItem
from optimizer.types import Msg, PackedMessage
from tests.support.chat import send
from tests.support.recall import FACT_ANSWER, QUESTION, memory_recall
from tests.support.recall import seed_with_fact as _seed_with_fact
from tests.support.records import entries_shaped, record_rebuild

__all__ = ["memory_recall"]  # the fixture, used through usefixtures below

pytestmark = pytest.mark.django_db

def _turn(user, conversation, fake_openai, text: str = QUESTION):
    fake_openai.reset()
    result = send(user, conversation, text)
    assert result.names[-1] == "done", result.events
    record = OptimizationRecord.objects.get(reply_id=result.named("start")[0]["assistant_message"]["id"])
    return result, record


@pytest.mark.usefixtures("memory_recall")
def test_recall_block_is_recorded_and_rebuilds_exactly(user, conversation, fake_openai):
    ids = _seed_with_fact(conversation)

    result, record = _turn(user, conversation, fake_openai)

    received = fake_openai.completions[-1].messages
    [entry] = [e for e in record.sent if e["origin"] == "recall"]
    # Right before the newest message, which is the question: on the wire the block opens it.
    assert record.sent.index(entry) == len(record.sent) - 2
    block, question = received[-1]["content"].rsplit("\n\n", 1)
    assert received[-1]["role"] == "user" and question == QUESTION
    assert block.startswith(HEADER) and FACT_ANSWER in block
    # The record rebuilds every message exactly, the recall block included, from ids and glue only.
    assert record_rebuild(record) == received
    assert "content" not in entry and any(isinstance(p, int) for p in entry["layout"])
    assert sum(len(p) for p in entry["layout"] if isinstance(p, str)) < len(block) / 2
    # What was quoted, which of those matched, and why.
    assert entry["source_ids"] == sorted(entry["source_ids"]) and ids[7] in entry["source_ids"]
    assert entry["hit_ids"] and set(entry["hit_ids"]) <= set(entry["source_ids"])
    assert ids[7] in entry["hit_ids"] or ids[6] in entry["hit_ids"]
    assert "postgresql" in entry["terms"] and "index" in entry["terms"]
    assert record.recall_tokens == entry["tokens"] == record.stats["recall_tokens"] > 0
    assert record.recall_message_count == len(entry["source_ids"])
    # Quoted messages were sent (as quotes): never among the dropped ranges.
    dropped = [pk for first, last in record.dropped_ranges for pk in range(first, last + 1)]
    assert dropped, "the messages outside the window that were not quoted are dropped"
    assert not set(dropped) & set(entry["source_ids"])
    assert set(dropped) | set(entry["source_ids"]) >= set(ids[1:16])

    # "What the model saw" shows the same text, and says why it was recalled.
    shown = dashboard_record_context(conversation=conversation, record_id=record.pk)
    assert entries_shaped(shown["entries"], model=record.model) == received
    assert shown["request_shape"] == record.stats["request_shape"]
    assert "the recall block opens the newest message" in shown["request_shape"]
    recall_shown = shown["entries"][-2]
    assert recall_shown["origin"] == "recall" and recall_shown["content_is_sent_text"]
    assert [q["id"] for q in recall_shown["recall"]["quotes"]] == entry["source_ids"]
    assert {q["id"] for q in recall_shown["recall"]["quotes"] if q["hit"]} == set(entry["hit_ids"])
    assert recall_shown["recall"]["terms"] == entry["terms"]
    assert shown["recalled_ids"] == entry["source_ids"]
    assert shown["record"]["recall_tokens"] == record.recall_tokens

    # The SSE context event of the turn says what was recalled.
    context = result.named("start")[0]["context"]
    assert context["recall"] == {
        "messages": len(entry["source_ids"]),
        "hits": len(entry["hit_ids"]),
        "tokens": entry["tokens"],
        "terms": entry["terms"][:8],
        "ids": entry["source_ids"],
    }


@pytest.mark.usefixtures("memory_recall")
def test_a_turn_without_recall_says_so(user, conversation, fake_openai):
    _seed_with_fact(conversation)

    result, record = _turn(user, conversation, fake_openai, text="Thanks!")

    assert result.named("start")[0]["context"]["recall"] is None
    assert not [e for e in record.sent if e["origin"] == "recall"]
    assert record.recall_tokens == record.recall_message_count == 0


def _packed_with_recall() -> tuple[optimizer.PackResult, list[Msg]]:
    day = timezone.now() - timedelta(days=3)
    msgs = []
    for i in range(60):
        role = "user" if i % 2 == 0 else "assistant"
        content = FACT_ANSWER if i == 11 else f"message {i} " + f"topic{i} " * 30
        msgs.append(Msg(id=str(i + 1), role=role, content=content, created_at=day + timedelta(minutes=i)))
    msgs.append(Msg(id="61", role="user", content=QUESTION))
    source = MemorySource([RecallItem(id=m.id, role=m.role, content=m.content, position=int(m.id),
                                      created_at=m.created_at) for m in msgs])
    return optimizer.pack(msgs, budget=3000, recall_source=source), msgs


def test_offline_note_tells_how_many_messages_were_recalled():
    result, _ = _packed_with_recall()
    stats = result.stats
    assert stats["recall_ids"]
    note = turn_context_note(result=result, budget=3000)
    count = len(stats["recall_ids"])
    assert f"It recalled {count} earlier messages ({stats['recall_tokens']:,} tokens)" in note


def test_recall_entry_keeps_the_text_when_a_quote_is_not_verbatim():
    result, msgs = _packed_with_recall()
    packed = next(m for m in result.messages if m.origin == "recall")
    quoted = {int(m.id): m.content for m in msgs if m.id in packed.source_ids}

    entry = _sent_entry(packed=packed, summary_message_id=None, info=result.info, quoted=quoted)
    assert "layout" in entry and "content" not in entry
    assert entry["hit_ids"] == [int(i) for i in result.stats["recall_hit_ids"]]

    # A stored text that no longer matches the quote: the record keeps the block's text instead.
    changed = {**quoted, int(packed.source_ids[0]): "something else entirely"}
    entry = _sent_entry(packed=packed, summary_message_id=None, info=result.info, quoted=changed)
    assert entry["content"] == packed.content and "layout" not in entry


def test_layout_finds_short_quotes_at_line_ends_not_inside_the_header():
    # "Recalled" occurs in the header, and "ok" inside another line: the quote is the line's end.
    content = f"{HEADER}\nMon 1 January 2024\nuser: ok then\nassistant: ok\nuser: Recalled"
    quoted = {5: "ok", 6: "Recalled"}
    layout = _recall_layout(content=content, source_ids=[5, 6], quoted=quoted)
    assert layout == [f"{HEADER}\nMon 1 January 2024\nuser: ok then\nassistant: ", 5, "\nuser: ", 6, ""]
    assert _recall_layout(content=content, source_ids=[5, 7], quoted=quoted) is None


def test_sent_entry_of_a_recall_without_stats_still_rebuilds():
    packed = PackedMessage("system", f"{HEADER}\nundated\nuser: hello", ("9",), "recall", 20)
    entry = _sent_entry(packed=packed, summary_message_id=None, quoted={9: "hello"})
    assert entry == {
        "source_ids": [9], "origin": "recall", "tokens": 20, "role": "system", "hit_ids": [], "terms": [],
        "layout": [f"{HEADER}\nundated\nuser: ", 9, ""],
    }


def test_ranges_without_cuts_recalled_ids_out():
    assert _ranges_without([[1, 10], [20, 20], [30, 35]], {1, 5, 6, 20, 35, 99}) == [
        [2, 4], [7, 10], [30, 34],
    ]
    assert _ranges_without([[1, 3]], set()) == [[1, 3]]
