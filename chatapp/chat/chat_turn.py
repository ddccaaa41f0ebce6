"""A chat turn, top to bottom: the request path of every message sent.

1. `chat_turn_start` (sync, the view): validate, claim the conversation (one turn at a time) and
   store the user's message (`turn_claim`): on PostgreSQL one statement for a plain send, else one
   short transaction. The client hears `accepted` at once.
2. `chat_turn_stream` (async, the response body): `turn_pack` (sync, one transaction): index the
   message for search and recall, pack the context once with the optimizer
   (`context_pack.context_build`), store the streaming placeholder and the optimization record
   (`turn_records`), and request a summary after commit when the strategy asks for one
   (`summary_requests`); the client hears `start`. Then, with the database connection handed back,
   the model's reply streams (`reply_stream`: deltas, stop requests, checkpoints), and `_turn_end`
   stores the reply once (`reply_store`, which gives the claim back), finishes the record, and
   answers `done` with the gauge — or `error`.

Regenerate, Retry and Edit start the same way from an existing message (`chat_retry`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Sequence
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import F

import optimizer
from chatapp.chat.admission import pack_gate
from chatapp.chat.context import context_budget, conversation_config, first_user_message_id
from chatapp.chat.context_pack import context_build_for
from chatapp.chat.dbconn import db_short
from chatapp.chat.gauge import context_gauge, too_large_gauge
from chatapp.chat.image_services import ImageUpload, images_tokens
from chatapp.chat.layout import message_place_get, new_message_place
from chatapp.chat.message_services import (
    client_key_validate,
    message_content_validate,
    message_serialize,
    title_from_text,
)
from chatapp.chat.models import Conversation, Message
from chatapp.chat.reply_store import reply_store
from chatapp.chat.reply_stream import STOPPED_WORDS, ReplyReader, failure_fields, stream_event
from chatapp.chat.rowsql import row_create
from chatapp.chat.search_services import message_index_add
from chatapp.chat.selectors import user_settings_get
from chatapp.chat.summary_requests import summary_ahead_submit, summary_request_submit
from chatapp.chat.title_services import title_due, title_pending_drop, title_pending_mark, title_request
from chatapp.chat.too_large import too_large_words
from chatapp.chat.turn_claim import RepeatedSend, send_store, turn_claim_release
from chatapp.chat.turn_left import gone_event
from chatapp.chat.turn_records import context_event, record_create, record_dropped_ranges, turn_context_note
from chatapp.chat.turn_types import ChatTurn, ReplyGoneError, TurnFailure, TurnStart, shaped_trigger
from chatapp.providers import llm
from optimizer.types import ContextTooLargeError

logger = logging.getLogger(__name__)

PACK_FAILED_WORDS = "The context for this reply could not be prepared (a server error). Your message is kept: retry."


def _user_message_payload(
    *, message: Message, first_user_id: int | None, window_start_id: int | None,
    siblings: tuple[int, int] | None = None, has_images: bool = True,
) -> dict[str, Any]:
    """The user's message for the start event, with its place so the browser need not derive it; not
    rendered (the browser shows the user's text as typed; the API renders it); images read if any."""
    place = message_place_get(message=message, first_user_id=first_user_id, window_start_id=window_start_id)
    return message_serialize(message=message, place=place, render=False, siblings=siblings,
                             images=None if has_images else [])


def target_for(*, conversation: Conversation) -> llm.LLMTarget:
    return llm.llm_target_for(config=conversation_config(conversation=conversation))


def chat_turn_start(
    *, user: User, conversation: Conversation, content: Any, client_key: str = "", parent_id: int | None = None,
    images: Sequence[ImageUpload] = (),
) -> TurnStart:
    """Validate, claim the conversation and store the user's message; the context is packed in the
    stream (`turn_pack`), after the client has heard that the message is stored.

    Raises ValidationError (empty / not text) or MessageTooLarge before anything is stored, and
    ValidationError(code="conflict") when `client_key` was already sent in this conversation or a
    turn is still running in it (another tab): sends are one at a time, never interleaved; also when
    `parent_id` is given and the chat's last message is another one now (send_claim_take).
    """
    text = message_content_validate(content=content, with_images=bool(images))
    client_key = client_key_validate(client_key=client_key)
    config = conversation_config(conversation=conversation)
    target = llm.llm_target_for(config=config)
    tokens = optimizer.count_message({"role": Message.Role.USER, "content": text}, model=target.model)
    tokens += images_tokens(images)  # `images`: image_services.images_validate's, at a seeing model's cost
    # The title a first message gives (the claim's UPDATE decides whether it is the first).
    title = conversation.title
    if not conversation.title_is_custom and conversation.live_message_count == 0:
        title = title_from_text(text=text, image_names=[i.name for i in images])
    try:
        claim, user_message, stored = send_store(conversation=conversation, text=text, tokens=tokens, title=title,
                                                 client_key=client_key, parent_id=parent_id, images=images)
    except IntegrityError:
        # msg_conv_client_key_uniq: the same send, arrived again after the first one's reply ended.
        if client_key and Message.objects.filter(conversation=conversation, client_key=client_key).exists():
            raise RepeatedSend from None
        raise
    # The newest message of the path, the only child of its parent: no sibling query needed.
    accepted = message_serialize(
        message=user_message, place=new_message_place(role=Message.Role.USER, is_first_user=claim.first),
        render=False, siblings=(1, 1), images=stored,
    )
    return TurnStart(
        user=user, conversation=conversation, user_message=user_message, target=target, through_id=None,
        claimed_at=claim.claimed_at, unindexed=True,
        # `model`: what answers, as the page's model menu names it (a chat whose model was deleted
        # elsewhere is answered by the default, and the menu follows).
        accepted={"user_message": accepted, "title": claim.title, "model": str(config.pk) if config else "offline"},
    )


def turn_pack(*, start: TurnStart) -> ChatTurn:
    """Pack the context of an acknowledged turn and open its reply (one transaction). A failure here
    keeps the user's message: the turn ends with an error reply and gives the claim back."""
    try:
        with transaction.atomic():
            if start.unindexed:
                message_index_add(message=start.user_message)  # recall and search find it from this commit on
            return turn_prepare(
                user=start.user, conversation=start.conversation, user_message=start.user_message,
                target=start.target, through_id=start.through_id, claimed_at=start.claimed_at,
                # A send's message is the newest of the path, the only child of its parent.
                user_siblings=(1, 1) if start.unindexed else None,
            )
    except Exception:
        if not Conversation.objects.filter(pk=start.conversation.pk).exists():
            # Deleted (another tab) while the turn waited in line or was packed: its rows were refused.
            raise ReplyGoneError(start.user_message.pk) from None
        logger.exception("packing the context failed in conversation %s", start.conversation.pk)
        with transaction.atomic():
            if start.unindexed:
                message_index_add(message=start.user_message)
            return _turn_failed(start=start, error=PACK_FAILED_WORDS, kind="server_error", retryable=True,
                                context={"reason": "", "triggered": False, "recall": None})


def _turn_failed(
    *, start: TurnStart, error: str, kind: str, retryable: bool, context: dict[str, Any]
) -> ChatTurn:
    """A turn that cannot reach the model: its reply stored as an error, the claim given back."""
    conversation, user_message = start.conversation, start.user_message
    reply = Message.objects.create(
        conversation=conversation, role=Message.Role.ASSISTANT, content="", status=Message.Status.ERROR,
        error=error, reply_to=user_message, parent=user_message, model=start.target.model,
    )
    message_index_add(message=reply)  # no text, so a no-op: kept so every create has its index call
    turn_claim_release(conversation_id=conversation.pk, claimed_at=start.claimed_at)
    return ChatTurn(
        conversation_id=conversation.pk, user_message_id=user_message.pk, target=start.target,
        title=conversation.title, user_id=start.user.pk,
        user_message=_user_message_payload(
            message=user_message, first_user_id=first_user_message_id(conversation=conversation),
            window_start_id=conversation.window_start_id,
        ),
        reply_id=reply.pk, record_id=None, messages=[], context=context,
        failure=TurnFailure(error=error, kind=kind, retryable=retryable,
                            message=message_serialize(message=reply, place=None)),
    )


def turn_prepare(
    *,
    user: User,
    conversation: Conversation,
    user_message: Message,
    target: llm.LLMTarget,
    through_id: int | None,
    claimed_at: datetime | None = None,
    user_siblings: tuple[int, int] | None = None,
) -> ChatTurn:
    prefs = user_settings_get(user=user)
    budget = context_budget(target=target)
    try:
        result, ctx = context_build_for(prefs=prefs, conversation=conversation, target=target, through_id=through_id)
    except ContextTooLargeError as exc:
        error = too_large_words(conversation=conversation, target=target, exc=exc)
        context = {**too_large_gauge(exc=exc, conversation=conversation, target=target),
                   "reason": "", "triggered": False, "recall": None}
        start = TurnStart(user=user, conversation=conversation, user_message=user_message, target=target,
                          through_id=through_id, claimed_at=claimed_at, accepted={})
        return _turn_failed(start=start, error=error, kind="context_too_large", retryable=False, context=context)

    info = result.info
    strategy, applied, triggered = info.strategy_chosen, info.optimization_applied, info.triggered
    # The window this request used (None: everything was sent), as the gauge reports it too.
    window_start_id = int(result.window_start) if result.window_start is not None else None
    dropped = record_dropped_ranges(ctx=ctx, result=result)
    with transaction.atomic(savepoint=False):  # nested in a turn: no savepoint round trips
        reply = row_create(
            Message,
            conversation=conversation,
            role=Message.Role.ASSISTANT,
            content="",
            status=Message.Status.STREAMING,
            reply_to=user_message,
            parent=user_message,
            model=target.model,
        )
        message_index_add(message=reply)  # empty while streaming; reply_store indexes its text
        created = record_create(
            conversation=conversation, reply=reply, preference=prefs.preference, target=target, budget=budget,
            result=result, ctx=ctx, window_start_id=window_start_id, dropped=dropped.ranges,
        )
        # A new message's reply is its only child; an answer again (regenerate, retry) is the last of them.
        siblings = 1 if through_id is None else Message.objects.filter(parent=user_message).count()
        # Counted when the window actually moved (the trigger fired), not on every request after.
        # Summaries are counted by the worker when one is saved (summary_writing.summary_save):
        # the selector's "summaries so far" means summaries made, not summarize decisions.
        if applied and triggered and strategy == "truncate":
            Conversation.objects.filter(pk=conversation.pk).update(truncation_count=F("truncation_count") + 1)
        span = result.summary_span
        summary_requested = strategy == "summarize" and span is not None
        if summary_requested:
            conversation_id = conversation.pk
            # After commit (the worker must see this turn) and in the background: see summary_request_submit.
            transaction.on_commit(
                lambda: summary_request_submit(conversation_id=conversation_id, span=span, trigger="auto"),
                robust=True,
            )
    return ChatTurn(
        conversation_id=conversation.pk, user_message_id=user_message.pk, target=target,
        title=conversation.title, user_id=user.pk, claimed_at=claimed_at,
        user_message=_user_message_payload(
            message=user_message, first_user_id=ctx.first_user_id, window_start_id=window_start_id,
            siblings=user_siblings, has_images=conversation.has_images,
        ),
        reply_id=reply.pk,
        record_id=created.record.pk,
        record_facts=created.facts,
        record_previous=created.previous,
        reply_siblings=(siblings, siblings),
        reply_created_at=reply.created_at,
        messages=ctx.request.messages if ctx.request is not None else [],
        context=context_event(result=result, budget=budget, ctx=ctx),
        context_note=turn_context_note(result=result, budget=budget) if target.offline else "",
        trigger_tokens=shaped_trigger(result),
        dropped_ranges=tuple((first, last) for first, last in dropped.sum_ranges),
        dropped_less=dropped.less,
        summary_requested=summary_requested,
        title_due=title_due(prefs=prefs, conversation=conversation, target=target),
    )


def _after_turn(*, turn: ChatTurn) -> tuple[dict[str, Any] | None, str]:
    conversation = Conversation.objects.select_related("llm_config", "owner").filter(pk=turn.conversation_id).first()
    if conversation is None:
        # Deleted (another tab) just after the reply was stored: the stream ends as for one deleted mid-reply.
        raise ReplyGoneError(turn.reply_id)
    try:
        gauge = context_gauge(conversation=conversation, user=conversation.owner, target=turn.target)
    except Exception:
        # The reply is stored; a gauge that cannot be computed must not turn success into an error.
        logger.exception("context gauge failed for conversation %s", turn.conversation_id)
        gauge = None
    return gauge, conversation.title


async def chat_turn_stream(*, start: TurnStart) -> AsyncGenerator[dict[str, Any], None]:
    """Stream one turn as SSE event dicts: accepted, start, delta…, then done or error.

    `accepted` goes out before anything else is done (the message is stored); `start` once the
    context is packed and the reply opened. While the model is silent for
    settings.SSE_KEEPALIVE_SECONDS, `KEEPALIVE` (a comment, no event) is yielded in between.

    The reply is persisted exactly once — also when the client goes away, before `start` or mid-stream:
    it is then read to its end without the client (ReplyReader.detach) — and the user's message is
    never removed.
    """
    packing: asyncio.Future[ChatTurn] | None = None
    try:
        yield stream_event("accepted", start.accepted)
        # Shielded: a client that leaves meanwhile must not leave a reply opened and never finished.
        packing = asyncio.ensure_future(_turn_pack_gated(start))
        turn = await asyncio.shield(packing)
    except ReplyGoneError:
        yield gone_event()
        return
    except (GeneratorExit, asyncio.CancelledError):
        await _turn_answer_unwatched(start=start, packing=packing)
        raise
    # Closed with this one: a client that leaves mid-reply reaches turn_stream now, not when the
    # stream is collected.
    async with contextlib.aclosing(turn_stream(turn=turn)) as events:
        async for event in events:
            yield event


async def _turn_answer_unwatched(*, start: TurnStart, packing: asyncio.Future[ChatTurn] | None) -> None:
    """The client left before the reply began (a connection dropped just after the send): the message
    is stored, so it is answered all the same, as when the client leaves mid-stream. The packing is
    awaited here, in the request, which its database work needs; the reply is read without it."""
    with contextlib.suppress(ReplyGoneError):  # deleted with its conversation: nothing to answer
        turn = await (packing if packing is not None else asyncio.ensure_future(_turn_pack_gated(start)))
        if turn.failure is None:  # a failure is stored as the turn's reply already
            ReplyReader(turn, store=reply_store).detach(end=_turn_end)


async def turn_stream(*, turn: ChatTurn) -> AsyncGenerator[dict[str, Any], None]:
    """A packed turn's events: start, delta…, then done or error."""
    begin = stream_event(
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
            "summary_requested": turn.summary_requested,
        },
    )
    if turn.failure is not None:
        yield begin
        failure = turn.failure
        yield stream_event("error", {"message": failure.message, "error": failure.error, "kind": failure.kind,
                                     "retryable": failure.retryable})
        return
    reader = ReplyReader(turn, store=reply_store)
    detached = False
    try:
        yield begin
        async for event in reader.read():
            yield event
    except (GeneratorExit, asyncio.CancelledError):
        # The client went away mid-stream: the reply is written to its end all the same, as a model
        # answering in the chat's other tabs or after a reload (Open WebUI and LibreChat do the same).
        reader.detach(end=_turn_end)
        detached = True
        raise
    finally:
        if not detached:
            await reader.close()
    try:
        end = await _turn_end(reader)
    except ReplyGoneError:
        end = gone_event()
    yield end


async def _turn_pack_gated(start: TurnStart) -> ChatTurn:
    # The CPU-heavy part of a turn, in line with other turns' (admission.pack_gate); the connection
    # goes back before the model is waited on (dbconn).
    async with pack_gate():
        return await db_short(turn_pack)(start=start)


async def _turn_end(reader: ReplyReader) -> dict[str, Any]:
    """Store the reply and say how it ended: `done` (with the gauge) or `error`."""
    turn = reader.turn
    stopped = {"error": STOPPED_WORDS, "kind": "stopped", "retryable": True}
    if reader.stopped:
        return stream_event("error", {"message": await reader.finish(Message.Status.STOPPED), **stopped})
    if reader.failure is not None:
        failure = failure_fields(reader.failure)
        message = await reader.finish(Message.Status.ERROR, error=failure["error"])
        if message["status"] == Message.Status.STOPPED:  # a stop accepted before the failure stays one
            return stream_event("error", {"message": message, **stopped})
        return stream_event("error", {"message": message, **failure})
    if turn.title_due:
        await title_pending_mark(conversation_id=turn.conversation_id, expected=turn.title)
    message = await reader.finish(Message.Status.COMPLETE)
    if message["status"] == Message.Status.STOPPED:  # the stop request landed after the last chunk
        if turn.title_due:
            await title_pending_drop(conversation_id=turn.conversation_id)
        return stream_event("error", {"message": message, **stopped})
    gauge = turn.gauge_without_repacking(reply_tokens=message["token_count"])
    title = turn.title
    if gauge is None:
        gauge, title = await db_short(_after_turn)(turn=turn)
    if turn.title_due:
        title_request(conversation_id=turn.conversation_id, expected=turn.title)
    margin = turn.summary_ahead_due(reply_tokens=message["token_count"])
    if margin is not None:
        # Planned and requested in the background: nothing here waits for it.
        summary_ahead_submit(conversation_id=turn.conversation_id, target=turn.target, margin_tokens=margin)
    return stream_event("done", {"message": message, "context": gauge, "title": title,
                                 "summary_requested": margin is not None, "title_pending": turn.title_due})
