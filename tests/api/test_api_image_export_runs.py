"""A chat's images in its exports are read a bounded run at a time: the Markdown, which prints only
their names, reads none of their bytes, and the JSON a run of messages' bytes at a time
(image_export.IMAGE_RUN_BYTES), so a chat of many photos downloads in flat memory, as its text does."""

from __future__ import annotations

import base64
import json
import os

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chatapp.chat import conversation_export, image_export, image_models
from chatapp.chat.conversation_export import conversation_export_chunks
from chatapp.chat.models import Conversation, Message
from tests.support.images import png_bytes

pytestmark = pytest.mark.django_db

IMAGE_TABLE = connection.ops.quote_name(image_models.MessageImage._meta.db_table)
BYTES_COLUMN = f'{IMAGE_TABLE}.{connection.ops.quote_name("data")}'


@pytest.fixture
def photos(user) -> tuple[Conversation, list[bytes]]:
    """Five questions with a photo of about a megabyte each, and their answers."""
    chat = Conversation.objects.create(owner=user, title="Photos", has_images=True)
    files = [png_bytes(8, 8) + os.urandom(1_000_000) for _ in range(5)]
    for n, data in enumerate(files):
        question = Message.objects.create(conversation=chat, role="user", content=f"What is in photo {n}?")
        image_models.MessageImage.objects.create(message=question, mime="image/png", width=8, height=8,
                                                 byte_count=len(data), name=f"photo {n}.png", data=data)
        Message.objects.create(conversation=chat, role="assistant", content=f"Photo {n} shows a cat.",
                               reply_to=question)
    return chat, files


def _chunks(chat: Conversation, fmt: str) -> list[str]:
    async def read() -> list[str]:
        return [chunk async for chunk in conversation_export_chunks(conversation=chat, fmt=fmt)]

    return async_to_sync(read)()


def test_a_markdown_export_reads_no_image_bytes(photos):
    """It says "[image: name WxH]" for each: it read every image's bytes (all of a page's at once) only to
    drop them, five megabytes here for a download of a few hundred bytes."""
    chat, _ = photos
    with CaptureQueriesContext(connection) as queries:
        text = "".join(_chunks(chat, "markdown"))
    assert text.count("[image: photo") == 5
    assert [q["sql"] for q in queries if BYTES_COLUMN in q["sql"]] == []


def test_a_json_export_holds_one_run_of_image_bytes_at_a_time(photos, monkeypatch):
    """A page of 500 messages was read with all its images' bytes and written as one chunk: a chat of
    photos held hundreds of megabytes at once in the web process. The bytes are read a run of messages
    at a time, each run written as a chunk of its own, and the file still carries every image whole."""
    chat, files = photos
    monkeypatch.setattr(image_export, "IMAGE_RUN_BYTES", 2_500_000)  # two photos a run
    with CaptureQueriesContext(connection) as queries:
        chunks = _chunks(chat, "json")
    reads = [q["sql"] for q in queries if BYTES_COLUMN in q["sql"]]
    assert len(reads) == 3  # photos 0-1, 2-3, 4
    assert max(len(chunk) for chunk in chunks) < 2 * 1_000_100 * 4 // 3 + 10_000
    document = json.loads("".join(chunks))
    images = [m["images"] for m in document["messages"]]
    assert [base64.b64decode(i["data"]) for found in images for i in found] == files
    assert [len(found) for found in images] == [1, 0] * 5


def test_a_chat_deleted_before_a_runs_image_bytes_were_read_fails_the_json_download(photos, monkeypatch):
    """Its images went with it after their page was read: the download fails, as for its messages,
    rather than end as a whole file with photos missing."""
    chat, _ = photos
    monkeypatch.setattr(image_export, "IMAGE_RUN_BYTES", 2_500_000)
    read_bytes = conversation_export._read_image_bytes
    runs_read: list[int] = []

    async def deleted_before_the_second_run(**kwargs):
        runs_read.append(1)
        if len(runs_read) == 2:
            await sync_to_async(Conversation.objects.filter(pk=chat.pk).delete)()
        return await read_bytes(**kwargs)

    monkeypatch.setattr(conversation_export, "_read_image_bytes", deleted_before_the_second_run)
    with pytest.raises(conversation_export.ExportGoneError):
        _chunks(chat, "json")
    assert len(runs_read) == 2
