"""Turn starts take turns: at most settings.TURN_START_CONCURRENCY per process prepare at once.

Starting a chat turn (store the message, pack the context, open the reply) is the one CPU-heavy
request; a stream after it costs little. Under ASGI each sync view runs in a thread of its own, so
200 sends arriving together become 200 threads sharing one interpreter lock, and a bystander's
10 ms page request gets 1/200 of the CPU: seconds. Queued here on the event loop instead, the sends
wait in line (the last of them starts no later than before: the work is the same), and everyone
else's requests compete with a few threads, not hundreds. The pool of database connections is
spared the same way. Two lines of that many places: the views that store the message
(`turn_gate`, in the middleware) and the packing in the response body (`pack_gate`); see
pack_gate for why one line deadlocked.

Views opt in with `turn_start_view` (a function) or `turn_start = True` (a class); only POSTs are
gated.

The middleware stack's shape is decided here too. Django runs a middleware that can be sync or async
in the mode of the one below it, and an async `MiddlewareMixin` (all of Django's own) hops to a
thread and back for each of its process_request and process_response: a chat turn crossed between
the event loop and threads 34 times. So `admission_middleware` (async only) opens the stack on the
event loop, `sync_stack_end` (sync only) closes it, and everything between runs in the request's
thread. `SyncStackASGIHandler` ends that stack in Django's sync request handler, so that the URL
resolving, the view middlewares (CSRF's check) and the view run in that same thread too: the async
handler Django puts there hopped back to the event loop, then to a thread for CSRF's process_view
and to another for the (sync, DRF) view. One hop in, one out, per request, into a thread lent for the
request (chatapp.chat.request_threads).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from asgiref.sync import AsyncToSync, ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponseBase
from django.urls import Resolver404, resolve
from django.utils.decorators import async_only_middleware, sync_only_middleware

from chatapp.chat.body_limit import BodyGuard, BodyTooLarge, body_refuse, sender_signed_in
from chatapp.chat.dbconn import db_short
from chatapp.chat.lifespan import lifespan_serve
from chatapp.chat.request_threads import request_thread_give, request_thread_take

View = TypeVar("View", bound=Callable[..., Any])

logger = logging.getLogger(__name__)

# One semaphore per event loop and line (tests may run several loops in one process).
_gates: dict[tuple[asyncio.AbstractEventLoop, str], asyncio.Semaphore] = {}


def turn_start_view(view: View) -> View:
    """Mark a function view as a turn start (gated by admission_middleware)."""
    view.turn_start = True  # type: ignore[attr-defined]
    return view


def is_turn_start(path: str) -> bool:
    try:
        func = resolve(path).func
    except Resolver404:
        return False
    return bool(getattr(func, "turn_start", False) or getattr(getattr(func, "cls", None), "turn_start", False))


def _gate(line: str) -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    gate = _gates.get((loop, line))
    if gate is None:
        for old in [old for old in _gates if old[0].is_closed()]:
            del _gates[old]
        gate = _gates[(loop, line)] = asyncio.Semaphore(settings.TURN_START_CONCURRENCY)
    return gate


def turn_gate() -> asyncio.Semaphore:
    """This event loop's line of turn starts: the views that store the message pass it here, in the
    middleware."""
    return _gate("start")


def pack_gate() -> asyncio.Semaphore:
    """This event loop's line of context packing (chat_turn), in the response body. A line of its own:
    a body waiting here still holds the connection its view used (it goes back when packing ends),
    and behind the views' line it waited for views that were themselves waiting for a connection: a
    burst of sends took the whole pool and nothing moved until the pool's timeout (bench/load.py)."""
    return _gate("pack")


@async_only_middleware
def admission_middleware(get_response: Callable) -> Callable:
    """First in MIDDLEWARE: the line is kept on the event loop, before any thread is taken."""

    async def middleware(request: HttpRequest) -> HttpResponseBase:
        if request.method != "POST" or not is_turn_start(request.path_info):
            return await get_response(request)
        # Held until the view has answered: a streamed reply's body runs after, outside the gate.
        async with turn_gate():
            return await _answered(get_response(request))

    return middleware


async def _answered(view: Awaitable[HttpResponseBase]) -> HttpResponseBase:
    """The view's response. Django cancels the request when its client leaves, but the view goes on
    in its thread and may have stored a message and claimed the conversation for it: its response is then
    closed, which answers the message without its client (stream_views._TurnEventStream), instead of
    being dropped with the claim held."""
    answer = asyncio.ensure_future(view)
    try:
        return await asyncio.shield(answer)
    except asyncio.CancelledError:
        try:
            response = await answer
            await sync_to_async(response.close)()
        except Exception:  # the client is gone: logged, and the cancellation goes on as Django expects
            logger.exception("a turn start whose client left could not be closed")
        raise


class SyncStackASGIHandler(ASGIHandler):
    """Django's ASGI handler whose middleware stack ends in the sync request handler (the module's
    docstring says why). The stack opens with `admission_middleware`, async only, so it is still an
    async callable on the event loop."""

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        # As Django's, but the request's sync code runs in a thread lent for the request
        # (chatapp.chat.request_threads), not one started and joined for it, and a body past the
        # largest an endpoint takes is refused as it arrives, not read whole first (body_limit).
        if scope["type"] == "lifespan":
            await lifespan_serve(receive, send)
            return
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        guard = BodyGuard(scope)
        if guard.may_import(scope):
            guard.signed_in = await db_short(sender_signed_in)(scope)
        try:
            guard.announced(scope)
        except BodyTooLarge as exc:  # refused before a byte of it is read
            await body_refuse(send, guard.refusal(exc))
            return
        thread = request_thread_take()
        try:
            async with ThreadSensitiveContext(executor=thread):
                await self.handle(scope, guard.receiving(receive), send)
        except BodyTooLarge as exc:  # raised while Django read the body: nothing was answered yet
            await body_refuse(send, guard.refusal(exc))
        finally:
            request_thread_give(thread)

    def load_middleware(self, is_async: bool = False) -> None:
        # Built as for a sync server: the view middlewares and the view are called in the thread the
        # sync middlewares run in. Its top is async (admission_middleware), which Django then wrapped
        # for a sync caller; this handler is the caller, and async.
        super().load_middleware(is_async=False)
        chain = getattr(self, "_middleware_chain", None)
        if not isinstance(chain, AsyncToSync):
            raise ImproperlyConfigured("The first middleware must be async only (chatapp.chat.admission).")
        self._middleware_chain = chain.awaitable


@sync_only_middleware
def sync_stack_end(get_response: Callable) -> Callable:
    """Last in MIDDLEWARE, and does nothing itself: being sync only, it makes every middleware above
    it (up to admission_middleware) run synchronously in the request's thread (see the module's
    docstring)."""
    return get_response
