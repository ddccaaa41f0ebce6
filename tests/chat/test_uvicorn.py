"""End to end through a real uvicorn server: the reply reaches the client while it is produced."""

from __future__ import annotations

import time

import httpx
import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from chatapp.chat.models import Conversation, Message, OptimizationRecord
from tests.support.chat import make_config, sse_events


@pytest.fixture
def live_setup(asgi_server, fake_openai):
    user = get_user_model().objects.create_user(username="grace", password="a long test password 3")
    token = Token.objects.create(user=user)
    config = make_config(user, fake_openai.base_url, model="slow-120")
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    client = httpx.Client(
        base_url=asgi_server.url, headers={"Authorization": f"Token {token.key}"}, timeout=30
    )
    yield client, conversation
    client.close()


def test_reply_streams_through_uvicorn_and_stop_ends_it(live_setup):
    client, conversation = live_setup
    seen: list[str] = []
    with client.stream(
        "POST", f"/api/conversations/{conversation.pk}/messages/", json={"content": "stream to me please"}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-accel-buffering"] == "no"
        for name, data in sse_events(response):
            seen.append(name)
            if name == "start":
                reply_id = data["assistant_message"]["id"]
                # The first event arrived while the model is still answering: the reply is in flight.
                assert Message.objects.get(pk=reply_id).status == "streaming"
            if name == "delta" and seen.count("delta") == 2:
                stop = client.post(f"/api/messages/{reply_id}/stop/")
                assert stop.status_code == 200
            if name == "error":
                final = data
    assert seen[:2] == ["accepted", "start"] and seen[-1] == "error" and seen.count("delta") >= 2
    assert final["kind"] == "stopped"
    reply = Message.objects.get(pk=reply_id)
    assert reply.status == "stopped" and reply.content == final["message"]["content"] != ""


def test_full_reply_through_uvicorn(live_setup):
    client, conversation = live_setup
    conversation.llm_config.model = "fake-echo"
    conversation.llm_config.save()
    with client.stream(
        "POST", f"/api/conversations/{conversation.pk}/messages/", json={"content": "hello server"}
    ) as response:
        events = list(sse_events(response))
    names = [name for name, _ in events]
    assert names[:2] == ["accepted", "start"] and names[-1] == "done" and "delta" in names
    done = events[-1][1]
    reply = Message.objects.get(pk=done["message"]["id"])
    assert reply.status == "complete" and reply.prompt_tokens == done["message"]["prompt_tokens"]
    assert OptimizationRecord.objects.get(reply=reply).provider_prompt_tokens == reply.prompt_tokens


def test_client_that_goes_away_leaves_a_stopped_reply(live_setup):
    client, conversation = live_setup
    with client.stream(
        "POST", f"/api/conversations/{conversation.pk}/messages/", json={"content": "I will hang up"}
    ) as response:
        for name, data in sse_events(response):
            if name == "start":
                reply_id = data["assistant_message"]["id"]
            if name == "delta":
                break  # closing the response drops the connection mid-stream
    # The server notices the disconnect and stores what it had; poll the database until it has.
    reply = Message.objects.get(pk=reply_id)
    for _ in range(200):
        if reply.status != "streaming":
            break
        time.sleep(0.05)
        reply.refresh_from_db()
    assert reply.status == "stopped"
    assert Message.objects.get(conversation=conversation, role="user").content == "I will hang up"
