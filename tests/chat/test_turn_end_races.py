"""How a turn ends when two things happen to it: a stop accepted before the model's stream fails stays a
stop (the user kept that text), and a turn whose client left before its reply began is answered all
the same."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from chatapp.chat import reply_stream
from chatapp.chat.chat_turn import chat_turn_start, chat_turn_stream
from chatapp.chat.message_services import message_stop
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from chatapp.dashboard.headline import dashboard_headline
from chatapp.providers.crypto import secret_encrypt
from chatapp.providers.models import LLMConfig
from tests.support.chat import make_config, send_stopped_elsewhere

pytestmark = pytest.mark.django_db


def test_a_stop_accepted_before_the_stream_fails_stays_a_stop(user, fake_openai):
    config = make_config(user, fake_openai.base_url, model="stream-error")
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    seen = send_stopped_elsewhere(user, conversation, "tell me a long story please")
    reply = Message.objects.get(conversation=conversation, role="assistant")
    assert (reply.status, reply.error) == ("stopped", "")
    assert reply.content  # what arrived before the stop is what the user kept
    last = seen[-1]
    assert (last["event"], last["data"]["kind"], last["data"]["message"]["status"]) == ("error", "stopped", "stopped")


@pytest.mark.parametrize("left_at", ["packing", "accepted"])
def test_a_turn_whose_client_left_before_its_reply_began_is_answered_all_the_same(user, fake_openai, left_at):
    # A connection dropped just after a send (a phone between networks): the message was stored, and
    # the page that comes back, or the send made again under its key, finds the reply, as it would had
    # the client left a moment later, mid-stream. It was stopped, empty, the model never asked.
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini")
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    fake_openai.reset()
    start = chat_turn_start(user=user, conversation=conversation, content="hello, what is a B-tree?")

    async def run() -> None:
        events = chat_turn_stream(start=start)
        first = await anext(events)
        assert first["event"] == "accepted"
        if left_at == "accepted":
            await events.aclose()  # Django closes the body at the yield
        else:
            nxt = asyncio.ensure_future(anext(events))  # the generator now awaits the packing
            await asyncio.sleep(0)
            nxt.cancel()  # the client leaves (Django cancels the body's task) while the context is packed
            with pytest.raises((asyncio.CancelledError, StopAsyncIteration)):
                await nxt
        # The reply goes on without its client; this loop ends with run(), the server's would not.
        await reply_stream.unwatched_replies_wait()

    async_to_sync(run)()

    reply = Message.objects.get(conversation=conversation, role="assistant")
    assert reply.status == "complete" and reply.content != ""
    assert len(fake_openai.completions) == 1  # asked once
    conversation.refresh_from_db()
    assert conversation.turn_claimed_at is None  # the chat takes sends again
    record = OptimizationRecord.objects.get(conversation=conversation)
    money = dashboard_headline(conversation=conversation)["money"]
    assert money["sent_usd"] == float(record.cost_sent_usd) > 0  # what was sent is counted


@pytest.mark.parametrize("stop_first", [False, True], ids=["refused", "stop-then-refused"])
def test_a_request_the_endpoint_refused_costs_nothing_also_after_a_stop(user, fake_openai, stop_first):
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini")
    LLMConfig.objects.filter(pk=config.pk).update(api_key_encrypted=secret_encrypt("bad-key-0000"))  # a 401
    config.refresh_from_db()
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    start = chat_turn_start(user=user, conversation=conversation, content="hello, what is a B-tree?")

    async def run() -> None:
        async for event in chat_turn_stream(start=start):
            if stop_first and event.get("event") == "start":
                reply_id = event["data"]["assistant_message"]["id"]
                await sync_to_async(message_stop)(message=await sync_to_async(Message.objects.get)(pk=reply_id))

    async_to_sync(run)()
    reply = Message.objects.get(conversation=conversation, role="assistant")
    record = OptimizationRecord.objects.get(conversation=conversation)
    assert reply.status == ("stopped" if stop_first else "error") and reply.content == ""
    assert float(record.cost_sent_usd or 0) == float(record.cost_full_usd or 0) == 0.0, record.cost_sent_usd
