"""Hypothesis properties of pack() over random conversations, budgets and preferences."""

import dataclasses
import random

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from optkit import MODEL, msg, refeed, shape, source_of

from optimizer import (
    ContextTooLargeError,
    HistoryTotals,
    Msg,
    PackConfig,
    Summary,
    count_messages,
    extractive_summary,
    pack,
)
from optimizer.shape import bridge_tokens, shape_request
from optimizer.tokens import content_chars, encoding_for

# shrinking these inputs is slow and the failing example is readable enough without it
SHRINK_LIMITED = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target)
WORDS = ["the", "port", "is", "8443", "my", "cat", "Pixel", "deadline", "March", "server", "log", "error",
         "timeout", "please", "thanks", "we", "moved", "to", "Lisbon", "NOTE"]


@st.composite
def conversations(draw):
    def text(lo, hi):
        # a length and a seed rather than word by word: drawing every word makes generation slow
        n, seed = draw(st.integers(lo, hi)), draw(st.integers(0, 2**16))
        if seed % 31 == 0:  # now and then a long pasted log
            return "log:\n" + "\n".join(f"12:00:{i % 60:02d} worker error {i}" for i in range(50 + 4 * n))
        return " ".join(random.Random(seed).choices(WORDS, k=n))

    out = []
    if draw(st.booleans()):
        out.append(msg("sys", "system", text(3, 30)))
    rounds = draw(st.integers(0, 40))
    for r in range(rounds):
        out.append(msg(f"u{r}", "user", text(1, 60), pinned=draw(st.integers(0, 25)) == 0))
        for k in range(draw(st.integers(0, 3))):
            role = draw(st.sampled_from(["assistant", "assistant", "tool"]))
            out.append(msg(f"r{r}.{k}", role, text(1, 120), pinned=draw(st.integers(0, 40)) == 0))
        if draw(st.integers(0, 30)) == 0:
            out.append(msg(f"s{r}", "system", text(2, 20)))
    out.append(msg("q", "user", text(1, 30)))
    return out


# Texts the word lists above never make: empty and blank messages, multi-byte characters whose bytes a
# compression cut may split (emoji, a ZWJ family, CJK, a combining accent), pastes without spaces.
ODD_TEXTS = ["", " ", "\n\t ", "\u200b", "h\u00e9llo", "a\u0301", "\U0001f600",
             "\U0001f469\u200d\U0001f469\u200d\U0001f467",
             "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", "port 8443", "NOTE: keep", "x" * 40, "\U0001f680" * 25]
IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}}


@st.composite
def odd_conversations(draw):
    def content():
        text = "".join(draw(st.lists(st.sampled_from(ODD_TEXTS), max_size=draw(st.sampled_from([2, 8, 60])))))
        if draw(st.integers(0, 12)) == 0:  # a multi-part message with an image, which no compression shrinks
            return [{"type": "text", "text": text}, IMAGE]
        return text

    out = [msg("sys", "system", content())] if draw(st.booleans()) else []
    for r in range(draw(st.integers(0, 12))):
        out.append(msg(f"u{r}", "user", content(), pinned=draw(st.integers(0, 15)) == 0))
        for k in range(draw(st.integers(0, 2))):
            out.append(msg(f"r{r}.{k}", draw(st.sampled_from(["assistant", "tool"])), content()))
    out.append(msg("q", "user", content()))
    return out


def must_keep_positions(msgs):
    users = [i for i, m in enumerate(msgs) if m.role == "user"]
    keep = {i for i, m in enumerate(msgs) if m.role == "system" or m.pinned}
    return keep | {users[0], users[-1]}


def check(msgs, budget, result):
    out = result.messages
    # never over budget, and the reported figure is the real one
    sent = count_messages([{"role": p.role, "content": p.content} for p in out], model=MODEL)
    assert sent == result.stats["tokens_after"] <= budget or not result.stats["optimization_applied"]
    if result.stats["optimization_applied"]:
        assert sent <= budget
    pos = {m.id: i for i, m in enumerate(msgs)}
    # a recall block quotes old messages out of the flow, before the newest one: not a message kept in order
    singles = [p for p in out if p.origin not in ("summary", "recall")]
    order = [pos[p.source_ids[0]] for p in singles]
    assert order == sorted(order) and len(set(order)) == len(order)  # original order, no duplicates
    kept = dict(zip(order, singles, strict=True))
    must = must_keep_positions(msgs)
    verbatim_must = sum(msgs[i].tokens for i in must) + 3
    for i in must:  # system / pinned / first / newest: present, verbatim unless they could not fit
        assert i in kept
        if verbatim_must <= budget or not result.stats["optimization_applied"]:
            assert kept[i].content == msgs[i].content
    # the other messages sent are exactly those from the window start on: a suffix of whole rounds
    # (no split, never an orphaned reply first)
    static = {i for i, m in enumerate(msgs) if m.role == "system" or m.pinned}
    first_user = next(i for i, m in enumerate(msgs) if m.role == "user")
    window = [i for i in order if i not in static and i != first_user]
    if result.stats["optimization_applied"]:
        ws = pos[result.window_start]
        assert msgs[ws].role == "user" or ws == 0
        assert window == [i for i in range(ws, len(msgs)) if i not in static and i != first_user]
    else:
        assert order == list(range(len(msgs)))


@settings(max_examples=200, deadline=None, phases=SHRINK_LIMITED, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=conversations(), budget=st.integers(150, 6000), pref=st.sampled_from(["fast", "balanced", "quality"]),
       inline=st.booleans())
def test_pack_properties(msgs, budget, pref, inline):
    now = extractive_summary if inline else None
    try:
        result = pack(msgs, budget=budget, preference=pref, model=MODEL, summarize_now=now)
    except ContextTooLargeError as exc:
        assert exc.needed > budget and exc.budget == budget
        return
    check(msgs, budget, result)
    # deterministic
    again = pack(msgs, budget=budget, preference=pref, model=MODEL, summarize_now=now)
    assert shape(again.messages) == shape(result.messages) and again.stats == result.stats
    # packing the packed context again with the same budget changes nothing
    pins = frozenset(m.id for m in msgs if m.pinned)
    repacked = pack(refeed(result.messages, pinned_ids=pins), budget=budget, preference=pref, model=MODEL,
                    summarize_now=now)
    assert shape(repacked.messages) == shape(result.messages)


@settings(max_examples=100, deadline=None, phases=SHRINK_LIMITED, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=st.one_of(conversations(), odd_conversations()),
       budget=st.one_of(st.integers(300, 6000), st.integers(1, 299)),
       pref=st.sampled_from(["fast", "balanced", "quality"]), data=st.data())
def test_window_state_properties(msgs, budget, pref, data):
    """With any stored window start, the result still obeys every rule, and the start only moves forward."""
    start = data.draw(st.sampled_from([m.id for m in msgs]))
    try:
        result = pack(msgs, budget=budget, preference=pref, model=MODEL, window_start=start)
    except ContextTooLargeError:
        return
    check(msgs, budget, result)
    pos = {m.id: i for i, m in enumerate(msgs)}
    assert pos[result.window_start] >= pos[start]
    # the web app's partial view (static layer + messages from the window on + totals) packs the same
    first_user = next(i for i, m in enumerate(msgs) if m.role == "user")
    view = [m for i, m in enumerate(msgs)
            if i >= pos[start] or i == first_user or m.role == "system" or m.pinned]
    totals = HistoryTotals(messages=len(msgs), chars=sum(content_chars(m.content) for m in msgs),
                           tokens=sum(m.tokens for m in msgs))
    partial = pack(view, budget=budget, preference=pref, model=MODEL, window_start=start, history=totals)
    assert shape(partial.messages) == shape(result.messages)
    assert partial.window_start == result.window_start


@settings(max_examples=100, deadline=None, phases=SHRINK_LIMITED, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=conversations(), budget=st.integers(150, 6000), pref=st.sampled_from(["fast", "balanced", "quality"]),
       data=st.data())
def test_summary_properties(msgs, budget, pref, data):
    """With a summary passed (any coverage, any length), every rule still holds whatever the strategy;
    the summary is sent as one system message or not at all, and only summarize asks for another."""
    through = data.draw(st.sampled_from([m.id for m in msgs]))
    words = data.draw(st.integers(1, 600))
    summary = Summary(id="s", content="[Conversation summary \u2014 covers some messages]\n" + "gist " * words,
                      through_id=through)
    try:
        result = pack(msgs, budget=budget, preference=pref, model=MODEL, summary=summary)
    except ContextTooLargeError as exc:
        assert exc.needed > budget
        return
    check(msgs, budget, result)
    sent = [p for p in result.messages if p.origin == "summary"]
    assert len(sent) <= 1 and all(p.role == "system" and p.content == summary.content for p in sent)
    assert result.stats["summary_used"] == bool(sent)
    if result.stats["strategy_chosen"] != "summarize":
        assert result.summary_span is None
    again = pack(msgs, budget=budget, preference=pref, model=MODEL, summary=summary)
    assert shape(again.messages) == shape(result.messages) and again.stats == result.stats


@settings(max_examples=150, deadline=None, phases=SHRINK_LIMITED, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=conversations(), budget=st.integers(150, 6000), pref=st.sampled_from(["fast", "balanced", "quality"]))
def test_a_history_that_fits_the_budget_is_never_sent_larger(msgs, budget, pref):
    """A first cut frees room that recall may fill: never past what sending everything would take."""
    try:
        result = pack(msgs, budget=budget, preference=pref, model=MODEL, recall_source=source_of(msgs))
    except ContextTooLargeError:
        return
    stats = result.stats
    assert stats["tokens_after"] <= budget or not stats["optimization_applied"]
    if stats["tokens_before"] <= budget:
        assert stats["tokens_after"] <= stats["tokens_before"]
        assert stats["tokens_after"] < stats["tokens_before"] or not stats["optimization_applied"]


@settings(max_examples=200, deadline=None, phases=SHRINK_LIMITED, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=odd_conversations(), budget=st.one_of(st.integers(1, 60), st.integers(61, 600)),
       pref=st.sampled_from(["fast", "balanced", "quality"]), inline=st.booleans(), recall=st.booleans())
def test_odd_contents_and_tiny_budgets_keep_every_rule(msgs, budget, pref, inline, recall):
    """Blank, multi-byte and multi-part messages at budgets down to one token: every rule holds, or the
    must-keeps are refused with figures that show they could not fit."""
    try:
        result = pack(msgs, budget=budget, preference=pref, model=MODEL,
                      summarize_now=extractive_summary if inline else None,
                      recall_source=source_of([m for m in msgs if isinstance(m.content, str)]) if recall else None)
    except ContextTooLargeError as exc:
        assert exc.needed > budget and exc.budget == budget
        return
    check(msgs, budget, result)


# The app's "send everything that fits" setting (automatic optimization off): the trigger is the budget.
SEND_ALL_THAT_FITS = PackConfig(trigger_ratio=1.0, target_ratio=0.9, fast_headroom=0.0, fill_window_ratio=0.9)


def alternating(msgs):
    """`msgs` with only the messages that keep user and assistant alternating: nothing for shaping to
    merge, so the request as shaped costs what the history does, plus any user line."""
    out = []
    last = "assistant"  # so that the first kept turn is the user's
    for m in msgs:
        if m.role == "system" or (m.role in ("user", "assistant") and m.role != last):
            out.append(m)
            last = m.role if m.role != "system" else last
    while out[-1].role != "user":  # the newest message is a question
        out.pop()
    return out


@settings(max_examples=150, deadline=None, phases=SHRINK_LIMITED, suppress_health_check=[HealthCheck.too_slow])
@given(msgs=st.one_of(conversations(), conversations().map(alternating)), greeting=st.integers(1, 80),
       pinned=st.booleans(),
       budget=st.one_of(st.integers(150, 6000), st.integers(-40, 40).map(lambda d: ("near", d))),
       pref=st.sampled_from(["fast", "balanced", "quality"]), send_all=st.booleans(), first_user=st.booleans())
def test_an_assistant_first_history_goes_out_shaped_inside_the_budget(msgs, greeting, pinned, budget, pref, send_all,
                                                                       first_user):
    """An imported history may open with the assistant's greeting (pinned or not), and without the
    first user message kept a pinned reply may open the request; the request as shaped for the wire
    (a user line before it) still fits the budget, near the history's size too."""
    lead = next((k for k, m in enumerate(msgs) if m.role != "system"), len(msgs))
    msgs = [*msgs[:lead], msg("hello", "assistant", "Welcome! " * greeting, pinned=pinned), *msgs[lead:]]
    if isinstance(budget, tuple):  # within a few tokens of the whole history, where it only just fits
        budget = max(150, count_messages([{"role": m.role, "content": m.content} for m in msgs], model=MODEL)
                     + budget[1])
    config = dataclasses.replace(SEND_ALL_THAT_FITS if send_all else PackConfig(), keep_first_user=first_user)
    try:
        result = pack(msgs, budget=budget, preference=pref, model=MODEL, config=config)
    except ContextTooLargeError as exc:
        assert exc.needed > budget and exc.budget == budget
        return
    assert shape_request(result.messages, model=MODEL).tokens <= budget
    assert result.stats["budget"] == budget


def test_an_assistant_first_history_that_fills_the_budget_leaves_room_for_the_user_line():
    """With everything sent while it fits, a greeting-first history exactly the budget's size no longer
    fits once shaped, so it is cut; one smaller by the user line is sent whole."""
    msgs = [msg("hello", "assistant", "Welcome! Ask me anything."), msg("u0", "user", "Hi " * 40),
            msg("a0", "assistant", "Hello " * 40), msg("q", "user", "And now?")]
    whole = count_messages([{"role": m.role, "content": m.content} for m in msgs], model=MODEL)
    bridge = bridge_tokens(msgs, model=MODEL)
    assert bridge > 0
    for budget in (whole, whole + bridge - 1):
        result = pack(msgs, budget=budget, model=MODEL, config=SEND_ALL_THAT_FITS)
        assert result.stats["optimization_applied"]
        assert shape_request(result.messages, model=MODEL).tokens <= budget
    result = pack(msgs, budget=whole + bridge, model=MODEL, config=SEND_ALL_THAT_FITS)
    assert not result.stats["optimization_applied"]
    assert shape_request(result.messages, model=MODEL).tokens == whole + bridge


def test_room_for_the_user_line_is_made_only_when_the_request_opens_with_the_assistant():
    """A greeting the cut drops needs no user line: the must-keeps that fit the budget are packed, not
    refused for the room of a line that would never be sent."""
    msgs = [msg("sys", "system", "You are helpful."), msg("hello", "assistant", "Welcome! Ask me anything.")]
    msgs += [msg("u0", "user", "First question " + "alpha " * 60), msg("a0", "assistant", "Answer " + "beta " * 60)]
    for r in range(1, 8):
        msgs += [msg(f"u{r}", "user", f"Pinned fact {r} " + "gamma " * 60, pinned=True),
                 msg(f"a{r}", "assistant", f"Ok {r} " + "delta " * 60)]
    msgs.append(msg("q", "user", "And now? " + "eps " * 60))
    without = [m for m in msgs if m.id != "hello"]
    must = count_messages([{"role": m.role, "content": m.content} for m in without
                           if m.role == "system" or m.pinned or m.id in ("u0", "q")], model=MODEL)
    for budget in (must, must + 5):
        result = pack(msgs, budget=budget, model=MODEL)
        assert [p.role for p in result.messages][:2] == ["system", "user"]
        assert shape_request(result.messages, model=MODEL).tokens <= budget
        assert all(p.origin != "compressed" for p in result.messages)
    with pytest.raises(ContextTooLargeError) as refused:
        pack(msgs, budget=must - 1, model=MODEL)
    assert refused.value.needed > must - 1 == refused.value.budget


def test_a_request_opened_by_a_pinned_reply_makes_room_for_the_user_line():
    """Without the first user message kept, a pinned reply can open the request although the history
    opens with the user: the line shaping puts before it still fits the budget."""
    msgs = [msg("sys", "system", "You are helpful."), msg("u0", "user", "Hi " * 30),
            msg("a0", "assistant", "Pinned greeting answer. " * 10, pinned=True)]
    for r in range(1, 12):
        msgs += [msg(f"u{r}", "user", f"Question {r} " + "detail " * 30),
                 msg(f"a{r}", "assistant", f"Answer {r} " + "words here " * 30)]
    msgs.append(msg("q", "user", "And now? " + "context " * 400))
    for budget in range(460, 490):
        result = pack(msgs, budget=budget, model=MODEL, config=PackConfig(keep_first_user=False))
        assert shape_request(result.messages, model=MODEL).tokens <= budget, budget


PASTES = ["ls -la |\n/usr/bin/wc -l", "}\n// next block", "x = 1;\n/* note */", "cd /srv &&\n/opt/run.sh", "ok.\nDone"]


@settings(max_examples=60, deadline=None, phases=SHRINK_LIMITED, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**16), budget=st.integers(150, 4000), model=st.sampled_from(["gpt-4o-mini", "gpt-4"]),
       pref=st.sampled_from(["fast", "balanced", "quality"]))
def test_a_packed_request_fits_the_budget_by_tiktokens_own_count(seed, budget, model, pref):
    """Code and shell pastes (long texts are counted by lines): the request as packed, counted by the
    encoding itself rather than by the counting under test, is what stats say and fits the budget."""
    rng = random.Random(seed)
    msgs = [Msg(id="sys", role="system", content="You review code.")]
    for r in range(rng.randint(1, 12)):
        for role in ("user", "assistant"):
            text = "\n".join(rng.choice(PASTES) for _ in range(rng.randint(1, 120)))
            msgs.append(Msg(id=f"{role[0]}{r}", role=role, content=text))
    msgs.append(Msg(id="q", role="user", content="Which command fails?"))
    try:
        result = pack(msgs, budget=budget, preference=pref, model=model, recall_source=source_of(msgs))
    except ContextTooLargeError:
        return
    enc = encoding_for(model)
    sent = 3 + sum(3 + len(enc.encode_ordinary(p.role)) + len(enc.encode_ordinary(p.content)) for p in result.messages)
    assert sent == result.stats["tokens_after"]
    assert sent <= budget or not result.stats["optimization_applied"]
