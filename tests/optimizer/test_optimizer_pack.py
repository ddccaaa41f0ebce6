"""pack(): layout, trigger/target/window state, compression, summaries, partial views."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from optkit import MODEL, conversation, msg, refeed, shape

from optimizer import (
    ContextTooLargeError,
    HistoryTotals,
    Msg,
    PackConfig,
    Summary,
    count_message,
    count_messages,
    extractive_summary,
    pack,
)
from optimizer.packing import NO_CUT_REASON
from optimizer.tokens import encoding_for


def sent_tokens(result):
    return count_messages([{"role": p.role, "content": p.content} for p in result.messages], model=MODEL)


def ids(result):
    return [p.source_ids[0] for p in result.messages if p.origin != "summary"]


# A stored summary of a 60-message conversation's first 40 messages.
SUMMARY_THROUGH_A19 = Summary(
    id="s1",
    content="[Conversation summary — covers 40 messages, 9,000 → 300 characters]\nUser: my cat is called Pixel.",
    through_id="a19",
)


def test_below_trigger_everything_unchanged():
    msgs = conversation(3)
    r = pack(msgs, budget=4000, preference="quality", model=MODEL)
    assert shape(r.messages) == [(m.role, m.content) for m in msgs]
    assert r.stats["optimization_applied"] is False
    assert r.stats["strategy_chosen"] == "none"
    assert r.window_start is None and r.summary_span is None
    assert r.stats["tokens_before"] == r.stats["tokens_after"] == count_messages(msgs, model=MODEL)
    assert r.stats["messages_removed"] == 0 and r.stats["removed_ids"] == []


def test_over_trigger_without_state_cuts_to_target():
    msgs = conversation(40)
    budget = 3000
    r = pack(msgs, budget=budget, preference="fast", model=MODEL)
    assert r.stats["triggered"] and r.stats["optimization_applied"]
    assert r.stats["strategy_chosen"] == "truncate"
    assert sent_tokens(r) == r.stats["tokens_after"] <= budget // 2
    kept = ids(r)
    assert kept[:2] == ["sys", "u0"]  # system + original request
    assert kept[-1] == "q"
    assert kept[2].startswith("u") and r.window_start == kept[2]
    assert r.stats["messages_removed"] == len(msgs) - len(kept)
    assert set(r.removed_ids) == {m.id for m in msgs} - set(kept)


def test_window_state_gives_a_stable_prefix_until_the_trigger_fires():
    msgs = conversation(40)
    budget = 3000
    first = pack(msgs, budget=budget, preference="fast", model=MODEL)
    state, previous = first.window_start, first
    moved_at = None
    for turn in range(40):
        msgs = [*msgs, msg(f"x{turn}", "assistant", "Reply text " * 20), msg(f"y{turn}", "user", f"Next {turn}?")]
        r = pack(msgs, budget=budget, preference="fast", model=MODEL, window_start=state)
        assert r.stats["tokens_after"] <= budget
        if not r.stats["triggered"]:
            assert r.window_start == state
            # the reason is this turn's: nothing was cut; the selector's choice is for the next cut
            assert r.stats["strategy_reason"].startswith(NO_CUT_REASON + "; at the next cut: ")
            prev = shape(previous.messages)
            assert shape(r.messages)[: len(prev)] == prev  # the previous prompt is an exact prefix
        else:
            moved_at = turn
            assert r.stats["tokens_after"] <= r.stats["target_tokens"]
            assert r.stats["strategy_reason"] == r.decision.reason
            ids_now = [m.id for m in msgs]
            assert ids_now.index(r.window_start) > ids_now.index(state)
            break
        previous = r
    assert moved_at is not None and moved_at > 3  # several turns reuse the prefix before it moves


def test_minimum_recent_window_may_exceed_target():
    msgs = conversation(60, words=200)  # 122 messages: at least 4 rounds when the budget allows
    r = pack(msgs, budget=6000, preference="fast", model=MODEL)
    kept = ids(r)
    rounds = [i for i in kept if i.startswith("u") and i != "u0"] + ["q"]
    assert len(rounds) >= 4
    assert r.stats["tokens_after"] <= 6000


def test_stale_window_start_on_a_reply_is_moved_to_the_next_round():
    msgs = conversation(40)
    r = pack(msgs, budget=100_000, preference="fast", model=MODEL, window_start="a30")
    assert r.window_start == "u31"
    assert ids(r)[2] == "u31"


def test_oversized_message_sent_as_head_and_tail():
    lines = [f"2026-03-01 12:00:{i % 60:02d} worker-1 nginx: timeout after 30s (request {i:08x})" for i in range(400)]
    lines[200] = "NOTE The staging server listens on port 7715."
    log = "Here's the log:\n```\n" + "\n".join(lines) + "\n```\nAnything odd?"
    msgs = [*conversation(10), msg("log", "user", log), msg("ack", "assistant", "Let me look."),
            msg("q2", "user", "Well?")]
    budget = 4000
    original = msgs[-3]
    r = pack(msgs, budget=budget, preference="fast", model=MODEL)
    packed = next(p for p in r.messages if p.source_ids == ("log",))
    assert packed.origin == "compressed"
    assert packed.tokens <= budget * 0.25
    assert packed.content.startswith("Here's the log:")
    assert packed.content.endswith("Anything odd?")
    assert "NOTE The staging server listens on port 7715." in packed.content
    assert "lines," in packed.content and "tokens omitted ...]" in packed.content
    assert msgs[-3] is original and original.content == log
    assert r.stats["compressed_ids"] == ["log"]
    assert sent_tokens(r) == r.stats["tokens_after"] <= budget


def test_must_keeps_that_cannot_fit_raise_with_numbers():
    # ten pinned notes of ~200 tokens: none is oversized (250 = 25 % of 1,000), together they cannot fit
    msgs = [msg("sys", "system", "Be brief.")]
    msgs += [msg(f"p{i}", "user", "note " * 200, pinned=True) for i in range(10)]
    msgs += [msg("q", "user", "hi")]
    with pytest.raises(ContextTooLargeError) as info:
        pack(msgs, budget=1000, model=MODEL)
    assert info.value.budget == 1000 and info.value.needed > 1000
    assert "1,000" in str(info.value)


def test_a_budget_too_small_to_compress_a_must_keep_into_raises_instead_of_sending_a_fragment():
    # 25 % of 60 tokens leaves an oversized newest message less room than the omission marker needs: it
    # went out as "[... 101 to", the question gone; it is reported with the numbers instead.
    question = "Which of the three bikes in the shed needs new brakes before the trip on Saturday? " * 15
    msgs = [msg("u0", "user", "hi"), msg("a0", "assistant", "hello"), msg("q", "user", question)]
    with pytest.raises(ContextTooLargeError) as info:
        pack(msgs, budget=60, model=MODEL)
    assert info.value.budget == 60 and info.value.needed > 60
    # With room for the marker and some of its words, it is still sent compressed.
    r = pack(msgs, budget=200, model=MODEL)
    assert r.messages[-1].origin == "compressed" and r.messages[-1].content.startswith("Which of the three bikes")
    assert sent_tokens(r) <= 200


def test_a_refusal_never_names_a_need_the_budget_could_hold():
    # A greeting opens the one round, so it cannot be cut, and the request as shaped needs a user line
    # before it: 42 tokens in all. The refusal counted only the must-keeps (the system note) and said
    # "need 36 tokens but the budget is 40", a need the budget holds.
    msgs = [msg("hello", "assistant", "8443"),
            msg("note", "system", "the Roma 8443 tomato tomato north port port port log")]
    for budget in range(26, 42):
        with pytest.raises(ContextTooLargeError) as info:
            pack(msgs, budget=budget, model=MODEL)
        assert info.value.needed > budget == info.value.budget
    assert sent_tokens(pack(msgs, budget=42, model=MODEL)) <= 42


def test_oversized_system_prompt_is_compressed_only_when_nothing_else_helps():
    msgs = [msg("sys", "system", "\n".join(f"rule {i}: be nice" for i in range(600))), msg("q", "user", "hi")]
    r = pack(msgs, budget=1000, model=MODEL)
    assert r.messages[0].origin == "compressed" and r.stats["tokens_after"] <= 1000


def test_oversized_must_keep_is_compressed_only_when_needed():
    big = "\n".join(f"line {i} of the original request with some words" for i in range(300))
    msgs = [msg("sys", "system", "Be brief."), msg("u0", "user", big), msg("a0", "assistant", "ok"),
            msg("q", "user", "go on")]
    r = pack(msgs, budget=1000, model=MODEL)
    assert [p.origin for p in r.messages][1] == "compressed"
    assert r.stats["tokens_after"] <= 1000
    roomy = pack(msgs, budget=6000, model=MODEL)
    assert roomy.messages[1].content == big


def test_summarize_layout_with_existing_summary_and_span():
    msgs = conversation(60)
    r = pack(msgs, budget=4000, preference="quality", model=MODEL, summary=SUMMARY_THROUGH_A19)
    assert r.stats["strategy_chosen"] == "summarize"
    origins = [p.origin for p in r.messages]
    assert origins[:3] == ["verbatim", "verbatim", "summary"]
    assert r.messages[2].role == "system" and r.messages[2].content == SUMMARY_THROUGH_A19.content
    assert r.messages[3].source_ids[0] == r.window_start
    span = r.summary_span
    assert span.after_id == "a19"
    assert span.ids[0] == "u20" and span.through_id == span.ids[-1]
    assert span.ids[-1] == msgs[[m.id for m in msgs].index(r.window_start) - 1].id
    assert span.tokens == sum(m.tokens for m in msgs if m.id in span.ids)
    assert r.stats["summary_needed"] and r.stats["summary_used"]
    assert sent_tokens(r) == r.stats["tokens_after"] <= 4000


def test_summarize_without_summary_truncates_and_asks_for_one():
    msgs = conversation(60)
    r = pack(msgs, budget=4000, preference="quality", model=MODEL)
    assert r.stats["strategy_chosen"] == "summarize"
    assert all(p.origin != "summary" for p in r.messages)
    assert r.summary_span.after_id is None and r.summary_span.ids[0] == "a0"
    assert r.stats["summary_needed"] and not r.stats["summary_generated"]


def test_summarize_now_covers_the_evicted_history():
    msgs = conversation(60)
    msgs[11] = msg("u5", "user", "By the way, my cat is called Pixel. " + msgs[11].content)
    r = pack(msgs, budget=4000, preference="quality", model=MODEL, summarize_now=extractive_summary)
    summary = next(p for p in r.messages if p.origin == "summary")
    assert summary.content.startswith("[Conversation summary — covers ")
    assert "my cat is called Pixel" in summary.content
    assert "u5" in summary.source_ids and "u0" not in summary.source_ids
    assert r.summary_span is None and r.stats["summary_generated"]
    assert r.new_summary is not None and r.new_summary.through_id == summary.source_ids[-1]
    # the window is cut to the target as without a summary; the summary comes on top, under the trigger
    assert sent_tokens(r) == r.stats["tokens_after"] < 0.8 * 4000
    assert r.stats["tokens_after"] - summary.tokens <= 4000 // 2


@pytest.mark.parametrize("preference", ["fast", "balanced", "quality"])
def test_a_summary_is_sent_whatever_the_strategy(preference):
    # The app after a manual compaction: the stored window has moved past what the summary covers,
    # and the request is packed from a partial view (static layer + window) with history totals.
    full = conversation(6)  # system, 6 rounds, the final question: 14 messages
    text = "[Conversation summary \u2014 covers messages 2\u20138]\nUser: my cat is called Pixel."
    summary = Summary(id="s", content=text, through_id="a3")
    view = [full[0], full[1], *full[[m.id for m in full].index("u4"):]]
    totals = HistoryTotals(messages=len(full), chars=sum(len(m.content) for m in full),
                           tokens=sum(m.tokens for m in full))
    r = pack(view, budget=8000, preference=preference, model=MODEL, window_start="u4", summary=summary,
             history=totals)
    assert [p.origin for p in r.messages].count("summary") == 1
    assert r.messages[2].content == text and r.stats["summary_used"]
    assert ids(r) == ["sys", "u0", "u4", "a4", "u5", "a5", "q"]
    assert sent_tokens(r) == r.stats["tokens_after"] <= 8000
    if r.stats["strategy_chosen"] == "truncate":  # truncation never asks for another summary
        assert r.summary_span is None and not r.stats["summary_needed"]


def test_truncate_uses_a_summary_that_fits_and_only_summarize_asks_for_more():
    msgs = conversation(60)
    fast = pack(msgs, budget=4000, preference="fast", model=MODEL, summary=SUMMARY_THROUGH_A19)
    assert fast.stats["strategy_chosen"] == "truncate"
    assert [p.origin for p in fast.messages][:3] == ["verbatim", "verbatim", "summary"]
    assert fast.summary_span is None and fast.stats["summary_used"]
    quality = pack(msgs, budget=4000, preference="quality", model=MODEL, summary=SUMMARY_THROUGH_A19)
    assert quality.summary_span is not None and quality.summary_span.after_id == "a19"
    assert sent_tokens(fast) == fast.stats["tokens_after"] <= 4000


def test_a_summary_too_large_to_fit_gives_its_messages_back_to_the_window():
    msgs = conversation(60)
    text = "[Conversation summary \u2014 covers 110 messages]\n" + "a very long summary " * 1200
    summary = Summary(id="s1", content=text, through_id="a55")
    r = pack(msgs, budget=4000, preference="fast", model=MODEL, summary=summary)
    assert not r.stats["summary_used"] and all(p.origin != "summary" for p in r.messages)
    pos = [m.id for m in msgs]
    assert pos.index(r.window_start) < pos.index("u56")  # the window is chosen as if no summary existed
    assert sent_tokens(r) == r.stats["tokens_after"] <= 4000


def test_partial_view_with_history_totals():
    full = conversation(60)
    first = pack(full, budget=4000, preference="fast", model=MODEL)
    start = [m.id for m in full].index(first.window_start)
    view = [full[0], full[1], *full[start:]]
    totals = HistoryTotals(messages=len(full), chars=sum(len(m.content) for m in full),
                           tokens=sum(m.tokens for m in full))
    r = pack(view, budget=4000, preference="fast", model=MODEL, window_start=first.window_start, history=totals)
    assert shape(r.messages) == shape(first.messages)
    assert r.stats["messages_before"] == len(full)
    assert r.stats["messages_removed"] == len(full) - len(r.messages)


def test_partial_view_span_is_identified_by_ids():
    full = conversation(60)
    summary = Summary(id="s", content="[Conversation summary — covers 2 messages, 10 → 5 characters]\nx",
                      through_id="a1")
    state = pack(full, budget=5000, preference="quality", model=MODEL, summary=summary).window_start
    start = [m.id for m in full].index(state)
    grown = [*full, *(msg(f"n{i}", "user" if i % 2 == 0 else "assistant", "more words " * 60) for i in range(30))]
    view = [grown[0], grown[1], *grown[start:]]
    totals = HistoryTotals(messages=len(grown), chars=10**6, tokens=sum(m.tokens for m in grown))
    r = pack(view, budget=5000, preference="quality", model=MODEL, window_start=state, summary=summary,
             history=totals)
    assert r.stats["triggered"]
    assert r.summary_span.after_id == "a1"
    assert r.summary_span.ids[0] == state  # the evicted messages in view start at the old window


def test_counts_are_used_when_handed_in_and_computed_otherwise():
    counted = conversation(30)
    uncounted = [Msg(id=m.id, role=m.role, content=m.content, pinned=m.pinned) for m in counted]
    a = pack(counted, budget=3000, model=MODEL)
    b = pack(uncounted, budget=3000, model=MODEL)
    assert shape(a.messages) == shape(b.messages) and a.stats == b.stats
    fake = [dataclasses.replace(m, tokens=1) for m in counted]  # stored counts are trusted, not recounted
    assert pack(fake, budget=3000, model=MODEL).stats["optimization_applied"] is False


def test_pinned_messages_kept_verbatim_anywhere():
    msgs = conversation(60)
    msgs[21] = msg("u10", "user", msgs[21].content, pinned=True)
    r = pack(msgs, budget=3000, preference="fast", model=MODEL)
    pinned = [p for p in r.messages if p.source_ids == ("u10",)]
    assert pinned and pinned[0].origin == "pinned" and pinned[0].content == msgs[21].content
    assert "a10" not in ids(r)


def test_trigger_and_target_are_configurable():
    msgs = conversation(20)
    total = count_messages(msgs, model=MODEL)
    cfg = PackConfig(trigger_ratio=0.95, target_ratio=0.3)
    assert pack(msgs, budget=int(total / 0.9), model=MODEL, config=cfg).stats["optimization_applied"] is False
    r = pack(msgs, budget=int(total / 0.96), model=MODEL, config=cfg)
    assert r.stats["triggered"] and r.stats["target_tokens"] == int(int(total / 0.96) * 0.3)


def test_keep_first_user_is_configurable():
    msgs = conversation(40)
    r = pack(msgs, budget=3000, model=MODEL, config=PackConfig(keep_first_user=False))
    assert "u0" not in ids(r)


def test_bad_arguments():
    with pytest.raises(ValueError, match="budget"):
        pack(conversation(2), budget=0)
    with pytest.raises(ValueError, match="preference"):
        pack(conversation(2), budget=100, preference="turbo")
    with pytest.raises(ValueError, match="budget"):  # past what a float holds: was an OverflowError
        pack(conversation(40), budget=10**400)


def test_stats_keys():
    r = pack(conversation(40), budget=3000, model=MODEL)
    for key in ("optimization_applied", "strategy_chosen", "strategy_reason", "scores", "tokens_before",
                "tokens_after", "tokens_saved", "messages_before", "messages_after", "messages_removed",
                "removed_ids", "summary_needed", "summary_generated", "budget", "estimated", "triggered",
                "window_start", "trigger_tokens", "target_tokens"):
        assert key in r.stats
    assert r.stats["tokens_saved"] == r.stats["tokens_before"] - r.stats["tokens_after"]


def test_name_is_carried_and_counted():
    named = Msg(id="n", role="user", content="hello", name="alice")
    named = dataclasses.replace(named, tokens=count_message(named, model=MODEL))
    msgs = [*conversation(30), named]
    r = pack(msgs, budget=2500, model=MODEL)
    assert r.messages[-1].name == "alice" and r.messages[-1].tokens == named.tokens


def test_repacking_output_changes_nothing():
    for pref in ("fast", "quality"):
        for now in (None, extractive_summary):
            r = pack(conversation(60), budget=3000, preference=pref, model=MODEL, summarize_now=now)
            again = pack(refeed(r.messages), budget=3000, preference=pref, model=MODEL, summarize_now=now)
            assert shape(again.messages) == shape(r.messages)


def test_oversized_list_content_is_compressed_to_text_with_a_note():
    parts = [{"type": "text", "text": "\n".join(f"row {i} of the pasted table" for i in range(600))},
             {"type": "image_url", "image_url": {"url": "https://example.invalid/chart.png"}}]
    big = Msg(id="big", role="user", content=parts)
    big = dataclasses.replace(big, tokens=count_message(big, model=MODEL))
    msgs = [*conversation(10), big, msg("ok", "assistant", "Seen it."), msg("q2", "user", "Thoughts?")]
    r = pack(msgs, budget=3000, model=MODEL)
    packed = next(p for p in r.messages if p.source_ids == ("big",))
    assert packed.origin == "compressed" and isinstance(packed.content, str)
    assert packed.content.startswith("row 0 of the pasted table")
    assert packed.content.endswith("[1 non-text part omitted]")
    assert packed.tokens <= 750 and r.stats["tokens_after"] <= 3000
    assert msgs[-3].content is parts


def test_with_the_trigger_at_the_budget_a_history_that_fills_it_exactly_is_sent_whole():
    """Automatic optimization off (the app's trigger is the budget): nothing to cut while it fits."""
    msgs = conversation(6)
    budget = count_messages([{"role": m.role, "content": m.content} for m in msgs], model=MODEL)
    cfg = PackConfig(trigger_ratio=1.0, target_ratio=0.9, fast_headroom=0.0, fill_window_ratio=0.9)

    fits = pack(msgs, budget=budget, preference="balanced", model=MODEL, config=cfg)
    over = pack(msgs, budget=budget - 1, preference="balanced", model=MODEL, config=cfg)

    assert not fits.stats["optimization_applied"] and len(fits.messages) == len(msgs)
    assert fits.stats["tokens_after"] == budget
    assert over.stats["optimization_applied"] and over.stats["tokens_after"] <= budget - 1


def test_a_compressed_system_prompt_leaves_the_summary_in_when_it_fits():
    # A system prompt far over the budget is compressed (an emergency); the summary in use still fits
    # beside it and the newest rounds, so it is sent: dropping it sent the chat with no history at all.
    rules = "\n".join(f"rule {i}: answer in the house style, citing the handbook section {i}" for i in range(800))
    msgs = [msg("sys", "system", rules), *conversation(60)[1:]]
    r = pack(msgs, budget=4000, preference="quality", model=MODEL, summary=SUMMARY_THROUGH_A19,
             window_start="u40")
    assert r.messages[0].origin == "compressed"
    assert "summary" in [p.origin for p in r.messages] and r.stats["summary_used"]
    assert sent_tokens(r) == r.stats["tokens_after"] <= 4000


def test_a_shell_paste_sent_whole_fits_the_budget_by_tiktokens_own_count():
    # `cmd |` lines followed by `/usr/bin/...` ones: o200k_base's punctuation run takes the slash after
    # the line break into its token, and counting such a text by lines came out 100 tokens short, so
    # a request "at the budget" went out 100 tokens over it.
    paste = "\n".join(f"echo hi{i} |\n/usr/bin foo" for i in range(100))
    msgs = [msg("u0", "user", "Why does this fail?\n" + paste)]
    budget = count_messages([{"role": m.role, "content": m.content} for m in msgs], model=MODEL)
    cfg = PackConfig(trigger_ratio=1.0, target_ratio=0.9, fast_headroom=0.0, fill_window_ratio=0.9)
    r = pack(msgs, budget=budget, model=MODEL, config=cfg)
    enc = encoding_for(MODEL)
    sent = 3 + sum(3 + len(enc.encode_ordinary(p.role)) + len(enc.encode_ordinary(p.content)) for p in r.messages)
    assert sent == r.stats["tokens_after"] <= budget


def _regenerated(reply_words: list[int]) -> list[Msg]:
    """A conversation that ends with its newest question and then replies to it (regenerated ones)."""
    msgs = [msg("sys", "system", "You are a careful assistant. " * 20),
            msg("u0", "user", "Please help me plan the garden. " * 10)]
    for r in range(1, 6):
        msgs += [msg(f"u{r}", "user", f"Question {r} about the beds. " * 8),
                 msg(f"a{r}", "assistant", f"Answer {r} about soil. " * 30)]
    msgs.append(msg("q", "user", "Which tomato variety should I plant in the north bed? " * 3))
    msgs += [msg(f"r{k}", "assistant", f"Reply {k}: plant Roma near the fence. " * n)
             for k, n in enumerate(reply_words)]
    return msgs


def test_replies_after_the_newest_question_shrink_before_the_must_keeps():
    # 3 replies of 405 tokens after the question; the must-keeps (system, first request, question) need
    # 241 tokens. Each reply was compressed only to a quarter of the budget, and all three together
    # still overflowed it: the request was refused as "the messages that must be kept need 670 tokens".
    msgs = _regenerated([40, 40, 40])
    for budget in (400, 600, 800):
        r = pack(msgs, budget=budget, model=MODEL)
        assert sent_tokens(r) <= budget
        sent = {p.source_ids[0]: p for p in r.messages}
        assert all(sent[i].origin == "verbatim" for i in ("sys", "u0", "q"))
        assert "r2" in sent and sent["r2"].origin == "compressed"  # the newest reply is the last to go
        assert r.window_start == "q"
    # Room for one shortened reply beside the must-keeps: the newest; then for none, and the newest
    # message is never left out (the hard rule): the oversized must-keeps make room for it, as they
    # would for the newest question.
    r = pack(msgs, budget=300, model=MODEL)
    assert [p.source_ids[0] for p in r.messages] == ["sys", "u0", "q", "r2"]
    assert r.messages[-1].content.startswith("Reply 2: plant Roma") and {"r0", "r1"} <= set(r.removed_ids)
    r = pack(msgs, budget=260, model=MODEL)
    assert [p.source_ids[0] for p in r.messages] == ["sys", "u0", "q", "r2"]
    assert r.messages[-1].content.startswith("Reply 2: plant Roma") and r.messages[-1].origin == "compressed"
    assert {"r0", "r1"} <= set(r.removed_ids) and "r2" not in r.removed_ids and r.info.tokens_after <= 260


@settings(max_examples=60, deadline=None)
@given(reply_words=st.lists(st.integers(min_value=1, max_value=120), min_size=1, max_size=4),
       budget=st.integers(min_value=245, max_value=1600))
def test_must_keeps_that_fit_are_sent_verbatim_whatever_replies_follow_the_newest_question(reply_words, budget):
    msgs = _regenerated(reply_words)
    r = pack(msgs, budget=budget, model=MODEL)
    assert sent_tokens(r) <= budget
    sent = {p.source_ids[0]: p for p in r.messages}
    # The newest reply is kept like a must-keep (at its floor, a reply cut to 32 tokens): the others
    # are verbatim whenever they fit beside it, compressed (the emergency) only when they do not.
    must = sum(m.tokens for m in msgs if m.id in ("sys", "u0", "q")) + 3
    if must + min(msgs[-1].tokens, 32) <= budget:
        assert all(sent[i].origin == "verbatim" for i in ("sys", "u0", "q"))
    replies = [p.source_ids[0] for p in r.messages if p.source_ids[0].startswith("r")]
    # what is left out of them is the oldest first, never the newest; what is sent stays in order
    assert replies and replies[-1] == msgs[-1].id
    assert replies == [f"r{k}" for k in range(len(reply_words) - len(replies), len(reply_words))]
    assert r.window_start in sent


def test_a_reply_to_a_question_over_the_budget_is_shortened_not_left_out():
    """The question alone is over the budget, so it goes shortened whatever its reply costs: the reply
    was left out to make room first (the chat then said "oldest turns dropped"), now it is shortened
    like any oversized message, as before replies after the newest question were fitted."""
    pasted = "\n".join(f"Line {i} of the log: service {i % 7} answered in {i * 3} ms." for i in range(600))
    msgs = [msg("q", "user", pasted), msg("a", "assistant", "Echo: " + pasted[:3000])]
    r = pack(msgs, budget=3_500, model=MODEL)
    assert sent_tokens(r) <= 3_500
    assert [p.source_ids[0] for p in r.messages] == ["q", "a"] and r.removed_ids == []
    assert [p.origin for p in r.messages] == ["compressed", "compressed"]
