"""The thread each request's sync code runs in, kept for the next request instead of started anew.

Django's ASGI handler enters a `ThreadSensitiveContext` per request: its first sync call starts a
thread, and on the way out a second thread is started to join the first. That was about 1 ms of the
server's CPU per API call under uvicorn (5.8 -> 4.7 ms a GET: bench/request_cpu.py), most of it in
the kernel. asgiref lets the caller own the context's executor
(`ThreadSensitiveContext(executor=...)`, asgiref 3.11+): `request_thread_take` lends one from a free
list, and `request_thread_give` takes it back once the request has ended.

What a request's thread held stays correct for the next one: Django's connections are per thread and
closed (or pooled) at the end of every request, as with a new thread; translations, time zones and
the like follow the request's context, not the thread.

A thread still running work when its request ends (a sync call whose awaiting task was cancelled by
a client going away) is not lent again, so that no request waits behind another's leftover work: it
is left to finish and stop, as Django's own would. At most `IDLE_MAX` idle threads are kept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

IDLE_MAX = 64

_idle: list[RequestThread] = []
_idle_lock = threading.Lock()  # lending happens on an event loop, but a process may run several


class RequestThread(ThreadPoolExecutor):
    """A one-thread executor that knows whether work submitted to it is still queued or running."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="request")
        self._pending = 0
        self._pending_lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        with self._pending_lock:
            self._pending += 1
        try:
            future = super().submit(fn, *args, **kwargs)
        except BaseException:
            self._done()
            raise
        future.add_done_callback(lambda _: self._done())
        return future

    def _done(self) -> None:
        with self._pending_lock:
            self._pending -= 1

    @property
    def busy(self) -> bool:
        with self._pending_lock:
            return self._pending > 0


def request_thread_take() -> RequestThread:
    """An idle request thread (the most recently used: its memory is the likeliest to be warm), or a
    new one."""
    with _idle_lock:
        if _idle:
            return _idle.pop()
    return RequestThread()


def request_thread_give(thread: RequestThread) -> None:
    """Back to the free list, unless it still runs a request's work or enough threads are idle; then it
    stops once its work is done (without waiting here: this runs on the event loop)."""
    if not thread.busy:
        with _idle_lock:
            if len(_idle) < IDLE_MAX:
                _idle.append(thread)
                return
    thread.shutdown(wait=False)
