"""A reasoning model's thinking kept apart from its answer (providers.thinking): the inline
`<think>` splitter under any chunking, the structured delta fields, and both through the real client
path against the fake endpoint."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chatapp.providers import llm
from chatapp.providers.thinking import ThinkSplitter, reasoning_of, think_split, unopened_split
from tests.support.fake_openai import echo_reply, thinking_text
from tests.support.llm import make_target, run_stream

MESSAGES = [{"role": "user", "content": "Where did we leave the bikes?"}]


def _streamed(chunks: list[str]) -> tuple[str, str]:
    splitter = ThinkSplitter()
    thinking, answer = [], []
    for chunk in chunks:
        t, a = splitter.feed(chunk)
        thinking.append(t)
        answer.append(a)
    t, a = splitter.end()
    return "".join(thinking) + t, "".join(answer) + a


def _cut(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


def test_a_leading_block_is_thinking_and_the_rest_the_answer():
    assert think_split("<think>Plan it.</think>\n\nThe answer.") == ("Plan it.", "The answer.")
    assert think_split("  \n<think>a</think>b") == ("a", "b")
    assert think_split("No thinking here.") == ("", "No thinking here.")


def test_the_blank_lines_after_the_block_are_not_the_answer_s_whatever_the_chunks():
    assert _streamed(["<think>a</think>", "\n", "\n", "The answer.\n"]) == ("a", "The answer.\n")
    assert _streamed(["<think>a</think>\n", "\nThe", " answer."]) == ("a", "The answer.")


def test_a_think_tag_later_in_the_text_is_the_answer_s_own():
    text = "Models write <think>…</think> before answering."
    assert think_split(text) == ("", text)


def test_a_block_never_closed_is_all_thinking():
    # a model cut off by its token limit while it still thought: no answer came
    assert think_split("<think>Still weighing") == ("Still weighing", "")


def test_a_text_that_only_starts_like_the_tag_is_the_answer():
    assert think_split("<thin") == ("", "<thin")
    assert think_split("<b>bold</b>") == ("", "<b>bold</b>")


_PIECE = st.text(alphabet=st.sampled_from(list("ab <>/thinkTHINK\n")), max_size=12)


@given(st.lists(_PIECE, max_size=4), st.booleans(), st.booleans(), st.lists(st.integers(0, 80), max_size=8))
def test_any_chunking_splits_as_the_whole_text_does(parts, opened, closed, cuts):
    thought, answer = "".join(parts[:2]), "".join(parts[2:])
    text = ("<think>" if opened else "") + thought + ("</think>" if closed else "") + answer
    whole = _streamed([text])
    assert _streamed(_cut(text, cuts)) == whole
    # The rule, stated plainly: only a block that opens the text is thinking, up to its first close tag.
    stripped = text.lstrip()
    if not stripped.startswith("<think>"):
        assert whole == ("", text)
    elif "</think>" in (body := stripped[len("<think>"):]):
        at = body.index("</think>")
        assert whole == (body[:at], _laid_out(body[at + len("</think>"):]))
    else:
        assert whole == (body, "")


def _laid_out(rest: str) -> str:
    """What follows a close tag without its layout: the spaces after the tag on its line, the blank lines
    after it; the first line of text keeps its indentation."""
    lines = rest.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return ""
    return "\n".join([lines[0].lstrip(), *lines[1:]]) if first == 0 else "\n".join(lines[first:])


def test_the_answer_s_first_line_keeps_its_indentation_whatever_the_chunks():
    # An answer that opens with an indented code block (or a nested list item) after the thinking.
    text = "<think>Plan.</think>\n\n    indented code\nafter"
    assert think_split(text) == ("Plan.", "    indented code\nafter")
    chunks = ["<think>Plan.</think>\n", "\n  ", "  indented code\nafter"]
    assert _streamed(chunks) == ("Plan.", "    indented code\nafter")
    assert think_split("<think>Plan.</think>   Same line.") == ("Plan.", "Same line.")
    assert unopened_split("Weigh it.\n</think>\n\n  - nested item") == ("Weigh it.", "  - nested item")


def test_a_block_opened_by_the_template_is_told_apart_once_the_reply_is_whole():
    # DeepSeek-R1's template opens the block in the prompt: the output holds its end only.
    assert think_split("Weigh it.\n</think>\n\nThe answer.") == ("Weigh it.", "The answer.")
    assert unopened_split("Weigh it.</think>  \r\nThe answer.") == ("Weigh it.", "The answer.")
    assert unopened_split("Still weighing, cut off.\n</think>") == ("Still weighing, cut off.", "")
    # Anything else is an answer that talks about the tags: left whole.
    for text in ("Close it with </think>, then </think> again.", "Write <think>, then </think>.", "Plain.",
                 "Qwen ends its thinking with </think>. Then the answer follows.", "Is `</think>` a tag?\nYes."):
        assert unopened_split(text) == ("", text)
        assert think_split(text) == ("", text)


def test_the_structured_fields_first_present_wins():
    assert reasoning_of({"reasoning_content": "a", "reasoning": "a"}) == "a"
    assert reasoning_of({"reasoning": "b", "content": "x"}) == "b"
    assert reasoning_of({"reasoning_content": None, "reasoning": ""}) == ""
    assert reasoning_of({"reasoning_content": ["not", "text"], "reasoning": "c"}) == "c"


def _parts(events: list) -> tuple[str, str]:
    thinking = "".join(e.text for e in events if isinstance(e, llm.Reasoning))
    answer = "".join(e.text for e in events if isinstance(e, llm.Delta))
    return thinking, answer


def test_a_stream_s_reasoning_fields_come_apart_from_its_answer(fake):
    events, error = run_stream(make_target(fake.base_url, "think-fields"), MESSAGES)

    assert error is None
    assert _parts(events) == (thinking_text(MESSAGES), echo_reply(MESSAGES))
    first_answer = next(i for i, e in enumerate(events) if isinstance(e, llm.Delta))
    assert all(isinstance(e, llm.Reasoning) for e in events[:first_answer])  # thinking streams first, live


def test_a_stream_s_inline_block_comes_apart_from_its_answer_though_chunks_cut_its_tags(fake):
    events, error = run_stream(make_target(fake.base_url, "think-inline"), MESSAGES)

    assert error is None
    assert _parts(events) == (thinking_text(MESSAGES), echo_reply(MESSAGES))


def test_a_whole_completion_leaves_the_thinking_out_of_its_text(fake):
    for model in ("think-inline", "think-fields"):
        completion = llm.llm_complete(target=make_target(fake.base_url, model), messages=MESSAGES)
        assert completion.text == echo_reply(MESSAGES), model


def test_a_close_tag_in_a_code_block_is_the_answer_s_own_text():
    # An answer about these templates shows the tag on a line of its own in a fence: not thinking, or
    # the answer's start would fold away and never be sent back to the model.
    for text in ("Qwen3 ends its thinking with this line:\n\n```\n</think>\n```\n\nThen the answer follows.",
                 "In the template:\n~~~jinja\n{{ reasoning }}\n</think>\n~~~\nKeep it."):
        assert unopened_split(text) == ("", text)
        assert think_split(text) == ("", text)
    # A fence the thinking opened and closed does not hide the real end of the block.
    assert unopened_split("Try:\n```\nx = 1\n```\n</think>\n\nIt is 1.") == ("Try:\n```\nx = 1\n```", "It is 1.")
