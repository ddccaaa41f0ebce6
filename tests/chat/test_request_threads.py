"""Requests' sync code runs in threads lent from a free list (chatapp.chat.request_threads), not in
a thread started, and another started to join it, per request."""

from __future__ import annotations

import threading
import time
from unittest import mock

import pytest
from django.core.signals import request_started

from chatapp.chat import request_threads
from chatapp.chat.admission import SyncStackASGIHandler
from chatapp.chat.request_threads import RequestThread, request_thread_give, request_thread_take
from tests.support.asgi_call import asgi_get


@pytest.fixture(autouse=True)
def free_list(monkeypatch):
    """A free list of this test's own: the process's may hold threads other tests' servers gave back."""
    idle: list[RequestThread] = []
    monkeypatch.setattr(request_threads, "_idle", idle)
    yield
    for thread in idle:
        thread.shutdown(wait=False)


def _threads_of(application, paths: list[str]) -> tuple[list[int], int]:
    """(the thread each GET's request_started receiver ran in, threads started over all of them)."""
    seen: list[int] = []
    started = 0
    start = threading.Thread.start

    def receiver(**kwargs):
        seen.append(threading.get_ident())

    def counted(self, *args, **kwargs):
        nonlocal started
        started += 1
        return start(self, *args, **kwargs)

    request_started.connect(receiver)
    try:
        with mock.patch.object(threading.Thread, "start", counted):
            for path in paths:
                assert asgi_get(application, path) == 200
    finally:
        request_started.disconnect(receiver)
    return seen, started


@pytest.mark.django_db
def test_requests_one_after_another_reuse_one_thread_and_start_none():
    application = SyncStackASGIHandler()
    asgi_get(application, "/accounts/login/")  # warm: a thread is lent and given back
    threads, started = _threads_of(application, ["/accounts/login/"] * 4)
    assert len(set(threads)) == 1
    assert threading.get_ident() not in threads  # still off the caller's thread
    # Whatever the harness itself starts (a loop per GET: asyncio.run) is counted by an application that
    # starts nothing; beyond that, none: Django's handler started two threads a request.
    _, loops_only = _threads_of(_LoopOnly(), ["/"] * 4)
    assert started == loops_only


class _LoopOnly:
    """An ASGI application that answers 200 and starts nothing: what the harness starts by itself."""

    async def __call__(self, scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def test_requests_at_the_same_time_get_threads_of_their_own():
    first, second = request_thread_take(), request_thread_take()
    try:
        assert first is not second
        idents = {first.submit(threading.get_ident).result(), second.submit(threading.get_ident).result()}
        assert len(idents) == 2
    finally:
        request_thread_give(second)
        request_thread_give(first)
    assert request_thread_take() is first  # the most recently given back is lent first
    request_thread_give(first)


def test_a_thread_still_working_when_its_request_ends_is_not_lent_again():
    thread = request_thread_take()
    worker = thread.submit(threading.current_thread).result(timeout=5)
    release = threading.Event()
    leftover = thread.submit(release.wait, 10)  # a sync call whose request was cancelled meanwhile
    request_thread_give(thread)
    lent = request_thread_take()
    try:
        assert lent is not thread
        assert lent.submit(lambda: "at once").result(timeout=5) == "at once"  # not behind the leftover
    finally:
        request_thread_give(lent)
    release.set()
    assert leftover.result(timeout=5) is True
    worker.join(timeout=5)
    assert not worker.is_alive()  # shut down once its work was done


def test_a_finished_call_leaves_the_thread_idle():
    thread = RequestThread()
    try:
        assert not thread.busy
        gate = threading.Event()
        future = thread.submit(gate.wait, 10)
        assert thread.busy
        gate.set()
        future.result(timeout=5)
        deadline = time.monotonic() + 5
        while thread.busy and time.monotonic() < deadline:  # done callbacks run just after the result
            time.sleep(0.001)
        assert not thread.busy
    finally:
        thread.shutdown()
