"""What a turn says when the messages that must be sent do not fit the model's budget: what they are,
and what the user can do about it."""

from __future__ import annotations

from chatapp.chat.context import live_chat_q
from chatapp.chat.models import Conversation, Message
from chatapp.chat.summary_selectors import summary_kept_pins
from optimizer.types import ContextTooLargeError


def too_large_words(*, conversation: Conversation, label: str, exc: ContextTooLargeError) -> str:
    """The error of a turn refused as too large for the model `label`.

    Messages the summary in use passed over as pinned stay must-keeps once unpinned, until a summary
    takes them in (context._passed_over_keep): with only those left, "unpin some messages" sent the
    user looking for pins that were not there, while compacting is what frees them.
    """
    live = Message.objects.filter(live_chat_q(), conversation=conversation)
    unpinned = live.filter(pk__in=summary_kept_pins(conversation=conversation), pinned=False).count()
    kept = f", and the {unpinned} you unpinned that the summary in use passed over" if unpinned else ""
    advice = [
        *(["compact the conversation (/compact) to fold those into the summary"] if unpinned else []),
        *(["unpin some messages"] if live.filter(pinned=True).exists() else []),
        "choose a model with a larger context window",
    ]
    todo = ", ".join(advice[:-1]) + (" or " if len(advice) > 1 else "") + advice[-1]
    return (
        f"This conversation can't be sent to {label}: the messages that must always be sent (system and "
        f"pinned messages, your first and your latest message{kept}) need {exc.needed:,} tokens, but the "
        f"model's budget is {exc.budget:,}. {todo[0].upper()}{todo[1:]}, then retry."
    )
