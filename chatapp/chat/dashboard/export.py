"""The records as export rows, read in chunks (CSV and JSON downloads stream them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from chatapp.chat.dashboard.costs import as_float
from chatapp.chat.dashboard.turns import RECORD_LIST_FIELDS
from chatapp.chat.models import Conversation, OptimizationRecord

EXPORT_FIELDS: tuple[str, ...] = (
    *RECORD_LIST_FIELDS, "scores", "sent", "dropped_ranges", "stats",
)


@dataclass(frozen=True)
class ExportRow:
    turn: int
    data: dict[str, Any]


def dashboard_record_export(*, conversation: Conversation, chunk_size: int = 500) -> Iterator[ExportRow]:
    """Every record with every field, streamed in turn order (server-side cursor where supported)."""
    rows = (
        OptimizationRecord.objects.filter(conversation=conversation)
        .order_by("id")
        .values(*EXPORT_FIELDS)
        .iterator(chunk_size=chunk_size)
    )
    for turn, row in enumerate(rows, start=1):
        for key in ("cost_sent_usd", "cost_full_usd"):
            row[key] = as_float(row[key])
        row["created_at"] = row["created_at"].isoformat()
        row["tokens_saved"] = row["tokens_full"] - row["tokens_sent"]
        yield ExportRow(turn=turn, data=row)


def export_json_value(value: Any) -> str:
    """A JSON column as compact text for a CSV cell."""
    return json.dumps(value, separators=(",", ":"), default=str)
