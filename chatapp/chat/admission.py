"""Turn starts take turns: at most settings.TURN_START_CONCURRENCY per process prepare at once.

Starting a chat turn (store the message, pack the context, open the reply) is the one CPU-heavy
request; a stream after it costs little. Under ASGI each sync view runs in a thread of its own, so
200 sends arriving together become 200 threads sharing one interpreter lock, and a bystander's
10 ms page request gets 1/200 of the CPU: seconds. Queued here on the event loop instead, the sends
wait in line (the last of them starts no later than before: the work is the same), and everyone
else's requests compete with a few threads, not hundreds. The pool of database connections is
spared the same way.

Views opt in with `turn_start_view` (a function) or `turn_start = True` (a class); only POSTs are
gated. Under WSGI (sync) the middleware passes requests through: threads are the server's business.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.urls import Resolver404, resolve
from django.utils.decorators import sync_and_async_middleware

View = TypeVar("View", bound=Callable[..., Any])

# One semaphore per event loop (tests may run several loops in one process).
_gates: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}


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


def turn_gate() -> asyncio.Semaphore:
    """This event loop's line of turn starts: the view that stores the message passes it in the
    middleware, the packing that follows in the response body (chat_turn) passes it again."""
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        for old in [old for old in _gates if old.is_closed()]:
            del _gates[old]
        gate = _gates[loop] = asyncio.Semaphore(settings.TURN_START_CONCURRENCY)
    return gate


@sync_and_async_middleware
def admission_middleware(get_response: Callable) -> Callable:
    if not iscoroutinefunction(get_response):
        return get_response

    async def middleware(request: HttpRequest) -> HttpResponseBase:
        if request.method != "POST" or not is_turn_start(request.path_info):
            return await get_response(request)
        # Held until the view has answered: a streamed reply's body runs after, outside the gate.
        async with turn_gate():
            return await get_response(request)

    return middleware
