"""`GET /api/conversations/export/`: every chat of the user as one JSON list of conversation documents,
streamed chat by chat and page by page, which the import reads back whole; nobody else's chats."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chatapp.chat.account_export import account_export_chunks
from chatapp.chat.models import Conversation, Message
from tests.chat.importkit import export_document, import_now

pytestmark = pytest.mark.django_db


def test_every_chat_of_yours_comes_in_one_list_that_the_import_reads_back(api, user, other_user, make_conversation):
    first = make_conversation(user, title="First", messages=3)
    Message.objects.create(conversation=first, role="assistant", content="Done.", reasoning="Thought it over.")
    second = make_conversation(user, title="Second", messages=2)
    empty = make_conversation(user, title="Nothing yet")
    make_conversation(other_user, title="Not yours", messages=2)

    response = api.get("/api/conversations/export/")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"].startswith('attachment; filename="longchat-chats-')
    assert response["Cache-Control"] == "no-store"
    documents = json.loads(response.recorded_body)
    assert [d["conversation"]["title"] for d in documents] == ["First", "Second", "Nothing yet"]
    # Each is the one-chat export's document (only `exported_at` differs between two reads).
    for document, conversation in zip(documents, [first, second, empty], strict=True):
        alone = export_document(conversation)
        assert {**document, "exported_at": None} == {**alone, "exported_at": None}

    job = import_now(other_user, response.recorded_body)
    assert job.status == "done", job.error
    copies = Conversation.objects.filter(owner=other_user).exclude(title="Not yours").order_by("id")
    assert [c.title for c in copies] == ["First", "Second", "Nothing yet"]
    assert [list(c.messages.order_by("id").values_list("content", "reasoning")) for c in copies] == [
        list(c.messages.order_by("id").values_list("content", "reasoning")) for c in (first, second, empty)
    ]


def test_an_account_without_chats_downloads_an_empty_list(api):
    response = api.get("/api/conversations/export/")
    assert response.status_code == 200 and json.loads(response.recorded_body) == []


def test_chats_and_messages_are_read_a_page_at_a_time(user, make_conversation):
    for k in range(5):
        make_conversation(user, title=f"Chat {k}", messages=3)

    async def read() -> list[str]:
        return [c async for c in account_export_chunks(owner_id=user.pk, chats_per_page=2, chunk_rows=2)]

    with CaptureQueriesContext(connection) as queries:
        chunks = async_to_sync(read)()
    # The owner's chats, a page at a time (each chat's head reads its own row again, by id).
    chat_pages = [q["sql"] for q in queries.captured_queries
                  if "FROM \"chat_conversation\"" in q["sql"] and "\"owner_id\" =" in q["sql"]]
    assert len(chat_pages) == 4  # 2 + 2 + 1, then the read that finds no more
    assert all("LIMIT 2" in sql for sql in chat_pages)
    assert len(json.loads("".join(chunks))) == 5


def test_signed_out_is_refused(client):
    assert client.get("/api/conversations/export/").status_code in (401, 403)


def test_settings_offer_the_download_beside_the_import(client, user):
    client.force_login(user)
    page = client.get("/settings/").content.decode()
    assert '<a class="btn" href="/api/conversations/export/" download aria-describedby="export-help">' in page


def test_a_chat_deleted_while_the_download_runs_is_left_out_not_exported_empty(user, make_conversation):
    """Export all, then delete a chat in another tab while the chats before it download: the file held it
    as an empty chat (its title, none of its messages), which an import brought back as one."""
    first = make_conversation(user, title="First", messages=3)
    deleted = make_conversation(user, title="Deleted meanwhile", messages=2)
    make_conversation(user, title="Third", messages=2)

    async def read() -> str:
        chunks = []
        async for chunk in account_export_chunks(owner_id=user.pk, chats_per_page=10, chunk_rows=2):
            chunks.append(chunk)
            if len(chunks) == 2:  # the first chat's head: the page of chats is read, its messages not yet
                await sync_to_async(Conversation.objects.filter(pk=deleted.pk).delete)()
        return "".join(chunks)

    documents = json.loads(async_to_sync(read)())
    assert [d["conversation"]["title"] for d in documents] == ["First", "Third"]
    assert [len(d["messages"]) for d in documents] == [3, 2]
    assert documents[0]["conversation"]["id"] == first.pk
