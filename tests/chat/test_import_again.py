"""Importing a file again: a conversation the owner imported before is recognised by its fingerprint
and left as it is (ChatGPT's export holds every chat each time), a chat continued since is imported
as a new chat, and a deleted one comes back."""

from __future__ import annotations

import json
from copy import deepcopy
from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from chatapp.chat import import_services
from chatapp.chat.import_models import ImportedConversation
from chatapp.chat.imports import ConversationRecord, MessageRecord, chatgpt
from chatapp.chat.imports.records import record_fingerprint, record_fingerprint_shown_branch
from chatapp.chat.models import Conversation, Message
from tests.chat.importkit import chatgpt_conversation, file_bytes, import_now

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user(username="reimporter", password="a long test password 9")


def _file(chats: list[dict]) -> bytes:
    return json.dumps(chats).encode()


def _counts(job) -> tuple[int, int, int, int]:
    return len(job.conversation_ids), job.duplicates, job.done - len(job.conversation_ids) - job.duplicates, job.total


def test_the_same_file_twice_imports_its_chats_once(owner):
    data = _file([chatgpt_conversation(i, messages=4) for i in range(3)])
    first = import_now(owner, data)
    assert (first.status, _counts(first)) == ("done", (3, 0, 0, 3))

    again = import_now(owner, data)
    assert (again.status, _counts(again)) == ("done", (0, 3, 0, 3))
    assert Conversation.objects.filter(owner=owner).count() == 3
    assert Message.objects.filter(conversation__owner=owner).count() == 12


def test_a_later_export_adds_only_the_new_and_the_continued_chats(owner):
    chats = [chatgpt_conversation(i, messages=4) for i in range(3)]
    import_now(owner, _file(chats))
    later = deepcopy(chats)
    later[0]["title"] = "Renamed in ChatGPT"  # a title is not what makes a chat the same one
    later[1] = chatgpt_conversation(1, messages=6)  # continued there since: two more messages
    later.append(chatgpt_conversation(3, messages=2))  # new

    job = import_now(owner, _file(later))
    assert _counts(job) == (2, 2, 0, 4)
    created = [Conversation.objects.get(pk=pk) for pk in job.conversation_ids]
    sizes = [(c.title, Message.objects.filter(conversation=c).count()) for c in created]
    assert sizes == [("Chat 1", 6), ("Chat 3", 2)]
    # The version imported first stays as it was: nothing is replaced or lost.
    assert sorted(Conversation.objects.filter(owner=owner).values_list("title", flat=True)) == [
        "Chat 0", "Chat 1", "Chat 1", "Chat 2", "Chat 3",
    ]


def test_a_deleted_chat_comes_back_when_the_file_is_imported_again(owner):
    data = _file([chatgpt_conversation(i, messages=2) for i in range(2)])
    first = import_now(owner, data)
    Conversation.objects.filter(pk=first.conversation_ids[0]).delete()

    again = import_now(owner, data)
    assert _counts(again) == (1, 1, 0, 2)
    assert Conversation.objects.get(pk=again.conversation_ids[0]).title == "Chat 0"


def test_another_owner_imports_the_same_file_as_their_own(owner):
    data = _file([chatgpt_conversation(0, messages=2)])
    import_now(owner, data)
    other = get_user_model().objects.create_user(username="someone-else", password="a long test password 9")
    job = import_now(other, data)
    assert _counts(job) == (1, 0, 0, 1)
    assert Conversation.objects.filter(owner=other).count() == 1


def test_a_chat_whose_shown_branch_was_switched_in_chatgpt_is_imported_before(owner):
    """Looking at another version of a regenerated answer in ChatGPT moves the export's current_node
    and nothing else: no message was added, so the chat is the one imported before, not a new copy."""
    chats = json.loads(file_bytes("chatgpt_branch.json"))
    first = import_now(owner, _file(chats))
    leaves = [key for key, node in chats[0]["mapping"].items() if not node["children"]]
    switched = deepcopy(chats)
    switched[0]["current_node"] = next(key for key in leaves if key != chats[0]["current_node"])
    job = import_now(owner, _file(switched))
    assert (_counts(first), _counts(job)) == ((2, 0, 0, 2), (0, 2, 0, 2))


def test_a_chat_imported_under_the_earlier_fingerprint_is_still_recognised(owner):
    """Imports stored before the fingerprint left the shown branch out hold the earlier one: the same
    file imported again after the upgrade adds nothing."""
    data = _file(json.loads(file_bytes("chatgpt_branch.json")))
    import_now(owner, data)
    for row, chat in zip(ImportedConversation.objects.order_by("id"), json.loads(data), strict=True):
        row.fingerprint = record_fingerprint_shown_branch(chatgpt.conversation_parse(chat, index=0))
        row.save(update_fields=["fingerprint"])
    assert _counts(import_now(owner, data)) == (0, 2, 0, 2)


def test_two_identical_chats_in_one_file_are_one_chat(owner):
    chat = chatgpt_conversation(0, messages=2)
    job = import_now(owner, _file([chat, deepcopy(chat)]))
    assert _counts(job) == (1, 1, 0, 2)


def test_a_chat_stored_by_another_import_meanwhile_counts_as_imported_before(owner, monkeypatch):
    """Two imports of one file at once: both look, find nothing, and both store; the database's unique
    fingerprint refuses the second, which then counts the chat as imported before (not as refused)."""
    data = _file([chatgpt_conversation(0, messages=2)])
    import_now(owner, data)
    looked: list[str] = []
    real = import_services._Import._imported_before

    def first_look_misses(self, fingerprint):
        looked.append(fingerprint)
        return False if len(looked) == 1 else real(self, fingerprint)

    monkeypatch.setattr(import_services._Import, "_imported_before", first_look_misses)
    job = import_now(owner, data)
    assert (_counts(job), job.skipped, len(looked)) == ((0, 1, 0, 1), [], 2)
    assert Conversation.objects.filter(owner=owner).count() == 1


def test_the_api_reports_what_was_imported_before(owner, django_capture_on_commit_callbacks, monkeypatch):
    data = _file([chatgpt_conversation(i, messages=2) for i in range(2)])
    import_now(owner, data)
    api = APIClient()
    api.force_authenticate(owner)
    monkeypatch.setattr(import_services, "_publish", lambda *, job_id: True)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post("/api/imports/", {"file": _upload(data)}, format="multipart")
    assert response.status_code == 202, response.content
    import_services.import_job_run(job_id=response.json()["id"])
    body = api.get(f"/api/imports/{response.json()['id']}/").json()
    assert (body["imported"], body["already_imported"], body["skipped_count"], body["total"]) == (0, 2, 0, 2)


def _upload(data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile("conversations.json", data, content_type="application/json")


T = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def _record(*texts: str, title: str = "t", started: datetime | None = T) -> ConversationRecord:
    roles = ("user", "assistant")
    messages = [MessageRecord(role=roles[n % 2], content=text, created_at=T) for n, text in enumerate(texts)]
    return ConversationRecord(title=title, created_at=started, updated_at=None, messages=messages)


def test_the_fingerprint_is_the_conversation_not_its_title():
    base = record_fingerprint(_record("hello", "hi there"))
    assert len(base) == 64 and int(base, 16) >= 0
    assert record_fingerprint(_record("hello", "hi there", title="renamed")) == base
    assert record_fingerprint(_record("hello", "hi there!")) != base
    assert record_fingerprint(_record("hello", "hi there", "more")) != base
    assert record_fingerprint(_record("hello", "hi there", started=None)) != base
    swapped = _record("hello", "hi there")
    swapped.messages[0].role, swapped.messages[1].role = "assistant", "user"
    assert record_fingerprint(swapped) != base
    # Text a database cannot store as it is still has a fingerprint (a lone surrogate).
    assert record_fingerprint(_record("\ud800 odd")) != record_fingerprint(_record("odd"))


def _undated(index: int, title: str, *, source_id: str | None = None) -> dict:
    chat = chatgpt_conversation(index, messages=2, text="thanks")
    chat["title"], chat["create_time"], chat["update_time"] = title, None, None
    if source_id is not None:
        chat["id"] = source_id
    for node in chat["mapping"].values():
        if node["message"]:
            node["message"]["create_time"] = None
    return chat


def test_undated_chats_saying_the_same_words_are_told_apart_by_their_ids_or_titles(owner):
    by_title = [_undated(0, "Thanking the plumber"), _undated(1, "Thanking my sister")]
    by_id = [_undated(2, "Thanks", source_id="a1"), _undated(3, "Thanks", source_id="b2")]
    job = import_now(owner, _file([*by_title, *by_id]))
    assert _counts(job) == (4, 0, 0, 4)
    again = import_now(owner, _file([*by_title, *by_id]))
    assert _counts(again) == (0, 4, 0, 4)


def test_the_source_id_is_part_of_what_makes_a_chat_the_same():
    dated = chatgpt_conversation(0, messages=2)
    ours, theirs = deepcopy(dated), deepcopy(dated)
    ours["id"], theirs["id"] = "conv-1", "conv-2"
    one, two = (chatgpt.conversation_parse(c, index=0) for c in (ours, theirs))
    assert one.source_id == "conv-1"
    assert record_fingerprint(one) != record_fingerprint(two)
    renamed = deepcopy(ours)
    renamed["title"] = "Renamed"
    assert record_fingerprint(chatgpt.conversation_parse(renamed, index=0)) == record_fingerprint(one)
