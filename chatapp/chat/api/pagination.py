"""Pagination for the API views (a plain APIView has no paginate step of its own)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rest_framework import serializers
from rest_framework.pagination import BasePagination, LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

# Past any table's rows, so the page is empty; a larger offset would reach the database as an integer it
# cannot hold (a 500 instead of an empty page).
MAX_OFFSET = 2**31 - 1


def _whole_number(raw: str, *, name: str, least: int) -> int:
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
        return min(_whole_number(raw, name=self.limit_query_param, least=1), self.max_limit)

    def get_offset(self, request: Request) -> int:
        raw = request.query_params.get(self.offset_query_param)
        if raw is None or raw == "":
            return 0
        return min(_whole_number(raw, name=self.offset_query_param, least=0), MAX_OFFSET)


class DefaultPagination(CheckedLimitOffsetPagination):
    default_limit = 50
    max_limit = 200


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
        return min(_whole_number(raw, name=self.limit_query_param, least=1), self.max_limit)

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
