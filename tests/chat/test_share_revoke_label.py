"""Settings → Shared links: each Revoke button names its link, as each API token's does. Two links of one
chat (shared twice) read "Revoke, button" alike to a screen reader, which could not tell which it ends."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from chatapp.chat.models import Conversation, ConversationShare
from chatapp.chat.share_services import conversation_share_create

pytestmark = pytest.mark.django_db


def test_each_revoke_button_names_the_link_it_revokes():
    owner = get_user_model().objects.create_user("sharer", password="Browser-test-pass-42")
    chat = Conversation.objects.create(owner=owner, title="Trip to Lisbon")
    first = conversation_share_create(owner=owner, conversation=chat).share
    second = conversation_share_create(owner=owner, conversation=chat).share
    ConversationShare.objects.filter(pk=first.pk).update(created_at=first.created_at.replace(hour=9, minute=5))
    ConversationShare.objects.filter(pk=second.pk).update(created_at=second.created_at.replace(hour=17, minute=30))
    page = Client()
    page.force_login(owner)
    body = page.get("/settings/").content.decode()
    section = body[body.index('id="shares-h"') :]

    labels = re.findall(r'<button type="submit"[^>]*aria-label="([^"]*)"[^>]*>Revoke</button>', section)
    assert len(labels) == 2 and len(set(labels)) == 2
    assert all(label.startswith("Revoke the link to “Trip to Lisbon”, shared ") for label in labels)
    assert any("09:05" in label for label in labels) and any("17:30" in label for label in labels)
