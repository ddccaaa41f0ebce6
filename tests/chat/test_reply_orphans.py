"""A web process killed mid-stream (issue 11, finding 6): the reply's text is checkpointed while it
streams, and the periodic sweep finishes a reply whose process is gone as interrupted, with its text,
so Retry works at once."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from chatapp.chat import reply_stream
from chatapp.chat.models import Conversation, Message
from chatapp.chat.tasks import sweep_pending_summary_jobs
from tests.support.accounts import api_key_for
from tests.support.chat import make_config, post_stream, sse_events

pytestmark = pytest.mark.django_db


def test_a_streaming_reply_checkpoints_its_text(asgi_server, fake_openai, monkeypatch):
    monkeypatch.setattr(reply_stream, "STREAM_HEARTBEAT_SECONDS", 0.3)
    user = get_user_model().objects.create_user(username="kit", password="a long test password 8")
    token = api_key_for(user)
    config = make_config(user, fake_openai.base_url, model="slow-150")
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    seen, stored = "", ""
    with httpx.Client(base_url=asgi_server.url, headers={"Authorization": f"Token {token}"},
                      timeout=30) as client, client.stream(
        "POST", f"/api/conversations/{conversation.pk}/messages/", json={"content": "talk slowly please"}
    ) as response:
        for name, data in sse_events(response):
            if name == "delta":
                seen += data["text"]
                reply = Message.objects.get(conversation=conversation, role="assistant")
                if reply.status == "streaming" and reply.content:
                    stored = reply.content
    # while it streamed, the stored text followed what the client saw (a prefix of it)
    assert stored and seen.startswith(stored)


def test_a_reply_the_sweep_took_for_dead_that_completes_is_stored_complete(asgi_server, fake_openai, monkeypatch):
    """The sweep marks a stream interrupted when its heartbeat stalls (a blocked event loop, say); if
    that stream then finishes, the reply is complete and counted, not "stopped"."""
    monkeypatch.setattr(reply_stream, "STREAM_HEARTBEAT_SECONDS", 3600.0)  # the heartbeat stalls
    user = get_user_model().objects.create_user(username="lee", password="a long test password 9")
    token = api_key_for(user)
    conversation = Conversation.objects.create(owner=user, llm_config=make_config(user, fake_openai.base_url,
                                                                                  model="slow-150"))
    swept, events = 0, []
    with httpx.Client(base_url=asgi_server.url, headers={"Authorization": f"Token {token}"},
                      timeout=30) as client, client.stream(
        "POST", f"/api/conversations/{conversation.pk}/messages/", json={"content": "talk slowly please"}
    ) as response:
        for name, data in sse_events(response):
            events.append((name, data))
            if name == "delta" and not swept:
                Message.objects.filter(conversation=conversation, role="assistant").update(
                    updated_at=timezone.now() - timedelta(minutes=5))
                swept = reply_stream.reply_orphans_finish()
    assert swept == 1
    name, done = events[-1]
    assert name == "done" and done["message"]["status"] == "complete", events[-1]
    reply = Message.objects.get(conversation=conversation, role="assistant")
    assert (reply.status, reply.error) == (Message.Status.COMPLETE, "")
    assert reply.content == "".join(data["text"] for name, data in events if name == "delta")
    conversation.refresh_from_db()
    assert conversation.live_message_count == 2 and conversation.live_token_count > reply.token_count


def test_a_stop_still_wins_over_a_reply_the_sweep_took_for_dead(asgi_server, fake_openai, monkeypatch):
    """Stop pressed while a swept stream is still alive: the reply ends stopped, not complete."""
    monkeypatch.setattr(reply_stream, "STREAM_HEARTBEAT_SECONDS", 3600.0)  # the heartbeat stalls
    user = get_user_model().objects.create_user(username="stopper", password="a long test password 9")
    token = api_key_for(user)
    conversation = Conversation.objects.create(owner=user, llm_config=make_config(user, fake_openai.base_url,
                                                                                  model="slow-150"))
    headers = {"Authorization": f"Token {token}"}
    swept, events = 0, []
    with httpx.Client(base_url=asgi_server.url, headers=headers, timeout=30) as client, client.stream(
        "POST", f"/api/conversations/{conversation.pk}/messages/", json={"content": "talk slowly please"}
    ) as response:
        for name, data in sse_events(response):
            events.append((name, data))
            if name == "delta" and not swept:
                reply = Message.objects.get(conversation=conversation, role="assistant")
                Message.objects.filter(pk=reply.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
                swept = reply_stream.reply_orphans_finish()
                with httpx.Client(base_url=asgi_server.url, headers=headers, timeout=30) as other:
                    assert other.post(f"/api/messages/{reply.pk}/stop/").status_code == 200
    assert swept == 1
    name, data = events[-1]
    assert name == "error" and data["kind"] == "stopped", events[-1]
    reply = Message.objects.get(conversation=conversation, role="assistant")
    assert reply.status == Message.Status.STOPPED and reply.content
    conversation.refresh_from_db()
    # the question and the reply as far as it went, counted once, with its final text
    assert conversation.live_message_count == 2
    assert conversation.live_char_count == len("talk slowly please") + len(reply.content)


def test_the_sweep_finishes_an_orphaned_reply_and_retry_works_at_once(user, fake_openai):
    config = make_config(user, fake_openai.base_url)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    question = Message.objects.create(conversation=conversation, role="user", content="Are you there?")
    # what a web process killed mid-stream leaves: the checkpointed text, no heartbeat any more
    orphan = Message.objects.create(conversation=conversation, role="assistant", content="Half an ans",
                                    status=Message.Status.STREAMING, reply_to=question)
    Message.objects.filter(pk=orphan.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
    live = Message.objects.create(conversation=conversation, role="assistant", content="still going",
                                  status=Message.Status.STREAMING, reply_to=question)

    outcome = sweep_pending_summary_jobs.apply().get()

    assert outcome["replies_interrupted"] == 1
    orphan.refresh_from_db()
    assert (orphan.status, orphan.content) == (Message.Status.ERROR, "Half an ans")
    assert "Interrupted" in orphan.error
    assert Message.objects.get(pk=live.pk).status == Message.Status.STREAMING  # its heartbeat is fresh
    Message.objects.filter(pk=live.pk).delete()

    # no waiting for the stale-stream grace: the interrupted reply is a failed one, and Retry answers
    result = post_stream(user, f"/api/messages/{question.pk}/retry/")

    assert result.names[-1] == "done", result.events
    orphan.refresh_from_db()
    assert orphan.superseded and orphan.content == "Half an ans"  # kept, replaced by the new answer


def test_retry_takes_over_a_silent_stream_when_a_send_would(user, fake_openai, settings):
    """Before the sweep has run: Retry and Send read the same clock (the heartbeat, not the model's
    timeout), so a reply whose process is gone does not block Retry for minutes after Send works."""
    config = make_config(user, fake_openai.base_url)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    question = Message.objects.create(conversation=conversation, role="user", content="Are you there?")
    orphan = Message.objects.create(conversation=conversation, role="assistant", content="Half",
                                    status=Message.Status.STREAMING, reply_to=question)
    silent = timezone.now() - timedelta(seconds=settings.STREAM_ORPHAN_SECONDS + 1)
    assert silent > timezone.now() - timedelta(seconds=settings.LLM_TIMEOUT_SECONDS)  # within the model's timeout
    Message.objects.filter(pk=orphan.pk).update(updated_at=silent)

    result = post_stream(user, f"/api/messages/{question.pk}/retry/")

    assert result.names[-1] == "done", result.events
    assert Message.objects.get(pk=orphan.pk).superseded
