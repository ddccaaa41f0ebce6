"""`GET /api/search/?q=...&page=N`: the user's messages matching a query, ranked, with highlighted
snippets (search_selectors.message_search); conversations whose title contains the query first on
page 1. A thin view: the query string is validated here, everything else is the selector's.
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chatapp.chat.api.inputs import validated
from chatapp.chat.search_match import MAX_QUERY_CHARS
from chatapp.chat.search_selectors import MAX_PAGE, MIN_QUERY_CHARS, SearchHit, message_search


class SearchHitOutputSerializer(serializers.Serializer):
    """One hit (search_selectors.SearchHit)."""

    kind = serializers.ChoiceField(
        choices=["message", "title"],
        help_text="message: a message matched; title: the conversation's title contains the query.",
    )
    conversation_id = serializers.IntegerField()
    conversation_title = serializers.CharField()
    conversation_archived = serializers.BooleanField(
        help_text="The chat is archived (out of the sidebar's list; its messages are still found)."
    )
    message_id = serializers.IntegerField(allow_null=True, help_text="null for a title hit.")
    role = serializers.CharField(allow_null=True, help_text="user or assistant; null for a title hit.")
    created_at = serializers.DateTimeField(help_text="The message's; a title hit: the conversation's last activity.")
    snippet = serializers.CharField(
        source="snippet_html",
        help_text="HTML: about 30 words around the first match, text escaped, matched words in <mark>.",
    )
    snippet_text = serializers.CharField(help_text="The same snippet as plain text.")
    score = serializers.FloatField(allow_null=True, help_text="BM25 score (message hits).")
    url = serializers.SerializerMethodField(help_text="The chat page, scrolled to the message (#m-<id>).")

    def get_url(self, hit: SearchHit) -> str:
        path = reverse("chat-detail", args=[hit.conversation_id])
        return path if hit.message_id is None else f"{path}#m-{hit.message_id}"


class SearchApi(APIView):
    class InputSerializer(serializers.Serializer):
        q = serializers.CharField(required=False, default="", allow_blank=True, trim_whitespace=True,
                                  max_length=MAX_QUERY_CHARS)
        page = serializers.IntegerField(required=False, default=1, min_value=1, max_value=MAX_PAGE)

    class OutputSerializer(serializers.Serializer):
        query = serializers.CharField()
        page = serializers.IntegerField()
        page_size = serializers.IntegerField()
        has_more = serializers.BooleanField(help_text="Another page of message hits follows (ask for page + 1).")
        ranked = serializers.IntegerField(help_text="Matching messages ranked (at most 1000).")
        window_full = serializers.BooleanField(
            help_text="More messages may match than were ranked: the ranking covers the newest 1000 matches."
        )
        results = SearchHitOutputSerializer(source="hits", many=True)

    @extend_schema(
        operation_id="search",
        summary="Search message text (ranked, with snippets)",
        description=(
            "Every content word of `q` must match (stemmed, as the index stores messages: \"running\" finds "
            "\"runs\"), the last one as a prefix (search as you type). Message hits are ranked by BM25 over "
            "the newest 1000 matching messages, then newest first, 20 a page. Page 1 starts with up to 5 "
            "conversations whose title contains `q` (kind \"title\"). "
            f"A `q` shorter than {MIN_QUERY_CHARS} characters (or empty) answers 200 with no results, but for "
            "one character of a script written without spaces (\"猫\"), which is searched; a `q` "
            f"made only of stop words finds titles only. `page` outside 1 to {MAX_PAGE}, or not a number, or a "
            f"`q` longer than {MAX_QUERY_CHARS} characters: 400 naming the field."
        ),
        parameters=[
            OpenApiParameter("q", str, description="The search text."),
            OpenApiParameter("page", int, description=f"1 to {MAX_PAGE} (default 1)."),
        ],
        responses={200: OutputSerializer, 400: OpenApiResponse(description="A bad `page` or too long a `q`.")},
    )
    def get(self, request: Request) -> Response:
        params = validated(self.InputSerializer, request.query_params)
        page = message_search(owner=request.user, query=params["q"], page=params["page"])
        return Response(self.OutputSerializer(page).data)
