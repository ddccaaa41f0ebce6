"""What a turn says when the messages that must be sent do not fit the model's budget: what they are,
and what the user can do about it."""

from __future__ import annotations

from chatapp.chat.context import live_chat_q
from chatapp.chat.models import Conversation, Message
from chatapp.chat.summary_selectors import summary_kept_pins
from chatapp.providers.llm.types import LLMTarget
from optimizer.types import ContextTooLargeError


def too_large_words(*, conversation: Conversation, target: LLMTarget, exc: ContextTooLargeError) -> str:
    """The error of a turn refused as too large for `target`'s budget.

    Messages the summary in use passed over as pinned stay must-keeps once unpinned, until a summary
    takes them in (context._passed_over_keep): with only those left, "unpin some messages" sent the
    user looking for pins that were not there, while compacting is what frees them. When they would
    fit the window but for the tokens the config keeps for the reply, it says so: lowering Max output
    tokens makes room.
    """
    live = Message.objects.filter(live_chat_q(), conversation=conversation)
    unpinned = live.filter(pk__in=summary_kept_pins(conversation=conversation), pinned=False).count()
    kept = f", and the {unpinned} you unpinned that the summary in use passed over" if unpinned else ""
    output_kept = not target.offline and exc.needed < target.context_window
    advice = [
        *([f"lower Max output tokens of “{target.label}” in Settings"] if output_kept else []),
        *(["compact the conversation (/compact) to fold those into the summary"] if unpinned else []),
        *(["unpin some messages"] if live.filter(pinned=True).exists() else []),
        "choose a model with a larger context window",
    ]
    todo = ", ".join(advice[:-1]) + (" or " if len(advice) > 1 else "") + advice[-1]
    budget = f"{exc.budget:,}"
    if output_kept:
        budget += (f" (its {target.context_window:,}-token context window less the {target.max_output_tokens:,} "
                   "tokens kept for the reply)")
    return (
        f"This conversation can't be sent to {target.label}: the messages that must always be sent (system and "
        f"pinned messages, your first and your latest message{kept}) need {exc.needed:,} tokens, but the "
        f"model's budget is {budget}. {todo[0].upper()}{todo[1:]}, then retry."
    )
