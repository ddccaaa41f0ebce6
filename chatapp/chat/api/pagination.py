"""Pagination for the API views (a plain APIView has no paginate step of its own)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db.models import Q, QuerySet
from django.utils import timezone
from rest_framework import serializers
from rest_framework.pagination import BasePagination, LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param
from rest_framework.views import APIView

# Past any table's rows, so the page is empty; a larger offset would reach the database as an integer it
# cannot hold (a 500 instead of an empty page).
MAX_OFFSET = 2**31 - 1


def keyed_next_link(request: Request, *, offset_param: str, param: str, value: Any) -> str | None:
    """This page's address with `param` set to `value` and the offset dropped (a keyed page starts at
    its key, whatever offset placed the first one); None on the last page."""
    if value is None:
        return None
    url = remove_query_param(request.build_absolute_uri(), offset_param)
    return replace_query_param(url, param, value)


def whole_number(raw: str, *, name: str, least: int) -> int:
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise serializers.ValidationError({name: ["Must be a whole number."]}) from None
    if value < least:
        raise serializers.ValidationError({name: [f"Must be at least {least}."]})
    return value


class CheckedLimitOffsetPagination(LimitOffsetPagination):
    """DRF's LimitOffsetPagination, refusing a bad `limit` or `offset` (400) where DRF answers its
    defaults: a client asking for limit=abc or offset=-1 got the first page and no word of it, where
    the timeline's pages refuse them. One rule for every list."""

    def get_limit(self, request: Request) -> int:
        raw = request.query_params.get(self.limit_query_param)
        if raw is None or raw == "":
            return self.default_limit
        return min(whole_number(raw, name=self.limit_query_param, least=1), self.max_limit)

    def get_offset(self, request: Request) -> int:
        raw = request.query_params.get(self.offset_query_param)
        if raw is None or raw == "":
            return 0
        return min(whole_number(raw, name=self.offset_query_param, least=0), MAX_OFFSET)


class DefaultPagination(CheckedLimitOffsetPagination):
    default_limit = 50
    max_limit = 200


class KeysetPagination(DefaultPagination):
    """Pages of a list ordered by `key_field` then id, both descending, each page after the last row of
    the one before: `next` carries that row's key as `?cursor=`. Offset pages shifted when the list
    changed between two reads (a chat with a new message moved to the top, one deleted or made): a row
    was shown twice or never. Keyed, a row that did not change is shown once; one that moved above the
    cursor is at the top of the list read again. The seek is a range scan of an index on
    (its filter's columns, key_field, id), however deep the page.

    `offset` still places the first page, for clients written for offset pages (and past the end it is
    an empty page, as it was); its `next` is a cursor. With a cursor it is a 400: the two disagree.
    `count` is the rows the list holds at this read (one COUNT on the same index)."""

    cursor_query_param = "cursor"
    key_field = "id"
    # A cursor is a time and an id, base64: anything longer was not given by the list.
    MAX_CURSOR = 100

    def _cursor_error(self) -> serializers.ValidationError:
        return serializers.ValidationError({self.cursor_query_param: ["Not a cursor this list gave: follow `next`."]})

    def get_cursor(self, request: Request, *, queryset: QuerySet) -> tuple[Any, int] | None:
        raw = request.query_params.get(self.cursor_query_param)
        if raw is None or raw == "":
            return None
        if len(raw) > self.MAX_CURSOR:
            raise self._cursor_error()
        try:
            key, _, pk = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode("ascii").rpartition("|")
            value = queryset.model._meta.get_field(self.key_field).to_python(key)
            row = int(pk)
        except (binascii.Error, UnicodeDecodeError, ValueError, ValidationError):
            raise self._cursor_error() from None
        # The list writes times with their offset and ids from 1: a naive time would be read in the
        # server's zone, a page off.
        if row < 1 or value is None or (isinstance(value, datetime) and timezone.is_naive(value)):
            raise self._cursor_error()
        if isinstance(value, datetime):
            try:
                # SQLite's backend stores times in UTC: a time whose offset takes it past year 1 or 9999
                # there could never be a row's, and failed the query (a 500).
                value.astimezone(UTC)
            except OverflowError:
                raise self._cursor_error() from None
        return value, row

    def _cursor_of(self, row: Any) -> str:
        key = getattr(row, self.key_field)
        text = f"{key.isoformat() if hasattr(key, 'isoformat') else key}|{row.pk}"
        return base64.urlsafe_b64encode(text.encode("ascii")).decode("ascii").rstrip("=")

    def _after(self, value: Any, pk: int) -> Q:
        if self.key_field == "id":
            return Q(id__lt=pk)
        key = self.key_field
        # `<=` is the index range's start; the OR alone has no bound, and the scan would read the list
        # from its top, filtering, as deep as the page is.
        return Q(**{f"{key}__lte": value}) & (Q(**{f"{key}__lt": value}) | Q(**{key: value, "id__lt": pk}))

    def paginate_queryset(self, queryset: QuerySet, request: Request, view: APIView | None = None) -> list[Any]:
        ordering = (f"-{self.key_field}", "-id") if self.key_field != "id" else ("-id",)
        if tuple(queryset.query.order_by) != ordering:
            raise ImproperlyConfigured(f"{type(self).__name__} pages a list ordered by {ordering}.")
        self.request = request
        self.limit = self.get_limit(request)
        self.offset = self.get_offset(request)
        cursor = self.get_cursor(request, queryset=queryset)
        if cursor is not None and self.offset:
            raise serializers.ValidationError(
                {self.offset_query_param: ["Send a cursor or an offset, not both: `next` holds the cursor."]})
        self.count = self.get_count(queryset)
        rows = queryset.filter(self._after(*cursor)) if cursor is not None else queryset[self.offset:]
        # One row more than the page says whether another follows.
        page = list(rows[: self.limit + 1])
        self.next_cursor = self._cursor_of(page[self.limit - 1]) if len(page) > self.limit else None
        return page[: self.limit]

    def get_next_link(self) -> str | None:
        return keyed_next_link(self.request, offset_param=self.offset_query_param, param=self.cursor_query_param,
                               value=self.next_cursor)

    def get_paginated_response(self, data: Any) -> Response:
        return Response({"count": self.count, "next": self.get_next_link(), "results": data})

    def get_paginated_response_schema(self, schema: dict) -> dict:
        return {
            "type": "object",
            "required": ["count", "next", "results"],
            "properties": {
                "count": {"type": "integer", "description": "How many the list holds at this read."},
                "next": {"type": "string", "nullable": True, "format": "uri",
                         "description": "The next page (`?cursor=`); null on the last."},
                "results": schema,
            },
        }

    def get_schema_operation_parameters(self, view: APIView) -> list[dict]:
        return [
            {"name": self.limit_query_param, "required": False, "in": "query", "schema": {"type": "integer"},
             "description": f"Page size (default {self.default_limit}, at most {self.max_limit})."},
            {"name": self.cursor_query_param, "required": False, "in": "query", "schema": {"type": "string"},
             "description": "Where the next page starts: taken from the page before's `next`."},
            {"name": self.offset_query_param, "required": False, "in": "query", "schema": {"type": "integer"},
             "description": "Older clients' start of the first page (rows to skip); not with `cursor`."},
        ]


# An APIView answering pages of a queryset with its pagination_class. A comment, not a docstring: the
# schema would take a docstring as every subclass's description.
class PaginatedApi(APIView):
    pagination_class: type[LimitOffsetPagination] = DefaultPagination

    def paginated_response(
        self,
        request: Request,
        *,
        queryset: Any,
        serializer_class: type[serializers.Serializer],
        context: dict[str, Any] | None = None,
    ) -> Response:
        # DRF keeps an explicit None as the serializer's context: an empty one unless the view gives one.
        context = {} if context is None else context
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(queryset, request, view=self)
        if page is None:
            return Response(serializer_class(queryset, many=True, context=context).data)
        return paginator.get_paginated_response(serializer_class(page, many=True, context=context).data)


class BeforeIdPagination(BasePagination):
    """Timeline pages: the newest page first, each page in reading order (oldest → newest).

    `?before=<id>` asks for the page just older than that message; the response's `next` link
    (and `next_before`) points at the following older page. Keyed on the id, so a reply arriving
    while the user scrolls back never shifts or duplicates a page, and each page is an index range
    scan however long the conversation is.
    """

    before_query_param = "before"
    limit_query_param = "limit"
    default_limit = 50
    max_limit = 200

    def get_limit(self, request: Request) -> int:
        raw = request.query_params.get(self.limit_query_param)
        if raw is None or raw == "":
            return self.default_limit
        return min(whole_number(raw, name=self.limit_query_param, least=1), self.max_limit)

    def get_before(self, request: Request) -> int | None:
        raw = request.query_params.get(self.before_query_param)
        if raw in (None, ""):
            return None
        try:
            before = int(raw)
        except ValueError:
            raise serializers.ValidationError({self.before_query_param: ["Must be a message id."]}) from None
        if before < 1:
            raise serializers.ValidationError({self.before_query_param: ["Must be a message id."]})
        return before

    def paginate(self, *, fetch: Callable[[int | None, int], Sequence[Any]], request: Request) -> list[Any]:
        """`fetch(before_id, limit)` returns up to `limit` newest items older than before_id, oldest first."""
        self.request = request
        limit = self.get_limit(request)
        items = list(fetch(self.get_before(request), limit + 1))
        # One extra row tells whether an older page exists without a COUNT over the whole history.
        self.has_more = len(items) > limit
        page = items[-limit:] if self.has_more else items
        self.next_before = page[0].pk if (self.has_more and page) else None
        return page

    def get_next_link(self) -> str | None:
        if self.next_before is None:
            return None
        url = self.request.build_absolute_uri()
        return replace_query_param(url, self.before_query_param, self.next_before)

    def get_paginated_response(self, data: Any) -> Response:
        return Response(
            {
                "next": self.get_next_link(),
                "has_more": self.has_more,
                "next_before": self.next_before,
                "results": data,
            }
        )

    def get_paginated_response_schema(self, schema: dict) -> dict:
        return {
            "type": "object",
            "required": ["results", "has_more"],
            "properties": {
                "next": {"type": "string", "nullable": True, "format": "uri"},
                "has_more": {"type": "boolean"},
                "next_before": {
                    "type": "integer",
                    "nullable": True,
                    "description": "Pass as ?before= to get the next older page.",
                },
                "results": schema,
            },
        }

    def get_schema_operation_parameters(self, view: APIView) -> list[dict]:
        return [
            {
                "name": self.before_query_param,
                "required": False,
                "in": "query",
                "description": "Return the page of messages just older than this message id.",
                "schema": {"type": "integer"},
            },
            {
                "name": self.limit_query_param,
                "required": False,
                "in": "query",
                "description": f"Page size (default {self.default_limit}, at most {self.max_limit}).",
                "schema": {"type": "integer"},
            },
        ]

    # The browsable API asks paginators for this.
    def to_html(self) -> str:
        return ""
