"""Dashboard downloads: the records as CSV (cells that would run as formulas escaped) and JSON,
streamed from async iterators (one chunk per page of records, see export.py), so under ASGI they are
sent as they are read instead of built in memory first.
"""

from __future__ import annotations

import csv
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, StreamingHttpResponse

from chatapp.chat.download_names import download_filename, streamed_download
from chatapp.chat.models import Conversation
from chatapp.dashboard.export import EXPORT_SCALARS, ExportRow, dashboard_record_chunks, export_json_value
from chatapp.dashboard.headline import dashboard_conversation_get
from chatapp.dashboard.turns import RECORD_LIST_FIELDS


class _Echo:
    """File-like object for csv.writer that hands each row back instead of buffering it."""

    def write(self, value: str) -> str:
        return value


_JSON_COLUMNS = ("scores", "sent", "dropped_ranges", "stats")


CSV_COLUMNS: tuple[str, ...] = (
    "turn", *RECORD_LIST_FIELDS, "tokens_saved", "on_active_path", "reply_status", *EXPORT_SCALARS, *_JSON_COLUMNS,
)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A spreadsheet opens a text cell that starts with = + - @ (or a tab or CR) as a formula: such
    text (a model name, a reason) gets a leading apostrophe. Numbers are left as numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _csv_cells(*, row: ExportRow) -> list[Any]:
    data = row.data
    out: list[Any] = []
    for col in CSV_COLUMNS:
        if col == "turn":
            out.append(row.turn)
        elif col in _JSON_COLUMNS:
            out.append(csv_cell(export_json_value(data[col])))
        else:
            value = data[col]
            out.append("" if value is None else csv_cell(value))
    return out


# Excel reads a CSV without one in the local code page, garbling any title or reason past ASCII.
_UTF8_BOM = "\ufeff"


async def _csv_rows(*, conversation: Conversation) -> AsyncIterator[str]:
    writer = csv.writer(_Echo())
    yield _UTF8_BOM + writer.writerow(CSV_COLUMNS)
    async for page in dashboard_record_chunks(conversation=conversation):
        yield "".join(writer.writerow(_csv_cells(row=row)) for row in page)


def _records_download(
    request: HttpRequest, pk: int, *, chunks: Callable[..., AsyncIterator[str]], content_type: str, extension: str
) -> StreamingHttpResponse:
    """The requesting user's conversation's records (others: 404) as an attachment, streamed from `chunks`."""
    conversation = dashboard_conversation_get(user=request.user, pk=pk)
    return streamed_download(chunks(conversation=conversation), content_type=content_type,
                             filename=download_filename(conversation.title, fallback=f"conversation-{conversation.pk}",
                                                        suffix=" records", extension=extension))


@login_required
def dashboard_export_csv(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    return _records_download(request, pk, chunks=_csv_rows, content_type="text/csv; charset=utf-8", extension="csv")


async def _json_chunks(*, conversation: Conversation) -> AsyncIterator[str]:
    head = {"conversation": {"id": conversation.pk, "title": conversation.title}}
    yield json.dumps(head, cls=DjangoJSONEncoder)[:-1] + ', "records": ['
    separator = ""
    async for page in dashboard_record_chunks(conversation=conversation):
        yield separator + ",".join(json.dumps({"turn": row.turn, **row.data}, cls=DjangoJSONEncoder) for row in page)
        separator = ","
    yield "]}"


@login_required
def dashboard_export_json(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    return _records_download(request, pk, chunks=_json_chunks, content_type="application/json", extension="json")
