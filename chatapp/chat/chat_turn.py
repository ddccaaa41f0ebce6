"""A chat turn, top to bottom: the request path of every message sent.

1. `chat_turn_start` (sync, one short transaction): validate, claim the conversation (one turn at a
   time), store the user's message (`message_services`), pack the context once with the optimizer
   (`context_pack.context_build`), store the streaming placeholder and the optimization record
   (`turn_records`), and request a summary after commit when the strategy asks for one
   (`summary_requests`).
2. `chat_turn_stream` (async): hand the database connection back, stream the model's reply
   (`reply_stream`: deltas, stop requests, checkpoints), then `_turn_end`: store the reply once
   (`_turn_finish`), finish the record, and answer `done` with the gauge — or `error`.

Regenerate and Retry start the same way from an existing message (`chat_retry`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

import optimizer
from chatapp.chat import llm
from chatapp.chat.context import context_budget, conversation_config, first_user_message_id
from chatapp.chat.context_pack import context_build
from chatapp.chat.dbconn import db_connection_release, db_short
from chatapp.chat.gauge import context_gauge, gauge_payload
from chatapp.chat.layout import message_place_get, new_message_place
from chatapp.chat.message_services import (
    live_totals_add,
    message_append,
    message_content_validate,
    message_serialize,
    title_from_text,
)
from chatapp.chat.models import Conversation, Message
from chatapp.chat.reply_stream import STOPPED_WORDS, ReplyReader, failure_words, stream_event
from chatapp.chat.search_services import message_index_add, message_index_sync
from chatapp.chat.selectors import user_settings_get
from chatapp.chat.summary_requests import summary_ahead_submit, summary_request_submit
from chatapp.chat.textsafe import text_storable
from chatapp.chat.turn_records import (
    context_event,
    record_create,
    record_dropped_ranges,
    record_finish,
    turn_context_note,
)
from chatapp.chat.turn_types import ChatTurn, TurnFailure
from optimizer.types import ContextTooLargeError

logger = logging.getLogger(__name__)


def _user_message_payload(
    *, message: Message, first_user_id: int | None, window_start_id: int | None
) -> dict[str, Any]:
    """The user's message for the start event, with its place so the browser need not derive it; not
    rendered (the browser shows the user's text as typed; the API renders it)."""
    place = message_place_get(message=message, first_user_id=first_user_id, window_start_id=window_start_id)
    return message_serialize(message=message, place=place, render=False)


def turn_prepare(
    *,
    user: User,
    conversation: Conversation,
    user_message: Message,
    target: llm.LLMTarget,
    through_id: int | None,
) -> ChatTurn:
    prefs = user_settings_get(user=user)
    budget = context_budget(target=target)
    common: dict[str, Any] = {
        "conversation_id": conversation.pk,
        "user_message_id": user_message.pk,
        "target": target,
        "title": conversation.title,
        "user_id": user.pk,
    }
    try:
        result, ctx = context_build(
            conversation=conversation,
            preference=prefs.preference,
            target=target,
            auto_optimize=prefs.auto_optimize,
            through_id=through_id,
            instructions=prefs.custom_instructions,
        )
    except ContextTooLargeError as exc:
        error = (
            f"This conversation can't be sent to {target.label}: the messages that must always be sent "
            f"(system and pinned messages, your first and your latest message) need {exc.needed:,} tokens, "
            f"but the model's budget is {exc.budget:,}. Unpin some messages or choose a model with a "
            "larger context window, then retry."
        )
        reply = Message.objects.create(
            conversation=conversation,
            role=Message.Role.ASSISTANT,
            content="",
            status=Message.Status.ERROR,
            error=error,
            reply_to=user_message,
            parent=user_message,
            model=target.model,
        )
        message_index_add(message=reply)  # no text, so a no-op: kept so every create has its index call
        return ChatTurn(
            **common,
            user_message=_user_message_payload(
                message=user_message,
                first_user_id=first_user_message_id(conversation=conversation),
                window_start_id=conversation.window_start_id,
            ),
            reply_id=reply.pk,
            record_id=None,
            messages=[],
            context={**gauge_payload(tokens=exc.needed, budget=exc.budget, history_tokens=exc.needed,
                                     window_start_id=conversation.window_start_id, strategy="none",
                                     estimated=optimizer.is_estimated(target.model)),
                     "reason": "", "triggered": False, "recall": None},
            failure=TurnFailure(error=error, kind="context_too_large", retryable=False,
                                message=message_serialize(message=reply, place=None)),
        )

    info = result.info
    strategy, applied, triggered = info.strategy_chosen, info.optimization_applied, info.triggered
    # The window this request used (None: everything was sent), as the gauge reports it too.
    window_start_id = int(result.window_start) if result.window_start is not None else None
    dropped = record_dropped_ranges(ctx=ctx, result=result)
    with transaction.atomic(savepoint=False):  # nested in a turn: no savepoint round trips
        reply = Message.objects.create(
            conversation=conversation,
            role=Message.Role.ASSISTANT,
            content="",
            status=Message.Status.STREAMING,
            reply_to=user_message,
            parent=user_message,
            model=target.model,
        )
        message_index_add(message=reply)  # empty while streaming; _turn_finish indexes its text
        record = record_create(
            conversation=conversation, reply=reply, preference=prefs.preference, target=target, budget=budget,
            result=result, ctx=ctx, window_start_id=window_start_id, dropped=dropped,
        )
        # Counted when the window actually moved (the trigger fired), not on every request after.
        # Summaries are counted by the worker when one is saved (summary_writing.summary_save):
        # the selector's "summaries so far" means summaries made, not summarize decisions.
        if applied and triggered and strategy == "truncate":
            Conversation.objects.filter(pk=conversation.pk).update(truncation_count=F("truncation_count") + 1)
        span = result.summary_span
        if strategy == "summarize" and span is not None:
            conversation_id = conversation.pk
            # After commit (the worker must see this turn) and in the background: see summary_request_submit.
            transaction.on_commit(
                lambda: summary_request_submit(conversation_id=conversation_id, span=span, trigger="auto"),
                robust=True,
            )
    return ChatTurn(
        **common,
        user_message=_user_message_payload(
            message=user_message, first_user_id=ctx.first_user_id, window_start_id=window_start_id
        ),
        reply_id=reply.pk,
        record_id=record.pk,
        messages=ctx.request.messages if ctx.request is not None else [],
        context=context_event(result=result, budget=budget, window_start_id=window_start_id, ctx=ctx),
        context_note=turn_context_note(result=result, budget=budget) if target.offline else "",
        trigger_tokens=info.trigger_tokens,
        dropped_ranges=tuple((first, last) for first, last in dropped),
    )


def target_for(*, conversation: Conversation) -> llm.LLMTarget:
    return llm.llm_target_for(config=conversation_config(conversation=conversation))


def chat_turn_start(
    *, user: User, conversation: Conversation, content: Any, client_key: str = ""
) -> ChatTurn:
    """Validate and store the user's message, pack the context and prepare the reply.

    Raises ValidationError (empty / not text) or MessageTooLarge before anything is stored, and
    ValidationError(code="conflict") when `client_key` was already sent in this conversation or a
    reply is still streaming in it (another tab): sends are one at a time, never interleaved.
    """
    text = message_content_validate(content=content)
    client_key = str(client_key or "")
    if len(client_key) > 64:
        raise ValidationError({"client_key": "At most 64 characters."}, code="invalid")
    target = target_for(conversation=conversation)
    with transaction.atomic():
        send_claim(conversation=conversation, client_key=client_key)
        # Nothing sendable yet means no user message yet (they always count): the first exchange.
        first = not conversation.title_is_custom and conversation.live_message_count == 0
        user_message = message_append(
            conversation=conversation, role=Message.Role.USER, content=text, token_model=target.model,
            client_key=client_key,
        )
        if first:
            conversation.title = title_from_text(text=text)
            Conversation.objects.filter(pk=conversation.pk).update(title=conversation.title)
        # One transaction for the whole start: each commit costs an fsync on PostgreSQL, and the
        # first byte of the reply waits for it. A turn the context cannot hold still commits the
        # user message (with an error reply), since turn_prepare handles that case itself.
        return turn_prepare(
            user=user, conversation=conversation, user_message=user_message, target=target, through_id=None
        )


def send_claim(*, conversation: Conversation, client_key: str) -> None:
    """Serialize sends to one conversation: lock its row until this turn's transaction commits (with
    its streaming reply), then refuse a repeated client key or a reply still streaming there."""
    Conversation.objects.select_for_update().filter(pk=conversation.pk).values_list("pk", flat=True).get()
    live = Q(status=Message.Status.STREAMING,
             updated_at__gte=timezone.now() - timedelta(seconds=settings.STREAM_ORPHAN_SECONDS))
    if client_key:
        live |= Q(client_key=client_key)
    # Unordered: served by the streaming partial index and the client-key unique index, never by a
    # walk over the conversation's messages in id order.
    clashes = list(Message.objects.filter(live, conversation=conversation).order_by().values_list(
        "client_key", flat=True)[:2])
    if not clashes:
        return
    clash = client_key if client_key in clashes else clashes[0]
    if client_key and clash == client_key:
        raise ValidationError("This message was already sent (the same send arrived twice).", code="conflict")
    raise ValidationError(
        "A reply is still being written in this chat (in another tab or device?). Wait for it or stop "
        "it, then send again: your text is kept.", code="conflict",
    )


def latest_exchange_check(*, user_message: Message) -> None:
    if user_message.superseded:
        raise ValidationError("This message is not on the branch shown; switch to it first.", code="off_path")
    later = Message.objects.filter(
        conversation_id=user_message.conversation_id,
        role=Message.Role.USER,
        kind=Message.Kind.CHAT,
        superseded=False,  # later messages of other branches do not count: this one ends the path
        id__gt=user_message.pk,
    ).exists()
    if later:
        raise ValidationError("Only the latest exchange can be regenerated or retried.", code="not_latest")


def _turn_finish(
    *,
    turn: ChatTurn,
    content: str,
    status: str,
    usage: Any,
    latency_ms: int,
    error: str = "",
) -> dict[str, Any]:
    """Persist the reply once, at the end of the stream; returns the stored reply as an event dict.

    A stop request that lands after the last chunk still wins: the reply is then kept as stopped.
    """
    content = text_storable(content)  # a NUL or an unpaired surrogate from the model must not lose the reply
    tokens = optimizer.count_message({"role": "assistant", "content": content}, model=turn.target.model)
    values: dict[str, Any] = {
        "content": content,
        "token_count": tokens,
        "char_count": len(content),
        "latency_ms": latency_ms,
        "model": turn.target.model,
        "prompt_tokens": getattr(usage, "prompt_tokens", None),
        "completion_tokens": getattr(usage, "completion_tokens", None),
        "error": error,
        "updated_at": timezone.now(),
    }
    with transaction.atomic():
        reply_qs = Message.objects.filter(pk=turn.reply_id)
        if status == Message.Status.COMPLETE:
            # Only a reply still streaming and still current counts: one superseded meanwhile (a
            # Retry took it for dead) is kept for the record but is not part of the live totals.
            done = reply_qs.filter(status=Message.Status.STREAMING, superseded=False).update(
                status=status, **values
            )
            if done:
                live_totals_add(
                    conversation_id=turn.conversation_id, messages=1, chars=len(content), tokens=tokens
                )
            else:
                status = Message.Status.STOPPED
                reply_qs.update(status=status, **values)
        else:
            reply_qs.update(status=status, **values)
            Conversation.objects.filter(pk=turn.conversation_id).update(updated_at=timezone.now())
        message_index_sync(message_ids=[turn.reply_id])  # the reply's text and status arrive here
        if turn.record_id is not None:
            record_finish(turn=turn, usage=usage)
        reply = Message.objects.get(pk=turn.reply_id)
    # A reply is never the first user message: the window start alone places it.
    place = message_place_get(message=reply, first_user_id=None, window_start_id=turn.context.get("window_start_id"))
    return message_serialize(message=reply, place=place)


def _after_turn(*, turn: ChatTurn) -> tuple[dict[str, Any] | None, str]:
    conversation = Conversation.objects.select_related("llm_config", "owner").get(pk=turn.conversation_id)
    try:
        gauge = context_gauge(conversation=conversation, user=conversation.owner, target=turn.target)
    except Exception:
        # The reply is stored; a gauge that cannot be computed must not turn success into an error.
        logger.exception("context gauge failed for conversation %s", turn.conversation_id)
        gauge = None
    return gauge, conversation.title


async def chat_turn_stream(*, turn: ChatTurn) -> AsyncIterator[dict[str, Any]]:
    """Stream one reply as SSE event dicts: start, delta…, then done or error.

    While the model is silent for settings.SSE_KEEPALIVE_SECONDS, `KEEPALIVE` (a comment, no event)
    is yielded in between.

    The reply is persisted exactly once — also when the client goes away mid-stream (then it is
    kept as stopped) — and the user's message is never removed.
    """
    start = stream_event(
        "start",
        {
            "user_message": turn.user_message,
            "assistant_message": {
                "id": turn.reply_id,
                "status": Message.Status.ERROR if turn.failure is not None else Message.Status.STREAMING,
                "place": new_message_place(role=Message.Role.ASSISTANT, is_first_user=False),
            },
            "context": turn.context,
            # the title a first message gives the chat, also when its reply then fails
            "title": turn.title,
        },
    )
    if turn.failure is not None:
        yield start
        yield stream_event(
            "error",
            {
                "message": turn.failure.message,
                "error": turn.failure.error,
                "kind": turn.failure.kind,
                "retryable": turn.failure.retryable,
            },
        )
        return
    # The turn was prepared with a connection this request still holds: give it back before the
    # model is waited on (see dbconn), and before the model call starts.
    await sync_to_async(db_connection_release)()
    reader = ReplyReader(turn, store=_turn_finish)
    try:
        yield start
        async for event in reader.read():
            yield event
    except (GeneratorExit, asyncio.CancelledError):
        # The client went away mid-stream: keep what arrived, as a stopped reply.
        await reader.abandon()
        raise
    finally:
        await reader.close()
    yield await _turn_end(reader)


async def _turn_end(reader: ReplyReader) -> dict[str, Any]:
    """Store the reply and say how it ended: `done` (with the gauge) or `error`."""
    turn = reader.turn
    if reader.stopped:
        message = await reader.finish(Message.Status.STOPPED)
        return stream_event("error", {"message": message, "error": STOPPED_WORDS, "kind": "stopped",
                                "retryable": True})
    if reader.failure is not None:
        words, kind, retryable = failure_words(reader.failure)
        message = await reader.finish(Message.Status.ERROR, error=words)
        return stream_event("error", {"message": message, "error": words, "kind": kind, "retryable": retryable})
    message = await reader.finish(Message.Status.COMPLETE)
    if message["status"] == Message.Status.STOPPED:  # the stop request landed after the last chunk
        return stream_event("error", {"message": message, "error": STOPPED_WORDS, "kind": "stopped",
                                "retryable": True})
    gauge = turn.gauge_without_repacking(reply_tokens=message["token_count"])
    title = turn.title
    if gauge is None:
        gauge, title = await db_short(_after_turn)(turn=turn)
    margin = turn.summary_ahead_due(reply_tokens=message["token_count"])
    if margin is not None:
        # Planned and requested in the background: nothing here waits for it.
        summary_ahead_submit(conversation_id=turn.conversation_id, target=turn.target, margin_tokens=margin)
    return stream_event("done", {"message": message, "context": gauge, "title": title})
