"""The chat request path: storing messages, starting a turn, streaming the reply, stopping it.

A turn is split in two so the server answers fast and never holds a transaction during a model call:
`chat_turn_start` (sync, one short transaction) validates, stores the user message, packs the
context with the optimizer and writes the optimization record and a streaming placeholder; the async
`chat_turn_stream` then calls the model and persists the reply once, at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import re
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any, cast

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.db import close_old_connections, connection, transaction
from django.db.models import F, Q, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

import optimizer
from chatapp.chat import llm
from chatapp.chat.context import (
    ContextInput,
    context_ahead_span,
    context_budget,
    context_build,
    context_gauge,
    conversation_config,
    first_user_message_id,
    gauge_payload,
    live_chat_q,
    message_is_live,
    summary_through_id,
)
from chatapp.chat.dbconn import db_connection_release, db_short
from chatapp.chat.layout import Place, message_place_get, new_message_place
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from chatapp.chat.rendering import markdown_render
from chatapp.chat.search_services import message_index_add, message_index_sync
from chatapp.chat.selectors import user_settings_get
from chatapp.chat.summary_services import summary_job_request
from chatapp.chat.textsafe import text_problem, text_storable
from optimizer.types import ContextTooLargeError, PackedMessage, PackResult, PackStats, SummarySpan

logger = logging.getLogger(__name__)

# How often a streaming reply asks the database for a stop request made on another process (a stop
# made on this one is seen at the next chunk, with no query). A query per stream five times a second
# made 200 streams cost a bystander 0.7 s per request; once a second, 30 ms (bench/faults.py).
STOP_POLL_SECONDS = 1.0
# Replies streaming in this process, and those a stop request on this process has flagged.
_streaming_here: set[int] = set()
_stopped_here: set[int] = set()
# How often a streaming reply touches its updated_at (so Retry and the orphan sweep can tell a live
# stream from a dead one) and checkpoints its text: a killed process loses at most this much.
STREAM_HEARTBEAT_SECONDS = 3.0
TITLE_MAX_CHARS = 60
# A placeholder still "streaming" this long after the model timeout belongs to a request that died
# (server restart): Retry may replace it.
_STALE_STREAM_GRACE = timedelta(seconds=60)
# A reply whose heartbeat stopped for settings.STREAM_ORPHAN_SECONDS has no process streaming it: the
# sweep finishes it.
INTERRUPTED_WORDS = (
    "Interrupted: the server stopped while this reply was streaming. The text received until then is "
    "kept; Retry answers again."
)


class MessageTooLarge(ValidationError):
    """The message is longer than settings.MAX_MESSAGE_CHARS; nothing was stored."""

    def __init__(self, *, limit: int, size: int) -> None:
        self.limit = limit
        self.size = size
        super().__init__(
            f"Your message is {size:,} characters long; the limit is {limit:,} characters. "
            "Shorten it or split it into several messages.",
            code="too_large",
        )


class RateLimited(Exception):
    def __init__(self, *, limit: int, retry_after: int) -> None:
        self.limit = limit
        self.retry_after = retry_after
        super().__init__(
            f"You are sending messages too quickly (limit: {limit} per minute). "
            f"Try again in {retry_after} second{'s' if retry_after != 1 else ''}."
        )


@dataclass(frozen=True, slots=True)
class TurnFailure:
    """A turn that cannot reach the model at all (the kept messages alone exceed the budget)."""

    error: str
    kind: str
    retryable: bool


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
    trigger_tokens: int | None = None
    # The record's dropped_ranges: their tokens are measured when the turn ends (_record_finish).
    dropped_ranges: tuple[tuple[int, int], ...] = ()


# --- messages ------------------------------------------------------------------------------------


def _live_totals_add(*, conversation_id: int, messages: int, chars: int, tokens: int) -> None:
    """Adjust the conversation's running totals over sendable messages (F(): concurrent turns add up)."""
    Conversation.objects.filter(pk=conversation_id).update(
        live_message_count=F("live_message_count") + messages,
        live_char_count=F("live_char_count") + chars,
        live_token_count=F("live_token_count") + tokens,
        updated_at=timezone.now(),
    )


def message_append(
    *,
    conversation: Conversation,
    role: str,
    content: str,
    kind: str = Message.Kind.CHAT,
    token_model: str | None = None,
    **fields: Any,
) -> Message:
    """Store a message with its token and character counts and keep the live totals in step.

    `token_model` is the model to count for (the caller usually has the target already); by default
    the conversation's config model, else the offline model.
    """
    if token_model is None:
        token_model = llm.llm_target_for(config=conversation_config(conversation=conversation)).model
    tokens = optimizer.count_message({"role": role, "content": content}, model=token_model)
    with transaction.atomic(savepoint=False):  # nested in a turn: no savepoint round trips
        message = Message.objects.create(
            conversation=conversation,
            role=role,
            kind=kind,
            content=content,
            token_count=tokens,
            char_count=len(content),
            **fields,
        )
        message_index_add(message=message)  # recall and search find it from this commit on
        if message_is_live(kind=message.kind, status=message.status, superseded=message.superseded):
            _live_totals_add(conversation_id=conversation.pk, messages=1, chars=len(content), tokens=tokens)
            # The caller's instance follows along (the database row was updated with F() above).
            conversation.live_message_count += 1
            conversation.live_char_count += len(content)
            conversation.live_token_count += tokens
    return message


def message_pin_set(*, message: Message, pinned: bool) -> Message:
    """Pin or unpin a chat message: pinned messages are always sent, whatever the window."""
    if message.kind != Message.Kind.CHAT:
        raise ValidationError({"pinned": "Only chat messages can be pinned."})
    if message.pinned != pinned:
        Message.objects.filter(pk=message.pk).update(pinned=pinned, updated_at=timezone.now())
        message.pinned = pinned
    return message


def message_stop(*, message: Message) -> None:
    """Mark a streaming reply stopped; its stream loop sees the flag and keeps the partial text."""
    with transaction.atomic():
        stopped = Message.objects.filter(pk=message.pk, status=Message.Status.STREAMING).update(
            status=Message.Status.STOPPED, updated_at=timezone.now()
        )
        if stopped:
            # A stopped reply is never recalled; the index follows the status even if the stream
            # loop that would store the partial text (and sync again) is gone.
            message_index_sync(message_ids=[message.pk])
            if message.pk in _streaming_here:
                transaction.on_commit(lambda: _stopped_here.add(message.pk))


# --- rate limit ----------------------------------------------------------------------------------


def send_rate_check(*, user: User) -> None:
    """Allow settings.SEND_RATE_LIMIT_PER_MINUTE model requests per user per sliding minute.

    Sliding-window counter in the cache: the previous minute's count weighted by how much of it still
    overlaps the window, plus this minute's. Raises RateLimited with the seconds to wait.
    """
    limit = settings.SEND_RATE_LIMIT_PER_MINUTE
    now = time.time()
    bucket = int(now // 60)
    key = f"chat:send-rate:{user.pk}:{bucket}"
    previous = cache.get(f"chat:send-rate:{user.pk}:{bucket - 1}", 0)
    current = cache.get(key, 0)
    elapsed = now - bucket * 60
    estimate = previous * (60 - elapsed) / 60 + current
    if estimate + 1 > limit:
        if previous and current + 1 <= limit:
            # The old minute's share decays linearly: wait until it has decayed enough.
            wait = 60 - elapsed - (limit - 1 - current) * 60 / previous
        else:
            wait = 60 - elapsed
        raise RateLimited(limit=limit, retry_after=max(1, math.ceil(wait)))
    if not cache.add(key, 1, timeout=130):
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=130)


# --- starting a turn -----------------------------------------------------------------------------


def message_content_validate(*, content: Any) -> str:
    """The message text, or ValidationError (not text, empty) / MessageTooLarge."""
    if not isinstance(content, str):
        raise ValidationError({"content": "The message must be text."}, code="invalid")
    if not content.strip():
        raise ValidationError({"content": "Type a message before sending."}, code="blank")
    limit = settings.MAX_MESSAGE_CHARS
    if len(content) > limit:
        raise MessageTooLarge(limit=limit, size=len(content))
    problem = text_problem(content)
    if problem is not None:
        raise ValidationError({"content": problem}, code="invalid")
    return content


# Markdown a title shows as plain text: block markers at the start of the line, then links and
# images (their text stays), code spans, and emphasis in pairs. `_` emphasis needs non-word
# characters around it, as in CommonMark, so snake_case names keep their underscores.
_TITLE_BLOCK_MARKERS = re.compile(r"^(?:#{1,6}\s+|>\s*|[-*+]\s+|\d{1,3}[.)]\s+)+")
_TITLE_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_TITLE_CODE = re.compile(r"(`+)(.+?)\1")
_TITLE_EMPHASIS = (
    re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*"),
    re.compile(r"(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)"),
    re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"),
    re.compile(r"\*(?=\S)(.+?)(?<=\S)\*"),
    re.compile(r"(?<!\w)_(?=\S)(.+?)(?<=\S)_(?!\w)"),
)


def _title_plain(line: str) -> str:
    line = _TITLE_BLOCK_MARKERS.sub("", line)
    line = _TITLE_LINK.sub(r"\1", line)
    line = _TITLE_CODE.sub(r"\2", line)
    for pattern in _TITLE_EMPHASIS:
        line = pattern.sub(r"\1", line)
    return line.strip()


def title_from_text(*, text: str) -> str:
    """A short title from the first user message: its first line as plain text, cut at a word boundary."""
    line = next((ln for ln in text.strip().splitlines() if ln.strip()), "")
    line = _title_plain(re.sub(r"\s+", " ", line).strip())
    if len(line) <= TITLE_MAX_CHARS:
        return line or "New chat"
    cut = line[: TITLE_MAX_CHARS - 1]
    if " " in cut[TITLE_MAX_CHARS // 2 :]:
        cut = cut[: cut.rfind(" ")]
    return cut.rstrip(" ,.;:-") + "…"


def message_serialize(*, message: Message, place: Place | None) -> dict[str, Any]:
    """A message for the stream's events; `place` as message_place_get gives it (the API's field)."""
    return {
        "id": message.pk,
        "role": message.role,
        "kind": message.kind,
        "content": message.content,
        "status": message.status,
        "pinned": message.pinned,
        "place": place,
        "superseded": message.superseded,
        "reply_to": message.reply_to_id,
        "token_count": message.token_count,
        "created_at": message.created_at.isoformat() if message.created_at else None,
    }


def _int_id(value: str) -> int | str:
    return int(value) if value.isdigit() else value


def _dropped_ranges(*, ctx: ContextInput, result: PackResult) -> list[list[int]]:
    """Live message ids neither sent nor covered by the summary used, as inclusive [first, last] ranges.

    Loaded messages are judged one by one; the history below the loaded window (never read, by
    design) is described by id bounds between the static messages that were read.
    """
    sent: set[int] = set()
    recalled: set[int] = set()
    covered_through: int | None = None
    for packed in result.messages:
        if packed.origin == "summary" and ctx.summary is not None:
            covered_through = int(ctx.summary.through_id)
            continue
        ids = {int(i) for i in packed.source_ids if str(i).isdigit()}
        sent.update(ids)
        if packed.origin == "recall":
            recalled.update(ids)
    floor = covered_through + 1 if covered_through is not None else None

    def uncovered(pk: int) -> bool:
        return floor is None or pk >= floor

    ranges: list[list[int]] = [[pk, pk] for pk in ctx.loaded_ids if pk not in sent and uncovered(pk)]
    if ctx.window_start is not None and ctx.loaded_ids:
        window_start = int(ctx.window_start)
        bounds = sorted(pk for pk in ctx.static_ids if pk < window_start)
        low = max(min(ctx.loaded_ids) + 1, floor or 0)
        for pk in [*bounds, window_start]:
            if low <= pk - 1:
                ranges.append([low, pk - 1])
            low = max(low, pk + 1)
    ranges.sort()
    kept = sorted(pk for pk in ctx.loaded_ids if pk in sent or not uncovered(pk))
    merged: list[list[int]] = []
    for first, last in ranges:
        if merged and not any(merged[-1][1] < k < first for k in kept):
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    # Quoted messages usually lie in the history below the window, described above by id bounds
    # only: cut them out, since a recall block sent them (as quotes) for this request.
    return _ranges_without(merged, recalled)


def _ranges_without(ranges: list[list[int]], ids: set[int]) -> list[list[int]]:
    """Inclusive [first, last] `ranges` with `ids` cut out, splitting a range around each one inside it."""
    if not ids:
        return ranges
    out: list[list[int]] = []
    for first, last in ranges:
        low = first
        for pk in sorted(i for i in ids if first <= i <= last):
            if low <= pk - 1:
                out.append([low, pk - 1])
            low = pk + 1
        if low <= last:
            out.append([low, last])
    return out


def _money(value: float | None) -> Decimal | None:
    return None if value is None else Decimal(str(round(value, 6)))


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=lambda o: list(o) if isinstance(o, (set, frozenset)) else str(o)))


# Summary jobs are requested off the response's critical path, on a thread of their own: creating
# the job and publishing it to the broker can take a broker's whole connect timeout when the broker
# is unreachable without refusing (a black-holed host), and the chat must not wait for that. If the
# process dies before the thread runs, nothing is lost for long: the next turn asks again (the span
# is still uncovered), and a job left pending by a failed publish is published by the sweep. One
# thread: requests are rare, and a dead broker then ties up one thread, not one per chat.
_summary_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="summary-request")
_summary_futures: set[Future] = set()
_summary_futures_lock = threading.Lock()


def summary_request_submit(*, conversation_id: int, span: SummarySpan | None, trigger: str) -> None:
    """Request a summary job of the conversation in the background; returns at once."""
    _track(_summary_executor.submit(_summary_request_run, conversation_id=conversation_id, span=span, trigger=trigger))


def _track(future: Future) -> None:
    with _summary_futures_lock:
        _summary_futures.add(future)
    future.add_done_callback(_summary_future_done)


def _summary_future_done(future: Future) -> None:
    with _summary_futures_lock:
        _summary_futures.discard(future)


def summary_requests_wait(*, timeout: float) -> bool:
    """Wait for the summary requests submitted so far (graceful shutdown, tests); True when all ran."""
    with _summary_futures_lock:
        pending = list(_summary_futures)
    _, not_done = futures_wait(pending, timeout=timeout)
    return not not_done


def _summary_request_run(*, conversation_id: int, span: SummarySpan | None, trigger: str) -> None:
    close_old_connections()
    try:
        conversation = Conversation.objects.filter(pk=conversation_id).first()
        if conversation is not None:  # deleted in the meantime: nothing to summarize
            summary_job_request(conversation=conversation, span=span, trigger=trigger)
    except Exception:
        # A summary that cannot be requested now is requested again by a later turn.
        logger.exception("could not request a summary of conversation %s", conversation_id)
    finally:
        # This thread outlives requests: give its database connection back like a request would.
        connection.close()


def summary_ahead_submit(*, conversation_id: int, target: llm.LLMTarget, margin_tokens: int) -> None:
    """Plan and request a summary ahead of need, in the background (see context_ahead_span)."""
    _track(_summary_executor.submit(
        _summary_ahead_run, conversation_id=conversation_id, target=target, margin_tokens=margin_tokens
    ))


def _summary_ahead_run(*, conversation_id: int, target: llm.LLMTarget, margin_tokens: int) -> None:
    close_old_connections()
    try:
        conversation = Conversation.objects.select_related("owner").filter(pk=conversation_id).first()
        if conversation is None:
            return
        span = context_ahead_span(
            conversation=conversation, user=conversation.owner, target=target, margin_tokens=margin_tokens
        )
        if span is not None:
            summary_job_request(conversation=conversation, span=span, trigger="ahead")
    except Exception:
        logger.exception("could not plan a summary ahead of need for conversation %s", conversation_id)
    finally:
        connection.close()


# Query terms the chat is told about (the record keeps them all).
RECALL_TERMS_SHOWN = 8


def _recall_summary(*, info: PackStats) -> dict[str, Any] | None:
    """This turn's recall block as the chat shows it (gauge popover, timeline marks); None without one.

    `ids` are the quoted messages in time order, `hits` how many of them matched the newest message
    (the others are their neighbours), `terms` the strongest query terms (stemmed, as searched).
    """
    ids = [_int_id(str(i)) for i in info.recall_ids]
    if not ids:
        return None
    return {
        "messages": len(ids),
        "hits": len(info.recall_hit_ids),
        "tokens": info.recall_tokens,
        "terms": list(info.recall_terms[:RECALL_TERMS_SHOWN]),
        "ids": ids,
    }


def _recall_words(*, messages: int, tokens: int) -> str:
    """The recall sentence, e.g. "recalled 4 earlier messages (312 tokens)" (the chat's words too)."""
    return f"recalled {messages:,} earlier message{'s' if messages != 1 else ''} ({tokens:,} tokens)"


def _context_event(
    *, result: PackResult, budget: int, window_start_id: int | None, ctx: ContextInput
) -> dict[str, Any]:
    info = result.info
    return {
        "tokens": info.tokens_after,
        "budget": budget,
        "history_tokens": info.tokens_before,
        "strategy": info.strategy_chosen,
        "reason": info.strategy_reason,
        "triggered": info.triggered,
        "window_start_id": window_start_id,
        "estimated": info.estimated,
        "summary_through_id": summary_through_id(result=result, ctx=ctx),
        "summary_quota_reached": ctx.quota_exhausted,
        # This request only: the next one recalls afresh for its own newest message.
        "recall": _recall_summary(info=info),
    }


def _context_note(*, result: PackResult, budget: int) -> str:
    info = result.info
    sent, full = info.tokens_after, info.tokens_before
    recall = _recall_summary(info=info)
    recalled = ""
    if recall is not None:
        words = _recall_words(messages=recall["messages"], tokens=recall["tokens"])
        recalled = f" It {words}, quoted before the newest message because they bear on it."
    if not info.optimization_applied or not info.messages_removed:
        return f"everything was sent — {sent:,} of {budget:,} tokens.{recalled}"
    removed = info.messages_removed
    how = "a summary stands in for the older part" if info.summary_used else "older messages were left out"
    note = (
        f"{info.strategy_chosen} — {how} ({removed:,} message{'s' if removed != 1 else ''} "
        f"not sent verbatim); {sent:,} of {budget:,} tokens sent, against {full:,} for the full history."
    )
    note += recalled
    if result.summary_span is not None:
        note += " A summary of the left-out part is being written in the background."
    return note


def _record_stats(*, info: PackStats, ctx: ContextInput) -> dict[str, Any]:
    """The record's `stats`: the pack's statistics plus what the request path measured around it."""
    stats = info.as_dict()
    stats["pack_ms"] = ctx.pack_ms
    if ctx.request is not None and ctx.request.notes:
        stats["request_shape"] = list(ctx.request.notes)  # how the request was made template-safe
    if ctx.quota_exhausted:
        stats["summary_quota_exhausted"] = True
    return stats


def _sent_entry(
    *,
    packed: PackedMessage,
    summary_message_id: int | None,
    info: PackStats | None = None,
    quoted: Mapping[int, str] | None = None,
) -> dict[str, Any]:
    """One entry of a record's `sent` list: enough, with the stored messages, to rebuild exactly
    what was sent in its place.

    - verbatim / pinned: `source_ids` = [the message's id]; its stored content was sent.
    - summary: `source_ids` = [the summary message's id], also given as `summary_id` (the optimizer
      reports the last covered id there, whose text is not what was sent). Summary messages are
      never edited in place (an edit is a new message), so its stored content is what was sent.
    - compressed: `source_ids` = [the message's id] and `content` = the head + tail text actually
      sent, which no row stores (compression is rare, so this costs little).
    - recall: `source_ids` = the quoted messages in time order; `hit_ids` = those the search
      matched, best first (the others are their neighbours); `terms` = the query terms, strongest
      first (why they were recalled); and `layout` (see _recall_layout), or `content` = the block's
      text when a quote could not be located in it. `quoted` maps the quoted ids to their stored
      contents, `info` is the pack's statistics (the hits and terms are reported there).
    """
    entry: dict[str, Any] = {
        "source_ids": [_int_id(str(i)) for i in packed.source_ids],
        "origin": packed.origin,
        "tokens": packed.tokens,
        "role": packed.role,
    }
    if packed.origin == "summary" and summary_message_id is not None:
        entry["source_ids"] = [summary_message_id]
        entry["summary_id"] = summary_message_id
    elif packed.origin == "compressed":
        entry["content"] = packed.content
    elif packed.origin == "recall":
        entry["hit_ids"] = [_int_id(str(i)) for i in info.recall_hit_ids] if info is not None else []
        entry["terms"] = list(info.recall_terms) if info is not None else []
        # a recall block is one text (the core writes it), never content parts
        layout = _recall_layout(content=cast(str, packed.content), source_ids=entry["source_ids"], quoted=quoted or {})
        if layout is None:
            entry["content"] = packed.content
        else:
            entry["layout"] = layout
    return entry


def _recall_layout(
    *, content: str, source_ids: Sequence[int | str], quoted: Mapping[int, str]
) -> list[str | int] | None:
    """A recall block's text as the pieces around its quotes, with each quote's message id in its place.

    Joining the pieces, each id replaced by that message's stored content, gives `content` exactly
    (checked here before it is trusted). The block quotes whole messages verbatim, each after
    "speaker: " and up to the end of a line, so beyond its header and date lines it repeats stored
    text: keeping only the glue keeps a record small where the block can run to thousands of tokens
    on every turn. Chat messages are never edited in place, so the rebuild stays exact. None when a
    quote is not found where expected (the caller then stores the text itself).
    """
    layout: list[str | int] = []
    cursor = 0
    for sid in source_ids:
        text = quoted.get(sid) if isinstance(sid, int) else None
        if text is None:
            return None
        needle = ": " + text
        at = content.find(needle, cursor)
        # The quote runs to the end of its line: a shorter text can also occur inside another line.
        while at >= 0 and not _line_ends(content, at + len(needle)):
            at = content.find(needle, at + 1)
        if at < 0:
            return None
        layout.append(content[cursor : at + 2])
        layout.append(sid)
        cursor = at + len(needle)
    layout.append(content[cursor:])
    rebuilt = "".join(part if isinstance(part, str) else quoted[part] for part in layout)
    return layout if rebuilt == content else None


def _line_ends(text: str, at: int) -> bool:
    return at == len(text) or text[at] == "\n"


def _recall_quotes(*, conversation: Conversation, packed: PackedMessage | None) -> dict[int, str]:
    """The stored contents of the messages a recall block quotes (one primary-key read, only when a
    block was sent): what _recall_layout checks the block against."""
    if packed is None:
        return {}
    ids = [int(i) for i in packed.source_ids if str(i).isdigit()]
    return dict(Message.objects.filter(conversation=conversation, pk__in=ids).values_list("id", "content"))


def _user_message_payload(
    *, message: Message, first_user_id: int | None, window_start_id: int | None
) -> dict[str, Any]:
    """The user's message for the start event, with its place so the browser need not derive it."""
    place = message_place_get(message=message, first_user_id=first_user_id, window_start_id=window_start_id)
    return message_serialize(message=message, place=place)


def _turn_prepare(
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
            context={"tokens": exc.needed, "budget": exc.budget, "history_tokens": exc.needed,
                     "strategy": "none", "reason": "",
                     "triggered": False, "window_start_id": conversation.window_start_id,
                     "estimated": optimizer.is_estimated(target.model)},
            failure=TurnFailure(error=error, kind="context_too_large", retryable=False),
        )

    info = result.info
    strategy, applied, triggered = info.strategy_chosen, info.optimization_applied, info.triggered
    tokens_sent, tokens_full = info.tokens_after, info.tokens_before
    summary_used = any(m.origin == "summary" for m in result.messages)
    # The window this request used (None: everything was sent), as the gauge reports it too.
    window_start_id = int(result.window_start) if result.window_start is not None else None
    decision = result.decision
    scores = info.scores or (decision.as_dict() if decision is not None else {})
    recall_packed = next((m for m in result.messages if m.origin == "recall"), None)
    quoted = _recall_quotes(conversation=conversation, packed=recall_packed)
    dropped = _dropped_ranges(ctx=ctx, result=result)
    with transaction.atomic(savepoint=False):  # nested in a turn: no savepoint round trips
        reply = Message.objects.create(
            conversation=conversation,
            role=Message.Role.ASSISTANT,
            content="",
            status=Message.Status.STREAMING,
            reply_to=user_message,
            model=target.model,
        )
        message_index_add(message=reply)  # empty while streaming; _turn_finish indexes its text
        record = OptimizationRecord.objects.create(
            conversation=conversation,
            reply=reply,
            preference=prefs.preference,
            model=target.model,
            context_window=target.context_window,
            budget=budget,
            triggered=triggered,
            window_start_id=window_start_id,
            strategy=strategy,
            reason=info.strategy_reason,
            scores=_json_safe(scores),
            tokens_full=tokens_full,
            tokens_sent=tokens_sent,
            estimated=info.estimated,
            sent=[
                _sent_entry(packed=m, summary_message_id=ctx.summary_message_id, info=info, quoted=quoted)
                for m in result.messages
            ],
            dropped_ranges=dropped,
            recall_tokens=recall_packed.tokens if recall_packed is not None else 0,
            recall_message_count=len(recall_packed.source_ids) if recall_packed is not None else 0,
            summary_id=ctx.summary_message_id if summary_used else None,
            messages_before=info.messages_before,
            messages_after=info.messages_after,
            pack_ms=ctx.pack_ms,
            cost_sent_usd=_money(optimizer.cost_usd(target.model, prompt_tokens=tokens_sent)),
            cost_full_usd=_money(optimizer.cost_usd(target.model, prompt_tokens=tokens_full)),
            stats=_json_safe(_record_stats(info=info, ctx=ctx)),
        )
        # Counted when the window actually moved (the trigger fired), not on every request after.
        # Summaries are counted by the worker when one is saved (summary_services._summary_save):
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
        context=_context_event(result=result, budget=budget, window_start_id=window_start_id, ctx=ctx),
        context_note=_context_note(result=result, budget=budget) if target.offline else "",
        trigger_tokens=info.trigger_tokens,
        dropped_ranges=tuple((first, last) for first, last in dropped),
    )


def _target_for(*, conversation: Conversation) -> llm.LLMTarget:
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
    target = _target_for(conversation=conversation)
    with transaction.atomic():
        _send_claim(conversation=conversation, client_key=client_key)
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
        # user message (with an error reply), since _turn_prepare handles that case itself.
        return _turn_prepare(
            user=user, conversation=conversation, user_message=user_message, target=target, through_id=None
        )


def _send_claim(*, conversation: Conversation, client_key: str) -> None:
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


def _latest_exchange_check(*, user_message: Message) -> None:
    later = Message.objects.filter(
        conversation_id=user_message.conversation_id,
        role=Message.Role.USER,
        kind=Message.Kind.CHAT,
        id__gt=user_message.pk,
    ).exists()
    if later:
        raise ValidationError("Only the latest exchange can be regenerated or retried.", code="not_latest")


def chat_regenerate_start(*, user: User, reply: Message) -> ChatTurn:
    """Answer the same user message again; the old reply stays visible, marked superseded, never sent."""
    if reply.role != Message.Role.ASSISTANT or reply.kind != Message.Kind.CHAT or reply.reply_to_id is None:
        raise ValidationError("Only a model reply can be regenerated.", code="not_a_reply")
    if reply.status == Message.Status.STREAMING:
        raise ValidationError("This reply is still streaming; stop it first.", code="streaming")
    if reply.superseded:
        raise ValidationError("This reply was already replaced.", code="superseded")
    user_message = Message.objects.get(pk=reply.reply_to_id)
    _latest_exchange_check(user_message=user_message)
    conversation = Conversation.objects.select_related("llm_config", "owner").get(pk=reply.conversation_id)
    with transaction.atomic():
        _send_claim(conversation=conversation, client_key="")  # one turn at a time, as for sends
        # The claim: of two concurrent regenerates (two tabs, a double click) only the one that
        # supersedes the reply goes on; the other would start a second streaming reply.
        claimed = Message.objects.filter(pk=reply.pk, superseded=False, status=reply.status).update(
            superseded=True, updated_at=timezone.now()
        )
        if not claimed:
            raise ValidationError(
                "This reply was just replaced or changed (another tab or a second click?). "
                "Reload the conversation to see the newest reply.",
                code="conflict",
            )
        message_index_sync(message_ids=[reply.pk])  # a superseded reply is no longer recalled
        if message_is_live(kind=reply.kind, status=reply.status, superseded=False):
            _live_totals_add(
                conversation_id=conversation.pk,
                messages=-1,
                chars=-reply.char_count,
                tokens=-reply.token_count,
            )
        conversation.refresh_from_db()
        return _turn_prepare(
            user=user,
            conversation=conversation,
            user_message=user_message,
            target=_target_for(conversation=conversation),
            through_id=user_message.pk,
        )


def _retry_last_reply(*, message: Message) -> Message | None:
    return Message.objects.filter(reply_to=message, superseded=False).order_by("-id").first()


def chat_retry_start(*, user: User, message: Message) -> ChatTurn:
    """Send a user message again after its reply failed or was stopped (or never came).

    The failed reply stays visible (marked superseded: a newer attempt replaced it); being stopped or
    failed it was never part of the context anyway.
    """
    if message.role != Message.Role.USER or message.kind != Message.Kind.CHAT:
        raise ValidationError("Only your own message can be retried.", code="not_user_message")
    _latest_exchange_check(user_message=message)
    last = _retry_last_reply(message=message)
    if last is not None:
        stale = last.status == Message.Status.STREAMING and last.updated_at < timezone.now() - (
            timedelta(seconds=settings.LLM_TIMEOUT_SECONDS) + _STALE_STREAM_GRACE
        )
        if last.status == Message.Status.COMPLETE:
            raise ValidationError("This message already has a reply; use Regenerate instead.", code="answered")
        if last.status == Message.Status.STREAMING and not stale:
            raise ValidationError("A reply is still streaming; stop it first.", code="streaming")
    conversation = Conversation.objects.select_related("llm_config", "owner").get(pk=message.conversation_id)
    with transaction.atomic():
        _send_claim(conversation=conversation, client_key="")  # one turn at a time, as for sends
        # The claim, conditional on the reply being exactly as judged above: a concurrent retry has
        # superseded it, or a live stream has touched its updated_at since (its heartbeat), when
        # nothing is updated. Without a reply, the user message's own row is the claim.
        now = timezone.now()
        if last is not None:
            claim = Message.objects.filter(
                pk=last.pk, superseded=False, status=last.status, updated_at=last.updated_at
            ).update(superseded=True, updated_at=now)
            message_index_sync(message_ids=[last.pk])
        else:
            claim = Message.objects.filter(pk=message.pk, updated_at=message.updated_at).update(updated_at=now)
            if claim and Message.objects.filter(reply_to=message, superseded=False).exists():
                claim = 0  # a reply appeared after the check above: another attempt got there first
        if not claim:
            raise ValidationError(
                "This message is already being retried or answered (another tab or a second click?). "
                "Reload the conversation to see the newest reply.",
                code="conflict",
            )
        return _turn_prepare(
            user=user,
            conversation=conversation,
            user_message=message,
            target=_target_for(conversation=conversation),
            through_id=message.pk,
        )


# --- streaming the reply -------------------------------------------------------------------------


def _event(name: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"event": name, "data": data}


# Not an event: the transport sends it as an SSE comment line, which clients ignore.
KEEPALIVE: dict[str, Any] = {"comment": "keep-alive"}


def _reply_poll(reply_id: int, *, heartbeat: bool, text: str = "") -> str | None:
    """The reply's status. With `heartbeat`, a streaming reply's updated_at is touched and its text so
    far checkpointed first, so a long stream never looks dead to Retry (see _STALE_STREAM_GRACE) and
    a killed process loses only the last seconds; one query either way."""
    if heartbeat:
        text = text_storable(text)
        if Message.objects.filter(pk=reply_id, status=Message.Status.STREAMING).update(
            updated_at=timezone.now(), content=text, char_count=len(text)
        ):
            return Message.Status.STREAMING
    return Message.objects.filter(pk=reply_id).values_list("status", flat=True).first()


def reply_orphans_finish() -> int:
    """Finish replies left `streaming` by a process that died (no heartbeat for a while): as
    failed and interrupted, with the text checkpointed, so the chat says so and Retry works at once.
    Returns how many were finished."""
    stale = timezone.now() - timedelta(seconds=settings.STREAM_ORPHAN_SECONDS)
    ids = list(
        Message.objects.filter(status=Message.Status.STREAMING, updated_at__lt=stale).values_list("id", flat=True)[:500]
    )
    if not ids:
        return 0
    done = Message.objects.filter(pk__in=ids, status=Message.Status.STREAMING, updated_at__lt=stale).update(
        status=Message.Status.ERROR, error=INTERRUPTED_WORDS, updated_at=timezone.now()
    )
    message_index_sync(message_ids=ids)
    return done


def _record_finish(*, turn: ChatTurn, usage: Any) -> None:
    """What the record learns when its turn ends, in one UPDATE: the tokens it dropped without a
    summary (counted by the database over the dropped ranges) and the provider's prompt figures; a
    provider prompt-cache hit lowers the sent cost (priced on our own count, like the full-history
    cost, so the two stay comparable)."""
    ranges = Q()
    for first, last in turn.dropped_ranges:
        ranges |= Q(id__gte=first, id__lte=last)
    dropped: Any = Value(0)
    if turn.dropped_ranges:
        dropped = Coalesce(Subquery(
            Message.objects.filter(ranges, live_chat_q(), conversation_id=turn.conversation_id)
            .order_by().values("conversation_id").annotate(total=Sum("token_count")).values("total")
        ), 0)
    fields: dict[str, Any] = {"dropped_tokens": dropped}
    if getattr(usage, "prompt_tokens", None) is not None:
        fields.update(_usage_fields(tokens_sent=int(turn.context["tokens"]), model=turn.target.model, usage=usage))
    if turn.record_id is not None:
        OptimizationRecord.objects.filter(pk=turn.record_id).update(**fields)


def _usage_fields(*, tokens_sent: int, model: str, usage: Any) -> dict[str, Any]:
    reported = getattr(usage, "cached_tokens", None)
    fields: dict[str, Any] = {"provider_prompt_tokens": usage.prompt_tokens}
    if reported is not None:
        fields["provider_cached_tokens"] = int(reported)
    cached = min(int(reported or 0), tokens_sent)
    if cached:
        cost = optimizer.cost_usd(model, prompt_tokens=tokens_sent, cached_tokens=cached)
        if cost is not None:
            fields["cost_sent_usd"] = _money(cost)
    return fields


def reply_cut_note() -> str:
    """The marker a reply cut at settings.MAX_REPLY_CHARS ends with."""
    return f"\n\n[Reply cut here: it reached the {settings.MAX_REPLY_CHARS:,}-character limit.]"


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
                _live_totals_add(
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
            _record_finish(turn=turn, usage=usage)
    return {
        "id": turn.reply_id,
        "status": status,
        "content": content,
        "html": markdown_render(content),
        "prompt_tokens": values["prompt_tokens"],
        "completion_tokens": values["completion_tokens"],
        "latency_ms": latency_ms,
        "model": turn.target.model,
        "token_count": tokens,
    }


def _gauge_without_repacking(*, turn: ChatTurn, reply_tokens: int) -> dict[str, Any] | None:
    """The gauge after a complete reply, when it can be known without packing again.

    Below the trigger nothing moves: the next request sends exactly this turn's context plus the
    reply (before the next message is typed) — the figure context_gauge would compute. At or above
    the trigger the next request repacks, so the caller asks context_gauge.
    """
    if turn.trigger_tokens is None:
        return None
    tokens = int(turn.context["tokens"]) + reply_tokens
    if tokens >= turn.trigger_tokens:
        return None
    return gauge_payload(
        tokens=tokens,
        budget=int(turn.context["budget"]),
        history_tokens=int(turn.context["history_tokens"]) + reply_tokens,
        window_start_id=turn.context["window_start_id"],
        strategy=turn.context["strategy"],
        estimated=turn.context["estimated"],
        summary_through_id=turn.context.get("summary_through_id"),
        summary_quota_reached=bool(turn.context.get("summary_quota_reached")),
    )


def _after_turn(*, turn: ChatTurn) -> tuple[dict[str, Any] | None, str]:
    conversation = Conversation.objects.select_related("llm_config", "owner").get(pk=turn.conversation_id)
    try:
        gauge = context_gauge(conversation=conversation, user=conversation.owner, target=turn.target)
    except Exception:
        # The reply is stored; a gauge that cannot be computed must not turn success into an error.
        logger.exception("context gauge failed for conversation %s", turn.conversation_id)
        gauge = None
    return gauge, conversation.title


def _summary_ahead_due(*, turn: ChatTurn, reply_tokens: int) -> int | None:
    """The expected size of the next exchange when it would take the next request past the trigger
    (so a summary should be started now, ahead of need); None when it would not.

    The next exchange is assumed to be like this one. Below the trigger the next request starts from
    this turn's context plus the reply (see _gauge_without_repacking).
    """
    if turn.trigger_tokens is None or turn.failure is not None:
        return None
    margin = int(turn.user_message.get("token_count") or 0) + reply_tokens
    if int(turn.context["tokens"]) + reply_tokens + margin < turn.trigger_tokens:
        return None
    return margin


_END = object()


async def _pump(*, turn: ChatTurn, queue: asyncio.Queue) -> None:
    """Move model events into the queue, so the reader can look for a stop request between them."""
    try:
        async with contextlib.aclosing(llm.llm_stream(  # type: ignore[type-var]  # an async generator: it has aclose
                target=turn.target, messages=turn.messages, context_note=turn.context_note or None
            )) as events:
            async for item in events:
                await queue.put(item)
        await queue.put(_END)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # handed to the reader, which reports it as an error event
        await queue.put(exc)


def _failure_words(exc: BaseException) -> tuple[str, str, bool]:
    if isinstance(exc, llm.LLMError):
        return exc.user_message, exc.kind, exc.retryable
    logger.error("unexpected failure while streaming a reply", exc_info=exc)
    return (
        "Something went wrong while the reply was streaming. Your message is saved; try again.",
        "server",
        True,
    )


async def chat_turn_stream(*, turn: ChatTurn) -> AsyncIterator[dict[str, Any]]:
    """Stream one reply as SSE event dicts: start, delta…, then done or error.

    While the model is silent for settings.SSE_KEEPALIVE_SECONDS, `KEEPALIVE` (a comment, no event)
    is yielded in between.

    The reply is persisted exactly once — also when the client goes away mid-stream (then it is
    kept as stopped) — and the user's message is never removed.
    """
    start = _event(
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
        yield _event(
            "error",
            {
                "message": {"id": turn.reply_id, "status": Message.Status.ERROR, "content": "", "html": ""},
                "error": turn.failure.error,
                "kind": turn.failure.kind,
                "retryable": turn.failure.retryable,
            },
        )
        return
    # The turn was prepared with a connection this request still holds: give it back before the
    # model is waited on (see dbconn), and before the model call starts.
    await sync_to_async(db_connection_release)()
    reader = _ReplyReader(turn)
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
    yield await reader.last_event()


_STOPPED_WORDS = "You stopped this reply; the text received so far is kept."


class _ReplyReader:
    """One reply's stream: model events in, SSE events out, the stop flag and checkpoints on the way."""

    def __init__(self, turn: ChatTurn) -> None:
        self.turn = turn
        self.started = time.monotonic()
        self.parts: list[str] = []
        self.received = 0
        self.usage: Any = None
        self.failure: BaseException | None = None
        self.stopped = False
        self.finished = False
        self.queue: asyncio.Queue = asyncio.Queue()
        # The model call starts while the first event goes out.
        self.pump = asyncio.create_task(_pump(turn=turn, queue=self.queue))
        _streaming_here.add(turn.reply_id)

    async def read(self) -> AsyncIterator[dict[str, Any]]:
        """Deltas (and keep-alives) until the model ends, fails, is stopped or the reply is cut."""
        keepalive = float(settings.SSE_KEEPALIVE_SECONDS)
        now = time.monotonic()
        next_check, next_heartbeat, last_sent = now + STOP_POLL_SECONDS, now + STREAM_HEARTBEAT_SECONDS, now
        while True:
            item = await self._next(next_check)
            if item is _END:
                return
            if isinstance(item, BaseException):
                self.failure = item
                return
            if isinstance(item, llm.Delta) and item.text:
                text, cut = self._take(item.text)
                yield _event("delta", {"text": text})
                last_sent = time.monotonic()
                if cut:
                    return
            elif isinstance(item, llm.Usage):
                self.usage = item
            if self.turn.reply_id in _stopped_here:
                self.stopped = True
                return
            if time.monotonic() - last_sent >= keepalive:
                # A model that thinks in silence must not look like a dead connection to proxies.
                yield KEEPALIVE
                last_sent = time.monotonic()
            if time.monotonic() >= next_check:
                heartbeat = time.monotonic() >= next_heartbeat
                if await self._stopped_elsewhere(heartbeat=heartbeat):
                    self.stopped = True
                    return
                if heartbeat:
                    next_heartbeat = time.monotonic() + STREAM_HEARTBEAT_SECONDS
                next_check = time.monotonic() + STOP_POLL_SECONDS

    async def _next(self, next_check: float) -> Any:
        """The next model event, or None when it is time to look for a stop request."""
        try:
            return self.queue.get_nowait()  # a burst of chunks needs no timer each
        except asyncio.QueueEmpty:
            try:
                return await asyncio.wait_for(self.queue.get(), timeout=max(0.0, next_check - time.monotonic()))
            except TimeoutError:
                return None

    def _take(self, text: str) -> tuple[str, bool]:
        """Keep a chunk; past MAX_REPLY_CHARS it is cut and marked (True: the reply ends here)."""
        room = settings.MAX_REPLY_CHARS - self.received
        cut = len(text) > room
        if cut:
            # A runaway model must not fill the database and the page: the rest is dropped, marked.
            text = text[:room] + reply_cut_note()
        self.received += len(text)
        self.parts.append(text)
        return text, cut

    async def _stopped_elsewhere(self, *, heartbeat: bool) -> bool:
        text = "".join(self.parts) if heartbeat else ""
        status = await db_short(_reply_poll)(self.turn.reply_id, heartbeat=heartbeat, text=text)
        return status == Message.Status.STOPPED

    async def _finish(self, status: str, error: str = "") -> dict[str, Any]:
        self.finished = True
        work = db_short(_turn_finish)(
            turn=self.turn,
            content="".join(self.parts),
            status=status,
            usage=self.usage,
            latency_ms=int((time.monotonic() - self.started) * 1000),
            error=error,
        )
        # Shielded: a client that disconnects right now must not cost the stored reply.
        return await asyncio.shield(asyncio.ensure_future(work))

    async def abandon(self) -> None:
        """The client left: store what arrived as a stopped reply (once)."""
        if self.finished:
            return
        await _cancel(self.pump)
        try:
            await self._finish(Message.Status.STOPPED)
        except Exception:
            logger.exception("could not store the partial reply %s", self.turn.reply_id)

    async def close(self) -> None:
        await _cancel(self.pump)
        _streaming_here.discard(self.turn.reply_id)
        _stopped_here.discard(self.turn.reply_id)

    async def last_event(self) -> dict[str, Any]:
        """Store the reply and say how it ended: `done` (with the gauge) or `error`."""
        turn = self.turn
        if self.stopped:
            message = await self._finish(Message.Status.STOPPED)
            return _event("error", {"message": message, "error": _STOPPED_WORDS, "kind": "stopped",
                                    "retryable": True})
        if self.failure is not None:
            words, kind, retryable = _failure_words(self.failure)
            message = await self._finish(Message.Status.ERROR, error=words)
            return _event("error", {"message": message, "error": words, "kind": kind, "retryable": retryable})
        message = await self._finish(Message.Status.COMPLETE)
        if message["status"] == Message.Status.STOPPED:  # the stop request landed after the last chunk
            return _event("error", {"message": message, "error": _STOPPED_WORDS, "kind": "stopped",
                                    "retryable": True})
        gauge = _gauge_without_repacking(turn=turn, reply_tokens=message["token_count"])
        title = turn.title
        if gauge is None:
            gauge, title = await db_short(_after_turn)(turn=turn)
        margin = _summary_ahead_due(turn=turn, reply_tokens=message["token_count"])
        if margin is not None:
            # Planned and requested in the background: nothing here waits for it.
            summary_ahead_submit(conversation_id=turn.conversation_id, target=turn.target, margin_tokens=margin)
        return _event("done", {"message": message, "context": gauge, "title": title})


async def _cancel(task: asyncio.Task) -> None:
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
