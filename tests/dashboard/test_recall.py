"""Recall on the dashboard: its own map status, "what the model saw", the headline, series and exports
(on the hand-built conversation of `factories.make_recall_turns`)."""

from __future__ import annotations

import csv
import io

import pytest

from chatapp.chat.models import Message, OptimizationRecord
from chatapp.dashboard.headline import dashboard_headline
from chatapp.dashboard.message_map import MAP_STATUSES, dashboard_message_map
from chatapp.dashboard.series import dashboard_series
from chatapp.dashboard.turns import dashboard_record_context
from tests.dashboard.factories import (
    RecallTurns,
    make_conversation,
    make_message,
    make_recall_turns,
    make_record,
    make_summary,
    sent_entry,
)
from tests.support.streaming import streamed_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def recalled(user) -> RecallTurns:
    return make_recall_turns(owner=user)


def _statuses(data: dict) -> dict[int, str]:
    ids = [start + k for start, length in data["id_runs"] for k in range(length)]
    statuses = [data["statuses"][code] for code, length in data["status_runs"] for _ in range(length)]
    return dict(zip(ids, statuses, strict=True))


def test_map_marks_recalled_messages_apart_from_dropped(recalled):
    m = recalled.m
    data = dashboard_message_map(conversation=recalled.conversation)
    by_id = _statuses(data)
    assert [by_id[x.pk] for x in m] == [
        "verbatim", "dropped", "recalled", "recalled", "dropped", "recalled", "dropped", "dropped",
        "verbatim", "verbatim", "verbatim", "verbatim",
    ]
    assert data["status_counts"]["recalled"] == 3
    assert data["status_counts"]["dropped"] == 4
    assert data["status_labels"][MAP_STATUSES.index("recalled")].startswith("Recalled")


def test_recalled_beats_summarized_on_the_map(recalled):
    """A message both covered by the summary and quoted was sent verbatim as a quote: say so."""
    m = recalled.m
    summary = Message.objects.create(
        conversation=recalled.conversation, role="system", kind="summary", content="[Summary]", token_count=5,
        char_count=9, covers_from_id=m[1].pk, covers_through_id=m[7].pk, covered_message_count=7,
    )
    OptimizationRecord.objects.filter(pk=recalled.record.pk).update(summary=summary, dropped_ranges=[])
    by_id = _statuses(dashboard_message_map(conversation=recalled.conversation))
    assert by_id[m[3].pk] == "recalled"
    assert by_id[m[4].pk] == "summarized"


def test_what_the_model_saw_shows_the_recall_block_exactly_with_its_reasons(recalled):
    m = recalled.m
    ctx = dashboard_record_context(conversation=recalled.conversation, record_id=recalled.record.pk)
    entry = ctx["entries"][4]
    assert entry["origin"] == "recall"
    assert entry["role"] == "system"
    assert entry["content"] == recalled.block
    assert entry["content_is_sent_text"] and not entry["missing"]
    assert entry["source_ids"] == [m[2].pk, m[3].pk, m[5].pk]
    assert entry["tokens"] == 61
    assert entry["recall"]["terms"] == ["gin", "index", "build"]
    quotes = entry["recall"]["quotes"]
    assert [(q["id"], q["hit"], q["rank"], q["role"]) for q in quotes] == [
        (m[2].pk, False, None, "user"), (m[3].pk, True, 1, "assistant"), (m[5].pk, True, 2, "assistant"),
    ]
    assert all(q["created_at"] for q in quotes)
    assert ctx["recalled_ids"] == [m[2].pk, m[3].pk, m[5].pk]
    assert ctx["record"]["recall_tokens"] == 61
    assert ctx["record"]["recall_message_count"] == 3
    assert not {m[2].pk, m[3].pk, m[5].pk} & {
        pk for first, last in ctx["dropped_ranges"] for pk in range(first, last + 1)
    }
    # The other entries are still the stored messages.
    assert [e["content"] for e in ctx["entries"][:4]] == [m[0].content, m[8].content, m[9].content, m[10].content]


def test_a_recall_block_whose_quote_is_gone_is_marked_not_exact(recalled):
    gone = recalled.m[5].pk
    recalled.m[5].delete()
    ctx = dashboard_record_context(conversation=recalled.conversation, record_id=recalled.record.pk)
    entry = ctx["entries"][4]
    assert entry["missing"] and not entry["content_is_sent_text"]
    assert entry["content"].endswith(f"[message #{gone} is no longer stored]")


def test_a_recall_entry_with_its_text_is_shown_as_kept(recalled):
    record = recalled.record
    sent = list(record.sent)
    entry = {k: v for k, v in sent[4].items() if k != "layout"}
    sent[4] = {**entry, "content": "the block as sent"}
    OptimizationRecord.objects.filter(pk=record.pk).update(sent=sent)
    ctx = dashboard_record_context(conversation=recalled.conversation, record_id=record.pk)
    assert ctx["entries"][4]["content"] == "the block as sent"
    assert ctx["entries"][4]["content_is_sent_text"]


def test_headline_and_series_count_recall(recalled):
    h = dashboard_headline(conversation=recalled.conversation)
    assert h["recall"] == {"turns": 1, "messages": 3, "tokens": 61}
    series = dashboard_series(conversation=recalled.conversation)
    assert series["recall_tokens"] == [0, 61]


def test_headline_recall_is_zero_without_it(small):
    assert dashboard_headline(conversation=small.conversation)["recall"] == {"turns": 0, "messages": 0, "tokens": 0}


def test_page_card_and_apis_carry_recall(owner_client, recalled):
    c = recalled.conversation
    page = owner_client.get(f"/c/{c.pk}/dashboard/").content.decode()
    assert "3 messages recalled on 1 turn (61 tokens)" in page
    assert 'data-status="recalled"' in page  # the map legend
    records = owner_client.get(f"/api/dashboard/conversations/{c.pk}/records/").json()["results"]
    assert [(r["recall_tokens"], r["recall_message_count"]) for r in records] == [(0, 0), (61, 3)]
    saw = owner_client.get(f"/api/dashboard/conversations/{c.pk}/records/{recalled.record.pk}/").json()
    assert saw["entries"][4]["content"] == recalled.block
    text = streamed_body(owner_client.get(f"/c/{c.pk}/dashboard/export.csv")).decode("utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows[1]["recall_tokens"] == "61" and rows[1]["recall_message_count"] == "3"


def test_a_dropped_range_that_starts_at_a_summary_carries_the_number_before_it(user):
    """Dropped ranges are id bounds and one may start at an old summary's id, which is numbered as
    the message before it: the page gets that message's number too, to start the range one later
    ("Dropped: #3 to #4", not "#2 to #4" beside "Summarized: #1 to #2")."""
    c = make_conversation(owner=user)
    u0, a1 = make_message(conversation=c, role="user"), make_message(conversation=c, role="assistant")
    old = make_summary(conversation=c, covers=(u0, a1), covered=2, content="[Summary] old", discarded=True)
    u2, a3, u4 = (make_message(conversation=c, role=r) for r in ("user", "assistant", "user"))
    record = make_record(conversation=c, tokens_full=100, tokens_sent=40, strategy="truncate", window_start_id=u4.pk,
                         sent=[sent_entry("verbatim", u0), sent_entry("verbatim", u4)],
                         dropped_ranges=[[old.pk, a3.pk]])

    numbers = {int(k): v for k, v in dashboard_record_context(conversation=c, record_id=record.pk)["numbers"].items()}

    assert numbers[old.pk] == numbers[old.pk - 1] == 2  # the summary's id: the number before it
    assert numbers[a3.pk] == 4 and u2.pk == old.pk + 1
