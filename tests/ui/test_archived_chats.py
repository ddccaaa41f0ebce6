"""Archived chats: out of the sidebar, kept whole. The API's `archived` (PATCH, the list's filter, the
bulk endpoint) and `archived_at`; the sidebar and its search; a turn bringing a chat back; Settings'
section (bring back, delete, archive or bring back all); the archive through an export and an import."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import async_to_sync
from django.urls import reverse
from django.utils import timezone

from chatapp.chat.chat_retry import chat_regenerate_start
from chatapp.chat.chat_turn import chat_turn_start, turn_pack, turn_stream
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation, Message
from chatapp.chat.selectors import conversation_back_url
from tests.chat.importkit import export_document, import_now
from tests.support.accounts import token_client
from tests.ui.test_pinned_chats import _chat, _sections

pytestmark = pytest.mark.django_db


def _archive(user, chat: Conversation, archived: bool = True):
    return token_client(user).patch(f"/api/conversations/{chat.pk}/", {"archived": archived}, format="json")


def _finish(turn) -> None:
    async def run() -> None:
        async for _ in turn_stream(turn=turn):
            pass

    async_to_sync(run)()


def test_archiving_through_the_api_sets_archived_at_and_leaves_the_activity_alone(user, other_user):
    chat = _chat(user, "Taxes", days_ago=3)
    before = Conversation.objects.get(pk=chat.pk).updated_at

    archived = _archive(user, chat)

    assert archived.status_code == 200 and archived.json()["archived_at"] is not None
    stored = Conversation.objects.get(pk=chat.pk)
    assert stored.archived_at is not None and stored.updated_at == before
    assert _archive(user, chat).json()["archived_at"] == archived.json()["archived_at"]  # its date kept
    assert _archive(user, chat, False).json()["archived_at"] is None
    assert Conversation.objects.get(pk=chat.pk).updated_at == before

    api = token_client(user)
    assert api.patch(f"/api/conversations/{chat.pk}/", {"archived": "maybe"}, format="json").status_code == 400
    assert _archive(other_user, chat).status_code == 404
    assert Conversation.objects.get(pk=chat.pk).archived_at is None


def test_the_api_list_filters_by_archived_and_lists_both_without_the_filter(user, other_user):
    kept, put_away = _chat(user, "Kept"), _chat(user, "Put away", days_ago=1)
    _archive(user, put_away)
    theirs = _chat(other_user, "Theirs")
    _archive(other_user, theirs)
    api = token_client(user)

    def titles(query: str) -> list[str]:
        response = api.get(f"/api/conversations/{query}")
        assert response.status_code == 200
        return [c["title"] for c in response.json()["results"]]

    assert titles("") == ["Kept", "Put away"]
    assert titles("?archived=true") == ["Put away"]
    assert titles("?archived=false") == ["Kept"]
    assert api.get("/api/conversations/?archived=perhaps").status_code == 400
    assert kept.archived_at is None


def test_the_sidebar_leaves_archived_chats_out_and_a_search_finds_them_marked(page, user):
    _chat(user, "Garden tools")
    old = _chat(user, "Garden plans", days_ago=2)
    pinned = _chat(user, "Pinned taxes")
    token_client(user).patch(f"/api/conversations/{pinned.pk}/", {"pinned": True}, format="json")
    for chat in (old, pinned):
        _archive(user, chat)

    expected = [("Today", ["Garden tools"])]
    assert _sections(page.get(reverse("chat-sidebar")).content.decode()) == expected
    assert _sections(page.get(reverse("chat-new")).content.decode()) == expected

    found = page.get(reverse("chat-sidebar"), {"q": "garden"}).content.decode()
    assert _sections(found) == [("Best matches", ["Garden tools", "Garden plans"])]
    assert found.count('<span class="conv-archived">Archived</span>') == 1
    assert 'data-archived="1" aria-label="Unarchive “Garden plans”"' in found
    assert 'data-archived="0" aria-label="Archive “Garden tools”"' in found

    # Its page still opens, saying so; "back to the chat" never leads to an archived one.
    detail = page.get(reverse("chat-detail", args=[old.pk])).content.decode()
    assert 'id="archived-note" >' in detail and "<span>Unarchive</span>" in detail
    Conversation.objects.filter(pk=old.pk).update(updated_at=timezone.now() + timedelta(minutes=1))
    assert conversation_back_url(owner=user) != reverse("chat-detail", args=[old.pk])


def test_a_send_or_a_regenerate_in_an_archived_chat_brings_it_back(user):
    chat = Conversation.objects.create(owner=user, offline=True, title="Old talk")
    _archive(user, chat)

    turn = turn_pack(start=chat_turn_start(user=user, conversation=chat, content="Where were we?"))
    assert Conversation.objects.get(pk=chat.pk).archived_at is None  # from the claim, before the reply
    _finish(turn)

    _archive(user, chat)
    reply = Message.objects.get(pk=turn.reply_id)
    _finish(turn_pack(start=chat_regenerate_start(user=user, reply=reply)))
    assert Conversation.objects.get(pk=chat.pk).archived_at is None


def test_archive_all_through_the_api_and_back(user, other_user):
    mine = [_chat(user, f"Mine {i}") for i in range(3)]
    theirs = _chat(other_user, "Theirs")
    _archive(user, mine[0])
    first = Conversation.objects.get(pk=mine[0].pk).archived_at
    api = token_client(user)

    done = api.post("/api/conversations/archive/", {"archived": True}, format="json")

    assert done.status_code == 200 and done.json() == {"changed": 2}
    assert Conversation.objects.filter(owner=user, archived_at__isnull=True).count() == 0
    assert Conversation.objects.get(pk=mine[0].pk).archived_at == first  # already archived: its date kept
    assert Conversation.objects.get(pk=theirs.pk).archived_at is None
    assert api.post("/api/conversations/archive/", {}, format="json").status_code == 400
    back = api.post("/api/conversations/archive/", {"archived": False}, format="json")
    assert back.json() == {"changed": 3}
    assert Conversation.objects.filter(owner=user, archived_at__isnull=False).count() == 0


def test_settings_lists_the_archived_chats_to_bring_back_or_delete(page, user, other_user):
    first, second, active = _chat(user, "First away"), _chat(user, "Second away"), _chat(user, "Active")
    for chat in (first, second):
        _archive(user, chat)
    theirs = _chat(other_user, "Theirs")
    _archive(other_user, theirs)

    settings_page = page.get(reverse("settings")).content.decode()
    listed = settings_page.split('id="archived-list"')[1].split("</ul>")[0]
    assert listed.index("Second away") < listed.index("First away") and "Active" not in listed
    assert "Theirs" not in listed

    restored = page.post(reverse("archived-restore", args=[first.pk]))
    assert restored.status_code == 302 and restored["Location"].endswith("#archived-h")
    assert Conversation.objects.get(pk=first.pk).archived_at is None
    assert page.post(reverse("archived-delete", args=[second.pk])).status_code == 302
    assert not Conversation.objects.filter(pk=second.pk).exists()
    # Another user's archived chat is not there to bring back or delete.
    assert page.post(reverse("archived-restore", args=[theirs.pk])).status_code == 404
    assert page.post(reverse("archived-delete", args=[theirs.pk])).status_code == 404
    assert Conversation.objects.get(pk=theirs.pk).archived_at is not None
    assert page.get(reverse("archived-restore", args=[first.pk])).status_code == 405

    page.post(reverse("archived-all"), {"archived": "1"})
    assert Conversation.objects.filter(owner=user, archived_at__isnull=True).count() == 0
    assert 'id="archive-all"' not in page.get(reverse("settings")).content.decode()  # nothing left to archive
    page.post(reverse("archived-all"), {"archived": "0"})
    assert Conversation.objects.filter(owner=user, archived_at__isnull=False).count() == 0
    assert 'id="archived-none"' in page.get(reverse("settings")).content.decode()
    assert Conversation.objects.get(pk=active.pk).archived_at is None


def test_an_archive_goes_with_the_chat_through_its_export_and_import(user, other_user):
    away, plain = _chat(user, "Away"), _chat(user, "Plain")
    for chat in (away, plain):
        message_append(conversation=chat, role="user", content=f"About {chat.title}")
    _archive(user, away)
    documents = [export_document(Conversation.objects.get(pk=chat.pk)) for chat in (away, plain)]
    stamp = Conversation.objects.get(pk=away.pk).archived_at
    assert documents[0]["conversation"]["archived_at"] == stamp.isoformat()
    assert documents[1]["conversation"]["archived_at"] is None

    job = import_now(other_user, json.dumps(documents).encode())

    assert [Conversation.objects.get(pk=pk).archived_at for pk in job.conversation_ids] == [stamp, None]


def test_chats_archived_in_chatgpt_and_open_webui_come_in_archived(user):
    def chatgpt(title: str, **extra: object) -> dict:
        mapping = {"root": {"id": "root", "message": None, "parent": None, "children": ["u1"]},
                   "u1": {"id": "u1", "parent": "root", "children": [], "message": {
                       "id": "u1", "author": {"role": "user"}, "create_time": 1720000010,
                       "content": {"content_type": "text", "parts": ["Hi"]}}}}
        return {"id": f"gpt-{title}", "title": title, "create_time": 1720000000, "update_time": 1720000030,
                "current_node": "u1", "mapping": mapping, **extra}

    def webui(title: str, **extra: object) -> dict:
        messages = {"u1": {"id": "u1", "parentId": None, "childrenIds": [], "role": "user", "content": "Hi",
                           "timestamp": 1720000010}}
        return {"id": f"id-{title}", "title": title, "created_at": 1720000000, "updated_at": 1720000020,
                "chat": {"title": title, "history": {"messages": messages, "currentId": "u1"}}, **extra}

    from_chatgpt = import_now(user, json.dumps([chatgpt("Away", is_archived=True), chatgpt("Here")]).encode())
    from_webui = import_now(user, json.dumps([webui("Away", archived=True), webui("Here", archived=False)]).encode())

    stamps = [Conversation.objects.get(pk=pk).archived_at for pk in from_chatgpt.conversation_ids]
    assert stamps == [datetime.fromtimestamp(1720000030, tz=UTC), None]
    stamps = [Conversation.objects.get(pk=pk).archived_at for pk in from_webui.conversation_ids]
    assert stamps == [datetime.fromtimestamp(1720000020, tz=UTC), None]


def test_a_sidebar_emptied_by_archiving_says_where_the_chats_are(page, user):
    # After Archive all the sidebar read "No chats yet. Start one below.", as if every chat was gone.
    for title in ("Taxes", "Garden"):
        _archive(user, _chat(user, title))

    for url in (reverse("chat-sidebar"), reverse("chat-new")):
        body = page.get(url).content.decode()
        assert "No chats yet" not in body
        assert "Your 2 chats are archived" in body and f'href="{reverse("settings")}#archived-h"' in body

    _archive(user, Conversation.objects.get(title="Taxes"), False)
    assert "are archived" not in page.get(reverse("chat-sidebar")).content.decode()


def test_an_import_says_which_chats_came_in_archived(user):
    # An import of chats archived at their source listed them among the others, with no word that they
    # were out of the sidebar: its report ("… and 3 more in your chat list") sent the user looking there.
    def webui(title: str, **extra: object) -> dict:
        messages = {"u1": {"id": "u1", "parentId": None, "childrenIds": [], "role": "user", "content": title,
                           "timestamp": 1720000010}}
        return {"id": f"id-{title}", "title": title, "created_at": 1720000000, "updated_at": 1720000020,
                "chat": {"title": title, "history": {"messages": messages, "currentId": "u1"}}, **extra}

    job = import_now(user, json.dumps([webui("Away", archived=True), webui("Here")]).encode())

    state = token_client(user).get(f"/api/imports/{job.pk}/").json()
    assert [(c["title"], c["archived"]) for c in state["conversations"]] == [("Away", True), ("Here", False)]
