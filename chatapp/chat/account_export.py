"""All of a user's chats in one download: a JSON list of conversation_export's documents, oldest chat
first, which the import reads back whole (here or on another server: Settings → Import).

Streamed like one chat's export: chats are read a page at a time and each chat's messages in pages,
so the web process holds one page whatever the account's size.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from chatapp.chat.conversation_export import EXPORT_CHUNK_ROWS, ExportGoneError, conversation_export_chunks
from chatapp.chat.dbconn import db_short
from chatapp.chat.models import Conversation

# Chats read per query: their heads are small; their messages come in pages of their own.
CHATS_PER_PAGE = 100


def _chats_after(*, owner_id: int, after_id: int, limit: int) -> list[Conversation]:
    # Served by the owner's foreign-key index; chats made while the download runs come last.
    return list(Conversation.objects.filter(owner_id=owner_id, pk__gt=after_id).order_by("pk")[:limit])


_read_chats = db_short(_chats_after)


async def account_export_chunks(
    *, owner_id: int, chats_per_page: int = CHATS_PER_PAGE, chunk_rows: int = EXPORT_CHUNK_ROWS
) -> AsyncIterator[str]:
    """Every chat of `owner_id` as one JSON list of conversation documents ("[]" without any)."""
    yield "["
    separator = "\n"
    after_id = 0
    while chats := await _read_chats(owner_id=owner_id, after_id=after_id, limit=chats_per_page):
        for conversation in chats:
            chunks = conversation_export_chunks(conversation=conversation, fmt="json", chunk_rows=chunk_rows)
            try:
                head = await anext(chunks)
            except ExportGoneError:
                continue  # deleted (another tab) since its page of chats was read: not an empty copy
            yield separator + head
            async for chunk in chunks:
                yield chunk
            separator = ",\n"
        after_id = chats[-1].pk
    yield "]\n"
