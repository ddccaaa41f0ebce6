"""What a packed turn knows about the next request without packing again: the `done` gauge and
whether a summary is due ahead of need. The trigger judges the context without its recall block."""

from __future__ import annotations

from typing import Any

from chatapp.chat.turn_types import ChatTurn
from chatapp.providers.llm import LLMTarget

TARGET = LLMTarget(base_url="http://127.0.0.1:9/v1", model="gpt-4o-mini", api_key="", temperature=0.0,
                   max_output_tokens=1_000, context_window=11_000, offline=False, label="test")


def _turn(*, tokens: int, recall: int | None, trigger: int = 8_000, question: int = 20) -> ChatTurn:
    context: dict[str, Any] = {
        "tokens": tokens, "budget": 10_000, "history_tokens": 50_000, "window_start_id": 41, "strategy": "truncate",
        "estimated": False, "summary_through_id": None, "summary_quota_reached": False, "prompt_shortened": False,
        "shortened_message_ids": [],
        "recall": None if recall is None else {"messages": 4, "hits": 2, "tokens": recall, "terms": [], "ids": []},
    }
    return ChatTurn(conversation_id=1, user_message_id=2, reply_id=3, record_id=4, target=TARGET,
                    user_message={"token_count": question}, context=context, title="", user_id=1, messages=[],
                    trigger_tokens=trigger)


def test_below_the_trigger_the_gauge_is_this_context_plus_the_reply():
    gauge = _turn(tokens=7_000, recall=None).gauge_without_repacking(reply_tokens=500)
    assert gauge is not None
    assert (gauge["tokens"], gauge["history_tokens"], gauge["window_start_id"]) == (7_500, 50_500, 41)
    assert _turn(tokens=7_600, recall=None).gauge_without_repacking(reply_tokens=500) is None  # 8,100: repack


def test_a_recall_block_over_the_trigger_does_not_call_for_a_repack():
    # 7,600 sent, 1,500 of them quotes: the window (6,100) plus the reply stays under the trigger,
    # so the next request keeps its window and the gauge needs no second packing.
    gauge = _turn(tokens=7_600, recall=1_500).gauge_without_repacking(reply_tokens=500)
    assert gauge is not None and gauge["tokens"] == 8_100
    # The window itself at the trigger: the next request cuts, so the gauge repacks.
    assert _turn(tokens=9_100, recall=1_500).gauge_without_repacking(reply_tokens=500) is None
    # Over the budget with the block: the block would be cut to the room left, so it repacks too.
    assert _turn(tokens=9_900, recall=3_000, trigger=9_000).gauge_without_repacking(reply_tokens=500) is None


def test_a_summary_is_due_ahead_only_when_the_window_would_cross_the_trigger():
    # The next exchange is assumed as large as this one: 20 + 500.
    assert _turn(tokens=7_000, recall=None).summary_ahead_due(reply_tokens=500) == 520
    assert _turn(tokens=6_900, recall=None).summary_ahead_due(reply_tokens=500) is None
    # The same 7,000 with 1,500 of quotes: the window is 5,500, far from the trigger.
    assert _turn(tokens=7_000, recall=1_500).summary_ahead_due(reply_tokens=500) is None
    assert _turn(tokens=8_500, recall=1_500).summary_ahead_due(reply_tokens=500) == 520
