"""The "Not now" cooldown (issue 13, item 5): after the user answers "Not now" to "compact now?",
the chat does not ask again until the history has grown by another tenth of the budget.

The history level at the dismissal (the conversation's live history tokens, the measure the
trigger reads, without the fixed system prompts) is kept server-side on the dismissed job itself,
in its reason text, so it needs no column: "Not now: dismissed by the user (history at 41200 tokens)."
Only the newest job counts: a summary made or confirmed since ends the cooldown, and a question
that expired unanswered is not a dismissal.
"""

from __future__ import annotations

import re

from chatapp.chat.context import context_budget, conversation_config
from chatapp.chat.models import Conversation, SummaryJob
from chatapp.providers.llm import llm_target_for

# How much the history must grow past the dismissed level before the chat asks again (of the budget).
NOT_NOW_GROWTH_RATIO = 0.1

_LEVEL = re.compile(r"^Not now: dismissed by the user \(history at (\d+) tokens\)")


def not_now_reason(*, history_tokens: int) -> str:
    """The dismissed job's `error`: the user's answer and the history level it was given at."""
    return f"Not now: dismissed by the user (history at {int(history_tokens)} tokens)."


def not_now_level(*, reason: str) -> int | None:
    """The history level a "Not now" was given at; None for any other reason (or an old dismissal)."""
    match = _LEVEL.match(reason or "")
    return int(match.group(1)) if match else None


def history_tokens_now(*, conversation_id: int) -> int:
    """The live history's tokens, read fresh (the counter moves with every message)."""
    value = Conversation.objects.filter(pk=conversation_id).values_list("live_token_count", flat=True).first()
    return int(value or 0)


def summary_ask_silenced(*, conversation: Conversation) -> bool:
    """True while a "Not now" holds: the newest job of the chat was dismissed, and the history has
    not yet grown to the dismissed level plus NOT_NOW_GROWTH_RATIO of the current budget."""
    latest = (
        SummaryJob.objects.filter(conversation=conversation).order_by("-id").values_list("status", "error").first()
    )
    if latest is None or latest[0] != SummaryJob.Status.CANCELLED:
        return False
    level = not_now_level(reason=latest[1])
    if level is None:
        return False
    budget = context_budget(target=llm_target_for(config=conversation_config(conversation=conversation)))
    return history_tokens_now(conversation_id=conversation.pk) < level + NOT_NOW_GROWTH_RATIO * budget
