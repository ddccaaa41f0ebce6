"""`GET /api/conversations/<id>/export/?format=json|markdown`: the conversation as a streamed download;
`GET /api/conversations/export/`: every conversation of the user, as one JSON list (account_export).

A thin sync DRF view (authentication, ownership, the format) returning a streamed download over
the async iterator of conversation_export: under ASGI the body streams from the event loop, page by
page, instead of being built in memory first (see that module for the formats).
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from chatapp.chat.account_export import account_export_chunks
from chatapp.chat.api.inputs import validated
from chatapp.chat.api.serializers import SummaryCoverageSerializer
from chatapp.chat.conversation_export import EXPORT_FORMATS, conversation_export_chunks
from chatapp.chat.download_names import download_filename, streamed_download
from chatapp.chat.selectors import conversation_get


class ExportNegotiation(DefaultContentNegotiation):
    """`format` names the export here, not a renderer (DRF reads it as one: `?format=markdown` would
    be a 404), and no renderer touches the download: errors before it starts are JSON whatever the
    client accepts (an `Accept: text/markdown` would otherwise be a 406)."""

    def select_renderer(self, request: Request, renderers: list, format_suffix: str | None = None) -> tuple:
        renderer = next((r for r in renderers if isinstance(r, JSONRenderer)), renderers[0])
        return renderer, renderer.media_type


# For the schema only: the document is written by conversation_export, not by these serializers.
class ConversationExportConfig(serializers.Serializer):
    name = serializers.CharField()
    model = serializers.CharField()
    context_window = serializers.IntegerField()
    max_output_tokens = serializers.IntegerField()
    temperature = serializers.FloatField()


class ConversationExportConversation(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    title_is_custom = serializers.BooleanField()
    system_prompt = serializers.CharField(allow_blank=True, help_text="The chat's own system prompt (\"\" if none).")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    offline = serializers.BooleanField()
    pinned_at = serializers.DateTimeField(allow_null=True, help_text="Pinned since; null: not.")
    archived_at = serializers.DateTimeField(allow_null=True, help_text="Archived since; null: not.")
    llm_config = ConversationExportConfig(
        allow_null=True, help_text="Name and model only: never the key or the address."
    )
    preference = serializers.CharField(allow_null=True, help_text="The preference the latest turn was packed with.")
    window_start_id = serializers.IntegerField(allow_null=True)
    folder = serializers.CharField(
        allow_null=True, help_text="The folder's name (an import files the chat in yours of that name); null: in none."
    )


class ConversationExportImage(serializers.Serializer):
    mime = serializers.CharField()
    width = serializers.IntegerField()
    height = serializers.IntegerField()
    bytes = serializers.IntegerField(help_text="The file's size.")
    name = serializers.CharField(allow_blank=True, help_text="The file's name as sent (\"\" if none).")
    data = serializers.CharField(help_text="The file's bytes, base64.")


class ConversationExportMessage(SummaryCoverageSerializer):
    id = serializers.IntegerField()
    role = serializers.CharField()
    kind = serializers.CharField()
    status = serializers.CharField()
    content = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    pinned = serializers.BooleanField()
    superseded = serializers.BooleanField(help_text="Off the active path (another branch); never sent.")
    reply_to_id = serializers.IntegerField(allow_null=True)
    model = serializers.CharField()
    token_count = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField(allow_null=True)
    completion_tokens = serializers.IntegerField(allow_null=True)
    latency_ms = serializers.IntegerField(allow_null=True)
    cost_usd = serializers.CharField(allow_null=True, help_text="Exact decimal, as text.")
    error = serializers.CharField()
    parent_id = serializers.IntegerField(allow_null=True, help_text="The message this one follows (null: a root).")
    off_path_by = serializers.IntegerField(
        allow_null=True, help_text="Off the active path: the first message of the branch it was hidden with."
    )
    skipped_pin_ids = serializers.ListField(
        child=serializers.IntegerField(), allow_null=True,
        help_text="A summary's pinned messages it passed over (sent as themselves while unpinned since).",
    )
    reasoning = serializers.CharField(
        allow_null=True, help_text="A reasoning model's thinking before the answer (null: none); never sent back."
    )
    finish_reason = serializers.CharField(
        allow_null=True, help_text='Why the model ended a complete reply ("length": cut at its output limit).'
    )
    images = ConversationExportImage(many=True, help_text="A user message's images, in the order sent.")


class ConversationExportDocument(serializers.Serializer):
    format = serializers.CharField(help_text='Always "longchat.conversation".')
    version = serializers.IntegerField(help_text="1")
    exported_at = serializers.DateTimeField()
    conversation = ConversationExportConversation()
    messages = ConversationExportMessage(many=True, help_text="Every stored message, in id order.")


_JSON_DESCRIPTION = (
    "The faithful copy: every stored message in id order with every field that carries meaning (summary "
    "coverage included). No key, no endpoint address."
)
_MARKDOWN_DESCRIPTION = (
    "Markdown for reading: a title, each message under `### n · Role — YYYY-MM-DD HH:MM UTC` (replaced, "
    "stopped, failed and cut replies marked), summaries as blockquotes headed `Summary of messages n\u2013m`."
)


class ConversationExportApi(APIView):
    renderer_classes = [JSONRenderer]
    content_negotiation_class = ExportNegotiation

    class InputSerializer(serializers.Serializer):
        format = serializers.ChoiceField(
            choices=list(EXPORT_FORMATS),
            required=False,
            default="json",
            error_messages={"invalid_choice": 'Unknown export format "{input}": use json or markdown.'},
        )

    @extend_schema(
        operation_id="conversations_export",
        summary="Download the whole conversation (streamed) as JSON or Markdown",
        parameters=[
            OpenApiParameter(
                "format", str, enum=list(EXPORT_FORMATS), default="json",
                description="json: the faithful copy (versioned format); markdown: a readable transcript.",
            )
        ],
        responses={
            (200, "application/json"): OpenApiResponse(
                response=ConversationExportDocument, description=_JSON_DESCRIPTION
            ),
            (200, "text/markdown"): OpenApiResponse(response=OpenApiTypes.STR, description=_MARKDOWN_DESCRIPTION),
            400: OpenApiResponse(description="Unknown format."),
            404: OpenApiResponse(description="No such conversation of yours."),
        },
    )
    def get(self, request: Request, pk: int) -> Any:
        conversation = conversation_get(owner=request.user, pk=pk)
        fmt = validated(self.InputSerializer, request.query_params)["format"]
        kind = EXPORT_FORMATS[fmt]
        filename = download_filename(conversation.title, fallback=f"conversation-{conversation.pk}",
                                     extension=kind.extension)
        return streamed_download(conversation_export_chunks(conversation=conversation, fmt=fmt),
                                 content_type=kind.media_type, filename=filename)


class AccountExportApi(APIView):
    renderer_classes = [JSONRenderer]
    content_negotiation_class = ExportNegotiation

    @extend_schema(
        operation_id="conversations_export_all",
        summary="Download every conversation of yours (streamed) as one JSON list",
        responses={
            (200, "application/json"): OpenApiResponse(
                response=ConversationExportDocument(many=True),
                description="A list of conversation documents (each as the one-conversation export writes it), oldest "
                "first; the import reads the file back whole.",
            ),
        },
    )
    def get(self, request: Request) -> Any:
        day = timezone.localdate().isoformat()
        return streamed_download(account_export_chunks(owner_id=request.user.pk), content_type="application/json",
                                 filename=f"longchat-chats-{day}.json")
