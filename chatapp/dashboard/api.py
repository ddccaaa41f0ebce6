"""The dashboard's JSON API (under /api/dashboard/): thin views over the selectors of this package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chatapp.chat.api.inputs import validated
from chatapp.chat.api.pagination import CheckedLimitOffsetPagination, keyed_next_link, whole_number
from chatapp.chat.api.serializers import SummaryCoverageSerializer
from chatapp.chat.models import Conversation
from chatapp.dashboard.headline import dashboard_conversation_get, dashboard_headline
from chatapp.dashboard.message_map import dashboard_message_map
from chatapp.dashboard.overview import dashboard_conversation_savings, dashboard_overview
from chatapp.dashboard.serializers import (
    ConversationSavingsSerializer,
    HeadlineSerializer,
    MessageMapSerializer,
    OverviewSerializer,
    RecordContextSerializer,
    RecordSerializer,
    SeriesSerializer,
)
from chatapp.dashboard.series import dashboard_series
from chatapp.dashboard.turns import (
    dashboard_record_context,
    dashboard_record_page,
    dashboard_summary_page,
)


class DashboardPagination(CheckedLimitOffsetPagination):
    default_limit = 50
    max_limit = 500

    def page_bounds(self, *, request: Request) -> tuple[int, int]:
        """The offset and limit asked for. The caller reads that page itself and sets `count` from what
        it already knows (stored totals, one read of the summaries), instead of a COUNT over the rows."""
        self.request = request
        self.count = 0
        self.limit = self.get_limit(request)
        self.offset = self.get_offset(request)
        return self.offset, self.limit


class DashboardSummaryPagination(DashboardPagination):
    """The summaries, newest first: `next` carries `before` (the page's last summary's id), not an
    offset, so a summary written while the page is open (a turn in another tab) repeats none on "Show
    more". An `offset` still places the first page; beside `before` it is a 400."""

    before_query_param = "before"

    def page_bounds(self, *, request: Request) -> tuple[int, int]:
        bounds = super().page_bounds(request=request)
        raw = request.query_params.get(self.before_query_param) or None
        self.before = None if raw is None else whole_number(raw, name=self.before_query_param, least=1)
        if self.before is not None and self.offset:
            raise serializers.ValidationError(
                {self.offset_query_param: ["Send before or an offset, not both: `next` holds before."]})
        self.next_before: int | None = None
        return bounds

    def get_next_link(self) -> str | None:
        return keyed_next_link(self.request, offset_param=self.offset_query_param, param=self.before_query_param,
                               value=self.next_before)

    def get_paginated_response_schema(self, schema: dict) -> dict:
        page = super().get_paginated_response_schema(schema)
        # DRF's own example is an offset link: this one carries `before`.
        page["properties"]["next"] = {"type": "string", "nullable": True, "format": "uri",
                                      "description": "The next older page (`?before=`); null on the last."}
        return page

    def get_schema_operation_parameters(self, view: APIView) -> list[dict]:
        return [*super().get_schema_operation_parameters(view), {
            "name": self.before_query_param, "required": False, "in": "query", "schema": {"type": "integer"},
            "description": "The page of summaries just older than this summary's id (`next` carries it).",
        }]


PageReader = Callable[..., tuple[int, list[dict[str, Any]]]]


# GET one page of a conversation's rows (the requesting user's; others: 404). `read` returns the rows
# of the page and how many there are in all, so no COUNT runs (DashboardPagination). A comment, not a
# docstring: the schema would take a docstring as every subclass's description.
class _ConversationPageApi(APIView):
    pagination_class = DashboardPagination

    def page_response(self, request: Request, pk: int, *, read: PageReader,
                      serializer_class: type[serializers.Serializer]) -> Response:
        conversation = dashboard_conversation_get(user=request.user, pk=pk)
        paginator = self.pagination_class()
        offset, limit = paginator.page_bounds(request=request)
        paginator.count, rows = read(conversation=conversation, offset=offset, limit=limit)
        return paginator.get_paginated_response(serializer_class(rows, many=True).data)


class _ConversationFiguresApi(APIView):
    """GET one selector's figures for a conversation of the requesting user (others: 404)."""

    selector: Callable[..., dict[str, Any]]

    def get(self, request: Request, pk: int) -> Response:
        conversation = dashboard_conversation_get(user=request.user, pk=pk)
        return Response(type(self).selector(conversation=conversation))


def _figures_api(name: str, *, selector: Callable[..., dict[str, Any]], operation_id: str,
                 summary: str, response: type[serializers.Serializer]) -> type[APIView]:
    view = type(name, (_ConversationFiguresApi,), {"selector": staticmethod(selector), "__module__": __name__})
    schema = extend_schema(operation_id=operation_id, summary=summary, responses=response)
    return extend_schema_view(get=schema)(view)


DashboardHeadlineApi = _figures_api(
    "DashboardHeadlineApi", selector=dashboard_headline, operation_id="dashboard_conversation_headline",
    summary="Dashboard headline figures of a conversation", response=HeadlineSerializer,
)


class DashboardSeriesApi(APIView):
    # FilterSerializer, as every view that checks its query names it: the schema declares its 400 by that name.
    class FilterSerializer(serializers.Serializer):
        # A range that is not one is refused (400), as the lists refuse a bad limit: read as the default,
        # it drew other turns than were asked for. One past the last turn is cut to it (dashboard_series).
        first = serializers.IntegerField(required=False, min_value=1)
        last = serializers.IntegerField(required=False, min_value=1)

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if attrs.get("last", attrs.get("first", 1)) < attrs.get("first", 1):
                raise serializers.ValidationError({"last": ["Must be at least first."]})
            return attrs

    @extend_schema(
        operation_id="dashboard_conversation_series",
        summary="Chart data (columnar: one array per field, one entry per point; at most 2,000 points, "
                "each one turn or a bucket of consecutive turns)",
        parameters=[
            OpenApiParameter("first", OpenApiTypes.INT, description="First turn (1-based) of the range; default 1"),
            OpenApiParameter("last", OpenApiTypes.INT, description="Last turn of the range; default the latest, and "
                             "cut to it. Either one not a whole number from 1, or last before first: 400"),
        ],
        responses=SeriesSerializer,
    )
    def get(self, request: Request, pk: int) -> Response:
        params = validated(self.FilterSerializer, request.query_params)
        conversation = dashboard_conversation_get(user=request.user, pk=pk)
        return Response(dashboard_series(conversation=conversation, first=params.get("first"), last=params.get("last")))


DashboardMessageMapApi = _figures_api(
    "DashboardMessageMapApi", selector=dashboard_message_map, operation_id="dashboard_conversation_map",
    summary="Every message's status in the latest request, run-length encoded", response=MessageMapSerializer,
)


class DashboardRecordListApi(_ConversationPageApi):
    class OutputSerializer(RecordSerializer):
        tokens_saved = serializers.IntegerField()
        summary_id = serializers.IntegerField(allow_null=True)
        on_active_path = serializers.BooleanField(
            help_text="False: the turn's reply is on another branch (edited, regenerated or switched away "
                      "from); its tokens and cost still count in the totals.")

    @extend_schema(summary="A conversation's optimization records in turn order (paginated)",
                   responses=OutputSerializer(many=True))
    def get(self, request: Request, pk: int) -> Response:
        return self.page_response(request, pk, read=_record_page, serializer_class=self.OutputSerializer)


def _record_page(*, conversation: Conversation, offset: int, limit: int) -> tuple[int, list[dict[str, Any]]]:
    count, page = dashboard_record_page(conversation=conversation, offset=offset, limit=limit)
    rows = [
        {**row, "turn": offset + i + 1, "tokens_saved": row["tokens_full"] - row["tokens_sent"]}
        for i, row in enumerate(page)
    ]
    return count, rows


class DashboardRecordContextApi(APIView):
    @extend_schema(summary="What the model saw on one turn: the messages sent, in order",
                   responses=RecordContextSerializer)
    def get(self, request: Request, pk: int, record_pk: int) -> Response:
        conversation = dashboard_conversation_get(user=request.user, pk=pk)
        return Response(dashboard_record_context(conversation=conversation, record_id=record_pk))


class DashboardSummaryListApi(APIView):
    pagination_class = DashboardSummaryPagination

    class OutputSerializer(SummaryCoverageSerializer):
        id = serializers.IntegerField()
        content = serializers.CharField()
        token_count = serializers.IntegerField()
        char_count = serializers.IntegerField()
        method = serializers.CharField()
        model = serializers.CharField()
        cost_usd = serializers.FloatField(allow_null=True)
        duration_s = serializers.FloatField(allow_null=True)
        prompt_tokens = serializers.IntegerField(allow_null=True)
        completion_tokens = serializers.IntegerField(allow_null=True)
        trigger = serializers.CharField(allow_null=True)
        job_id = serializers.IntegerField(allow_null=True)
        job_note = serializers.CharField(help_text="Why the job wrote the summary without the model (\"\": it did not)")
        used_by_requests = serializers.IntegerField()
        created_at = serializers.DateTimeField()
        number = serializers.IntegerField(allow_null=True, help_text="1-based order among the conversation's summaries")
        edited_from_number = serializers.IntegerField(allow_null=True)
        covers_from_number = serializers.IntegerField(
            allow_null=True, help_text="Position (1-based, chat messages) of the first message covered"
        )
        covers_through_number = serializers.IntegerField(allow_null=True)
        summary_chars = serializers.IntegerField(help_text="Characters of the summary text, header excluded")
        in_use = serializers.BooleanField(
            help_text="The summary the next request sends (the newest neither discarded nor on another branch); "
                      "the only one that can be edited")
        on_active_path = serializers.BooleanField(
            help_text="False: an edit, a regenerate or a branch switch took messages it covers off the path shown")

    @extend_schema(summary="A conversation's summaries, newest first, with their jobs (paginated)",
                   responses=OutputSerializer(many=True))
    def get(self, request: Request, pk: int) -> Response:
        conversation = dashboard_conversation_get(user=request.user, pk=pk)
        paginator = DashboardSummaryPagination()
        offset, limit = paginator.page_bounds(request=request)
        paginator.count, rows, paginator.next_before = dashboard_summary_page(
            conversation=conversation, offset=offset, limit=limit, before=paginator.before)
        return paginator.get_paginated_response(self.OutputSerializer(rows, many=True).data)


class DashboardOverviewApi(APIView):
    @extend_schema(summary="Totals across the user's conversations and the top savers", responses=OverviewSerializer)
    def get(self, request: Request) -> Response:
        return Response(dashboard_overview(user=request.user, top=10))


class DashboardConversationSavingsApi(APIView):
    pagination_class = DashboardPagination

    @extend_schema(operation_id="dashboard_conversations_list",
                   summary="The user's conversations by tokens saved, most first (paginated)",
                   responses=ConversationSavingsSerializer(many=True))
    def get(self, request: Request) -> Response:
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(dashboard_conversation_savings(user=request.user), request, view=self)
        return paginator.get_paginated_response(page)
