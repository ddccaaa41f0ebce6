"""Summary header, prompt builder and the extractive summarizer; head + tail compression."""

from optkit import MODEL, msg

from optimizer import (
    PackConfig,
    build_summary_prompt,
    compress_text,
    count_text,
    extractive_summary,
    omitted_marker,
    summary_header,
)


def test_header_forms():
    assert summary_header(covered_messages=48, source_chars=21_300, summary_chars=1_050) == (
        "[Conversation summary — covers 48 messages, 21,300 → 1,050 characters]")
    labelled = summary_header(covered_messages=48, source_chars=21_300, summary_chars=1_050, first_label="1",
                              last_label="48")
    assert labelled == "[Conversation summary — covers messages 1\u201348, 21,300 → 1,050 characters]"


def span_of(n_words):
    words = "the staging server listens on port 8443 and my cat is called Pixel " * (n_words // 13 + 1)
    return [msg("1", "user", words), msg("2", "assistant", "Noted, thanks.")]


def test_prompt_target_is_a_clamped_share_with_tiers():
    short = build_summary_prompt(span_of(100), previous_summary=None, model=MODEL)
    assert short.tier == "brief" and short.target_tokens == 64  # 15 % of ~120 clamped up to the minimum
    medium = build_summary_prompt(span_of(3000), previous_summary=None, model=MODEL)
    assert medium.tier == "key_points"
    span_tokens = sum(m.tokens for m in span_of(3000))
    assert medium.target_tokens == -(-span_tokens * 15 // 100)
    long = build_summary_prompt(span_of(30_000), previous_summary=None, model=MODEL)
    assert long.tier == "detailed" and long.target_tokens == 1500  # clamped down to the maximum
    assert long.max_tokens > long.target_tokens
    cfg = PackConfig(summary_share=0.05, summary_min_tokens=10, summary_max_tokens=5000)
    big = span_of(30_000)
    expected = -(-sum(m.tokens for m in big) * 5 // 100)
    assert build_summary_prompt(big, previous_summary=None, model=MODEL, config=cfg).target_tokens == expected


def test_prompt_content_asks_for_the_sections_and_rolls():
    p = build_summary_prompt(span_of(500), previous_summary="[Conversation summary — x]\nUser: my dog is Rex.",
                             instructions="keep the port numbers", model=MODEL)
    system, user = p.messages[0]["content"], p.messages[1]["content"]
    for section in ("Facts about the user", "Decisions", "Open tasks", "Identifiers and numbers"):
        assert section in system
    assert "keep the port numbers" in system
    assert "my dog is Rex." in user and "[Conversation summary" not in user
    assert "USER: the staging server" in user


def test_extractive_prefers_facts_and_corrections_and_respects_the_target():
    span = [
        msg("1", "user", "Can you explain how Redis handles timeouts under heavy load?"),
        msg("2", "assistant", "Good question. Start by checking the metrics around the time of the error, then "
            "compare them with a quiet period. Keep sessions short and regular rather than long and rare."),
        msg("3", "user", "By the way, my cat is called Pixel. What do people get wrong about chess openings?"),
        msg("4", "assistant", "Noted. People new to chess often try to do too much too soon."),
        msg("5", "user", "Here's the log:\n```\n" + "\n".join(
            "12:00 worker-1 redis: timeout" if i != 40 else "NOTE Our database is named atlas_core."
            for i in range(80)) + "\n```\nCan you spot anything odd?"),
        msg("6", "user", "Small correction: we renamed the cat, she's Mochi now."),
        msg("7", "assistant", "The command you want is `make rebuild-index`; run it from the project root."),
    ]
    text = extractive_summary(span, previous_summary=None, target_tokens=80, model=MODEL)
    assert count_text(text, model=MODEL) <= 80
    assert "my cat is called Pixel" in text and "Mochi" in text and "atlas_core" in text
    assert "make rebuild-index" in text
    assert "12:00 worker-1" not in text
    lines = text.split("\n")
    assert lines.index(next(x for x in lines if "Pixel" in x)) < lines.index(next(x for x in lines if "Mochi" in x))
    assert extractive_summary(span, previous_summary=None, target_tokens=80, model=MODEL) == text


def test_extractive_rolls_the_previous_summary_in():
    prev = "[Conversation summary — covers 2 messages, 100 → 40 characters]\nUser: My manager's name is Greta."
    text = extractive_summary([msg("9", "user", "The wifi password at the office is teal-otter-42.")],
                              previous_summary=prev, target_tokens=60, model=MODEL)
    assert "Greta" in text and "teal-otter-42" in text and "[Conversation summary" not in text


def test_compress_text_keeps_head_tail_and_flagged_lines():
    lines = [f"line {i} some log text here" for i in range(500)]
    lines[250] = "IMPORTANT: the real failure is here"
    text = "\n".join(lines)
    out = compress_text(text, limit=200, model=MODEL)
    assert count_text(out, model=MODEL) <= 200
    assert out.startswith("line 0 ") and out.endswith("line 499 some log text here")
    assert "IMPORTANT: the real failure is here" in out
    assert "lines," in out and "tokens omitted ...]" in out
    assert compress_text("short", limit=200, model=MODEL) == "short"
    one_line = "word " * 5000
    assert count_text(compress_text(one_line, limit=100, model=MODEL), model=MODEL) <= 100
    assert omitted_marker(lines=412, tokens=9_800) == "[... 412 lines, 9,800 tokens omitted ...]"


def test_prompt_puts_the_span_under_its_dates_and_asks_to_keep_them():
    import dataclasses
    import datetime as dt

    def said(m, day, hour=9):
        return dataclasses.replace(m, created_at=dt.datetime(2023, 5, day, hour, tzinfo=dt.UTC))

    span = [said(msg("1", "user", "I went to the support group yesterday."), 8),
            said(msg("2", "assistant", "How was it?"), 8, 10),
            said(msg("3", "user", "We adopted a dog named Rex."), 20)]
    p = build_summary_prompt(span, previous_summary=None, model=MODEL)
    system, user = p.messages[0]["content"], p.messages[1]["content"]
    # one line per new day, before the first message said on it
    assert user.count("[Mon 8 May 2023]") == 1 and user.count("[Sat 20 May 2023]") == 1
    assert user.index("[Mon 8 May 2023]") < user.index("USER: I went") < user.index("ASSISTANT: How was it?")
    assert user.index("ASSISTANT: How was it?") < user.index("[Sat 20 May 2023]") < user.index("USER: We adopted")
    assert "date" in system and "yesterday" in system

    undated = build_summary_prompt([dataclasses.replace(m, created_at=None) for m in span], previous_summary=None,
                                   model=MODEL)
    assert "2023" not in undated.messages[1]["content"]
    assert "yesterday" not in undated.messages[0]["content"]


def test_extractive_lines_stand_under_the_day_they_were_said_across_rolls():
    import dataclasses
    import datetime as dt
    import itertools

    def said(m, day):
        return dataclasses.replace(m, created_at=dt.datetime(2023, 5, day, 9, tzinfo=dt.UTC))

    first = [said(msg("1", "user", "My sister Ana moved to Lisbon yesterday."), 8),
             said(msg("2", "assistant", "Noted."), 8),
             said(msg("3", "user", "We booked the flight to Porto for 14 June."), 9)]
    text = extractive_summary(first, previous_summary=None, target_tokens=200, model=MODEL)
    lines = text.split("\n")
    assert lines == ["[Mon 8 May 2023]", "User: My sister Ana moved to Lisbon yesterday.",
                     "[Tue 9 May 2023]", "User: We booked the flight to Porto for 14 June."]
    # rolled into the next summary, the kept lines keep their days; the day lines are not facts to rank
    later = [said(msg("4", "user", "My car is a red Fiat 500, plate 12-AB-34."), 20)]
    rolled = extractive_summary(later, previous_summary=text, target_tokens=200, model=MODEL).split("\n")
    assert rolled == [*lines, "[Sat 20 May 2023]", "User: My car is a red Fiat 500, plate 12-AB-34."]
    assert count_text("\n".join(rolled), model=MODEL) <= 200
    # a tight target drops whole facts, never leaves a day line with nothing under it
    tight = extractive_summary(later, previous_summary=text, target_tokens=30, model=MODEL).split("\n")
    assert tight and not tight[-1].startswith("[")
    assert all(not a.startswith("[") or not b.startswith("[") for a, b in itertools.pairwise(tight))
    # undated messages give the lines as before
    assert "[" not in extractive_summary([dataclasses.replace(m, created_at=None) for m in first],
                                         previous_summary=None, target_tokens=200, model=MODEL)
