"""A turn whose client left before its response's body began, or whose conversation was deleted before it
was packed (chat_turn): what it began is finished, so the claim is given back and nothing is left half-done."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from chatapp.chat.reply_stream import stream_event
from chatapp.chat.search_services import message_index_add
from chatapp.chat.turn_claim import turn_claim_release
from chatapp.chat.turn_types import TurnStart

GONE_WORDS = "This conversation was deleted while the reply was being written; nothing more is stored."


def gone_event() -> dict[str, Any]:
    """The stream's end for a turn whose conversation was deleted (another tab): no message to show, no Retry."""
    return stream_event("error", {"message": None, "error": GONE_WORDS, "kind": "gone", "retryable": False})


def turn_unstarted_end(*, start: TurnStart) -> None:
    """Give back a turn whose context was never packed (the client left first): the message stays,
    indexed, with no reply (Retry answers it), and the conversation takes sends again."""
    with transaction.atomic():
        if start.unindexed:
            message_index_add(message=start.user_message)
        turn_claim_release(conversation_id=start.conversation.pk, claimed_at=start.claimed_at)
