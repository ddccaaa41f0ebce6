"""The newest message is always sent, whatever its role: the product's hard rule names it beside the
system prompt, the pins and the original request. A conversation may end with a reply (a regenerated
answer), a tool result (an agent loop), a system note, an image or a paste far over the budget; the
newest user message was the only one the packer knew to keep, and the others were left out first."""

import json
import random

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from optkit import MODEL, msg, source_of

from optimizer import ContextTooLargeError, Msg, Summary, count_message, extractive_summary, pack
from optimizer.cli import main

SHRINK_LIMITED = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target)
WORDS = ["the", "port", "is", "8443", "tomato", "bed", "north", "fence", "Roma", "soil", "log", "error"]
IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}}


def _text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(lo, hi)))


def _counted(m: Msg) -> Msg:
    return Msg(id=m.id, role=m.role, content=m.content, pinned=m.pinned, name=m.name,
               tokens=count_message(m, model=MODEL))


@st.composite
def conversations_ending_anyhow(draw):
    """Rounds of a user message and replies, then a last message of any role, size and shape."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    out = [msg("sys", "system", _text(rng, 3, 120))] if draw(st.booleans()) else []
    if draw(st.integers(0, 5)) == 0:  # an imported chat may open with the assistant
        out.append(msg("hello", "assistant", _text(rng, 1, 40)))
    for r in range(draw(st.integers(0, 15))):
        out.append(msg(f"u{r}", "user", _text(rng, 1, 80), pinned=draw(st.integers(0, 20)) == 0))
        for k in range(draw(st.integers(0, 3))):
            out.append(msg(f"r{r}.{k}", draw(st.sampled_from(["assistant", "tool"])), _text(rng, 1, 150)))
    if draw(st.booleans()):
        out.append(msg("q", "user", _text(rng, 1, 60)))
        for k in range(draw(st.integers(0, 3))):  # replies after the newest question
            out.append(msg(f"after{k}", draw(st.sampled_from(["assistant", "tool"])), _text(rng, 1, 200)))
    role = draw(st.sampled_from(["assistant", "tool", "system", "user"]))
    size = draw(st.sampled_from([1, 10, 60, 400, 3000]))
    content = _text(rng, size, size)
    if draw(st.integers(0, 4)) == 0:
        content = [{"type": "text", "text": content}, IMAGE]
    newest = Msg(id="newest", role=role, content=content, name="lookup" if role == "tool" else None)
    return [*out, _counted(newest)]


def _sent_ids(result) -> list[str]:
    """Ids sent as themselves (or compressed): a recall quote or a summary stands for others."""
    return [p.source_ids[0] for p in result.messages if p.origin not in ("summary", "recall")]


@settings(max_examples=300, deadline=None, phases=SHRINK_LIMITED, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=conversations_ending_anyhow(), budget=st.one_of(st.integers(40, 600), st.integers(601, 8000)),
       pref=st.sampled_from(["fast", "balanced", "quality"]), inline=st.booleans(), recall=st.booleans(),
       data=st.data())
def test_the_newest_message_is_always_sent(msgs, budget, pref, inline, recall, data):
    window_start = data.draw(st.one_of(st.none(), st.sampled_from([m.id for m in msgs])))
    try:
        result = pack(msgs, budget=budget, preference=pref, model=MODEL, window_start=window_start,
                      summarize_now=extractive_summary if inline else None,
                      recall_source=source_of([m for m in msgs if isinstance(m.content, str)]) if recall else None)
    except ContextTooLargeError as exc:
        assert exc.needed > budget and exc.budget == budget
        return
    sent = _sent_ids(result)
    assert "newest" in sent, (budget, sent, result.removed_ids)
    assert sent[-1] == "newest"  # and it stays last: nothing is sent after what was said last
    assert "newest" not in result.removed_ids
    if result.stats["optimization_applied"]:
        assert result.stats["tokens_after"] <= budget


@settings(max_examples=100, deadline=None, phases=SHRINK_LIMITED, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=conversations_ending_anyhow(), budget=st.integers(40, 3000), data=st.data())
def test_a_passed_summary_never_stands_in_for_the_newest_message(msgs, budget, data):
    through = data.draw(st.sampled_from([m.id for m in msgs]))
    summary = Summary(id="s", content="[Conversation summary]\n" + "gist " * data.draw(st.integers(1, 300)),
                      through_id=through)
    try:
        result = pack(msgs, budget=budget, model=MODEL, summary=summary)
    except ContextTooLargeError as exc:
        assert exc.needed > budget
        return
    assert _sent_ids(result)[-1] == "newest"


def _garden(last_role: str) -> list[Msg]:
    msgs = [msg("sys", "system", "You are a careful assistant. " * 20),
            msg("u0", "user", "Please help me plan the garden. " * 10)]
    for r in range(1, 6):
        msgs += [msg(f"u{r}", "user", f"Question {r} about the beds. " * 8),
                 msg(f"a{r}", "assistant", f"Answer {r} about soil. " * 30)]
    msgs += [msg("q", "user", "Which tomato variety should I plant in the north bed? " * 3),
             msg("call", "assistant", "Let me look that up."),
             msg("newest", last_role, "Result: " + "Roma tomatoes near the fence. " * 40)]
    return msgs


@pytest.mark.parametrize("last_role", ["assistant", "tool"])
def test_a_reply_with_no_room_beside_the_must_keeps_is_kept_as_they_would_be(last_role):
    # The must-keeps (system, first request, question) took 241 of 265 tokens, and a tool result after
    # them was left out whole: the model was asked to go on from a call whose result it never saw.
    # Now it is kept like the newest question: the older replies go, and the oversized must-keeps are
    # compressed (the emergency) to make room for it.
    result = pack(_garden(last_role), budget=265, model=MODEL)
    assert _sent_ids(result)[-1] == "newest" and "call" in result.removed_ids
    assert result.info.tokens_after <= 265
    assert "newest" in result.info.compressed_ids


def test_the_cli_sends_the_newest_tool_result(tmp_path, capsys):
    request = {"id": "r1", "budget": 265, "messages": [
        {"id": m.id, "role": m.role, "content": m.content} for m in _garden("tool")]}
    path = tmp_path / "req.json"
    path.write_text(json.dumps(request), encoding="utf-8")
    assert main(["pack", "--input", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["messages"][-1]["source_ids"] == ["newest"]
    assert "newest" not in out["stats"]["removed_ids"]
