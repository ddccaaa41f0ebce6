"""Turn starts wait in line per process (chatapp.chat.admission); other requests never do."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync
from django.http import HttpResponse
from django.test import RequestFactory, override_settings

from chatapp.chat.admission import admission_middleware, is_turn_start
from tests.support.asgi_call import asgi_get


def test_the_three_turn_starts_are_gated_and_nothing_else():
    assert is_turn_start("/api/conversations/7/messages/")
    assert is_turn_start("/api/messages/7/regenerate/")
    assert is_turn_start("/api/messages/7/retry/")
    assert not is_turn_start("/api/messages/7/stop/")
    assert not is_turn_start("/api/conversations/")
    assert not is_turn_start("/no/such/page/")


def _most_at_once(method: str, path: str, *, requests: int) -> int:
    """How many of `requests` concurrent requests the middleware lets into the view at once."""

    async def run() -> int:
        inside, most, release = 0, 0, asyncio.Event()

        async def view(request):
            nonlocal inside, most
            inside += 1
            most = max(most, inside)
            await release.wait()
            inside -= 1
            return HttpResponse("ok")

        middleware = admission_middleware(view)
        build = getattr(RequestFactory(), method.lower())
        tasks = [asyncio.create_task(middleware(build(path))) for _ in range(requests)]
        for _ in range(1000):  # until no task can make progress without the release
            await asyncio.sleep(0)
            if most == requests:
                break
        seen = most
        release.set()
        responses = await asyncio.gather(*tasks)
        assert [r.status_code for r in responses] == [200] * requests
        return seen

    return async_to_sync(run)()


@override_settings(TURN_START_CONCURRENCY=2)
def test_at_most_the_configured_number_of_sends_are_prepared_at_once():
    assert _most_at_once("POST", "/api/conversations/7/messages/", requests=6) == 2


@override_settings(TURN_START_CONCURRENCY=2)
@pytest.mark.parametrize(("method", "path"), [("GET", "/api/conversations/7/messages/"),
                                              ("GET", "/api/conversations/"), ("POST", "/api/messages/7/stop/")])
def test_other_requests_are_never_held(method, path):
    assert _most_at_once(method, path, requests=6) == 6


def _thread_hops(path: str) -> tuple[int, int]:
    """(status, event loop <-> thread crossings) of one GET of `path` through the ASGI application."""
    from unittest import mock

    from asgiref.sync import AsyncToSync, SyncToAsync

    from chatapp.chat.admission import SyncStackASGIHandler

    hops = 0
    to_thread, to_loop = SyncToAsync.__call__, AsyncToSync.__call__

    def counted(original):
        def call(self, *args, **kwargs):
            nonlocal hops
            hops += 1
            return original(self, *args, **kwargs)
        return call

    application = SyncStackASGIHandler()  # chatapp.asgi's
    with mock.patch.object(SyncToAsync, "__call__", counted(to_thread)), \
            mock.patch.object(AsyncToSync, "__call__", counted(to_loop)):
        status = asgi_get(application, path)
    return status, hops


@pytest.mark.django_db
def test_the_middleware_stack_runs_in_one_thread_per_request():
    # A page behind every middleware (sessions, CSRF, auth, messages). With the stack's middlewares
    # async, each MiddlewareMixin hook crossed to a thread and back: 17 crossings for this page.
    status, hops = _thread_hops("/accounts/login/")
    assert status == 200
    # Now: the request_started signal, into the stack's thread (where the URL is resolved and CSRF's
    # view hook, the view and the template's render run: 4 more crossings with Django's own ASGI
    # handler) and the response's close.
    assert hops <= 3, hops
