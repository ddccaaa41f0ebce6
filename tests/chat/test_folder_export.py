"""Folders through the app's own export and import (a user moving to a new server keeps them): the JSON
export names a chat's folder, the import puts the chat in the owner's folder of that name (made if
missing, unless they are at the folder limit), Markdown says it in the head, and a branch in a new chat
lands in its original's folder, in the request and from the worker alike."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync

from chatapp.chat import fork_services
from chatapp.chat.account_export import account_export_chunks
from chatapp.chat.conversation_export import conversation_export_chunks
from chatapp.chat.folder_models import Folder
from chatapp.chat.folder_services import MAX_FOLDERS_PER_USER, conversation_folder_set, folder_create
from chatapp.chat.fork_services import ForkQueued, conversation_fork
from chatapp.chat.import_services import import_job_run
from chatapp.chat.models import Conversation, Message
from tests.chat.importkit import export_document, import_now
from tests.chat.test_fork import chat
from tests.support.branches import active_path

pytestmark = pytest.mark.django_db
# The in-request fork's tests' chat (an offline chat of three exchanges), by that name.
__all__ = ["chat"]


def _filed(owner, title: str, folder: Folder | None) -> Conversation:
    conversation = Conversation.objects.create(owner=owner, title=title, title_is_custom=True)
    Message.objects.create(conversation=conversation, role="user", content=f"a question in {title}")
    return conversation_folder_set(conversation=conversation, folder=folder)


def _text(chunks) -> str:
    async def read() -> str:
        return "".join([c async for c in chunks])

    return async_to_sync(read)()


def test_the_json_exports_name_the_chats_folder_or_null(user):
    work = folder_create(owner=user, name="Work “notes”")
    filed = _filed(user, "Filed", work)
    loose = _filed(user, "Loose", None)

    assert export_document(filed)["conversation"]["folder"] == "Work “notes”"
    assert export_document(loose)["conversation"]["folder"] is None
    # The account's export is a list of the same documents.
    documents = json.loads(_text(account_export_chunks(owner_id=user.pk)))
    assert [(d["conversation"]["title"], d["conversation"]["folder"]) for d in documents] == [
        ("Filed", "Work “notes”"),
        ("Loose", None),
    ]


def test_the_markdown_head_names_the_folder_when_there_is_one(user):
    filed = _filed(user, "Filed", folder_create(owner=user, name="Garden"))
    loose = _filed(user, "Loose", None)

    text = _text(conversation_export_chunks(conversation=filed, fmt="markdown"))
    head = text.split("---\n", 1)[0]
    assert "\nFolder: Garden\n" in head
    assert "Folder:" not in _text(conversation_export_chunks(conversation=loose, fmt="markdown"))


def test_an_import_puts_the_chat_in_the_owners_folder_of_that_name_made_if_missing(user, other_user):
    exported = export_document(_filed(user, "Filed", folder_create(owner=user, name="Work")))

    # A new server: no such folder yet, so it is made.
    job = import_now(other_user, json.dumps(exported).encode())
    assert job.status == "done", job.error
    copy = Conversation.objects.get(pk=job.conversation_ids[0])
    assert copy.folder is not None and (copy.folder.owner_id, copy.folder.name) == (other_user.pk, "Work")

    # A folder of the same name in another case is that folder: no second one.
    Folder.objects.filter(owner=other_user).update(name="WORK")
    exported["conversation"]["id"] = "another chat"  # not recognised as imported before
    again = Conversation.objects.get(pk=import_now(other_user, json.dumps(exported).encode()).conversation_ids[0])
    assert Folder.objects.filter(owner=other_user).count() == 1
    assert again.folder_id == copy.folder_id


@pytest.mark.parametrize("older", ["no key", "null"])
def test_an_export_without_a_folder_imports_unfiled(user, other_user, older):
    exported = export_document(_filed(user, "Filed", folder_create(owner=user, name="Work")))
    if older == "no key":
        del exported["conversation"]["folder"]  # made before folders were exported
    else:
        exported["conversation"]["folder"] = None

    job = import_now(other_user, json.dumps(exported).encode())
    assert job.status == "done", job.error
    assert Conversation.objects.get(pk=job.conversation_ids[0]).folder_id is None
    assert not Folder.objects.filter(owner=other_user).exists()


def test_at_the_folder_limit_the_chat_is_imported_unfiled(user, other_user):
    exported = export_document(_filed(user, "Filed", folder_create(owner=user, name="Work")))
    Folder.objects.bulk_create(Folder(owner=other_user, name=f"F{n}") for n in range(MAX_FOLDERS_PER_USER))

    job = import_now(other_user, json.dumps(exported).encode())
    assert (job.status, job.skipped) == ("done", [])
    assert Conversation.objects.get(pk=job.conversation_ids[0]).folder_id is None
    assert Folder.objects.filter(owner=other_user).count() == MAX_FOLDERS_PER_USER


@pytest.fixture
def by_worker(monkeypatch, django_capture_on_commit_callbacks):
    """Branch as a queued job (the path past the in-request limit); `run` then runs it as the worker would."""

    class Worker:
        @staticmethod
        def queue(owner, message_id: int) -> ForkQueued:
            monkeypatch.setattr(fork_services, "MAX_FORK_MESSAGES", 0)
            with django_capture_on_commit_callbacks(execute=False):
                queued = conversation_fork(owner=owner, message_id=message_id)
            assert isinstance(queued, ForkQueued)
            return queued

        @staticmethod
        def run(queued: ForkQueued) -> Conversation:
            assert import_job_run(job_id=queued.job.pk).status == "done"
            queued.job.refresh_from_db()
            return Conversation.objects.get(pk=queued.job.conversation_ids[0])

    return Worker


@pytest.mark.parametrize("in_folder", [True, False], ids=["filed", "unfiled"])
def test_a_branch_lands_in_its_originals_folder_in_the_request_and_from_the_worker(user, chat, in_folder, by_worker):
    folder = folder_create(owner=user, name="Garden") if in_folder else None
    conversation_folder_set(conversation=chat, folder=folder)
    message_id = active_path(chat)[3]

    in_request = conversation_fork(owner=user, message_id=message_id)
    assert isinstance(in_request, Conversation)
    in_job = by_worker.run(by_worker.queue(user, message_id))

    expected = folder.pk if folder else None
    assert (in_request.folder_id, in_job.folder_id) == (expected, expected)
    assert Folder.objects.filter(owner=user).count() == (1 if in_folder else 0)


def test_a_branch_from_the_worker_follows_the_originals_folder_as_it_is_then(user, chat, by_worker):
    """Queued, then the folder renamed before the worker ran: the branch is in that folder, and no
    folder of the old name is made (the worker takes the original's folder as it takes its model)."""
    folder = folder_create(owner=user, name="Garden")
    conversation_folder_set(conversation=chat, folder=folder)
    queued = by_worker.queue(user, active_path(chat)[3])
    Folder.objects.filter(pk=folder.pk).update(name="Allotment")

    assert by_worker.run(queued).folder_id == folder.pk
    assert list(Folder.objects.filter(owner=user).values_list("name", flat=True)) == ["Allotment"]


def test_a_branch_whose_original_was_deleted_before_the_worker_ran_lands_in_the_folder_its_export_named(
    user, chat, by_worker
):
    folder = folder_create(owner=user, name="Garden")
    conversation_folder_set(conversation=chat, folder=folder)
    queued = by_worker.queue(user, active_path(chat)[3])
    chat.delete()

    assert by_worker.run(queued).folder_id == folder.pk
