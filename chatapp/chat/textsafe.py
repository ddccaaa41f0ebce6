"""Text a database can store: what a model (or a client) may send that PostgreSQL or UTF-8 cannot hold.

PostgreSQL's text type refuses NUL (U+0000), and UTF-8 cannot encode a lone surrogate (U+D800 to U+DFFF
without its pair). A model may stream either (JSON allows "\\u0000" and unpaired "\\ud83d"), and a
reply that cannot be written loses all its text. Streams split surrogate pairs across chunks, so
text is made storable once it is whole, not chunk by chunk.
"""

from __future__ import annotations

import re

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


def text_problem(text: str) -> str | None:
    """Why a user's text cannot be stored as sent (None when it can): it is refused, not altered."""
    if "\x00" in text:
        return "The message contains a NUL character (U+0000), which cannot be stored. Remove it and send again."
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "The message contains an unpaired surrogate, which is not valid Unicode text. Remove it and send again."
    return None
