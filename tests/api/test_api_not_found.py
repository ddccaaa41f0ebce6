"""Addresses under /api/ that lead nowhere answer in JSON led by `detail` (chat/api/not_found.py): an
address without its final slash is not redirected (a client followed the 301 as a GET, and a message
POSTed there listed the messages instead of being sent), and an unknown one is not the site's page."""

from __future__ import annotations

import pytest
from django.test import Client

from chatapp.chat.models import Conversation, Message
from tests.support.accounts import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation(user):
    return Conversation.objects.create(owner=user, title="Slashes")


@pytest.mark.parametrize("method", ["post", "patch", "get"])
def test_an_api_address_without_its_slash_is_a_json_404_naming_the_right_one(user, conversation, method):
    api = token_client(user)
    path = f"/api/conversations/{conversation.pk}" + ("/messages" if method == "post" else "")

    answer = getattr(api, method)(path, {"content": "sent without slash", "title": "x"}, format="json")

    assert answer.status_code == 404 and answer["Content-Type"] == "application/json"
    assert answer.json() == {"detail": f"Not found. The API's addresses end with a slash: {path}/"}
    assert not Message.objects.filter(conversation=conversation).exists()
    assert Conversation.objects.get(pk=conversation.pk).title == "Slashes"


@pytest.mark.parametrize("path", ["/api/nothing/", "/api/conversations/abc/", "/api/messages/abc/pin/", "/api/x"])
def test_an_unknown_api_address_is_a_json_404(user, path):
    answer = token_client(user).get(path)

    assert answer.status_code == 404 and answer["Content-Type"] == "application/json"
    assert answer.json() == {"detail": "Not found."}


def test_pages_keep_their_slash_redirect_and_their_404_page(user):
    page = Client()
    page.force_login(user)

    assert page.get("/settings").status_code == 301 and page.get("/settings")["Location"] == "/settings/"
    missing = page.get("/no-such-page/")
    assert missing.status_code == 404 and missing["Content-Type"].startswith("text/html")
