"""The series of a long conversation: at most MAX_POINTS points, each a bucket of consecutive turns whose
figures are what its records say (sums, extremes, the last turn's values), totals exact over every
record; ranges; and the reads that go through the turn blocks (turn numbers, record pages, message
numbers) against the plain reads they replace."""

from __future__ import annotations

import random

import pytest

from chatapp.chat.models import Message, OptimizationRecord
from chatapp.chat.selectors import message_numbers
from chatapp.dashboard import series as series_module
from chatapp.dashboard.figures import dashboard_message_numbers, dashboard_record_rows, dashboard_record_turn
from chatapp.dashboard.ledger import ledger_read
from chatapp.dashboard.series import dashboard_series
from chatapp.dashboard.totals import STRATEGY_CODES, dashboard_totals_rebuild
from chatapp.dashboard.turns import RECORD_LIST_FIELDS
from tests.dashboard.factories import make_conversation, make_long_conversation, make_message, make_summary

pytestmark = pytest.mark.django_db


def check_points(s: dict, records: list[OptimizationRecord]) -> None:
    """Each point against the records it covers, and the arrays' shape."""
    n = s["points"]
    assert all(len(s[name]) == n for name in series_module.POINT_FIELDS)
    by_turn = {k: r for k, r in enumerate(records, start=1)}
    saved = sum(r.tokens_full - r.tokens_sent for k, r in by_turn.items() if k < s["turn_first"][0])
    for i in range(n):
        part = [by_turn[t] for t in range(s["turn_first"][i], s["turn_last"][i] + 1)]
        assert part, i
        if i:
            assert s["turn_first"][i] == s["turn_last"][i - 1] + 1  # consecutive, no gap, no overlap
        assert s["ids"][i] == part[-1].pk
        assert s["tokens_full"][i] == max(r.tokens_full for r in part)
        assert s["tokens_full_sum"][i] == sum(r.tokens_full for r in part)
        assert s["tokens_sent"][i] == max(r.tokens_sent for r in part)
        assert s["tokens_sent_min"][i] == min(r.tokens_sent for r in part)
        assert s["tokens_sent_sum"][i] == sum(r.tokens_sent for r in part)
        assert s["budget"][i] == part[-1].budget
        assert s["trigger"][i] == part[-1].stats["trigger_tokens"]
        provided = [r.provider_prompt_tokens for r in part if r.provider_prompt_tokens is not None]
        assert s["provider_prompt_tokens"][i] == (max(provided) if provided else None)
        assert s["truncations"][i] == sum(r.strategy == "truncate" for r in part)
        assert s["summarizations"][i] == sum(r.strategy == "summarize" for r in part)
        codes = [STRATEGY_CODES.index(r.strategy) if r.strategy != "none" else int(r.tokens_sent < r.tokens_full)
                 for r in part]
        assert s["strategy"][i] == max(codes)
        assert s["recall_tokens"][i] == max(r.recall_tokens for r in part)
        assert s["recall_tokens_sum"][i] == sum(r.recall_tokens for r in part)
        saved += sum(r.tokens_full - r.tokens_sent for r in part)
        assert s["saved_cumulative"][i] == saved  # exact at the point's last turn
    totals = s["totals"]
    assert totals["turns"] == s["count"] == len(records)
    assert totals["tokens_full"] == sum(r.tokens_full for r in records)
    assert totals["tokens_saved"] == sum(r.tokens_full - r.tokens_sent for r in records)
    assert totals["truncations"] == sum(r.strategy == "truncate" for r in records)


def test_a_long_series_is_bucketed_to_at_most_max_points_with_exact_totals(user):
    c = make_long_conversation(owner=user, turns=9_000)  # past RECORD_TURNS: buckets of whole turn blocks
    records = list(OptimizationRecord.objects.filter(conversation=c).order_by("id"))
    s = dashboard_series(conversation=c)
    assert s["count"] == 9_000 and s["bucket_size"] == 16
    assert s["points"] == 563 <= series_module.MAX_POINTS
    assert (s["first_turn"], s["last_turn"]) == (1, 9_000)
    check_points(s, records)
    first = s["first_optimized_turn"]
    assert s["turn_first"][s["first_optimized_index"]] <= first <= s["turn_last"][s["first_optimized_index"]]


def test_a_series_between_max_points_and_record_turns_is_bucketed_from_the_records(user):
    c = make_long_conversation(owner=user, turns=2_500)
    records = list(OptimizationRecord.objects.filter(conversation=c).order_by("id"))
    s = dashboard_series(conversation=c)
    assert (s["bucket_size"], s["points"]) == (2, 1_250)
    check_points(s, records)


@pytest.mark.parametrize(("first", "last"), [(1, 600), (37, 290), (50, 60), (595, 600), (200, 10_000)])
def test_ranges_with_small_limits(user, monkeypatch, first, last):
    # Small limits so every path runs on small data: per turn (<= 10), from the records (<= 40), blocks.
    monkeypatch.setattr(series_module, "MAX_POINTS", 10)
    monkeypatch.setattr(series_module, "RECORD_TURNS", 40)
    c = make_long_conversation(owner=user, turns=600, seed=first)
    records = list(OptimizationRecord.objects.filter(conversation=c).order_by("id"))
    s = dashboard_series(conversation=c, first=first, last=last)
    assert 0 < s["points"] <= 10
    # A range is covered; bucketed from blocks, it widens to whole blocks of 16 turns.
    assert s["turn_first"][0] <= first and s["turn_last"][-1] >= min(last, 600)
    assert s["turn_first"][0] > first - 16 and s["turn_last"][-1] < min(last, 600) + 16
    check_points(s, records)


def test_one_point_per_turn_up_to_max_points(user):
    c = make_long_conversation(owner=user, turns=40)
    s = dashboard_series(conversation=c)
    assert (s["bucket_size"], s["points"], s["count"]) == (1, 40, 40)
    assert s["turn_first"] == s["turn_last"] == list(range(1, 41))
    assert s["tokens_sent"] == s["tokens_sent_min"] == s["tokens_sent_sum"]


def test_turn_numbers_and_record_pages_through_the_blocks(user):
    c = make_long_conversation(owner=user, turns=300)
    ids = list(OptimizationRecord.objects.filter(conversation=c).order_by("id").values_list("id", flat=True))
    for turn in (1, 16, 17, 150, 299, 300):
        assert dashboard_record_turn(conversation=c, record_id=ids[turn - 1]) == turn
    for offset, limit in ((0, 15), (15, 15), (285, 15), (290, 50), (300, 5)):
        rows = dashboard_record_rows(conversation=c, offset=offset, limit=limit, fields=RECORD_LIST_FIELDS)
        assert [r["id"] for r in rows] == ids[offset:offset + limit]


def test_message_numbers_equal_the_users_numbering(user, other_user):
    c = make_conversation(owner=user)
    other = make_conversation(owner=other_user)
    messages = []
    for k in range(1_500):
        # Ids interleave with another conversation's, and summaries are not numbered.
        if k % 7 == 0:
            make_message(conversation=other)
        # A regenerated reply or an edited question: the version replaced is kept but not numbered.
        messages.append(make_message(conversation=c, role="user" if k % 2 == 0 else "assistant",
                                     superseded=k % 37 == 5))
        if k % 200 == 199:
            make_summary(conversation=c, covers=(messages[0], messages[-1]), covered=k, content="[Summary]")
    ids = [m.pk for m in Message.objects.filter(conversation=c).order_by("id")]
    rng = random.Random(5)
    wanted = {ids[0], ids[-1], *rng.sample(ids, 25), *ids[700:760], ids[-1] + 5, ids[0] - 1}
    expected = message_numbers(conversation_id=c.pk, ids=wanted)
    # Without a ledger (counted from the start) and with one (counted back from its end when nearer).
    scan = ledger_read(conversation_id=c.pk)
    assert scan.through_id is None
    assert dashboard_message_numbers(conversation_id=c.pk, ids=wanted, scan=scan) == expected
    OptimizationRecord.objects.create(conversation=c, preference="balanced", model="m", context_window=10, budget=5,
                                      strategy="none", tokens_full=1, tokens_sent=1, reply_id=ids[1_200])
    totals = dashboard_totals_rebuild(conversation=c)
    assert totals.ledger_through_id == ids[1_200] - 1
    scan = ledger_read(conversation_id=c.pk)
    assert scan.ids == [m.pk for m in Message.objects.filter(conversation=c, kind="summary").order_by("id")]
    assert dashboard_message_numbers(conversation_id=c.pk, ids=wanted, scan=scan) == expected
