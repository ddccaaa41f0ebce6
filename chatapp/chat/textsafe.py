"""Text a database can store: what a model (or a client) may send that PostgreSQL or UTF-8 cannot hold.

PostgreSQL's text type refuses NUL (U+0000), and UTF-8 cannot encode a lone surrogate (U+D800 to U+DFFF
without its pair). A model may stream either (JSON allows "\\u0000" and unpaired "\\ud83d"), and a
reply that cannot be written loses all its text. Streams split surrogate pairs across chunks, so
text is made storable once it is whole, not chunk by chunk.
"""

from __future__ import annotations

import re
import unicodedata

import regex

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def text_storable(text: str) -> str:
    """`text` with valid surrogate pairs joined, and NUL and lone surrogates replaced by U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # join the pairs a stream split into two code points, then replace what is still unpaired
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
        text = _LONE_SURROGATE.sub(REPLACEMENT, text)
    return text


def text_problem(text: str, *, what: str = "The message") -> str | None:
    """Why a user's text cannot be stored as sent (None when it can): it is refused, not altered.
    `what` names the text in the words: a refused idempotency key said "The message contains…"."""
    if "\x00" in text:
        return f"{what} contains a NUL character (U+0000), which cannot be stored. Remove it and send again."
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return f"{what} contains an unpaired surrogate, which is not valid Unicode text. Remove it and send again."
    return None


def text_blank(text: str) -> bool:
    """Nothing of `text` shows: white space and invisible format characters only (zero-width spaces and
    joiners, the word joiner, a byte order mark, tag characters: Unicode's category Cf), which
    `str.strip` leaves. Stops at the first character that shows."""
    return all(ch.isspace() or unicodedata.category(ch) == "Cf" for ch in text)


# One user-perceived character (a grapheme cluster): a letter with its vowel signs, an emoji family.
_CLUSTER = regex.compile(r"\X")


def cluster_edge(text: str, at: int, *, forward: bool) -> int:
    """`at`, or the nearest boundary between user-perceived characters after it (`forward`) or before it:
    a text cut between code points lost a vowel sign (Devanagari, Thai) or split an emoji family,
    leaving a stray joiner."""
    if at <= 0 or at >= len(text) or text[at - 1 : at + 1].isascii():
        return at
    for found in _CLUSTER.finditer(text, max(0, at - 32), min(len(text), at + 32)):
        if found.start() < at < found.end():
            return found.end() if forward else found.start()
        if found.start() >= at:
            break
    return at


# A fence line: its indentation, its run of ``` or ~~~, the rest (the opener's info string).
_FENCE_LINE = re.compile(r"^([ \t]*)(`{3,}|~{3,})(.*)$")
# CommonMark's line endings. str.splitlines also ends a line at a form feed, U+2028 and other
# separators, which Markdown reads as text: a ``` after one would be taken for the fence's end.
_LINE_END = re.compile(r"\r\n|\r|\n")


def fence_left_open(text: str) -> tuple[str, str] | None:
    """The (indentation, run) of a code fence `text` opens and never closes, at any indentation (a list
    item's too); None when every fence closes. A fence closes on a run of its own character at least
    as long as the opener's (CommonMark's rule); a backtick opener's info string holds no backtick."""
    open_run, indent = "", ""
    for line in _LINE_END.split(text):
        found = _FENCE_LINE.match(line)
        if found is None:
            continue
        lead, run, rest = found.groups()
        if open_run:
            # Only spaces and tabs may follow a closing run (str.strip would also take a no-break space).
            if run[0] == open_run[0] and len(run) >= len(open_run) and not rest.strip(" \t"):
                open_run = ""
        elif not (run[0] == "`" and "`" in rest):
            open_run, indent = run, lead
    return (indent, open_run) if open_run else None
