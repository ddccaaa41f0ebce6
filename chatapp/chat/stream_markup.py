"""A reply's Markdown drawn while it streams: now and then the text so far, rendered on the server.

The page shows a streaming reply's words as they come, as text; rendered once the reply is complete,
its code blocks, lists, tables and math appeared only at the end, all at once. Between deltas the
event stream now sends a `markup` event, `{"html": …}`: the reply so far through `markdown_render`
(sanitized, as every rendered message), which the page puts in place of what it shows, adding the
deltas that follow to its last block until the next one.

Each rendering reads the whole text so far, so they are spaced by their cost: never sooner than
`INTERVAL` after the last, nor sooner than `COST_SHARE` times its cost, which keeps them under a
twentieth of a core per stream however long the reply. A reply that streams within `INTERVAL` (a
short one, or a fast model) is rendered once, at its end, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from chatapp.chat.rendering import markdown_render

INTERVAL = 0.35  # seconds between two renderings at least
COST_SHARE = 20  # and at least this many times the last one's cost


class StreamMarkup:
    """Follows a turn's events; `after(event)` is the `markup` event to send after it, or None."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.text = ""
        self.rendered = 0  # characters of `text` the last markup event held
        self.due: float | None = None  # no rendering before the first delta
        self.ended = False

    def after(self, event: dict[str, Any]) -> dict[str, Any] | None:
        name = event.get("event")
        if name in ("done", "error"):
            self.ended = True  # the message they carry is rendered whole
        if self.ended or name != "delta":
            return None
        self.text += event["data"].get("text") or ""
        now = self.clock()
        if self.due is None:
            self.due = now + INTERVAL
            return None
        if now < self.due or len(self.text) == self.rendered:
            return None
        html = markdown_render(self.text, cached=False)
        cost = self.clock() - now
        self.due = now + max(INTERVAL, COST_SHARE * cost)
        self.rendered = len(self.text)
        return {"event": "markup", "data": {"html": html}}
