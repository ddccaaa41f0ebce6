"""Compression of one oversized message: head + (annotated lines) + tail, with explicit markers.

A pasted log or file larger than a share of the budget would crowd out the whole conversation.
We send its beginning and its end (where the context and the error usually are) with a marker such
as ``[... 412 lines, 9,800 tokens omitted ...]`` so the model knows something was cut. Lines that a
person explicitly flagged inside the paste (``NOTE``, ``IMPORTANT``, ``TODO`` ...) are kept too, each
between markers, because they are what the user pasted the log for. The stored original is never
modified; results are cached per (text, limit, model) because the same oversized message is compressed
again on every request while it stays in the window.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .tokens import count_text, encoding_for

FLAGGED_LINE = re.compile(
    r"^\W{0,4}(?:NOTE|IMPORTANT|ATTENTION|REMEMBER|TODO|FIXME|N\.B\.)\b|^\W{0,4}(?:note|important)\s*:"
)
_MIN_LINES = 6  # below this, cut by tokens instead of by lines
_FLAGGED_SHARE = 0.2  # at most this share of the limit goes to flagged lines from the middle


# The marker when the one with the counts does not fit (1 or 2 tokens in tiktoken's encodings).
SHORT_MARKER = "[...]"


def omitted_marker(*, lines: int | None, tokens: int) -> str:
    """The marker put where content was cut, e.g. ``[... 412 lines, 9,800 tokens omitted ...]``."""
    if lines is None:
        return f"[... {tokens:,} tokens omitted ...]"
    return f"[... {lines:,} line{'s' if lines != 1 else ''}, {tokens:,} tokens omitted ...]"


def _marker_alone(tokens: int, limit: int, model: str) -> str:
    """What a limit too small for any of the text sends: the whole marker, or when even that does
    not fit the shortest one, `SHORT_MARKER`; nothing when not even that fits. Never a piece of a
    marker: "[... 1" tells the model neither that something was cut nor how much."""
    for marker in (omitted_marker(lines=None, tokens=tokens), SHORT_MARKER):
        if count_text(marker, model=model) <= limit:
            return marker
    return ""


def _whole_characters(data: bytes) -> str:
    """The characters of `data`, a run of tokens' bytes cut from a UTF-8 text's start or end.

    A character's bytes may be split between two tokens (an emoji, a CJK character, an accented
    letter), so such a run can open or close with part of one; decoding it with replacement sent
    U+FFFD at the cut. Within the run the bytes are the text's own, so what is dropped here is only
    the cut character's part."""
    return data.decode("utf-8", errors="ignore")


def _by_tokens(text: str, limit: int, model: str) -> str:
    enc = encoding_for(model)
    ids = enc.encode_ordinary(text)
    keep = max(0, limit - 16)
    while True:
        head, tail = keep - keep // 2, keep // 2
        omitted = len(ids) - head - tail
        parts = [_whole_characters(enc.decode_bytes(ids[:head]))] if head else []
        parts.append(omitted_marker(lines=None, tokens=omitted))
        if tail:
            parts.append(_whole_characters(enc.decode_bytes(ids[-tail:])))
        out = "\n".join(parts)
        if count_text(out, model=model) <= limit or keep == 0:
            return out
        keep = max(0, keep - max(4, keep // 8))


def _by_lines(lines: list[str], line_tokens: list[int], limit: int, model: str) -> str | None:
    n = len(lines)
    flagged_cap = int(limit * _FLAGGED_SHARE)
    scale = 1.0
    while scale > 0.05:
        room = int((limit - 24) * scale)  # 24: one marker; more markers are paid from the flagged share
        head_room = room * 11 // 20  # a little more head than tail: the head says what the paste is
        tail_room = room - head_room
        head_end, used = 0, 0
        while head_end < n and used + line_tokens[head_end] + 1 <= head_room:
            used += line_tokens[head_end] + 1
            head_end += 1
        tail_start, used = n, 0
        while tail_start > head_end and used + line_tokens[tail_start - 1] + 1 <= tail_room:
            tail_start -= 1
            used += line_tokens[tail_start] + 1
        if tail_start <= head_end:  # line estimates said it all fits, the exact count said no: shrink
            scale *= 0.85
            continue
        picked: list[int] = []
        flagged_used = 0
        for i in range(head_end, tail_start):
            if FLAGGED_LINE.search(lines[i]):
                cost = line_tokens[i] + 1 + 24
                if flagged_used + cost > flagged_cap * scale:
                    break
                picked.append(i)
                flagged_used += cost
        parts = lines[:head_end]
        prev = head_end
        for i in [*picked, tail_start]:
            if i > prev:
                gap_tokens = sum(line_tokens[prev:i]) + (i - prev)
                parts.append(omitted_marker(lines=i - prev, tokens=gap_tokens))
            if i < tail_start:
                parts.append(lines[i])
            prev = i + 1
        parts.extend(lines[tail_start:])
        out = "\n".join(parts)
        if count_text(out, model=model) <= limit:
            return out
        scale *= 0.85
    return None


@lru_cache(maxsize=64)
def compress_text(text: str, *, limit: int, model: str) -> str:
    """Shorten `text` to at most `limit` tokens (content only), keeping head, flagged lines and tail.

    Below 24 tokens none of the text is kept: the marker alone, or `SHORT_MARKER` when it does not
    fit, or "" at a limit too small for that."""
    if count_text(text, model=model) <= limit:
        return text
    if limit < 24:
        return _marker_alone(count_text(text, model=model), limit, model)
    lines = text.split("\n")
    if len(lines) >= _MIN_LINES:
        enc = encoding_for(model)
        line_tokens = [len(t) for t in enc.encode_ordinary_batch(lines)] if len(lines) > 64 else [
            len(enc.encode_ordinary(line)) for line in lines
        ]
        out = _by_lines(lines, line_tokens, limit, model)
        if out is not None:
            return out
    return _by_tokens(text, limit, model)
