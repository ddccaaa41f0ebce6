"""context_load / context_build: only what the optimizer needs, from stored counts, under bounded queries."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import optimizer
from chatapp.chat.chat_turn import chat_turn_start, turn_pack
from chatapp.chat.context import context_load
from chatapp.chat.context_pack import context_build
from chatapp.chat.gauge import context_gauge
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation, Message, OptimizationRecord, UserSettings
from chatapp.providers import llm
from tests.support.chat import make_config, seed_messages

pytestmark = pytest.mark.django_db


def _ids(ctx) -> list[int]:
    return [int(m.id) for m in ctx.msgs]


def test_load_sends_only_live_chat_messages(conversation):
    u1 = message_append(conversation=conversation, role="user", content="first question")
    a1 = message_append(conversation=conversation, role="assistant", content="first answer")
    u2 = message_append(conversation=conversation, role="user", content="second question")
    superseded = message_append(conversation=conversation, role="assistant", content="old", superseded=True)
    stopped = message_append(conversation=conversation, role="assistant", content="half", status="stopped")
    failed = message_append(conversation=conversation, role="assistant", content="broken", status="error")
    streaming = message_append(conversation=conversation, role="assistant", content="", status="streaming")
    a2 = message_append(conversation=conversation, role="assistant", content="second answer")
    summary = message_append(
        conversation=conversation, role="system", kind="summary", content="[Conversation summary] s",
        covers_from_id=u1.pk, covers_through_id=a1.pk,
    )

    ctx = context_load(conversation=conversation)

    # a stopped reply is sent as far as it went, as the chat shows it
    assert _ids(ctx) == [u1.pk, a1.pk, u2.pk, stopped.pk, a2.pk]
    assert not {superseded.pk, failed.pk, streaming.pk, summary.pk} & set(_ids(ctx))
    assert ctx.summary is not None and ctx.summary.id == str(summary.pk)
    assert ctx.summary.through_id == str(a1.pk)
    # Running totals count only the five live chat messages.
    conversation.refresh_from_db()
    assert ctx.history.messages == conversation.live_message_count == 5
    assert ctx.history.tokens == sum(m.token_count for m in (u1, a1, u2, stopped, a2))
    assert [m.tokens for m in ctx.msgs] == [m.token_count for m in (u1, a1, u2, stopped, a2)]


def test_newest_live_summary_is_used_and_discarded_ones_ignored(conversation):
    ids = seed_messages(conversation, 10)
    kept = message_append(conversation=conversation, role="system", kind="summary", content="[Conversation summary] A",
                          covers_from_id=ids[0], covers_through_id=ids[3])
    message_append(conversation=conversation, role="system", kind="summary", content="[Conversation summary] B",
                   covers_from_id=ids[0], covers_through_id=ids[5], discarded=True)
    ctx = context_load(conversation=conversation)
    assert ctx.summary is not None
    assert (ctx.summary.id, ctx.summary.content, ctx.summary.through_id) == (
        str(kept.pk), kept.content, str(ids[3]))


def test_load_reads_static_layer_and_window_not_the_history(conversation, django_assert_max_num_queries):
    system = message_append(conversation=conversation, role="system", content="You are terse.")
    ids = seed_messages(conversation, 400)
    Message.objects.filter(pk=ids[101]).update(pinned=True)
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[380])
    conversation.refresh_from_db()

    with django_assert_max_num_queries(3):
        ctx = context_load(conversation=conversation)

    assert _ids(ctx) == [system.pk, ids[0], ids[101], *ids[380:]]
    assert ctx.static_ids == {system.pk, ids[0], ids[101]}
    assert ctx.window_start == str(ids[380])
    assert ctx.msgs[2].pinned


def _rows_read(sql: str) -> int:
    """The most rows one node of `sql`'s plan reads (PostgreSQL EXPLAIN ANALYZE): what it returns plus
    what its filter or recheck removes, over its loops."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
        raw = cursor.fetchone()[0]
    nodes, most = [(json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]], 0
    while nodes:
        node = nodes.pop()
        nodes += node.get("Plans", [])
        removed = node.get("Rows Removed by Filter", 0) + node.get("Rows Removed by Index Recheck", 0)
        most = max(most, (node["Actual Rows"] + removed) * node["Actual Loops"])
    return most


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner and its EXPLAIN ANALYZE")
def test_the_window_read_stays_narrow_in_an_old_long_conversation(user, conversation):
    # The conversation's ids lie below most of the table's (newer chats came after it), so PostgreSQL
    # estimates `id >= window start` as most of the table: a read OR-ing the window with the static
    # layer went through the whole conversation and filtered it.
    ids = seed_messages(conversation, 2_000, words=3)
    seed_messages(Conversation.objects.create(owner=user, title="newer"), 18_000, words=3)
    Message.objects.filter(pk=ids[101]).update(pinned=True)
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[1980])
    conversation.refresh_from_db()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE chat_message")

    with CaptureQueriesContext(connection) as captured:
        ctx = context_load(conversation=conversation)

    assert _ids(ctx) == [ids[0], ids[101], *ids[1980:]]
    reads = [_rows_read(q["sql"]) for q in captured.captured_queries if q["sql"].lstrip("( ").startswith("SELECT")]
    assert reads and max(reads) < 200, reads


def test_window_start_on_a_replaced_reply_begins_at_the_next_live_message(conversation):
    ids = seed_messages(conversation, 20)
    Message.objects.filter(pk=ids[10]).update(superseded=True)
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[10])
    conversation.refresh_from_db()
    ctx = context_load(conversation=conversation)
    assert ctx.window_start == str(ids[11])
    assert _ids(ctx) == [ids[0], *ids[11:]]


def test_long_conversation_triggers_optimization_without_loading_history(
    user, fake_openai, django_assert_max_num_queries
):
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=6_000, max_output=1_000)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    ids = seed_messages(conversation, 3_000, model="gpt-4o-mini")
    budget = optimizer.compute_budget(context_window=6_000, max_output_tokens=1_000)
    assert conversation.live_token_count > budget * 5

    # 30 before recall; recall adds the new message's index write (row, term and corpus statistics)
    # and its search (statistics, one full-text lookup per query term, neighbours): still a constant.
    with django_assert_max_num_queries(40):
        start = chat_turn_start(user=user, conversation=conversation, content="What did we decide?")
        turn = turn_pack(start=start)

    record = OptimizationRecord.objects.get(pk=turn.record_id)
    assert record.triggered
    assert record.strategy in {"truncate", "summarize"}
    assert record.tokens_sent <= budget < record.tokens_full
    assert record.messages_before >= 3_000
    assert record.dropped_ranges, "the middle of the history must be recorded as dropped"
    conversation.refresh_from_db()
    assert conversation.window_start_id is not None and conversation.window_start_id > ids[2_000]
    assert record.window_start_id == conversation.window_start_id
    sent_ids = {i for entry in record.sent for i in entry["source_ids"]}
    assert ids[0] in sent_ids  # the first user message is always kept
    assert ids[1_500] not in sent_ids

    with django_assert_max_num_queries(3):
        ctx = context_load(conversation=conversation)
    loaded = _ids(ctx)
    assert len(loaded) < 300
    assert loaded[0] == ids[0] and loaded[-1] == turn.user_message_id
    assert not [pk for pk in loaded if ids[1] <= pk < conversation.window_start_id]


def test_context_build_without_window_reads_only_the_tail(user, fake_openai):
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=6_000, max_output=1_000)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    seed_messages(conversation, 3_000, model="gpt-4o-mini")
    target = llm.llm_target_for(config=config)
    _, ctx = context_build(conversation=conversation, preference="balanced", target=target)
    assert len(ctx.loaded_ids) < 400


def test_auto_optimize_off_sends_everything_that_fits(user, fake_openai):
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=16_000, max_output=1_000)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    ids = seed_messages(conversation, 300, model="gpt-4o-mini")
    # Window sized so the history is 90% of the budget: past the 80% trigger, but it fits.
    config.context_window = int(conversation.live_token_count / 0.9) + config.max_output_tokens
    config.save()
    UserSettings.objects.update_or_create(user=user, defaults={"auto_optimize": False})
    target = llm.llm_target_for(config=config)
    result, _ = context_build(conversation=conversation, preference="balanced", target=target, auto_optimize=False)
    assert [int(i) for m in result.messages for i in m.source_ids] == ids
    assert conversation.window_start_id is None
    on, _ = context_build(conversation=conversation, preference="balanced", target=target, store_window=False)
    assert len({i for m in on.messages for i in m.source_ids}) < len(ids)


def test_auto_optimize_off_says_so_when_it_truncates(user, fake_openai):
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=16_000, max_output=1_000)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    seed_messages(conversation, 300, model="gpt-4o-mini")
    config.context_window = int(conversation.live_token_count / 1.2) + config.max_output_tokens  # 120%: a cut
    config.save()
    target = llm.llm_target_for(config=config)
    result, _ = context_build(conversation=conversation, preference="quality", target=target, auto_optimize=False)
    assert result.info.strategy_chosen == "truncate"
    assert "automatic optimization is off" in result.info.strategy_reason
    assert "no summarizer" not in result.info.strategy_reason


def test_the_gauge_names_the_summary_a_kept_window_sends(user, conversation):
    """No cut on this request (the window of an earlier one is kept) and a summary sent for what it
    left out: the gauge says the older turns are summarized, whatever the selector would pick at the
    next cut (fast picks truncation)."""
    ids = seed_messages(conversation, 20)
    message_append(conversation=conversation, role="system", kind="summary",
                   content="[Conversation summary — covers 8 messages]\n\nThey planned the trip.",
                   covers_from_id=ids[0], covers_through_id=ids[9])
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[10])
    UserSettings.objects.update_or_create(user=user, defaults={"preference": "fast"})
    conversation.refresh_from_db()
    gauge = context_gauge(conversation=conversation, user=user)
    assert gauge["summary_through_id"] == ids[9] and gauge["window_start_id"] == ids[10]
    assert gauge["strategy"] == "summarize"


def test_gauge_reports_next_request_tokens_against_budget(conversation, user):
    message_append(conversation=conversation, role="user", content="hello there")
    message_append(conversation=conversation, role="assistant", content="hi, how can I help?")
    gauge = context_gauge(conversation=conversation, user=user)
    budget = optimizer.compute_budget(context_window=16_000, max_output_tokens=500)
    assert gauge["budget"] == budget
    assert gauge["tokens"] == conversation.live_token_count + 3
    assert gauge["ratio"] == pytest.approx(gauge["tokens"] / budget, abs=1e-3)
    assert gauge["strategy"] == "none"


def test_a_turn_packed_before_a_compaction_does_not_move_the_window_back(user, fake_openai):
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=6_000, max_output=1_000)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    ids = seed_messages(conversation, 600, model="gpt-4o-mini")
    assert conversation.window_start_id is None  # this request read the conversation before...
    # ...a manual compaction committed a window further on.
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[590])
    target = llm.llm_target_for(config=config)

    result, _ = context_build(conversation=conversation, preference="balanced", target=target)

    assert result.window_start is not None and int(result.window_start) < ids[590]
    assert Conversation.objects.get(pk=conversation.pk).window_start_id == ids[590]


def test_auto_optimize_off_clears_the_window_when_everything_is_sent(user, conversation):
    ids = seed_messages(conversation, 10)
    # A window left from earlier (automatic optimization on, or a smaller model).
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[6])
    conversation.refresh_from_db()
    UserSettings.objects.update_or_create(user=user, defaults={"auto_optimize": False})

    turn = turn_pack(start=chat_turn_start(user=user, conversation=conversation, content="and now?"))

    record = OptimizationRecord.objects.get(pk=turn.record_id)
    assert [i for entry in record.sent for i in entry["source_ids"]] == [*ids, turn.user_message_id]
    assert record.window_start_id is None
    assert Conversation.objects.get(pk=conversation.pk).window_start_id is None
    assert turn.context["window_start_id"] is None


def test_clearing_the_window_yields_to_a_concurrent_compaction(user, conversation):
    ids = seed_messages(conversation, 10)
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[4])
    conversation.refresh_from_db()
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[8])  # committed meanwhile
    target = llm.llm_target_for(config=conversation.llm_config)

    result, _ = context_build(conversation=conversation, preference="balanced", target=target, auto_optimize=False)

    assert result.window_start is None
    assert Conversation.objects.get(pk=conversation.pk).window_start_id == ids[8]
