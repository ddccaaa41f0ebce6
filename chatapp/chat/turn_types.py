"""A chat turn between its start and its stream: what the start stored (`TurnStart`), what the
packing prepared (`ChatTurn`), and what follows from it.

`chat_turn.chat_turn_start` (or a `chat_retry` starter) makes a TurnStart; `chat_turn.turn_pack`
makes the ChatTurn that `chat_turn.chat_turn_stream` (through `reply_stream`) streams.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from chatapp.chat.gauge import gauge_payload
from chatapp.providers import llm
from optimizer.tokens import REPLY_PRIMING

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from chatapp.chat.models import Conversation, Message
    from chatapp.dashboard.totals import PreviousRequest
    from optimizer.types import PackResult


class ReplyGoneError(Exception):
    """The reply's row is gone, or could not be opened: its conversation was deleted (another tab) while the
    reply streamed, or while the turn waited to be packed."""


@dataclass(frozen=True, slots=True)
class TurnStart:
    """A turn acknowledged: the conversation claimed and the user's message stored; not packed yet.

    What the client hears first (the `accepted` event). The instances stay in this request's
    process: the packing follows in the same stream, under the claim."""

    user: User
    conversation: Conversation
    user_message: Message
    target: llm.LLMTarget
    through_id: int | None  # the packing's last message (regenerate, retry: the message answered)
    claimed_at: datetime | None
    accepted: dict[str, Any]
    # A send stores its message with one statement; its search and recall rows follow in the packing.
    unindexed: bool = False


def shaped_trigger(result: PackResult) -> int:
    """`ChatTurn.trigger_tokens` of a packing: its trigger in the terms of the gauge's figures. The packer
    judges the request as packed, the gauge counts it as shaped (optimizer.shape: the prompts joined,
    consecutive turns merged), fewer tokens by what shaping saved; the next request's shaping saves the same."""
    packed = sum(p.tokens for p in result.messages) + REPLY_PRIMING
    return result.info.trigger_tokens - (packed - result.info.tokens_after)


@dataclass(frozen=True, slots=True)
class TurnFailure:
    """A turn that cannot reach the model at all (the kept messages alone exceed the budget)."""

    error: str
    kind: str
    retryable: bool
    message: dict[str, Any]  # the stored error reply (message_serialize)


@dataclass(frozen=True, slots=True)
class ChatTurn:
    conversation_id: int
    user_message_id: int
    reply_id: int
    record_id: int | None
    target: llm.LLMTarget
    messages: list[dict[str, Any]]
    user_message: dict[str, Any]
    context: dict[str, Any]
    title: str
    user_id: int
    failure: TurnFailure | None = None
    # What the optimizer did, in a sentence: read only by the offline model, which describes it.
    context_note: str = ""
    # The trigger of this turn's packing: below it, the next request sends this context plus the reply.
    # In the terms of `context`'s figures (the request as shaped): the trigger less what shaping saved.
    trigger_tokens: int | None = None
    # The tokens the turn dropped, measured when it ends (record_finish): the live tokens of these
    # ranges less `dropped_less` (turn_records.DroppedRanges).
    dropped_ranges: tuple[tuple[int, int], ...] = ()
    dropped_less: int = 0
    # The conversation's claim this turn holds (turn_claim), given back when its reply is stored.
    claimed_at: datetime | None = None
    # The record as the dashboard's totals counted it, and the request before it (record_finish).
    record_facts: dict[str, Any] | None = None
    record_previous: PreviousRequest | None = None
    # The reply's place among its siblings (parent's children), and when it was opened: its final
    # shape is then built without reading it back.
    reply_siblings: tuple[int, int] = (1, 1)
    reply_created_at: datetime | None = None
    # A summary was requested when the turn was packed: it is created a moment later, in the
    # background (summary_requests), so the page is told to look for it rather than to find it.
    summary_requested: bool = False
    # The model names the chat once this reply is complete (title_services.title_due).
    title_due: bool = False

    def _stable_tokens(self) -> int:
        """What this turn sent but its recall block: the part the trigger judges (the window, the
        static messages, the summary). The block quotes for one message only; the next request quotes
        for its own."""
        recall = self.context.get("recall") or {}
        return int(self.context["tokens"]) - int(recall.get("tokens") or 0)

    def gauge_without_repacking(self, *, reply_tokens: int) -> dict[str, Any] | None:
        """The gauge after a complete reply, when it can be known without packing again.

        Below the trigger nothing moves: the next request sends this turn's context plus the reply
        (before the next message is typed), as context_gauge would compute it, this turn's recall
        block standing for the next one. The trigger judges the context without its recall block, so
        a block that takes the total past the trigger does not move the window. At or above the
        trigger, or when the total would not fit the budget (the block would be cut to the room
        left), the next request repacks, so the caller asks context_gauge. So does a turn that cut:
        its recall block filled the room the cut freed (all of it, before any window was stored), and
        the next request, packed against the window this one stored, quotes in far less: counted as
        the next one's, the block put the gauge at 67 % where the context endpoint says 40 %.
        """
        if self.trigger_tokens is None or self.context.get("triggered"):
            return None
        tokens = int(self.context["tokens"]) + reply_tokens
        budget = int(self.context["budget"])
        if self._stable_tokens() + reply_tokens >= self.trigger_tokens or tokens > budget:
            return None
        return gauge_payload(
            tokens=tokens,
            budget=budget,
            history_tokens=int(self.context["history_tokens"]) + reply_tokens,
            window_start_id=self.context["window_start_id"],
            strategy=self.context["strategy"],
            estimated=self.context["estimated"],
            summary_through_id=self.context.get("summary_through_id"),
            summary_quota_reached=bool(self.context.get("summary_quota_reached")),
            prompt_shortened=bool(self.context.get("prompt_shortened")),
            shortened_message_ids=list(self.context.get("shortened_message_ids") or []),
        )

    def summary_ahead_due(self, *, reply_tokens: int) -> int | None:
        """The expected size of the next exchange when it would take the next request past the trigger
        (so a summary should be started now, ahead of need); None when it would not.

        The next exchange is assumed to be like this one. Below the trigger the next request starts from
        this turn's context plus the reply, its recall block aside (see gauge_without_repacking).
        """
        if self.trigger_tokens is None or self.failure is not None:
            return None
        margin = int(self.user_message.get("token_count") or 0) + reply_tokens
        if self._stable_tokens() + reply_tokens + margin < self.trigger_tokens:
            return None
        return margin
