"""A conversation's running totals (`live_*`, `offline_reply_*`), stored and recounted from its rows."""

from __future__ import annotations

from django.db.models import Count, Sum

from chatapp.chat.context import live_chat_q, offline_reply_q
from chatapp.chat.models import Conversation, Message


def recount(conversation: Conversation) -> dict[str, int]:
    """The running totals recounted from the rows: live (sendable) chat messages, and the offline demo
    model's replies among them."""
    live = Message.objects.filter(live_chat_q(), conversation=conversation)
    every = live.aggregate(n=Count("id"), chars=Sum("char_count"), tokens=Sum("token_count"))
    offline = live.filter(offline_reply_q()).aggregate(n=Count("id"), chars=Sum("char_count"),
                                                        tokens=Sum("token_count"))
    return {
        "live_message_count": every["n"], "live_char_count": every["chars"] or 0,
        "live_token_count": every["tokens"] or 0, "offline_reply_count": offline["n"],
        "offline_reply_chars": offline["chars"] or 0, "offline_reply_tokens": offline["tokens"] or 0,
    }


def stored_totals(conversation: Conversation) -> dict[str, int]:
    return dict(Conversation.objects.filter(pk=conversation.pk).values(*recount(conversation)).get())
