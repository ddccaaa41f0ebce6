"""Streaming one reply: model events in, SSE events out.

The reader looks for a stop request between chunks (made on this process: at once, no query; on
another: polled once a second), checkpoints the text every few seconds (a killed process loses at
most that), caps a runaway reply, and goes on reading to the reply's end when the client leaves
(`detach`). The periodic sweep (`reply_orphans_finish`) finishes replies whose process died.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from chatapp.chat.dbconn import db_short
from chatapp.chat.models import Message
from chatapp.chat.search_services import message_index_sync
from chatapp.chat.textsafe import text_storable
from chatapp.chat.turn_types import ChatTurn, ReplyGoneError
from chatapp.providers import llm

logger = logging.getLogger(__name__)


# How often a streaming reply asks the database for a stop request made on another process (a stop
# made on this one is seen at the next chunk, with no query). A query per stream five times a second
# made 200 streams cost a bystander 0.7 s per request; once a second, 30 ms (bench/faults.py).
STOP_POLL_SECONDS = 1.0


# Replies streaming in this process, and those a stop request on this process has flagged.
streaming_here: set[int] = set()
stopped_here: set[int] = set()


def stop_flag(reply_id: int) -> None:
    """Flag a stop for a reply streaming in this process (others find it by polling). Only while it
    streams: a flag set after its stream ended would never be cleared."""
    if reply_id in streaming_here:
        stopped_here.add(reply_id)


# How often a streaming reply touches its updated_at (so Retry and the orphan sweep can tell a live
# stream from a dead one) and checkpoints its text: a killed process loses at most this much.
STREAM_HEARTBEAT_SECONDS = 3.0


# A reply whose heartbeat stopped for settings.STREAM_ORPHAN_SECONDS has no process streaming it: the
# sweep finishes it.
INTERRUPTED_WORDS = (
    "Interrupted: the server stopped while this reply was streaming. The text received until then is "
    "kept; Retry answers again."
)


def stream_event(name: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"event": name, "data": data}


# Not an event: the transport sends it as an SSE comment line, which clients ignore.
KEEPALIVE: dict[str, Any] = {"comment": "keep-alive"}


def _reply_poll(reply_id: int, *, heartbeat: bool, text: str = "", reasoning: str = "") -> str | None:
    """The reply's status. With `heartbeat`, a streaming reply's updated_at is touched and its text
    (and thinking) so far checkpointed first, so a long stream never looks dead to Retry (chat_retry),
    a killed process loses only the last seconds, and a page following the reply shows both; one
    query either way."""
    if heartbeat:
        text = text_storable(text)
        if Message.objects.filter(pk=reply_id, status=Message.Status.STREAMING).update(
            updated_at=timezone.now(), content=text, char_count=len(text), reasoning=text_storable(reasoning) or None
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


def reply_cut_note(what: str = "Reply") -> str:
    """The marker a reply (or its thinking) cut at settings.MAX_REPLY_CHARS ends with."""
    return f"\n\n[{what} cut here: it reached the {settings.MAX_REPLY_CHARS:,}-character limit.]"


_END = object()
_WAKE = object()  # the reader's timer fired: a stop poll or a keep-alive may be due
# Deltas waiting in the queue are sent as one event up to this size (see ReplyReader._joined).
_JOIN_MAX_CHARS = 8192


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


def failure_fields(exc: BaseException) -> dict[str, Any]:
    """An `error` event's words, kind, whether Retry may help, and the whole seconds the endpoint asked
    to wait (a 429's or 503's Retry-After) or None: the page holds Retry that long, as sooner is refused."""
    if isinstance(exc, llm.LLMError):
        wait = math.ceil(exc.retry_after) if exc.retry_after else None
        return {"error": exc.user_message, "kind": exc.kind, "retryable": exc.retryable, "retry_after": wait}
    logger.error("unexpected failure while streaming a reply", exc_info=exc)
    words = "Something went wrong while the reply was streaming. Your message is saved; try again."
    return {"error": words, "kind": "server", "retryable": True, "retry_after": None}


STOPPED_WORDS = "You stopped this reply; the text received so far is kept."


class ReplyReader:
    """One reply's stream: model events in, SSE events out, the stop flag and checkpoints on the way."""

    def __init__(self, turn: ChatTurn, *, store: Callable[..., dict[str, Any]]) -> None:
        self.turn = turn
        self.store = store  # stores the reply once, when it ends (reply_store.reply_store)
        self.started = time.monotonic()
        self.parts: list[str] = []
        self.received = 0
        self.thinking: list[str] = []  # a reasoning model's thinking (llm.Reasoning), kept apart
        self.thought = 0
        self.usage: Any = None
        self.finish_reason = ""  # why the model ended, as it said (llm.Finish): "length" marks a cut reply
        self.failure: BaseException | None = None
        self.stopped = False
        self.stored: asyncio.Future | None = None  # the store's work, once finish began
        self.queue: asyncio.Queue = asyncio.Queue()
        self.held: Any = None  # a model event taken from the queue while joining deltas (_joined)
        self.wake: asyncio.TimerHandle | None = None  # the reader's wake-up (_wake_by)
        self.wake_when = 0.0
        # The model call starts while the first event goes out.
        self.pump = asyncio.create_task(_pump(turn=turn, queue=self.queue))
        streaming_here.add(turn.reply_id)
        _open_readers.add(self)

    async def read(self) -> AsyncIterator[dict[str, Any]]:
        """Deltas (and keep-alives) until the model ends, fails, is stopped or the reply is cut."""
        keepalive = float(settings.SSE_KEEPALIVE_SECONDS)
        now = time.monotonic()
        next_check, next_heartbeat, last_sent = now + STOP_POLL_SECONDS, now + STREAM_HEARTBEAT_SECONDS, now
        while True:
            # Woken for the next stop poll or the next keep-alive, whichever is due first: a silent
            # model gets its keep-alives on time, not only when some other wake-up comes.
            item = await self._next(min(next_check, last_sent + keepalive))
            if item is _END:
                return
            if isinstance(item, BaseException):
                self.failure = item
                return
            event, cut = self._model_event(item)
            if event is not None:
                yield event
                last_sent = time.monotonic()
                if cut:
                    return
            if self.turn.reply_id in stopped_here:
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

    def _model_event(self, item: Any) -> tuple[dict[str, Any] | None, bool]:
        """The event a model event makes (None: nothing to send), and whether the reply ends there (cut)."""
        if isinstance(item, llm.Delta) and item.text:
            text, cut = self._take(self._joined(item))
            return stream_event("delta", {"text": text}), cut
        if isinstance(item, llm.Reasoning) and item.text:
            thought = self._think(self._joined(item))
            return (stream_event("reasoning", {"text": thought}) if thought else None), False
        if isinstance(item, llm.Usage):
            self.usage = item
        elif isinstance(item, llm.Finish):
            self.finish_reason = item.reason
        return None, False

    def _joined(self, first: llm.Delta | llm.Reasoning) -> str:
        """`first`'s text and that of the events of its kind already waiting behind it, as one: each
        event costs the server the same whatever its size, and chunks pile up exactly when it is
        busy. The first item of another kind is held for the next `_next`."""
        kind, text = type(first), first.text
        parts = [text]
        size = len(text)
        while size < _JOIN_MAX_CHARS and self.held is None:
            try:
                item = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            if type(item) is kind:
                parts.append(item.text)
                size += len(item.text)
            else:
                self.held = item
        return "".join(parts) if len(parts) > 1 else text

    async def _next(self, wake_at: float) -> Any:
        """The next model event, or None by `wake_at` (a stop poll or a keep-alive is due)."""
        if self.held is not None:
            item, self.held = self.held, None
        else:
            try:
                item = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                self._wake_by(wake_at)
                item = await self.queue.get()
        return None if item is _WAKE else item

    def _wake_by(self, when: float) -> None:
        """One timer for the stream, moved only to an earlier time: a reply that streams at a model's
        pace pushes its keep-alive back with every chunk, and a timer set and cancelled per chunk
        (what wait_for or asyncio.timeout does) was about 4% of such a turn's instructions
        (bench/turn_instructions.py). A wake-up that comes early finds nothing due, and the next
        wait sets the timer again."""
        if self.wake is not None:
            if self.wake_when <= when:
                return
            self.wake.cancel()
        self.wake_when = when
        # A millisecond late: uvloop rounds a timer to whole milliseconds and may fire it just before
        # `when`, and the rest, rounded to nothing, would wake the reader again and again until then.
        self.wake = asyncio.get_running_loop().call_later(max(0.0, when - time.monotonic()) + 0.001, self._woken)

    def _woken(self) -> None:
        self.wake = None
        self.queue.put_nowait(_WAKE)

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

    def _think(self, text: str) -> str:
        """Keep a piece of thinking, up to MAX_REPLY_CHARS of it: past that it is dropped (marked once),
        and the answer still comes. White space alone is no thinking: Qwen3 told `/no_think` still
        writes its block, empty, and an empty "Thinking" would then fold above every reply."""
        text = text if self.thinking else text.lstrip()
        room = settings.MAX_REPLY_CHARS - self.thought
        if not text or room <= 0:
            return ""
        if len(text) > room:
            text = text[:room] + reply_cut_note("Thinking")
            self.thought = settings.MAX_REPLY_CHARS  # the mark closes the thinking: nothing more is kept
        else:
            self.thought += len(text)
        self.thinking.append(text)
        return text

    async def _stopped_elsewhere(self, *, heartbeat: bool) -> bool:
        text = "".join(self.parts) if heartbeat else ""
        reasoning = "".join(self.thinking) if heartbeat else ""
        status = await db_short(_reply_poll)(self.turn.reply_id, heartbeat=heartbeat, text=text, reasoning=reasoning)
        # None: the row is gone with its conversation; the model need not go on writing for nobody.
        return status in (Message.Status.STOPPED, None)

    async def finish(self, status: str, error: str = "") -> dict[str, Any]:
        """Store the reply, once: a second call (the turn's end meeting a server's stop) gets the first's."""
        if self.stored is None:
            _open_readers.discard(self)
            work = db_short(self.store)(
                turn=self.turn,
                content="".join(self.parts),
                reasoning="".join(self.thinking),
                status=status,
                usage=self.usage,
                latency_ms=int((time.monotonic() - self.started) * 1000),
                error=error,
                finish_reason=self.finish_reason,
            )
            self.stored = asyncio.ensure_future(work)
        # Shielded: a client that disconnects right now must not cost the stored reply.
        return await asyncio.shield(self.stored)

    def detach(self, *, end: Callable[[ReplyReader], Awaitable[Any]]) -> None:
        """The client left mid-reply (a reload, a closed laptop, a dropped connection): the reply goes
        on being read from the model and is stored as it would have been, `end` (the turn's own end:
        store, record, summary ahead) included, by a task of this process's loop that nobody awaits.
        The page that comes back follows it from its checkpoints (history.js), and a stop request still
        ends it. Should the process stop first, the sweep finishes it from its last checkpoint
        (reply_orphans_finish), as for a process that died mid-reply."""
        # In a context of its own: the request's (asgiref's thread-sensitive context among it) ends
        # with the request, and database work through it would then be refused.
        task = asyncio.get_running_loop().create_task(self._unwatched(end), context=contextvars.Context())
        _unwatched_tasks.add(task)  # held: the loop keeps only a weak reference to a task
        task.add_done_callback(_unwatched_tasks.discard)

    async def _unwatched(self, end: Callable[[ReplyReader], Awaitable[Any]]) -> None:
        try:
            try:
                async for _ in self.read():  # the events have no one to go to; the text is kept here
                    pass
            finally:
                await self.close()
            await end(self)
        except ReplyGoneError:
            pass  # deleted with its conversation: nothing to keep
        except Exception:
            logger.exception("could not finish the reply %s after its client left", self.turn.reply_id)

    async def close(self) -> None:
        if self.wake is not None:
            self.wake.cancel()
        await _cancel(self.pump)
        streaming_here.discard(self.turn.reply_id)
        stopped_here.discard(self.turn.reply_id)



# Replies whose client left, still being read (ReplyReader.detach).
_unwatched_tasks: set[asyncio.Task] = set()

# Readers of this process whose reply is not stored yet (replies_interrupt); weak, so that one whose
# store never came (its conversation deleted meanwhile) is not kept.
_open_readers: weakref.WeakSet[ReplyReader] = weakref.WeakSet()


async def replies_interrupt(*, grace: float) -> int:
    """Store every reply this process still streams as interrupted, with the text it had, and give its
    chat's claim back; returns how many. For a server that stops (SIGTERM: a deploy, a restart) once
    its grace period for open connections has ended: it has just cancelled them, and what is not
    stored now would stay "streaming", its chat refusing sends, until the orphan sweep
    (STREAM_ORPHAN_SECONDS later) found it. The replies whose page left (no connection for the server
    to wait for) get `grace` seconds more to end first. Called at the ASGI lifespan's shutdown."""
    await asyncio.sleep(0.05)  # the cancelled connections hand their readers over (detach)
    unwatched = list(_unwatched_tasks)
    if unwatched:
        _, late = await asyncio.wait(unwatched, timeout=grace)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
    readers = list(_open_readers)  # a reader leaves the set when its finish begins
    for reader in readers:
        await reader.close()
    await asyncio.gather(
        *(reader.finish(Message.Status.ERROR, error=INTERRUPTED_WORDS) for reader in readers), return_exceptions=True
    )
    return len(readers)


async def unwatched_replies_wait() -> None:
    """Until the replies on this loop whose client left are stored: for a caller whose loop ends with
    its own work (a script, a test); a server's loop outlives them."""
    loop = asyncio.get_running_loop()
    while mine := [task for task in _unwatched_tasks if task.get_loop() is loop]:
        await asyncio.gather(*mine, return_exceptions=True)


async def _cancel(task: asyncio.Task) -> None:
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
