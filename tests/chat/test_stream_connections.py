"""Streams hold no database connection while they wait on the model (issue 11, finding 1).

With PostgreSQL the app uses a connection pool (settings.DATABASE_POOL_SIZE): ten replies streaming
held all ten connections, and every other request of the process waited and failed. Here more slow
replies stream at once than the pool has connections, and a bystander's request is still answered.
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from chatapp.chat.models import Conversation, Message
from tests.support.accounts import api_key_for
from tests.support.chat import make_config, sse_events


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the connection pool exists with PostgreSQL")
def test_more_slow_streams_than_pooled_connections_leave_room_for_others(asgi_server, fake_openai):
    pool = connection.pool
    assert pool is not None
    streams = pool.max_size + 2  # more than the pool could serve if each held its connection
    user = get_user_model().objects.create_user(username="lin", password="a long test password 7")
    token = api_key_for(user)
    config = make_config(user, fake_openai.base_url, model="slow-300")
    conversations = [Conversation.objects.create(owner=user, llm_config=config) for _ in range(streams)]
    headers = {"Authorization": f"Token {token}"}
    streaming = threading.Barrier(streams + 1, timeout=30)
    outcomes: list[str] = []

    def stream(conversation: Conversation) -> None:
        with httpx.Client(base_url=asgi_server.url, headers=headers, timeout=60) as client, client.stream(
            "POST", f"/api/conversations/{conversation.pk}/messages/", json={"content": "a long answer please"}
        ) as response:
            waited = False
            for name, _ in sse_events(response):
                if name == "delta" and not waited:
                    waited = True
                    streaming.wait()
                if name in ("done", "error"):
                    outcomes.append(name)

    threads = [threading.Thread(target=stream, args=(c,)) for c in conversations]
    for t in threads:
        t.start()
    streaming.wait()  # every reply is now streaming
    # while they all stream, no connection is held for them: the only one lent is this test's own
    # (a poll may hold one for a moment, so the quietest of a few samples is taken)
    in_use = []
    for _ in range(10):
        stats = pool.get_stats()
        in_use.append(stats["pool_size"] - stats["pool_available"])
        time.sleep(0.05)
    with httpx.Client(base_url=asgi_server.url, headers=headers, timeout=30) as client:
        started = time.monotonic()
        bystander = client.get("/api/conversations/")
        waited = time.monotonic() - started
    for t in threads:
        t.join(timeout=60)

    assert min(in_use) <= 1, in_use
    assert bystander.status_code == 200, f"after {waited:.1f} s"
    assert outcomes == ["done"] * streams
    assert Message.objects.filter(conversation__in=conversations, role="user").count() == streams
    assert Message.objects.filter(conversation__in=conversations, role="assistant", status="complete").count() \
        == streams


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the connection pool exists with PostgreSQL")
def test_a_burst_of_sends_waiting_in_line_does_not_take_the_pool(asgi_server, fake_openai, settings):
    # More sends at once than the pool has connections, plus the line's places: a send whose view has
    # answered waits in line (admission) to pack its context. Waiting with the connection its view
    # used, the first sends took the whole pool while the views holding the line waited for one, and
    # nothing moved until the pool's timeout answered them 500.
    pool = connection.pool
    assert pool is not None
    sends = pool.max_size + 2 * settings.TURN_START_CONCURRENCY
    user = get_user_model().objects.create_user(username="burst", password="a long test password 7")
    token = api_key_for(user)
    config = make_config(user, fake_openai.base_url)
    conversations = [Conversation.objects.create(owner=user, llm_config=config) for _ in range(sends)]
    headers = {"Authorization": f"Token {token}"}
    start = threading.Barrier(sends, timeout=30)
    outcomes: list[tuple[int, str]] = []

    def send(conversation: Conversation) -> None:
        with httpx.Client(base_url=asgi_server.url, headers=headers, timeout=60) as client:
            start.wait()
            with client.stream("POST", f"/api/conversations/{conversation.pk}/messages/",
                               json={"content": "hello there"}) as response:
                last = ""
                if response.status_code == 200:
                    for name, _ in sse_events(response):
                        last = name
                outcomes.append((response.status_code, last))

    threads = [threading.Thread(target=send, args=(c,)) for c in conversations]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)

    assert sorted(outcomes) == [(200, "done")] * sends, outcomes
