"""The window rule turn by turn, at every window size: a cut ends at the target (plus the newest round
when it alone is larger), so several turns append before the next cut. Conversations are replayed as
a chat does: the window start each pack returns is passed back."""

import random

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from optkit import MODEL, msg

from optimizer import ContextTooLargeError, pack
from optimizer.budget import target_tokens, trigger_tokens
from optimizer.tokens import REPLY_PRIMING
from optimizer.types import DEFAULT_CONFIG


def text_of(tokens: int) -> str:
    return " ".join(["word"] * max(1, tokens))  # "word" and " word" are one token each


def replay(budget: int, sizes: list[tuple[int, int]], preference: str):
    """Each turn: append the user message, pack with the stored window, yield (turn, result), append
    the reply of the given size."""
    msgs = [msg("sys", "system", "You are a helpful assistant.")]
    window_start = None
    for turn, (user, reply) in enumerate(sizes):
        msgs.append(msg(f"u{turn}", "user", text_of(user)))
        try:
            result = pack(msgs, budget=budget, preference=preference, model=MODEL, window_start=window_start,
                          summarizer_available=False)
        except ContextTooLargeError:
            return
        yield turn, result
        window_start = result.window_start
        msgs.append(msg(f"a{turn}", "assistant", text_of(reply)))


@st.composite
def chats(draw):
    budget = draw(st.integers(2_000, 200_000))
    rng = random.Random(draw(st.integers(0, 2**16)))
    # message sizes from 10 to 5,000 tokens, scaled so that the conversation outgrows the window
    turns = draw(st.integers(4, 40))
    scale = draw(st.sampled_from([0.02, 0.1, 0.5, 1.0]))
    sizes = [(max(10, min(5_000, int(rng.randint(10, 5_000) * scale))),
              max(10, min(5_000, int(rng.randint(10, 5_000) * scale)))) for _ in range(turns)]
    return budget, sizes


SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.data_too_large])


@SLOW
@given(chats(), st.sampled_from(["fast", "balanced", "quality"]))
# a first message past the budget: compressed on every turn, beside a window kept from the turn before
@example((2000, [(2090, 1595), (1709, 1184), (946, 1698), (1961, 593), (1638, 1251), (1387, 844), (285, 41),
                 (101, 1576)]), "balanced")
def test_a_cut_ends_at_the_target_plus_at_most_the_newest_round(chat, preference):
    budget, sizes = chat
    target = target_tokens(budget, DEFAULT_CONFIG, preference=preference)
    trigger = trigger_tokens(budget, DEFAULT_CONFIG, preference=preference)
    for turn, result in replay(budget, sizes, preference):
        info = result.info
        if not (info.optimization_applied and info.triggered):
            continue
        if {"sys", "u0", f"u{turn}"} & set(info.compressed_ids):
            # An emergency: the window is kept and the compressed must-keeps grow back into the room
            # under the trigger (truncate.give_back), so the request ends under the trigger, not the target.
            assert info.tokens_after < trigger
            continue
        newest = result.messages[-1].tokens
        static = sum(p.tokens for p in result.messages[:-1] if p.source_ids[0] in ("sys", "u0"))
        # the newest round always; older rounds only while they fit the target
        assert info.tokens_after <= max(target, static + REPLY_PRIMING) + newest


@SLOW
@given(chats(), st.sampled_from(["fast", "balanced"]))
def test_the_window_moves_only_when_growth_reaches_the_trigger(chat, preference):
    budget, sizes = chat
    trigger = trigger_tokens(budget, DEFAULT_CONFIG, preference=preference)
    previous = None
    for turn, result in replay(budget, sizes, preference):
        info = result.info
        # must-keeps compressed in an emergency are counted whole again on the next turn: not this rule
        emergency = previous is not None and {"sys", "u0", f"u{turn - 1}"} & set(previous.info.compressed_ids)
        moved = previous is not None and previous.window_start not in (None, info.window_start)
        if moved and not emergency:
            # a re-cut: the stored window plus what this turn added (as stored: sent compressed it is
            # smaller still) reached the trigger
            reply, user = sizes[turn - 1][1], sizes[turn][0]
            added = msg("r", "assistant", text_of(reply)).tokens + msg("u", "user", text_of(user)).tokens
            assert previous.info.tokens_after + added >= trigger
        previous = result


# Settings promise "fast: smallest context". Not turn by turn, nor over any few turns: the windows
# saw-tooth out of phase. In a 6-turn chat at 2,000 tokens fast cut at turn 5 (1,250 -> 500) and grew
# back to 1,252 while balanced, cutting only at turn 6 (1,000 -> 607), sent less over those two turns
# (4,616 tokens against 4,471 in all), which a property over short random chats found. What holds is
# the rule (fast trims earlier, to less: the test below and the cut tests above) and, over a long chat,
# fewer tokens per turn, checked here on long chats of realistic sizes.
@pytest.mark.parametrize("budget", [2_048, 4_096, 8_192])
@pytest.mark.parametrize("seed", [1, 2])
def test_fast_sends_the_smallest_context_of_the_three_over_a_long_chat(budget, seed):
    rng = random.Random(seed)
    sizes = [(rng.randint(50, 400), rng.randint(100, 600)) for _ in range(150)]
    sent = {p: sum(r.info.tokens_after for _, r in replay(budget, sizes, p)) for p in ("fast", "balanced", "quality")}
    assert sent["fast"] < sent["balanced"] and sent["fast"] < sent["quality"], sent


def test_fast_trims_earlier_with_the_same_gap_between_trigger_and_target():
    budget = 4096
    fast = trigger_tokens(budget, DEFAULT_CONFIG, preference="fast"), target_tokens(budget, DEFAULT_CONFIG,
                                                                                    preference="fast")
    balanced = trigger_tokens(budget, DEFAULT_CONFIG), target_tokens(budget, DEFAULT_CONFIG)
    assert fast[0] < balanced[0] and fast[1] < balanced[1]
    assert abs((fast[0] - fast[1]) - (balanced[0] - balanced[1])) <= 1


@pytest.mark.parametrize("budget", [10, 1000, 126_000])
def test_fast_lines_are_exact_percentages_of_a_budget(budget):
    # 0.8 - 0.1 is 0.7000000000000001 in floating point: the trigger must still be 70 % to the token.
    assert trigger_tokens(budget, DEFAULT_CONFIG, preference="fast") == budget * 7 // 10
    assert target_tokens(budget, DEFAULT_CONFIG, preference="fast") == budget * 4 // 10
    assert trigger_tokens(budget, DEFAULT_CONFIG) == budget * 8 // 10
    assert target_tokens(budget, DEFAULT_CONFIG) == budget // 2
