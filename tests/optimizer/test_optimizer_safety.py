"""The design notes' helper API: recommendation, safety check, optimize_chat_context."""

import pytest

from optimizer import (
    ContextTooLargeError,
    check_context_safety,
    count_messages,
    get_optimization_recommendation,
    optimize_chat_context,
)
from optimizer.safety import urgency_for


def chat(rounds, words=30):
    out = [{"role": "system", "content": "Be helpful."}]
    for r in range(rounds):
        out += [{"role": "user", "content": f"q{r} " + "word " * words},
                {"role": "assistant", "content": f"a{r} " + "word " * words}]
    return out


@pytest.mark.parametrize(("ratio", "level"), [(0.1, "none"), (0.6, "low"), (0.85, "medium"), (0.95, "high"),
                                              (1.0, "critical"), (3, "critical")])
def test_urgency_levels(ratio, level):
    assert urgency_for(ratio) == level


def test_recommendation():
    msgs = chat(20)
    tokens = count_messages(msgs, model="gpt-4o")
    rec = get_optimization_recommendation(msgs, budget=tokens * 2, model="gpt-4o", preference="quality")
    assert rec["tokens"] == tokens and rec["usage_ratio"] == 0.5
    assert rec["urgency"] == "none" and rec["needs_optimization"] is False and rec["recommended_strategy"] == "none"
    rec = get_optimization_recommendation(msgs, budget=tokens - 1, model="gpt-4o", preference="quality")
    assert rec["urgency"] == "critical" and rec["needs_optimization"] is True
    assert rec["recommended_strategy"] == "summarize" and rec["estimated"] is False


def test_safety_reserves_room_for_tools():
    msgs = chat(2)
    tokens = count_messages(msgs, model="gpt-4o-mini")
    ok, text = check_context_safety(msgs, tokens + 200)
    assert ok and f"{tokens:,} tokens" in text
    ok, text = check_context_safety(msgs, tokens + 200, tools_count=2)
    assert not ok and "300 reserved for 2 tools" in text and "by 100" in text


def test_optimize_chat_context():
    msgs = chat(40)
    out, stats = optimize_chat_context(msgs, budget=1500, preference="fast", model="gpt-4o-mini")
    assert out[0] == msgs[0] and out[-1] == msgs[-1]
    assert stats["optimization_applied"] and stats["messages_after"] == len(out)
    assert count_messages(out, model="gpt-4o-mini") == stats["tokens_after"] <= 1500
    with pytest.raises(ValueError, match="unknown role"):
        optimize_chat_context([{"role": "robot", "content": "x"}], budget=100)
    with pytest.raises(ContextTooLargeError):
        optimize_chat_context([{"role": "system", "content": "x " * 20, "pinned": True}] * 10, budget=100)
