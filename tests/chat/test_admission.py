"""Turn starts wait in line per process (chatapp.chat.admission); other requests never do."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync
from django.http import HttpResponse
from django.test import RequestFactory, override_settings

from chatapp.chat.admission import admission_middleware, is_turn_start


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
