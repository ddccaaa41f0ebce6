"""A turn whose conversation was deleted (another tab) while it ran (chat_turn): how its stream ends. One
whose client left is answered all the same (chat_turn._turn_answer_unwatched)."""

from __future__ import annotations

from typing import Any

from chatapp.chat.reply_stream import stream_event

GONE_WORDS = "This conversation was deleted while the reply was being written; nothing more is stored."


def gone_event() -> dict[str, Any]:
    """The stream's end for a turn whose conversation was deleted (another tab): no message to show, no Retry."""
    return stream_event("error", {"message": None, "error": GONE_WORDS, "kind": "gone", "retryable": False})

