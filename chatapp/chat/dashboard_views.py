"""Dashboard pages, exports and JSON API (issue 5). Thin: the numbers come from dashboard_selectors.

Pages render the headline cards on the server; charts, the message map, summaries and "what the
model saw" are drawn in the browser from the JSON API below, so page and API always agree.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chatapp.chat.dashboard_selectors import (
    MAP_STATUS_LABELS,
    MAP_STATUSES,
    RECORD_LIST_FIELDS,
    dashboard_conversation_get,
    dashboard_conversation_savings,
    dashboard_headline,
    dashboard_message_map,
    dashboard_overview,
    dashboard_record_context,
    dashboard_record_export,
    dashboard_record_list,
    dashboard_series,
    dashboard_summary_details,
    dashboard_summary_list,
    export_json_value,
)
from chatapp.chat.views import page_csp

# --- Formatting for the cards ------------------------------------------------------------------------

MINUS = "\u2212"


def _tokens(n: int | None) -> str:
    if n is None:
        return "—"
    for div, suffix in ((1_000_000_000, "B"), (1_000_000, "M"), (1_000, "k")):
        if abs(n) >= div:
            value = n / div
            return f"{value:.1f}{suffix}" if abs(value) < 100 else f"{value:.0f}{suffix}"
    return f"{n:,}"


def _usd(x: float | None) -> str:
    if x is None:
        return "—"
    sign = MINUS if x < 0 else ""
    x = abs(x)
    if x >= 100:
        return f"{sign}${x:,.0f}"
    if x >= 1:
        return f"{sign}${x:,.2f}"
    if x == 0:
        return "$0"
    return f"{sign}${x:.4f}"


def _pct(x: float | None, digits: int = 0) -> str:
    return "—" if x is None else f"{x * 100:.{digits}f}%"


def _per_million(price: float | None) -> str:
    return "—" if price is None else f"${price * 1_000_000:,.3g}/M"


def _cards(h: dict[str, Any]) -> list[dict[str, Any]]:
    tokens, money, summaries, usage, acc = h["tokens"], h["money"], h["summaries"], h["usage"], h["accuracy"]
    strat = h["strategies"]
    prices = money["prices"]
    price_note = ""
    if prices:
        price_note = f"input {_per_million(prices['input'])}"
        if prices.get("cached_input") is not None:
            price_note += f", cached {_per_million(prices['cached_input'])}"
    cards = [
        {
            "key": "tokens",
            "label": "Tokens not sent",
            "value": _tokens(tokens["saved"]),
            # Two kinds, never added up as one saving: replaced by a summary vs left out altogether.
            "detail": (
                f"{_pct(tokens['saved_share'])} of {_tokens(tokens['full'])} full-history tokens: "
                f"{_tokens(tokens['summarized'])} replaced by summaries or compressed · "
                f"{_tokens(tokens['dropped'])} dropped with no summary"
                + (f" ({tokens['dropped_unmeasured']:,} turns not measured)" if tokens["dropped_unmeasured"] else "")
            ),
            "meter": tokens["saved_share"],
            "tone": "good" if tokens["saved"] > 0 else "",
        },
        {
            "key": "money",
            "label": "Money saved (net)",
            "value": _usd(money["net_saved_usd"]),
            "detail": (
                f"{_usd(money['gross_saved_usd'])} saved {MINUS} {_usd(money['summary_cost_usd'])} summarizing"
                + (f" · {price_note}" if price_note else "")
                + (f" · {money['unpriced_records']} turns unpriced" if money["unpriced_records"] else "")
            ),
            "tone": "good" if money["net_saved_usd"] > 0 else ("bad" if money["net_saved_usd"] < 0 else ""),
        },
        {
            "key": "summaries",
            "label": "Summaries made",
            "value": f"{summaries['made']:,}",
            "detail": (
                f"{summaries['extractive']} extractive · {summaries['made'] - summaries['live']} discarded"
                f" · {strat['truncate']} truncations" + _recall_detail(h["recall"])
            ),
        },
    ]
    if usage:
        cards.append({
            "key": "usage",
            "label": "Current usage",
            "value": _pct(usage["ratio"]),
            "detail": f"{usage['tokens']:,} of {usage['budget']:,} budget at the latest request"
            f" · window {usage['context_window']:,}" + (" · estimated count" if usage["estimated"] else ""),
            "meter": min(1.0, usage["ratio"] or 0),
            "tone": "bad" if (usage["ratio"] or 0) > 1 else ("warn" if (usage["ratio"] or 0) > 0.8 else ""),
        })
    else:
        cards.append({"key": "usage", "label": "Current usage", "value": "—", "detail": "No request yet"})
    if acc:
        # One claim per figure: the value is how close each request's count was (bounded: a provider
        # that counts very differently gives "—", not a negative accuracy); the detail adds the totals.
        error = acc["error_share"]
        cards.append({
            "key": "accuracy",
            "label": "Counting accuracy",
            "value": "—" if error >= 1 else _pct(1 - error, 1),
            "detail": (
                f"per request, ours differs from the provider's count by {error * 100:.1f}% on average"
                + (" (it counts differently: tools, images or cached prompts)" if error >= 1 else "")
                + f"; in total ours {_tokens(acc['ours'])} vs {_tokens(acc['provider'])} "
                f"({'+' if acc['bias_share'] >= 0 else MINUS}{abs(acc['bias_share']) * 100:.1f}%) "
                f"over {acc['requests']:,} requests"
            ),
        })
    else:
        cards.append({
            "key": "accuracy",
            "label": "Counting accuracy",
            "value": "—",
            "detail": "The endpoint has not reported usage yet",
        })
    return cards


def _recall_detail(recall: dict[str, Any]) -> str:
    """Recall next to the summaries: both bring old history back, and quoted messages are not lost."""
    if not recall["turns"]:
        return ""
    return (
        f" · {_plural(recall['messages'], 'message')} recalled on {_plural(recall['turns'], 'turn')}"
        f" ({_tokens(recall['tokens'])} tokens)"
    )


def _with_meters(cards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for card in cards:
        meter = card.get("meter")
        card["meter_pct"] = None if meter is None else round(max(0.0, min(1.0, meter)) * 100, 1)
    return cards


# --- Pages --------------------------------------------------------------------------------------------


@login_required
@page_csp
def dashboard_conversation_page(request: HttpRequest, pk: int) -> HttpResponse:
    conversation = dashboard_conversation_get(user=request.user, pk=pk)
    headline = dashboard_headline(conversation=conversation)
    return render(request, "dashboard/conversation.html", {
        "conversation": conversation,
        "headline": headline,
        "cards": _with_meters(_cards(headline)),
        "chat_url": reverse("chat-detail", args=[conversation.pk]),
        "legend": [{"key": s, "label": MAP_STATUS_LABELS[s]} for s in MAP_STATUSES],
        "first_optimized_turn": headline["strategies"]["first_optimized_turn"],
        "subtitle": _subtitle(turns=headline["turns"], messages=conversation.live_message_count,
                              first=headline["strategies"]["first_optimized_turn"]),
    })


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _subtitle(*, turns: int, messages: int, first: int | None) -> str:
    parts = [_plural(turns, "request"), _plural(messages, "message")]
    if first:
        parts.append(f"optimized from turn {first:,}")
    return " · ".join(parts)


@login_required
@page_csp
def dashboard_overview_page(request: HttpRequest) -> HttpResponse:
    overview = dashboard_overview(user=request.user, top=10)
    top = overview["top"]
    biggest = max((r["tokens_saved"] for r in top), default=0) or 1
    for row in top:
        # A visible sliver for any saving, however small next to the biggest.
        row["bar_pct"] = 0 if row["tokens_saved"] <= 0 else max(0.6, round(100 * row["tokens_saved"] / biggest, 1))
        row["saved_label"] = _tokens(row["tokens_saved"])
        row["full_label"] = _tokens(row["tokens_full"])
        row["share_label"] = _pct(row["saved_share"])
        row["money_label"] = _usd(row["net_saved_usd"])
        row["turns_label"] = _plural(row["turns"], "request")
    money = overview["money"]
    cards = [
        {"key": "tokens", "label": "Tokens not sent", "value": _tokens(overview["tokens"]["saved"]),
         "detail": f"{_pct(overview['tokens']['saved_share'])} of {_tokens(overview['tokens']['full'])}: "
                   f"{_tokens(overview['tokens']['summarized'])} replaced by summaries or compressed · "
                   f"{_tokens(overview['tokens']['dropped'])} dropped with no summary",
         "meter": overview["tokens"]["saved_share"], "tone": "good" if overview["tokens"]["saved"] > 0 else ""},
        {"key": "money", "label": "Money saved (net)", "value": _usd(money["net_saved_usd"]),
         "detail": f"{_usd(money['full_usd'] - money['sent_usd'])} saved {MINUS} {_usd(money['summary_cost_usd'])}"
                   " summarizing",
         "tone": "good" if money["net_saved_usd"] > 0 else ""},
        {"key": "summaries", "label": "Summaries made", "value": f"{overview['summaries']['made']:,}",
         "detail": f"{overview['summaries']['jobs']:,} summary jobs"},
        {"key": "turns", "label": "Requests", "value": f"{overview['turns']:,}",
         "detail": f"{overview['optimized_turns']:,} optimized · "
                   f"{_plural(overview['conversations_with_records'], 'conversation')} with requests"},
    ]
    subtitle = f"{_plural(overview['conversations'], 'conversation')} · {_plural(overview['turns'], 'request')}"
    return render(request, "dashboard/overview.html", {
        "overview": overview, "cards": _with_meters(cards), "top": top, "subtitle": subtitle,
    })


# --- Exports ---------------------------------------------------------------------------------------------


class _Echo:
    """File-like object for csv.writer that hands each row back instead of buffering it."""

    def write(self, value: str) -> str:
        return value


_JSON_COLUMNS = ("scores", "sent", "dropped_ranges", "stats")
CSV_COLUMNS: tuple[str, ...] = ("turn", *RECORD_LIST_FIELDS, "tokens_saved", *_JSON_COLUMNS)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A spreadsheet opens a text cell that starts with = + - @ (or a tab or CR) as a formula: such
    text (a model name, a reason) gets a leading apostrophe. Numbers are left as numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _csv_rows(conversation) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(CSV_COLUMNS)
    for row in dashboard_record_export(conversation=conversation):
        data = row.data
        out = []
        for col in CSV_COLUMNS:
            if col == "turn":
                out.append(row.turn)
            elif col in _JSON_COLUMNS:
                out.append(csv_cell(export_json_value(data[col])))
            else:
                value = data[col]
                out.append("" if value is None else csv_cell(value))
        yield writer.writerow(out)


@login_required
def dashboard_export_csv(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    conversation = dashboard_conversation_get(user=request.user, pk=pk)
    response = StreamingHttpResponse(_csv_rows(conversation), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="conversation-{conversation.pk}-records.csv"'
    return response


def _json_chunks(conversation) -> Iterator[str]:
    head = {"conversation": {"id": conversation.pk, "title": conversation.title}}
    yield json.dumps(head, cls=DjangoJSONEncoder)[:-1] + ', "records": ['
    first = True
    for row in dashboard_record_export(conversation=conversation):
        yield ("" if first else ",") + json.dumps({"turn": row.turn, **row.data}, cls=DjangoJSONEncoder)
        first = False
    yield "]}"


@login_required
def dashboard_export_json(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    conversation = dashboard_conversation_get(user=request.user, pk=pk)
    response = StreamingHttpResponse(_json_chunks(conversation), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="conversation-{conversation.pk}-records.json"'
    return response


# --- JSON API --------------------------------------------------------------------------------------------


class DashboardPagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500


class _ConversationFiguresApi(APIView):
    """GET one selector's figures for a conversation of the requesting user (others: 404)."""

    selector: Callable[..., dict[str, Any]]

    def get(self, request: Request, pk: int) -> Response:
        conversation = dashboard_conversation_get(user=request.user, pk=pk)
        return Response(type(self).selector(conversation=conversation))


def _figures_api(name: str, *, selector: Callable[..., dict[str, Any]], operation_id: str,
                 summary: str) -> type[APIView]:
    view = type(name, (_ConversationFiguresApi,), {"selector": staticmethod(selector), "__module__": __name__})
    schema = extend_schema(operation_id=operation_id, summary=summary, responses=OpenApiTypes.OBJECT)
    return extend_schema_view(get=schema)(view)


DashboardHeadlineApi = _figures_api(
    "DashboardHeadlineApi", selector=dashboard_headline, operation_id="dashboard_conversation_headline",
    summary="Dashboard headline figures of a conversation",
)
DashboardSeriesApi = _figures_api(
    "DashboardSeriesApi", selector=dashboard_series, operation_id="dashboard_conversation_series",
    summary="Per-turn chart data (columnar: one array per field, one entry per request)",
)
DashboardMessageMapApi = _figures_api(
    "DashboardMessageMapApi", selector=dashboard_message_map, operation_id="dashboard_conversation_map",
    summary="Every message's status in the latest request, run-length encoded",
)


class DashboardRecordListApi(APIView):
    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        turn = serializers.IntegerField()
        created_at = serializers.DateTimeField()
        reply_id = serializers.IntegerField(allow_null=True)
        preference = serializers.CharField()
        model = serializers.CharField()
        context_window = serializers.IntegerField()
        budget = serializers.IntegerField()
        triggered = serializers.BooleanField()
        window_start_id = serializers.IntegerField(allow_null=True)
        strategy = serializers.CharField()
        reason = serializers.CharField()
        tokens_full = serializers.IntegerField()
        tokens_sent = serializers.IntegerField()
        tokens_saved = serializers.IntegerField()
        provider_prompt_tokens = serializers.IntegerField(allow_null=True)
        estimated = serializers.BooleanField()
        summary_id = serializers.IntegerField(allow_null=True)
        messages_before = serializers.IntegerField()
        messages_after = serializers.IntegerField()
        pack_ms = serializers.FloatField()
        cost_sent_usd = serializers.FloatField(allow_null=True)
        cost_full_usd = serializers.FloatField(allow_null=True)
        recall_tokens = serializers.IntegerField()
        recall_message_count = serializers.IntegerField()

    pagination_class = DashboardPagination

    @extend_schema(summary="A conversation's optimization records in turn order (paginated)",
                   responses=OutputSerializer(many=True))
    def get(self, request: Request, pk: int) -> Response:
        conversation = dashboard_conversation_get(user=request.user, pk=pk)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(dashboard_record_list(conversation=conversation), request, view=self)
        offset = paginator.offset
        rows = [
            {**row, "turn": offset + i + 1, "tokens_saved": row["tokens_full"] - row["tokens_sent"]}
            for i, row in enumerate(page)
        ]
        return paginator.get_paginated_response(self.OutputSerializer(rows, many=True).data)


class DashboardRecordContextApi(APIView):
    @extend_schema(summary="What the model saw on one turn: the messages sent, in order",
                   responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, pk: int, record_pk: int) -> Response:
        conversation = dashboard_conversation_get(user=request.user, pk=pk)
        return Response(dashboard_record_context(conversation=conversation, record_id=record_pk))


class DashboardSummaryListApi(APIView):
    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        content = serializers.CharField()
        token_count = serializers.IntegerField()
        char_count = serializers.IntegerField()
        covers_from_id = serializers.IntegerField(allow_null=True)
        covers_through_id = serializers.IntegerField(allow_null=True)
        covered_message_count = serializers.IntegerField(allow_null=True)
        source_chars = serializers.IntegerField(allow_null=True)
        extractive = serializers.BooleanField()
        discarded = serializers.BooleanField()
        edited = serializers.BooleanField()
        edited_from_id = serializers.IntegerField(allow_null=True)
        method = serializers.CharField()
        model = serializers.CharField()
        cost_usd = serializers.FloatField(allow_null=True)
        duration_s = serializers.FloatField(allow_null=True)
        prompt_tokens = serializers.IntegerField(allow_null=True)
        completion_tokens = serializers.IntegerField(allow_null=True)
        trigger = serializers.CharField(allow_null=True)
        job_id = serializers.IntegerField(allow_null=True)
        used_by_requests = serializers.IntegerField()
        created_at = serializers.DateTimeField()
        number = serializers.IntegerField(allow_null=True, help_text="1-based order among the conversation's summaries")
        edited_from_number = serializers.IntegerField(allow_null=True)
        covers_from_number = serializers.IntegerField(
            allow_null=True, help_text="Position (1-based, chat messages) of the first message covered"
        )
        covers_through_number = serializers.IntegerField(allow_null=True)
        summary_chars = serializers.IntegerField(help_text="Characters of the summary text, header excluded")

    pagination_class = DashboardPagination

    @extend_schema(summary="A conversation's summaries, newest first, with their jobs (paginated)",
                   responses=OutputSerializer(many=True))
    def get(self, request: Request, pk: int) -> Response:
        conversation = dashboard_conversation_get(user=request.user, pk=pk)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(dashboard_summary_list(conversation=conversation), request, view=self)
        rows = dashboard_summary_details(conversation=conversation, summaries=list(page))
        return paginator.get_paginated_response(self.OutputSerializer(rows, many=True).data)


class DashboardOverviewApi(APIView):
    @extend_schema(summary="Totals across the user's conversations and the top savers", responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        return Response(dashboard_overview(user=request.user, top=10))


class DashboardConversationSavingsApi(APIView):
    pagination_class = DashboardPagination

    @extend_schema(operation_id="dashboard_conversations_list",
                   summary="The user's conversations by tokens saved, most first (paginated)",
                   responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(dashboard_conversation_savings(user=request.user), request, view=self)
        return paginator.get_paginated_response(page)
