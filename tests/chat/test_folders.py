"""Chat folders (folder_models): made, renamed and deleted by their owner, a chat in at most one; a folder
deleted gives its chats back to the main list. The sidebar lists the folders with their chats above the
chats in none, pinned chats first as ever, archived ones in no folder's list."""

from __future__ import annotations

import html
import re
import unicodedata
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.http import Http404
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from chatapp.chat import fork_services
from chatapp.chat.folder_models import Folder
from chatapp.chat.folder_selectors import folder_get, folder_list
from chatapp.chat.folder_services import (
    MAX_FOLDERS_PER_USER,
    conversation_folder_set,
    folder_create,
    folder_delete,
    folder_for_import,
    folder_rename,
)
from chatapp.chat.fork_services import ForkQueued, conversation_fork
from chatapp.chat.import_models import ImportJob
from chatapp.chat.import_services import import_job_run
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation
from chatapp.chat.tasks import import_conversations

pytestmark = pytest.mark.django_db


def _chat(owner, title: str, *, days_ago: int = 0, **fields) -> Conversation:
    chat = Conversation.objects.create(owner=owner, title=title, **fields)
    Conversation.objects.filter(pk=chat.pk).update(updated_at=timezone.now() - timedelta(days=days_ago))
    return Conversation.objects.get(pk=chat.pk)


def _code(exc: pytest.ExceptionInfo, field: str = "name") -> str:
    return exc.value.error_dict[field][0].code


def test_a_folder_is_named_once_per_owner_whatever_the_case(user, other_user):
    work = folder_create(owner=user, name="  Work   notes ")
    assert work.name == "Work notes" and work.created_at is not None

    with pytest.raises(ValidationError) as taken:
        folder_create(owner=user, name="WORK NOTES")
    assert _code(taken) == "taken"
    assert folder_create(owner=other_user, name="Work notes").owner == other_user  # another user's is theirs

    with pytest.raises(ValidationError) as blank:
        folder_create(owner=user, name="   ")
    assert _code(blank) == "blank"
    for unseen in ("\u200b", "\u200b\u2060 \ufeff", "\u202e", "\u00ad\u3000"):  # a name of nothing visible
        with pytest.raises(ValidationError) as blank:
            folder_create(owner=user, name=unseen)
        assert _code(blank) == "blank"
    with pytest.raises(ValidationError) as long:
        folder_create(owner=user, name="x" * 81)
    assert _code(long) == "too_long"
    assert folder_create(owner=user, name="y" * 80).name == "y" * 80
    assert [f.name for f in folder_list(owner=user)] == ["Work notes", "y" * 80]


def test_renaming_keeps_the_rule_and_may_change_only_the_case(user):
    work, home = folder_create(owner=user, name="Work"), folder_create(owner=user, name="Home")

    assert folder_rename(folder=work, name="WORK").name == "WORK"  # its own name in another case
    with pytest.raises(ValidationError) as taken:
        folder_rename(folder=home, name="work")
    assert _code(taken) == "taken"
    # The folder the user has is named as it is shown in the sidebar, not as typed.
    assert taken.value.error_dict["name"][0].message == "You already have a folder “WORK”."
    assert Folder.objects.get(pk=home.pk).name == "Home"
    assert folder_rename(folder=home, name="Family").name == "Family"
    assert Folder.objects.get(pk=home.pk).name == "Family"


@pytest.mark.parametrize(("kept", "typed"), [
    ("Café", "Cafe\u0301"),  # é typed whole, then pasted decomposed (macOS): one name to a reader
    ("Cafe\u0301", "CAFÉ"),
    ("Straße", "STRASSE"),  # Unicode's upper case of "ß" is "SS"
])
def test_names_that_read_the_same_clash_on_every_database(user, kept, typed):
    first = folder_create(owner=user, name=kept)
    assert first.name == unicodedata.normalize("NFC", kept)  # stored composed, as the sidebar shows it
    with pytest.raises(ValidationError) as taken:
        folder_create(owner=user, name=typed)
    assert _code(taken) == "taken"
    other = folder_create(owner=user, name="Other")
    with pytest.raises(ValidationError) as renamed:
        folder_rename(folder=other, name=typed)
    assert _code(renamed) == "taken"
    # An import naming the folder so files its chat in the one there is, not in a second of that name.
    assert folder_for_import(owner=user, name=typed) == first
    assert Folder.objects.filter(owner=user).count() == 2


def test_an_owner_holds_a_bounded_number_of_folders(user):
    Folder.objects.bulk_create([Folder(owner=user, name=f"f{i}") for i in range(MAX_FOLDERS_PER_USER)])
    with pytest.raises(ValidationError) as many:
        folder_create(owner=user, name="one more")
    assert _code(many) == "too_many"


def test_a_chat_moves_into_one_folder_and_out_without_moving_in_the_list(user, other_user):
    work, home = folder_create(owner=user, name="Work"), folder_create(owner=user, name="Home")
    chat = _chat(user, "Taxes", days_ago=3)
    before = chat.updated_at

    conversation_folder_set(conversation=chat, folder=work)
    conversation_folder_set(conversation=chat, folder=home)
    stored = Conversation.objects.get(pk=chat.pk)
    assert stored.folder == home and stored.updated_at == before  # one folder at a time; no activity

    conversation_folder_set(conversation=chat, folder=None)
    assert Conversation.objects.get(pk=chat.pk).folder is None

    theirs = folder_create(owner=other_user, name="Eve's")
    with pytest.raises(ValidationError):  # as a folder not there (test_api_body_ids)
        conversation_folder_set(conversation=chat, folder=theirs)
    assert Conversation.objects.get(pk=chat.pk).folder is None


def test_deleting_a_folder_keeps_its_chats(user):
    work = folder_create(owner=user, name="Work")
    chats = [_chat(user, f"chat {i}", days_ago=i) for i in range(3)]
    for chat in chats:
        conversation_folder_set(conversation=chat, folder=work)
    dates = {c.pk: c.updated_at for c in chats}

    folder_delete(folder=work)

    assert not Folder.objects.filter(pk=work.pk).exists()
    kept = {c.pk: c for c in Conversation.objects.filter(owner=user)}
    assert set(kept) == set(dates)
    assert all(c.folder_id is None and c.updated_at == dates[c.pk] for c in kept.values())


@pytest.mark.django_db(transaction=True)  # committed, as a request is: the chat's link is checked then
def test_a_folder_deleted_meanwhile_is_not_found_by_a_move_nor_a_rename(user):
    """Another tab deleted the folder after this request read it: as for any folder not there, a move
    into it is a bad `folder` (the API's 400, as for a missing id in its body) and a rename of it a 404,
    not the database's refusal of a chat filed in nothing (a 500)."""
    chat = _chat(user, "Taxes")
    stale = folder_create(owner=user, name="Work")
    Folder.objects.filter(pk=stale.pk).delete()

    with pytest.raises(ValidationError) as refused:
        conversation_folder_set(conversation=chat, folder=stale)
    assert refused.value.message_dict == {"folder": ["No such folder."]}
    assert Conversation.objects.get(pk=chat.pk).folder_id is None
    with pytest.raises(Http404):
        folder_rename(folder=stale, name="Home")
    assert not Folder.objects.filter(owner=user).exists()


def test_another_users_folder_is_not_found(user, other_user):
    theirs = folder_create(owner=other_user, name="Eve's")
    with pytest.raises(Http404):
        folder_get(owner=user, pk=theirs.pk)
    assert folder_get(owner=other_user, pk=theirs.pk) == theirs
    assert list(folder_list(owner=user)) == []


def _folders(page: str) -> list[tuple[str, list[str]]]:
    """(name, titles listed in it) of each folder of the sidebar's list, in order."""
    found = []
    for name, body in re.findall(r'<span class="folder-name">([^<]*)</span>(.*?)</ul>', page, re.S):
        found.append((html.unescape(name), re.findall(r'<span class="conv-title">([^<]*)</span>', body)))
    return found


def _sections(page: str) -> list[tuple[str, list[str]]]:
    return [
        (label, re.findall(r'<span class="conv-title">([^<]*)</span>', body))
        for label, body in re.findall(r'<h2 class="conv-group-label">([^<]*)</h2>(.*?)</ul>', page, re.S)
    ]


def test_the_sidebar_lists_folders_with_their_chats_above_the_others(user):
    work = folder_create(owner=user, name="Work")
    folder_create(owner=user, name="Archive box")  # empty: listed all the same
    report = _chat(user, "Report", days_ago=2)
    budget = _chat(user, "Budget", days_ago=1)
    pinned = _chat(user, "Pinned one", pinned_at=timezone.now())
    archived = _chat(user, "Old archived", archived_at=timezone.now())
    _chat(user, "Loose")
    for chat in (report, budget, pinned, archived):
        conversation_folder_set(conversation=chat, folder=work)
    client = Client()
    client.force_login(user)

    for page in (
        client.get(reverse("chat-new")).content.decode(),
        client.get(reverse("chat-sidebar")).content.decode(),
    ):
        # Folders by name; a folder's chats by last activity; pinned chats stay first, listed once;
        # archived ones are out of the folder as they are out of the main list.
        assert _folders(page) == [("Archive box", []), ("Work", ["Budget", "Report"])]
        assert page.index("Pinned one") < page.index('class="folder-name"') < page.index("Loose")
        assert _sections(page)[0] == ("Pinned", ["Pinned one"])
        assert "Old archived" not in page
        assert page.count(">Report<") == 1

    # A search lists what it finds as ever, in a folder or not.
    found = client.get(reverse("chat-sidebar"), {"q": "Report"}).content.decode()
    assert _folders(found) == [] and "Report" in found


def test_the_sidebar_pages_a_long_folder_with_the_other_chats(user, monkeypatch):
    from chatapp.chat import sidebar

    monkeypatch.setattr(sidebar, "SIDEBAR_LIMIT", 3)
    work = folder_create(owner=user, name="Work")
    for i in range(5):
        conversation_folder_set(conversation=_chat(user, f"w{i}", days_ago=i), folder=work)
    client = Client()
    client.force_login(user)

    first = client.get(reverse("chat-sidebar")).content.decode()
    assert _folders(first) == [("Work", ["w0", "w1", "w2"])]
    assert 'data-action="more-chats"' in first
    more = client.get(reverse("chat-sidebar"), {"limit": "6"}).content.decode()
    assert _folders(more) == [("Work", ["w0", "w1", "w2", "w3", "w4"])]


def test_a_folder_name_cut_short_in_the_sidebar_is_whole_in_its_tooltip(user):
    """The sidebar ends a long name with "…", as it does a chat's title: the pointer's tooltip says it
    whole, as the chat rows' does."""
    name = "Project 07 with a long descriptive name here"
    folder_create(owner=user, name=name)
    client = Client()
    client.force_login(user)
    page = client.get(reverse("chat-sidebar")).content.decode()
    toggle = re.search(r'<button type="button" class="folder-toggle"[^>]*>', page)
    assert toggle and f'title="{name}"' in toggle.group(0)


def test_a_folder_holding_only_pinned_chats_says_where_they_are(user):
    """A pinned chat is listed once, under Pinned: its folder said "No chats in this folder." and
    counted 0 right after "Move to folder…" put it there."""
    work = folder_create(owner=user, name="Work")
    for title in ("Plan", "Budget"):
        conversation_folder_set(conversation=_chat(user, title, pinned_at=timezone.now()), folder=work)
    client = Client()
    client.force_login(user)
    page = client.get(reverse("chat-sidebar")).content.decode()
    assert _folders(page) == [("Work", [])]
    assert "No chats in this folder." not in page
    assert "Its 2 pinned chats are listed under Pinned." in page
    assert re.search(r'class="folder-count">2<', page)


def test_a_folder_holding_only_archived_chats_says_where_they_are(user):
    """Archived chats are out of every list, their folder's too: a folder holding only archived chats
    said "No chats in this folder.", and deleting it as empty would surprise its owner."""
    work = folder_create(owner=user, name="Work")
    home = folder_create(owner=user, name="Home")
    folder_create(owner=user, name="Empty")
    for title in ("Plan", "Budget"):
        conversation_folder_set(conversation=_chat(user, title, archived_at=timezone.now()), folder=work)
    conversation_folder_set(conversation=_chat(user, "Old", archived_at=timezone.now()), folder=home)
    conversation_folder_set(conversation=_chat(user, "Live"), folder=home)
    # Another user's archived chats count for nobody here.
    other = _chat(user.__class__.objects.create_user("other-owner"), "Theirs", archived_at=timezone.now())
    conversation_folder_set(conversation=other, folder=folder_create(owner=other.owner, name="Empty"))
    client = Client()
    client.force_login(user)
    page = client.get(reverse("chat-sidebar")).content.decode()
    assert _folders(page) == [("Empty", []), ("Home", ["Live"]), ("Work", [])]
    empties = re.findall(r'<li class="folder-empty">(.*?)</li>', page)
    assert [re.sub(r"<[^>]+>", "", html.unescape(text)) for text in empties] == [
        "No chats in this folder.",
        "Its 2 chats are archived: Settings → Archived chats lists them.",
    ]
    assert f'href="{reverse("settings")}#archived-h"' in empties[1]


@pytest.mark.parametrize("limit", [100, 0], ids=["in-request", "import-job"])
def test_a_branch_in_new_chat_is_in_the_folder_of_its_chat(
    user, limit, monkeypatch, django_capture_on_commit_callbacks
):
    """Branch in new chat keeps the chat's model and system prompt; its folder too, whether written in
    the request or, past the limit, by the import worker (its folder as it is when the worker runs)."""
    monkeypatch.setattr(fork_services, "MAX_FORK_MESSAGES", limit)
    monkeypatch.setattr(import_conversations, "apply_async", lambda **kwargs: None)
    work = folder_create(owner=user, name="Work")
    source = _chat(user, "Plan", offline=True)
    conversation_folder_set(conversation=source, folder=work)
    asked = message_append(conversation=source, role="user", content="What next?")
    with django_capture_on_commit_callbacks(execute=True):
        made = conversation_fork(owner=user, message_id=asked.pk)
    if isinstance(made, ForkQueued):
        assert import_job_run(job_id=made.job.pk).status == "done"
        made = Conversation.objects.get(pk=ImportJob.objects.get(pk=made.job.pk).conversation_ids[0])
    assert Conversation.objects.get(pk=made.pk).folder_id == work.pk
