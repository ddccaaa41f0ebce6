"""The strategy interface (optimizer.strategies) and the typed pack statistics (PackStats)."""

import dataclasses

import pytest
from optkit import MODEL, conversation, msg, source_of

from optimizer import (
    ContextTooLargeError,
    Counters,
    PackStats,
    Summary,
    extractive_summary,
    pack,
    target_tokens,
    trigger_tokens,
)
from optimizer.strategies import (
    AFTER_ASSEMBLY,
    PASSED_SUMMARY,
    PLAN,
    RECALL,
    SUMMARIZE,
    SUMMARY_AFTER_RECALL,
    TRUNCATE,
    PackState,
    Strategy,
)
from optimizer.strategies.base import begin
from optimizer.types import DEFAULT_CONFIG

STATS_KEYS = [
    "budget", "estimated", "trigger_tokens", "target_tokens", "tokens_before", "messages_before",
    "optimization_applied", "strategy_chosen", "strategy_reason", "scores", "tokens_after", "tokens_saved",
    "messages_after", "messages_removed", "removed_ids", "summary_needed", "summary_generated", "summary_used",
    "triggered", "window_start", "compressed_ids", "recall_ids", "recall_hit_ids", "recall_terms", "recall_tokens",
]


def state_for(msgs, *, budget, preference="balanced", window_start=None, summary=None, summarize_now=None,
              recall_source=None) -> PackState:
    return begin(
        msgs, [m.tokens for m in msgs], budget=budget, preference=preference, model=MODEL, config=DEFAULT_CONFIG,
        trigger=trigger_tokens(budget, DEFAULT_CONFIG, preference=preference),
        target=target_tokens(budget, DEFAULT_CONFIG, preference=preference),
        window_start=window_start, history=None, counters=Counters(), summarizer_available=True, summary=summary,
        summarize_now=summarize_now, recall_source=recall_source,
    )


def test_every_strategy_has_the_one_small_interface():
    def conforms(s: Strategy) -> Strategy:  # a type checker rejects a non-conforming strategy here
        return s

    for s in (PASSED_SUMMARY, TRUNCATE, SUMMARIZE, RECALL, SUMMARY_AFTER_RECALL):
        conforms(s)
        assert isinstance(s.name, str) and callable(s.apply)
    assert [s.name for s in PLAN] == ["summary", "truncate", "summarize"]
    assert [s.name for s in AFTER_ASSEMBLY] == ["recall", "summary after recall"]


@pytest.mark.parametrize("preference", ["fast", "quality"])
@pytest.mark.parametrize("inline", [False, True])
def test_running_the_strategies_by_hand_is_pack(preference, inline):
    msgs = conversation(60)
    summary = Summary(id="s1", content="[Conversation summary — covers 20 messages]\nUser: facts.", through_id="a9")
    now = extractive_summary if inline else None
    state = state_for(msgs, budget=4000, preference=preference, summary=summary, summarize_now=now,
                      recall_source=source_of(msgs))
    for s in PLAN:
        s.apply(state)
    state.assemble()
    for s in AFTER_ASSEMBLY:
        s.apply(state)
    r = pack(msgs, budget=4000, preference=preference, model=MODEL, summary=summary, summarize_now=now,
             recall_source=source_of(msgs))
    assert state.out == r.messages
    assert state.msgs[state.ws].id == r.window_start
    assert state.span == r.summary_span and state.new_summary == r.new_summary


def test_passed_summary_bounds_the_window():
    msgs = conversation(60)
    state = state_for(msgs, budget=4000, summary=Summary(id="s", content="summary text", through_id="a19"))
    PASSED_SUMMARY.apply(state)
    assert state.summary_ok and state.summary_tokens > 0
    assert msgs[state.cover_end].id == "a19" and msgs[state.lo].id == "u20"


def test_a_summary_of_the_newest_request_is_ignored():
    msgs = conversation(10)
    state = state_for(msgs, budget=4000, summary=Summary(id="s", content="summary text", through_id="q"))
    PASSED_SUMMARY.apply(state)
    assert not state.summary_ok and state.summary_tokens == 0 and state.cover_end == -1


def test_truncate_cuts_whole_rounds_down_to_the_target():
    msgs = conversation(40)
    state = state_for(msgs, budget=3000, preference="fast")
    TRUNCATE.apply(state)
    assert state.triggered and msgs[state.ws].role == "user"
    assert state.used <= state.target


def test_truncate_keeps_a_stored_window_under_the_trigger():
    msgs = conversation(40)
    first = pack(msgs, budget=3000, preference="fast", model=MODEL)
    state = state_for(msgs, budget=3000, preference="fast", window_start=first.window_start)
    TRUNCATE.apply(state)
    assert not state.triggered and msgs[state.ws].id == first.window_start


def test_truncate_raises_when_must_keeps_cannot_fit():
    # pinned notes under the oversize line each (no compression helps), too many together
    msgs = [msg(f"p{i}", "user", "note " * 200, pinned=True) for i in range(10)] + [msg("q", "user", "hi")]
    state = state_for(msgs, budget=1000)
    with pytest.raises(ContextTooLargeError) as exc:
        TRUNCATE.apply(state)
    assert exc.value.budget == 1000 and exc.value.needed > 1000


def test_truncate_compresses_oversized_must_keeps_in_an_emergency():
    msgs = [msg("s", "system", "rule " * 400), msg("q", "user", "question " * 400)]
    state = state_for(msgs, budget=300)
    TRUNCATE.apply(state)
    assert state.must_compressed == {0, 1} and state.used <= 300


def test_summarize_reports_a_span_or_writes_inline():
    msgs = conversation(60)
    state = state_for(msgs, budget=4000, preference="quality")
    for s in PLAN:
        s.apply(state)
    assert state.span is not None and state.new_summary is None
    assert state.span.ids[-1] == msgs[state.ws - 1].id

    inline = state_for(msgs, budget=4000, preference="quality", summarize_now=extractive_summary)
    for s in PLAN:
        s.apply(inline)
    assert inline.span is None and inline.new_summary is not None and inline.room > 0


def test_summarize_leaves_truncation_alone():
    state = state_for(conversation(40), budget=3000, preference="fast", summarize_now=extractive_summary)
    TRUNCATE.apply(state)
    before = (state.ws, state.used)
    SUMMARIZE.apply(state)
    assert (state.ws, state.used) == before and state.span is None and state.room == 0


def test_recall_goes_right_before_the_newest_message():
    msgs = conversation(60)
    msgs[5] = msg("u2", "user", "My bike's serial number is QX-7741, remember it.")
    msgs[-1] = msg("q", "user", "What was the serial number of my bike?")
    state = state_for(msgs, budget=3000, preference="fast", recall_source=source_of(msgs))
    for s in PLAN:
        s.apply(state)
    state.assemble()
    RECALL.apply(state)
    assert state.recalled is not None and "u2" in state.recalled.source_ids
    assert [p.origin for p in state.out[-2:]] == ["recall", "verbatim"]


def test_pack_stats_are_typed_and_match_the_dict():
    for r in (pack(conversation(3), budget=4000, model=MODEL),
              pack(conversation(60), budget=4000, preference="quality", model=MODEL),
              pack(conversation(60), budget=4000, preference="quality", model=MODEL,
                   summarize_now=extractive_summary)):
        assert isinstance(r.info, PackStats)
        assert r.stats == r.info.as_dict()
        assert list(r.stats) == STATS_KEYS == [f.name for f in dataclasses.fields(PackStats)]
        assert r.info.removed_ids == tuple(r.removed_ids) and r.info.window_start == r.window_start


def test_pack_stats_are_frozen_and_the_dict_is_a_copy():
    r = pack(conversation(40), budget=3000, model=MODEL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.info.tokens_after = 0  # type: ignore[misc]
    assert not hasattr(r.info, "__dict__")  # slots
    r.stats["removed_ids"].append("x")  # `stats` is a copy: editing it leaves the typed record alone
    r.stats["pack_ms"] = 1.0
    assert "x" not in r.info.removed_ids and "pack_ms" not in r.stats
    assert isinstance(r.info.as_dict()["removed_ids"], list)
