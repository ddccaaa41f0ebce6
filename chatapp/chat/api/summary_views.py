"""JSON API for background summaries (issue 4): compact now, "not now", job state, read / edit / discard a summary.

Thin views: lookups through selectors (another user's ids are 404), writes through summary_services.
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from chatapp.chat.api.inputs import validated
from chatapp.chat.api.pagination import KeysetPagination, PaginatedApi
from chatapp.chat.api.serializers import MessageOutputSerializer
from chatapp.chat.models import SummaryJob
from chatapp.chat.selectors import conversation_get
from chatapp.chat.services import summary_job_dismiss
from chatapp.chat.summary_selectors import summary_get, summary_job_list, summary_quota_remaining
from chatapp.chat.summary_services import (
    MAX_INSTRUCTIONS_CHARS,
    compact_command_parse,
    conversation_compact,
    summary_discard,
    summary_edit,
)


class SummaryJobOutputSerializer(serializers.ModelSerializer):
    status_label = serializers.CharField(source="get_status_display")
    duration_ms = serializers.SerializerMethodField(help_text="From first start to finish (retries included).")
    summary_id = serializers.IntegerField(allow_null=True)
    extractive = serializers.SerializerMethodField()
    summary_on_active_path = serializers.SerializerMethodField(
        help_text="Whether its summary is on the path shown (null: no summary). False when the messages it "
        "covers left the path while it was written (an edit or a version switch): it is sent on that version only."
    )

    class Meta:
        model = SummaryJob
        fields = [
            "id",
            "conversation",
            "status",
            "status_label",
            "trigger",
            "instructions",
            "span_from_id",
            "span_through_id",
            "attempts",
            "error",
            "summary_id",
            "extractive",
            "summary_on_active_path",
            "model",
            "prompt_tokens",
            "completion_tokens",
            "cost_usd",
            "created_at",
            "started_at",
            "finished_at",
            "duration_ms",
        ]
        read_only_fields = fields

    def get_duration_ms(self, job: SummaryJob) -> int | None:
        if job.started_at is None or job.finished_at is None:
            return None
        return int((job.finished_at - job.started_at).total_seconds() * 1000)

    def get_extractive(self, job: SummaryJob) -> bool | None:
        return job.summary.extractive if job.summary_id and job.summary is not None else None

    def get_summary_on_active_path(self, job: SummaryJob) -> bool | None:
        return not job.summary.superseded if job.summary_id and job.summary is not None else None


class ConversationCompactApi(APIView):
    # Each compaction is a model call on the shared summary queue: bounded per user (settings).
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "compact"
    class InputSerializer(serializers.Serializer):
        instructions = serializers.CharField(
            required=False, allow_blank=True, max_length=MAX_INSTRUCTIONS_CHARS, default=""
        )
        content = serializers.CharField(
            required=False, help_text="Composer text starting with /compact; the rest becomes the instructions."
        )

        def validate(self, attrs: dict) -> dict:
            if "content" in attrs:
                parsed = compact_command_parse(text=attrs["content"])
                if parsed is None:
                    raise serializers.ValidationError({"content": ["Not a /compact command."]})
                attrs["instructions"] = parsed
            return attrs

    @extend_schema(
        request=InputSerializer,
        responses={202: SummaryJobOutputSerializer},
        summary="Compact now: start a summary (optionally with instructions)",
    )
    def post(self, request: Request, pk: int) -> Response:
        conversation = conversation_get(owner=request.user, pk=pk)
        instructions = validated(self.InputSerializer, request.data)["instructions"]
        job = conversation_compact(conversation=conversation, instructions=instructions)
        try:
            job.refresh_from_db()
        except SummaryJob.DoesNotExist:  # the chat (and its jobs) deleted in another tab just now
            raise Http404("No Conversation matches the given query.") from None
        return Response(SummaryJobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class SummaryJobPagination(KeysetPagination):
    """Newest first by id (sumjob_conv_idx), each page after the last one's, so a job the chat makes while a
    client reads on shifts no page; the automatic summaries this chat may still start today beside it."""

    def get_paginated_response_schema(self, schema: dict) -> dict:
        page = super().get_paginated_response_schema(schema)
        page["properties"]["quota_remaining"] = {
            "type": "integer",
            "minimum": 0,
            "description": "How many more automatic summaries this conversation may start today.",
        }
        page.setdefault("required", []).append("quota_remaining")
        return page


class SummaryJobListApi(PaginatedApi):
    pagination_class = SummaryJobPagination

    @extend_schema(responses=SummaryJobOutputSerializer(many=True), summary="A conversation's summary jobs")
    def get(self, request: Request, pk: int) -> Response:
        conversation = conversation_get(owner=request.user, pk=pk)
        response = self.paginated_response(
            request, queryset=summary_job_list(conversation=conversation), serializer_class=SummaryJobOutputSerializer
        )
        response.data["quota_remaining"] = summary_quota_remaining(conversation=conversation)
        return response


class SummaryJobDismissApi(APIView):
    @extend_schema(
        request=None,
        responses={
            200: SummaryJobOutputSerializer,
            400: OpenApiResponse(description="The job is no longer waiting: only a waiting one can be dismissed."),
        },
        summary='"Not now": cancel a job waiting for confirmation ("Context is NN% full — compact now?")',
    )
    def post(self, request: Request, pk: int, job_pk: int) -> Response:
        conversation = conversation_get(owner=request.user, pk=pk)
        # Scoped to the owner's conversation: another user's job, or one of another chat, is a 404.
        job = conversation.summary_jobs.filter(pk=job_pk).first()
        if job is None:
            raise Http404("No such summary job.")
        job = summary_job_dismiss(job=job)
        return Response(SummaryJobOutputSerializer(job).data)


class SummaryDetailApi(APIView):
    class InputSerializer(serializers.Serializer):
        # blank reaches summary_edit, whose refusal says what to do instead (discard it)
        content = serializers.CharField(allow_blank=True)

    @extend_schema(responses=MessageOutputSerializer, summary="A summary (its text and sanitized HTML)")
    def get(self, request: Request, pk: int) -> Response:
        return Response(MessageOutputSerializer(summary_get(owner=request.user, pk=pk)).data)

    @extend_schema(request=InputSerializer, responses=MessageOutputSerializer, summary="Edit a summary's text")
    def patch(self, request: Request, pk: int) -> Response:
        summary = summary_get(owner=request.user, pk=pk)
        summary = summary_edit(summary=summary, content=validated(self.InputSerializer, request.data)["content"])
        return Response(MessageOutputSerializer(summary).data)

    @extend_schema(
        # A code, not a serializer: drf-spectacular documents a DELETE given a serializer as a bodiless
        # 204, but a discard keeps the summary and answers it (the page shows it from this body).
        responses={200: MessageOutputSerializer},
        summary="Discard a summary (kept in the history; the conversation falls back to truncation)",
    )
    def delete(self, request: Request, pk: int) -> Response:
        summary = summary_get(owner=request.user, pk=pk)
        summary = summary_discard(summary=summary)
        return Response(MessageOutputSerializer(summary).data)
