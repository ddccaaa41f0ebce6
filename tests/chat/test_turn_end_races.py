"""How a turn ends when two things happen to it: a stop accepted before the model's stream fails stays a
stop (the user kept that text), and a turn whose client left while its context was packed is kept
but costs nothing (the model was never called)."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync, sync_to_async

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


def test_a_turn_left_while_its_context_was_packed_costs_nothing(user, fake_openai):
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini")
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    fake_openai.reset()
    start = chat_turn_start(user=user, conversation=conversation, content="hello, what is a B-tree?")

    async def run() -> None:
        events = chat_turn_stream(start=start)
        first = await anext(events)
        assert first["event"] == "accepted"
        nxt = asyncio.ensure_future(anext(events))  # the generator now awaits the packing
        await asyncio.sleep(0)
        nxt.cancel()  # the client leaves (Django cancels the body's task) while the context is packed
        with pytest.raises((asyncio.CancelledError, StopAsyncIteration)):
            await nxt

    async_to_sync(run)()

    reply = Message.objects.get(conversation=conversation, role="assistant")
    assert reply.status == "stopped" and reply.content == ""
    assert fake_openai.completions == []  # the model was never asked
    record = OptimizationRecord.objects.get(conversation=conversation)
    money = dashboard_headline(conversation=conversation)["money"]
    # Nothing was sent to the endpoint: this request cost nothing, as a refused one costs nothing.
    assert float(record.cost_sent_usd or 0) == 0.0, (record.cost_sent_usd, record.cost_full_usd)
    assert money["sent_usd"] == 0.0, money


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
