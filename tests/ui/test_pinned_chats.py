"""Chats pinned to the top of the sidebar: the API's `pinned` (PATCH) and `pinned_at`, the list the page
and its fragment draw (a "Pinned" section first, the latest pinned first, each chat listed once; a
search lists its matches as found, pinned or not), and the pin through an export and an import."""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation
from tests.chat.importkit import export_document, import_now
from tests.support.accounts import token_client

pytestmark = pytest.mark.django_db


def _chat(owner, title: str, *, days_ago: int = 0) -> Conversation:
    chat = Conversation.objects.create(owner=owner, title=title)
    # updated_at is auto_now: set past save()
    Conversation.objects.filter(pk=chat.pk).update(updated_at=timezone.now() - timedelta(days=days_ago))
    return chat


def _sections(page: str) -> list[tuple[str, list[str]]]:
    """(label, titles listed under it) of each section of the sidebar's list, in order."""
    found = []
    for label, body in re.findall(r'<h2 class="conv-group-label">([^<]*)</h2>(.*?)</ul>', page, re.S):
        found.append((label, [html.unescape(t) for t in re.findall(r'<span class="conv-title">([^<]*)</span>', body)]))
    return found


def test_pinning_through_the_api_sets_pinned_at_and_leaves_the_activity_alone(user, other_user):
    chat = _chat(user, "Taxes", days_ago=3)
    before = Conversation.objects.get(pk=chat.pk).updated_at
    api = token_client(user)

    pinned = api.patch(f"/api/conversations/{chat.pk}/", {"pinned": True}, format="json")

    assert pinned.status_code == 200 and pinned.json()["pinned_at"] is not None
    stored = Conversation.objects.get(pk=chat.pk)
    assert stored.pinned_at is not None and stored.updated_at == before  # not moved up by activity
    again = api.patch(f"/api/conversations/{chat.pk}/", {"pinned": True}, format="json")
    assert again.json()["pinned_at"] == pinned.json()["pinned_at"]  # pinned again: its place kept
    assert api.get(f"/api/conversations/{chat.pk}/").json()["pinned_at"] == pinned.json()["pinned_at"]

    unpinned = api.patch(f"/api/conversations/{chat.pk}/", {"pinned": False}, format="json")
    assert unpinned.status_code == 200 and unpinned.json()["pinned_at"] is None
    assert Conversation.objects.get(pk=chat.pk).pinned_at is None

    assert api.patch(f"/api/conversations/{chat.pk}/", {"pinned": "maybe"}, format="json").status_code == 400
    theirs = token_client(other_user).patch(f"/api/conversations/{chat.pk}/", {"pinned": True}, format="json")
    assert theirs.status_code == 404
    assert Conversation.objects.get(pk=chat.pk).pinned_at is None


def test_the_sidebar_lists_the_pinned_chats_first_the_latest_pinned_first(page, user, other_user):
    api = token_client(user)
    old = _chat(user, "Old plans", days_ago=40)
    _chat(user, "Today's chat")
    yesterday = _chat(user, "Yesterday's chat", days_ago=1)
    theirs = _chat(other_user, "Not mine")
    for chat in (old, yesterday):
        assert api.patch(f"/api/conversations/{chat.pk}/", {"pinned": True}, format="json").status_code == 200
    Conversation.objects.filter(pk=theirs.pk).update(pinned_at=timezone.now())

    expected = [("Pinned", ["Yesterday's chat", "Old plans"]), ("Today", ["Today's chat"])]
    assert _sections(page.get(reverse("chat-sidebar")).content.decode()) == expected
    assert _sections(page.get(reverse("chat-new")).content.decode()) == expected
    fragment = page.get(reverse("chat-sidebar")).content.decode()
    assert 'data-pinned="1" aria-label="Unpin “Old plans”"' in fragment
    assert 'data-pinned="0" aria-label="Pin “Today&#x27;s chat”"' in fragment

    api.patch(f"/api/conversations/{old.pk}/", {"pinned": False}, format="json")
    assert _sections(page.get(reverse("chat-sidebar")).content.decode()) == [
        ("Pinned", ["Yesterday's chat"]), ("Today", ["Today's chat"]), ("Older", ["Old plans"]),
    ]


def test_a_search_lists_its_matches_as_found_pinned_or_not(page, user):
    pinned = _chat(user, "Garden plans", days_ago=5)
    _chat(user, "Garden tools")
    _chat(user, "Taxes")
    token_client(user).patch(f"/api/conversations/{pinned.pk}/", {"pinned": True}, format="json")

    found = _sections(page.get(reverse("chat-sidebar"), {"q": "garden"}).content.decode())

    # Ranked as any search (title hits first, the newest first), no "Pinned" section above them.
    assert found == [("Best matches", ["Garden tools", "Garden plans"])]


def test_a_pin_goes_with_the_chat_through_its_export_and_import(user, other_user):
    pinned, plain = _chat(user, "Pinned one"), _chat(user, "Plain one")
    for chat in (pinned, plain):
        message_append(conversation=chat, role="user", content=f"About {chat.title}")
    token_client(user).patch(f"/api/conversations/{pinned.pk}/", {"pinned": True}, format="json")
    documents = [export_document(Conversation.objects.get(pk=chat.pk)) for chat in (pinned, plain)]
    assert documents[0]["conversation"]["pinned_at"] == Conversation.objects.get(pk=pinned.pk).pinned_at.isoformat()
    assert documents[1]["conversation"]["pinned_at"] is None

    job = import_now(other_user, json.dumps(documents).encode())

    copies = [Conversation.objects.get(pk=pk) for pk in job.conversation_ids]
    assert [c.pinned_at for c in copies] == [Conversation.objects.get(pk=pinned.pk).pinned_at, None]


def test_a_chat_pinned_in_open_webui_comes_in_pinned(user):
    def chat(title: str, **extra: object) -> dict:
        messages = {"u1": {"id": "u1", "parentId": None, "childrenIds": [], "role": "user", "content": "Hi",
                           "timestamp": 1720000010}}
        return {"id": f"id-{title}", "title": title, "created_at": 1720000000, "updated_at": 1720000020,
                "chat": {"title": title, "history": {"messages": messages, "currentId": "u1"}}, **extra}

    job = import_now(user, json.dumps([chat("Pinned", pinned=True), chat("Not", pinned=False), chat("Old")]).encode())

    stamps = [Conversation.objects.get(pk=pk).pinned_at for pk in job.conversation_ids]
    assert stamps == [datetime.fromtimestamp(1720000020, tz=UTC), None, None]
