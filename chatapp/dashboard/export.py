"""The records as export rows, read in chunks (CSV and JSON downloads stream them).

An async iterator of pages: under ASGI a download streams from the event loop (Django reads a
synchronous iterator to the end, into memory, before sending a byte). Each page is a keyset read on
the (conversation, id) index in its own short database call that gives the connection back, so a
slow download holds no pooled connection (a server-side cursor would hold one throughout).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from chatapp.chat.conversation_export import ExportGoneError
from chatapp.chat.dbconn import db_short
from chatapp.chat.models import Conversation, OptimizationRecord
from chatapp.dashboard.costs import as_float
from chatapp.dashboard.turns import RECORD_LIST_FIELDS

# The record's other plain columns: what the headline's figures are summed from beside the list's
# (the tokens dropped with no summary, the provider's cached prompt tokens) and the registry provider
# a turn was priced by, so a download reconciles with the cards.
EXPORT_SCALARS: tuple[str, ...] = ("dropped_tokens", "provider_cached_tokens", "registry_provider")

EXPORT_FIELDS: tuple[str, ...] = (
    *RECORD_LIST_FIELDS, *EXPORT_SCALARS, "scores", "sent", "dropped_ranges", "stats",
)


@dataclass(frozen=True)
class ExportRow:
    turn: int
    data: dict[str, Any]


def _record_page(*, conversation_id: int, after_id: int, limit: int) -> list[dict[str, Any]]:
    return list(
        OptimizationRecord.objects.filter(conversation_id=conversation_id, id__gt=after_id)
        .order_by("id")
        .values(*EXPORT_FIELDS, "reply__superseded", "reply__status")[:limit]
    )


_read_record_page = db_short(_record_page)


def _conversation_exists(*, conversation_id: int) -> bool:
    return Conversation.objects.filter(pk=conversation_id).exists()


_still_there = db_short(_conversation_exists)


async def dashboard_record_chunks(
    *, conversation: Conversation, chunk_size: int = 500
) -> AsyncIterator[list[ExportRow]]:
    """Every record with every field in turn order, a page of up to `chunk_size` rows at a time."""
    after_id, turn = 0, 0
    while True:
        page = await _read_record_page(conversation_id=conversation.pk, after_id=after_id, limit=chunk_size)
        if not page:
            # Records go only with their conversation: deleted (another tab) while the download ran, it
            # left a file that would read as whole; it fails instead, as the chat's own export does.
            if not await _still_there(conversation_id=conversation.pk):
                raise ExportGoneError(conversation.pk)
            return
        rows = []
        for row in page:
            turn += 1
            for key in ("cost_sent_usd", "cost_full_usd"):
                row[key] = as_float(row[key])
            row["created_at"] = row["created_at"].isoformat()
            row["tokens_saved"] = row["tokens_full"] - row["tokens_sent"]
            # As the records API and the turn list say it ("other branch"): an edit, a regenerate or
            # a branch switch took the turn's reply off the active path (no reply yet: on it).
            row["on_active_path"] = not row.pop("reply__superseded")
            row["reply_status"] = row.pop("reply__status")  # as the records API says it
            rows.append(ExportRow(turn=turn, data=row))
        yield rows
        after_id = page[-1]["id"]


def export_json_value(value: Any) -> str:
    """A JSON column as compact text for a CSV cell."""
    return json.dumps(value, separators=(",", ":"), default=str)
