"""A reasoning model's thinking, kept apart from its answer.

Endpoints give the thinking one of three ways. Structured: a delta field beside `content`
(`reasoning_content`: DeepSeek, vLLM's reasoning parsers, LM Studio; `reasoning`: OpenRouter, newer
Ollama). In blocks: `content` as a list of blocks, the thinking in blocks of its own (Mistral's
Magistral). Inline: the content opens with `<think>…</think>` (Qwen3, QwQ and DeepSeek-R1 served without
a reasoning parser, older Ollama), or holds only its end when the chat template opened the block in
the prompt (`unopened_split`). Either way the thinking is shown apart and never sent back: it is
often longer than the answer, and the providers say not to return it.

Pure Python, outside the `llm` package (whose import brings Django and the SDK): the import readers
(chatapp.chat.imports, which stay free of both) read an Open WebUI reply's thinking with it too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from chatapp.chat.textsafe import fence_left_open

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"

# The delta fields that carry thinking, the first present wins: some servers send the same text under
# both names.
REASONING_FIELDS = ("reasoning_content", "reasoning")


def reasoning_of(delta: Mapping[str, Any]) -> str:
    """The structured thinking in a streamed delta (or a whole message), "" without any."""
    for name in REASONING_FIELDS:
        value = delta.get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def _held_back(text: str, tag: str) -> int:
    """How many characters at the end of `text` could be the start of `tag` cut by a chunk boundary."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


class ThinkSplitter:
    """Splits streamed content into (thinking, answer) pieces by a leading `<think>…</think>`.

    Only a block that opens the content (after white space) is thinking: a `<think>` later on is the
    answer's own text (a reply about these tags). Chunk boundaries may fall inside a tag, so the
    little that could be a tag's start is held back until the next chunk (or `end`) settles it. Once
    the answer has begun, a chunk passes straight through.
    """

    __slots__ = ("_buffer", "_state")

    def __init__(self) -> None:
        # head: nothing but white space yet; think: inside the block; gap: after it, before the answer's
        # first character (the blank line models put there is layout); answer
        self._state = "head"
        self._buffer = ""

    def feed(self, text: str) -> tuple[str, str]:
        """(thinking, answer) that this chunk settles."""
        if self._state == "answer":
            return "", text
        if self._state == "gap":
            return "", self._after_gap(text)
        self._buffer += text
        return self._settle(final=False)

    def _after_gap(self, text: str) -> str:
        # White space is held until the answer's first character shows which of it is layout.
        self._buffer += text
        if not self._buffer.strip():
            return ""
        self._state, answer, self._buffer = "answer", blank_lines_off(self._buffer), ""
        return answer

    def end(self) -> tuple[str, str]:
        """What is still held back, settled: the stream is over."""
        if self._state in ("answer", "gap"):
            return "", ""
        return self._settle(final=True)

    def _settle(self, *, final: bool) -> tuple[str, str]:
        thinking = ""
        if self._state == "head":
            stripped = self._buffer.lstrip()
            if stripped.startswith(OPEN_TAG):
                self._state, self._buffer = "think", stripped[len(OPEN_TAG):]
            elif OPEN_TAG.startswith(stripped) and not final:
                return "", ""  # white space, or the tag's first characters: wait for more
            else:
                self._state, answer, self._buffer = "answer", self._buffer, ""
                return "", answer
        at = self._buffer.find(CLOSE_TAG)
        if at >= 0:
            thinking, rest = self._buffer[:at], self._buffer[at + len(CLOSE_TAG):]
            self._state, self._buffer = "gap", ""
            return thinking, self._after_gap(rest)
        keep = 0 if final else _held_back(self._buffer, CLOSE_TAG)
        thinking, self._buffer = self._buffer[: len(self._buffer) - keep], self._buffer[len(self._buffer) - keep:]
        return thinking, ""


# The close tag as these templates' models write it: the answer starts on a line of its own after it.
_CLOSE_LINE_END = re.compile(re.escape(CLOSE_TAG) + r"[ \t]*(?:\r?\n|\Z)")
def unopened_split(text: str) -> tuple[str, str]:
    """(thinking, answer) of a reply whose block was opened by the chat template, in the prompt
    (DeepSeek-R1's and Qwen3's thinking templates served without a reasoning parser): its text holds
    the close tag only, so the thinking can be told apart once the reply has ended, not while it
    streams. Read so only with one close tag, ending its line, and no open tag; otherwise ("", text).

    Every reply of every model goes through here, so the rule must not catch a plain answer that
    names the tag ("close it with </think>.", or shows it in a code block): that answer would lose its
    start to a folded block, and the model would never see it again. The models this is for put the
    answer on a new line."""
    if text.count(CLOSE_TAG) != 1 or OPEN_TAG in text or not _CLOSE_LINE_END.search(text):
        return "", text
    thinking, answer = text.split(CLOSE_TAG)
    if fence_left_open(thinking) is not None:
        # The tag sits in a code block the answer opened: a sample of it, in an answer about these templates.
        return "", text
    return thinking.strip(), blank_lines_off(answer)


def blank_lines_off(answer: str) -> str:
    """The answer after a thinking block without the blank lines (and the spaces after the close tag)
    that lay it out, its first line's indentation kept: an answer that opens with an indented code
    block or a nested list item must not lose it."""
    stripped = answer.lstrip()
    newline = answer.rfind("\n", 0, len(answer) - len(stripped))
    return stripped if newline < 0 or not stripped else answer[newline + 1:]


def content_answer(content: Any) -> str:
    """The text of a whole message's `content` (`content_parts`), its thinking left out as structured
    thinking is; no text for an odd shape (null, a number)."""
    return content_parts(content)[1]


def content_parts(content: Any) -> tuple[str, str]:
    """(thinking, text) of a message's or a delta's `content`: a string is text; a list of blocks, as
    Mistral's Magistral gives it whole and streamed, has its thinking in `thinking` blocks (themselves
    text blocks) and the answer in `text` blocks; anything else is neither."""
    if isinstance(content, str):
        return "", content
    thinking: list[str] = []
    text: list[str] = []
    for block in content if isinstance(content, list) else ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            text.append(block["text"])
        elif kind == "thinking":
            inner = block.get("thinking")
            thinking.append(inner if isinstance(inner, str) else content_parts(inner)[1])
    return "".join(thinking), "".join(text)


def think_split(text: str) -> tuple[str, str]:
    """(thinking, answer) of a whole reply (a non-streamed completion), however its block was opened."""
    splitter = ThinkSplitter()
    thinking, answer = splitter.feed(text)
    more_thinking, more_answer = splitter.end()
    thinking, answer = thinking + more_thinking, answer + more_answer
    return (thinking, answer) if thinking else unopened_split(answer)
