"""A stored key the server can no longer decrypt (its encryption key changed) is said so, in the
settings and in the chat, and no request goes out with a placeholder (issue 11, finding 9)."""

from __future__ import annotations

import base64

import pytest
from django.test import Client

from chatapp.chat.models import Conversation, Message
from tests.support.chat import make_config, send

pytestmark = pytest.mark.django_db


def test_an_unreadable_key_sends_nothing_and_says_what_to_do(user, fake_openai, settings):
    config = make_config(user, fake_openai.base_url)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    settings.FIELD_ENCRYPTION_KEYS = [base64.urlsafe_b64encode(b"9" * 32).decode()]
    fake_openai.reset()

    result = send(user, conversation, "Hello?")

    assert result.names[-1] == "error", result.events
    error = result.named("error")[0]
    assert "can no longer be read" in error["error"] and "Enter the key again in Settings" in error["error"]
    assert fake_openai.requests == []
    assert Message.objects.filter(conversation=conversation, role="user").count() == 1  # kept
    page = Client()
    page.force_login(user)
    body = page.get("/settings/").content.decode()
    assert "key unreadable: enter it again" in body


def test_the_edit_form_of_an_unreadable_key_asks_for_it_again(user, settings):
    """The card said "key unreadable: enter it again" and its edit form, under the key field, "A key is
    set, ending in ••••1234. Leave empty to keep it": kept, every message failed."""
    config = make_config(user, "https://api.example.com/v1")
    settings.FIELD_ENCRYPTION_KEYS = [base64.urlsafe_b64encode(b"9" * 32).decode()]
    page = Client()
    page.force_login(user)
    body = page.get("/settings/").content.decode()

    help_text = body.split(f'id="id_cfg{config.pk}-api_key_helptext">', 1)[1].split("</p>", 1)[0]
    assert "Leave empty to keep it" not in help_text
    assert "can no longer be read" in help_text and "type it again" in help_text
