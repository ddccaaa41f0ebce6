"""End to end through a real uvicorn server: the reply reaches the client while it is produced."""

from __future__ import annotations

import time

import httpx
import pytest
from django.contrib.auth import get_user_model

from chatapp.chat.models import Conversation, Message, OptimizationRecord
from tests.support.accounts import api_key_for
from tests.support.chat import make_config, sse_events


@pytest.fixture
def live_setup(asgi_server, fake_openai):
    user = get_user_model().objects.create_user(username="grace", password="a long test password 3")
    token = api_key_for(user)
    config = make_config(user, fake_openai.base_url, model="slow-120")
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    client = httpx.Client(
        base_url=asgi_server.url, headers={"Authorization": f"Token {token}"}, timeout=30
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


def _leave_after_first_delta(client: httpx.Client, conversation: Conversation, content: str) -> int:
    """Send `content` and hang up at the reply's first delta (a reload): the reply's id."""
    url = f"/api/conversations/{conversation.pk}/messages/"
    with client.stream("POST", url, json={"content": content}) as response:
        for name, data in sse_events(response):
            if name == "start":
                reply_id = data["assistant_message"]["id"]
            if name == "delta":
                break  # closing the response drops the connection mid-stream
    return reply_id


def _settled(reply_id: int) -> Message:
    """The reply once its stream has stored it: the turn's claim on the conversation is given back in
    the same transaction (a stop request marks the row stopped at once, with the text checkpointed so
    far, and the stream stores the rest at its next chunk)."""
    conversation_id = Message.objects.values_list("conversation_id", flat=True).get(pk=reply_id)
    for _ in range(400):
        # The claim first, then the reply: read the other way round, a store committing in between
        # would leave the reply read as it was before (stopped, with the text checkpointed then).
        claimed = Conversation.objects.filter(pk=conversation_id).values_list("turn_claimed_at", flat=True).get()
        reply = Message.objects.get(pk=reply_id)
        if reply.status != "streaming" and claimed is None:
            break
        time.sleep(0.05)
    return reply


def test_a_reply_whose_client_goes_away_is_written_to_its_end(live_setup):
    # A reload or a dropped connection mid-reply: the model's whole answer is stored all the same (with
    # its record finished and the claim given back, so the chat takes the next message), and the page
    # that comes back follows it.
    client, conversation = live_setup
    reply_id = _leave_after_first_delta(client, conversation, "I will hang up")
    assert Message.objects.get(pk=reply_id).status == "streaming"  # still being read, without a client
    reply = _settled(reply_id)
    assert reply.status == "complete" and reply.content.startswith("Echo:") and "I will hang up" in reply.content
    assert OptimizationRecord.objects.get(reply=reply).dropped_tokens is not None
    assert Message.objects.get(conversation=conversation, role="user").content == "I will hang up"
    with client.stream("POST", f"/api/conversations/{conversation.pk}/messages/", json={"content": "next"}) as again:
        assert [name for name, _ in sse_events(again)][-1] == "done"


def test_a_reply_whose_client_went_away_still_stops_on_request(live_setup):
    client, conversation = live_setup
    reply_id = _leave_after_first_delta(client, conversation, "I will hang up, then stop it")
    assert client.post(f"/api/messages/{reply_id}/stop/").status_code == 200
    reply = _settled(reply_id)
    assert reply.status == "stopped" and reply.content != ""
