"""The end of a turn: its reply stored once, with the live totals, the search and recall index, the
record's finish and the conversation's claim given back, in one transaction (chat_turn calls it)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

import optimizer
from chatapp.chat.context import is_offline_reply, message_is_live
from chatapp.chat.layout import message_place_get
from chatapp.chat.message_services import message_serialize
from chatapp.chat.models import Message
from chatapp.chat.record_finish import record_finish
from chatapp.chat.reply_stream import INTERRUPTED_WORDS
from chatapp.chat.rowsql import row_update, statements_run
from chatapp.chat.search_services import message_index_statements, message_index_sync
from chatapp.chat.textsafe import text_storable
from chatapp.chat.turn_claim import turn_claim_release_statement
from chatapp.chat.turn_types import ChatTurn, ReplyGoneError
from chatapp.providers import llm


def _stored_over(*, reply_id: int, status: str, values: dict[str, Any]) -> tuple[str, tuple[int, int, int]]:
    """Write a reply that ends stopped or failed over its row; returns the status stored and what the
    live totals gain. A stop already accepted (message_stop, from another process: this one learns of
    it by polling) stays a stop when the model then fails: the user kept that text. A stopped reply is
    live (context.live_chat_q), and message_stop may have counted it already with the text
    checkpointed then: the totals follow the row from what it was to what it is, so the reply is
    counted once, with its final text. Raises ReplyGoneError when the row is gone (the conversation
    was deleted)."""
    before = Message.objects.select_for_update().filter(pk=reply_id).values(
        "kind", "status", "superseded", "char_count", "token_count"
    ).first()
    if before is not None and status == Message.Status.ERROR and before["status"] == Message.Status.STOPPED:
        status, values = Message.Status.STOPPED, {**values, "error": ""}
    if before is None or not row_update(Message, where={"id": reply_id}, assign={"status": status, **values}):
        raise ReplyGoneError(reply_id)
    was = message_is_live(kind=before["kind"], status=before["status"], superseded=before["superseded"])
    now = message_is_live(kind=before["kind"], status=status, superseded=before["superseded"])
    return status, (
        int(now) - int(was),
        now * values["char_count"] - was * before["char_count"],
        now * values["token_count"] - was * before["token_count"],
    )


def reply_store(
    *,
    turn: ChatTurn,
    content: str,
    status: str,
    usage: Any,
    latency_ms: int,
    error: str = "",
    reasoning: str = "",
    finish_reason: str = "",
) -> dict[str, Any]:
    """Persist the reply once, at the end of the stream; returns the stored reply as an event dict.

    A stop request that lands after the last chunk still wins: the reply is then kept as stopped.
    A reply the orphan sweep took for dead (its heartbeat stalled) that completes after all is stored
    complete, unless a Retry has replaced it. Raises ReplyGoneError, storing nothing, when the
    conversation was deleted meanwhile.
    """
    content = text_storable(content)  # a NUL or an unpaired surrogate from the model must not lose the reply
    if not reasoning and not turn.target.offline:  # the demo repeats what it is sent: no template opened a block
        reasoning, content = llm.unopened_split(content)
    tokens = optimizer.count_message({"role": "assistant", "content": content}, model=turn.target.model)
    values: dict[str, Any] = {
        "content": content,
        # Not counted: the thinking is never sent back (providers.thinking).
        "reasoning": text_storable(reasoning).rstrip() or None,
        "token_count": tokens,
        "char_count": len(content),
        "latency_ms": latency_ms,
        "model": turn.target.model,
        "prompt_tokens": getattr(usage, "prompt_tokens", None),
        "completion_tokens": getattr(usage, "completion_tokens", None),
        "error": error,
        # Only a complete reply keeps it: a stopped one ended by the user's hand, a failed one by the error.
        # The endpoint's own word: a NUL or a lone surrogate in it failed the write, losing the reply.
        "finish_reason": (text_storable(finish_reason)[:32] or None) if status == Message.Status.COMPLETE else None,
        "updated_at": timezone.now(),
    }
    with transaction.atomic():
        where = {"id": turn.reply_id}
        counted = revived = False
        change = (0, 0, 0)  # what the live totals gain: (messages, characters, tokens)
        if status == Message.Status.COMPLETE:
            # Only a reply still streaming and still current counts: one superseded meanwhile (a
            # Retry took it for dead) is kept for the record but is not part of the live totals.
            counted = bool(row_update(Message, where={**where, "status": Message.Status.STREAMING, "superseded": False},
                                      assign={"status": status, **values}))
            swept = {"status": Message.Status.ERROR, "error": INTERRUPTED_WORDS, "superseded": False}
            revived = not counted and bool(row_update(Message, where={**where, **swept},
                                                      assign={"status": status, **values}))
            counted = counted or revived
            if counted:
                change = (1, len(content), tokens)
            else:
                status, values["finish_reason"] = Message.Status.STOPPED, None
        # Refused (401, 429, 5xx...) or never reached: no reply text, no thinking and no usage, nothing
        # billed (also when a stop was accepted before the refusal came, which keeps the reply stopped).
        # Thinking alone was billed: the model was at work when the stream broke.
        billed = not (status == Message.Status.ERROR and not content and not reasoning and usage is None)
        if not counted:
            status, change = _stored_over(reply_id=turn.reply_id, status=status, values=values)
        # The live totals (increments: concurrent writers add up) and the claim given back, in one statement.
        release = turn_claim_release_statement(
            conversation_id=turn.conversation_id, claimed_at=turn.claimed_at, messages=change[0], chars=change[1],
            tokens=change[2], offline=is_offline_reply(role=Message.Role.ASSISTANT, model=turn.target.model),
        )
        if counted and not revived:
            # It was streaming until this transaction, so nothing indexed it: its row is written here,
            # with the release in the same round trip (other tables, nothing read back).
            reply = Message(
                pk=turn.reply_id, conversation_id=turn.conversation_id, role=Message.Role.ASSISTANT,
                status=status, reply_to_id=turn.user_message_id, parent_id=turn.user_message_id,
                created_at=turn.reply_created_at or timezone.now(), **values,
            )
            statements_run([release, *message_index_statements(message=reply, owner_id=turn.user_id)])
        else:
            statements_run([release])
            message_index_sync(message_ids=[turn.reply_id])  # the reply's text and status arrive here
        if turn.record_id is not None:
            record_finish(turn=turn, usage=usage, billed=billed)
        if not counted or revived:
            reply = Message.objects.get(pk=turn.reply_id)
    # A reply is never the first user message: the window start alone places it.
    place = message_place_get(message=reply, first_user_id=None, window_start_id=turn.context.get("window_start_id"))
    return message_serialize(message=reply, place=place, siblings=turn.reply_siblings if counted else None)
