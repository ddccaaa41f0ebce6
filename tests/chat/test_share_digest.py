"""Share links are stored as a digest of their token (as API tokens are): a copy of the database holds no
link that opens. The link is shown once, when it is made."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from chatapp.chat.models import Conversation, ConversationShare, Message
from chatapp.chat.share_services import conversation_share_create
from chatapp.chat.token_models import key_digest


@pytest.fixture
def chat(user) -> Conversation:
    conversation = Conversation.objects.create(owner=user, title="Trip to Lisbon")
    Message.objects.create(conversation=conversation, role="user", content="Where should we eat?")
    return conversation


def _stored(share_id: int) -> list[str]:
    """Every text the link's row holds."""
    row = ConversationShare.objects.filter(pk=share_id).values().get()
    return [str(value) for value in row.values()]


@pytest.mark.django_db
def test_only_a_digest_of_the_token_is_stored_and_the_link_opens(chat, user):
    issued = conversation_share_create(owner=user, conversation=chat)
    assert len(issued.token) >= 32
    assert not any(issued.token in value for value in _stored(issued.share.pk))
    assert ConversationShare.objects.get(pk=issued.share.pk).digest == key_digest(issued.token)
    assert Client().get(f"/s/{issued.token}/").status_code == 200
    # The digest itself is no link.
    assert Client().get(f"/s/{key_digest(issued.token)}/").status_code == 404


@pytest.mark.django_db
def test_each_share_makes_a_new_link_since_none_can_be_shown_again(chat, user):
    first = conversation_share_create(owner=user, conversation=chat)
    second = conversation_share_create(owner=user, conversation=chat)
    assert first.share.pk != second.share.pk and first.token != second.token
    for issued in (first, second):
        assert Client().get(f"/s/{issued.token}/").status_code == 200


@pytest.mark.django_db
def test_the_link_is_shown_at_creation_only(chat, user):
    api = APIClient()
    api.force_login(user)
    created = api.post(f"/api/conversations/{chat.pk}/share/").json()
    token = created["url"].rstrip("/").rsplit("/", 1)[1]
    assert Client().get(f"/s/{token}/").status_code == 200

    listed = api.get("/api/shares/").json()["results"]
    assert [row["id"] for row in listed] == [created["id"]] and "url" not in listed[0]
    assert token not in str(listed)
    page = Client()
    page.force_login(user)
    settings = page.get("/settings/").content.decode()
    assert "Trip to Lisbon" in settings and token not in settings and "/s/" not in settings
