"""A must-keep over the budget (a pasted document as the newest message, a long system prompt) is cut
only as far as the budget needs. The emergency cut each one to the oversize line, a quarter of the
budget, whatever room the rest of the request left: a log three times the budget went out at a
quarter of it beside half the budget unused. What it may now take is the room under the trigger, the
line a conversation grows to before a cut; the room above stays for recall."""

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from optkit import MODEL, conversation, msg

from optimizer import count_message, pack

WORDS = ["port", "8443", "timeout", "retry", "north", "fence", "error", "worker", "queue", "tomato"]


def _log(rng: random.Random, lines: int) -> str:
    return "\n".join(f"{i:05d} {' '.join(rng.choices(WORDS, k=rng.randint(3, 12)))}" for i in range(lines))


def _sent(result) -> dict:
    return {p.source_ids[0]: p for p in result.messages if p.origin != "recall"}


def test_a_paste_over_the_budget_takes_the_room_the_rest_leaves():
    paste = msg("q", "user", "Why does the worker stop?\n" + _log(random.Random(7), 2000))
    msgs = [*conversation(6), paste]
    r = pack(msgs, budget=4000, model=MODEL)
    q = _sent(r)["q"]

    assert q.origin == "compressed" and r.info.tokens_after <= 4000
    assert q.tokens > 2 * 1000  # it was cut to 1,000 (the oversize share, 25 %) with 2,000 left free
    # under the trigger, as any request after a cut: what is left above it is recall's
    assert r.info.tokens_after < r.info.trigger_tokens
    assert q.content.startswith("Why does the worker stop?") and "omitted" in q.content
    # the rest of the request is what it was: the window, the system prompt, the first request
    before = pack([*msgs[:-1], msg("q", "user", "short")], budget=4000, model=MODEL)
    assert [m for m in _sent(r) if m != "q"] == [m for m in _sent(before) if m != "q"]


def test_two_oversized_must_keeps_share_the_room():
    rng = random.Random(3)
    msgs = [msg("sys", "system", "Rules:\n" + _log(rng, 900)), msg("u0", "user", "hello"),
            msg("a0", "assistant", "hi"), msg("q", "user", "Look:\n" + _log(rng, 900))]
    r = pack(msgs, budget=3000, model=MODEL)
    sent = _sent(r)

    assert sent["sys"].origin == sent["q"].origin == "compressed"
    assert r.info.tokens_after <= 3000 and min(sent["sys"].tokens, sent["q"].tokens) > 750
    assert abs(sent["sys"].tokens - sent["q"].tokens) < 100  # one limit for both, cut by lines


def test_a_must_keep_that_fits_under_the_trigger_after_the_cut_is_sent_whole():
    # Over the oversize line but under what the rest leaves: the window is cut for it, and it goes whole.
    paste = msg("q", "user", "Check this:\n" + _log(random.Random(5), 150))
    msgs = [*conversation(40), paste]
    r = pack(msgs, budget=3000, model=MODEL)

    assert count_message(paste, model=MODEL) > 750
    assert _sent(r)["q"].origin == "verbatim" and r.info.tokens_after <= 3000


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds=st.integers(0, 12), lines=st.integers(1, 1500), budget=st.integers(400, 6000),
       seed=st.integers(0, 2**16), preference=st.sampled_from(["fast", "balanced", "quality"]))
def test_a_compressed_newest_message_would_not_fit_whole(rounds, lines, budget, seed, preference):
    rng = random.Random(seed)
    msgs = [*conversation(rounds, words=rng.randint(5, 60)), msg("q", "user", "Read:\n" + _log(rng, lines))]
    try:
        r = pack(msgs, budget=budget, model=MODEL, preference=preference)
    except Exception as exc:  # a budget too small for the must-keeps even compressed: said, not sent
        assert type(exc).__name__ == "ContextTooLargeError"
        return
    q = _sent(r)["q"]
    assert r.info.tokens_after <= budget
    if q.origin == "compressed":
        whole = r.info.tokens_after - q.tokens + count_message(msgs[-1], model=MODEL)
        # either it would not fit whole under the trigger, or the emergency's floor (the oversize line)
        # is all it could have, and then it is at most that
        assert whole >= r.info.trigger_tokens or q.tokens <= max(32, budget // 4)
