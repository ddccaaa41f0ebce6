"""A client that leaves before its reply's stream starts: its message is answered all the same, and the
chat is given back.

A client leaving while the body streams is chat_turn_stream's. Before that, Django never runs the body:
it cancels a request whose client left while the view ran, and only closes a response whose body had
not begun (stream_views._TurnEventStream.close)."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth import get_user_model
from django.http import HttpResponse
from django.test import RequestFactory
from rest_framework.test import APIRequestFactory, force_authenticate

from chatapp.chat.admission import SyncStackASGIHandler, admission_middleware
from chatapp.chat.api.stream_views import ConversationMessagesApi
from chatapp.chat.models import Conversation, Message, MessageSearch
from chatapp.chat.reply_stream import unwatched_replies_wait
from tests.support.accounts import api_key_for
from tests.support.asgi_call import asgi_post_left
from tests.support.chat import make_config, send

pytestmark = pytest.mark.usefixtures("no_rate_limit")


def _chat(fake_openai, username: str):
    user = get_user_model().objects.create_user(username=username, password="a long test password 9")
    conversation = Conversation.objects.create(
        owner=user, llm_config=make_config(user, fake_openai.base_url, model="fake-echo"))
    return user, conversation


@pytest.mark.django_db(transaction=True)
def test_a_send_closed_before_its_body_began_is_answered_and_gives_the_turn_back(fake_openai):
    user, conversation = _chat(fake_openai, "grace")
    fake_openai.reset()
    request = APIRequestFactory().post(f"/api/conversations/{conversation.pk}/messages/",
                                       {"content": "are you there?"}, format="json")
    force_authenticate(request, user=user)
    response = ConversationMessagesApi.as_view()(request, pk=conversation.pk)
    conversation.refresh_from_db()
    assert response.status_code == 200 and conversation.turn_claimed_at is not None  # the turn is on

    async def left() -> None:
        # What Django does when the client left before the body's first step: the response closed in
        # the request's thread. The reply is then read without its client; this loop ends with left().
        await sync_to_async(response.close)()
        await unwatched_replies_wait()

    async_to_sync(left)()

    conversation.refresh_from_db()
    assert conversation.turn_claimed_at is None
    message, reply = Message.objects.filter(conversation=conversation).order_by("id")
    assert (message.role, message.content) == ("user", "are you there?")
    assert (reply.role, reply.status, reply.reply_to_id) == ("assistant", "complete", message.pk)  # answered
    assert len(fake_openai.completions) == 1
    assert MessageSearch.objects.filter(message=message).exists()  # and found by search and recall
    assert send(user, conversation, "hello again").names[-1] == "done"


def test_a_turn_start_whose_client_left_while_its_view_ran_has_its_response_closed():
    closed: list[bool] = []

    class Answer(HttpResponse):
        def close(self) -> None:
            closed.append(True)

    async def run() -> None:
        entered, finish = asyncio.Event(), asyncio.Event()

        async def view(request):  # stands for the sync view, which no cancellation stops in its thread
            entered.set()
            await finish.wait()
            return Answer()

        middleware = admission_middleware(view)
        request = RequestFactory().post("/api/conversations/7/messages/")
        handling = asyncio.ensure_future(middleware(request))
        await entered.wait()
        handling.cancel()  # Django's disconnect listener heard the client leave
        finish.set()
        with pytest.raises(asyncio.CancelledError):
            await handling

    asyncio.run(run())
    assert closed == [True]


@pytest.mark.django_db(transaction=True)
def test_a_send_whose_client_left_at_once_is_answered_and_leaves_the_chat_free(fake_openai):
    user, conversation = _chat(fake_openai, "ada")
    fake_openai.reset()
    token = api_key_for(user)

    sent = asgi_post_left(SyncStackASGIHandler(), f"/api/conversations/{conversation.pk}/messages/",
                          body=json.dumps({"content": "are you there?"}).encode(),
                          headers=[(b"authorization", f"Token {token}".encode())])

    assert sent == []  # gone before anything could reach it
    # The view ran to its end: the message is stored, so it is answered all the same (a connection
    # dropped just after the send: the page that comes back, or the send made again under its key,
    # finds the reply), and no turn holds the chat after. It was kept with no reply.
    message, reply = Message.objects.filter(conversation=conversation).order_by("id")
    assert (message.role, message.content) == ("user", "are you there?")
    assert (reply.role, reply.status, reply.reply_to_id) == ("assistant", "complete", message.pk)
    assert len(fake_openai.completions) == 1
    conversation.refresh_from_db()
    assert conversation.turn_claimed_at is None
    assert send(user, conversation, "hello again").names[-1] == "done"
