"""Sends are idempotent and one at a time (issue 11, finding 9): the same client key twice stores
one message; a send while a reply streams in the same conversation (another tab) is refused with a
clear 409, so the model never sees two user turns in a row."""

from __future__ import annotations

import threading

import httpx
import pytest
from django.contrib.auth import get_user_model

from chatapp.chat.models import Conversation, Message
from tests.support.accounts import api_key_for
from tests.support.chat import make_config, post_stream, sse_events

pytestmark = pytest.mark.django_db


def test_the_same_client_key_twice_stores_one_message(user, conversation):
    path = f"/api/conversations/{conversation.pk}/messages/"
    once = post_stream(user, path, {"content": "Pay the invoice", "client_key": "k-123"})
    again = post_stream(user, path, {"content": "Pay the invoice", "client_key": "k-123"})

    assert once.names[-1] == "done"
    assert again.status == 409 and "already sent" in again.body["detail"]
    assert again.body["repeated"] is True  # stored: a page does not give the text back as unsent
    assert Message.objects.filter(conversation=conversation, role="user", content="Pay the invoice").count() == 1


@pytest.mark.parametrize("key", [0, False, [], {}])
def test_a_client_key_that_is_not_text_is_refused_even_when_falsy(user, conversation, key):
    # A falsy key was read as "no key": both sends stored, idempotency silently off.
    path = f"/api/conversations/{conversation.pk}/messages/"
    sends = [post_stream(user, path, {"content": "Pay the invoice", "client_key": key}) for _ in range(2)]

    assert [send.status for send in sends] == [400, 400]
    assert "client_key" in sends[0].body
    assert not Message.objects.filter(conversation=conversation, role="user").exists()


def test_an_empty_client_key_in_the_body_leaves_the_header_key(user, conversation):
    path = f"/api/conversations/{conversation.pk}/messages/"
    body = {"content": "Pay the invoice", "client_key": ""}
    once = post_stream(user, path, body, headers={"Idempotency-Key": "hdr-1"})
    again = post_stream(user, path, body, headers={"Idempotency-Key": "hdr-1"})

    assert once.names[-1] == "done" and again.status == 409
    assert Message.objects.filter(conversation=conversation, role="user").count() == 1


def test_a_send_while_a_reply_streams_elsewhere_is_refused(asgi_server, fake_openai):
    user = get_user_model().objects.create_user(username="two-tabs", password="a long test password 10")
    token = api_key_for(user)
    config = make_config(user, fake_openai.base_url, model="slow-150")
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    headers = {"Authorization": f"Token {token}"}
    path = f"/api/conversations/{conversation.pk}/messages/"
    streaming, second = threading.Event(), {}

    def first_tab() -> None:
        with httpx.Client(base_url=asgi_server.url, headers=headers, timeout=60) as client, client.stream(
            "POST", path, json={"content": "first tab asks", "client_key": "tab-1"}
        ) as response:
            for name, _ in sse_events(response):
                if name == "delta":
                    streaming.set()

    tab = threading.Thread(target=first_tab)
    tab.start()
    assert streaming.wait(30)
    with httpx.Client(base_url=asgi_server.url, headers=headers, timeout=30) as client:
        response = client.post(path, json={"content": "second tab asks", "client_key": "tab-2"})
        second.update(status=response.status_code, body=response.json())
    tab.join(60)

    assert second["status"] == 409 and "still being written" in second["body"]["detail"]
    assert "repeated" not in second["body"]  # refused, not stored: the page gives the text back
    users = list(Message.objects.filter(conversation=conversation, role="user").values_list("content", flat=True))
    assert users == ["first tab asks"]
    # once it has finished, the second tab's send goes through
    with httpx.Client(base_url=asgi_server.url, headers=headers, timeout=60) as client, client.stream(
        "POST", path, json={"content": "second tab asks", "client_key": "tab-2"}
    ) as response:
        assert response.status_code == 200
        b"".join(response.iter_bytes())
    roles = list(Message.objects.filter(conversation=conversation).values_list("role", flat=True))
    assert roles == ["user", "assistant", "user", "assistant"]
