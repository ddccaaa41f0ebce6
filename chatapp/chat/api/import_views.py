"""`POST /api/imports/` (multipart `file`) → 202 and a job; `GET /api/imports/` the user's jobs;
`GET /api/imports/<id>/` its progress, then the conversations it created or the reason it failed.

Thin DRF views over import_services / import_selectors. The upload limit (settings.IMPORT_MAX_BYTES)
is enforced as the body arrives, before Django stores it (chatapp.chat.body_limit, in the ASGI
handler), then again on the file itself while the body is parsed: a handler placed before Django's
own refuses a file part past the limit (and, outside the ASGI server, an announced length past it);
the service checks once more, for callers other than this view.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler
from django.http import HttpRequest, HttpResponseBase
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import APIException
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chatapp.chat.api.inputs import validated
from chatapp.chat.api.pagination import KeysetPagination, PaginatedApi
from chatapp.chat.body_limit import MULTIPART_SLACK, import_too_large_words
from chatapp.chat.import_models import ImportJob
from chatapp.chat.import_selectors import import_job_conversations, import_job_get, import_job_list
from chatapp.chat.import_services import ImportBacklogFull, ImportTooLarge, import_job_create


class UploadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"

    def __init__(self, *, size: int | None = None) -> None:
        self.limit: int = settings.IMPORT_MAX_BYTES  # in the answer beside `detail` (api.errors)
        super().__init__(import_too_large_words(limit=self.limit, size=size))


class _LimitedUpload(FileUploadHandler):
    """First in the request's upload handlers: refuses the body before the others store it."""

    def handle_raw_input(self, input_data: Any, META: Any, content_length: int, boundary: Any,
                         encoding: Any = None) -> None:
        if content_length and content_length > settings.IMPORT_MAX_BYTES + MULTIPART_SLACK:
            raise UploadTooLarge(size=content_length)

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        if start + len(raw_data) > settings.IMPORT_MAX_BYTES:
            raise UploadTooLarge()
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler (memory or temporary file) keeps the file


class SkippedConversationSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="The conversation's place in the file, 0-based.")
    title = serializers.CharField(allow_blank=True, allow_null=True, help_text="Its title in the file, if any.")
    error = serializers.CharField(help_text="What is wrong with it.")


class ImportJobOutputSerializer(serializers.ModelSerializer):
    format_label = serializers.CharField(source="get_format_display")
    imported = serializers.SerializerMethodField(help_text="Conversations created so far.")
    skipped_count = serializers.SerializerMethodField(help_text="Conversations not imported (reasons in `skipped`).")
    already_imported = serializers.IntegerField(
        source="duplicates",
        help_text="Conversations you had imported before (from this or an earlier file): left as they are.",
    )
    progress = serializers.SerializerMethodField(help_text="Share of the file's conversations handled, 0 to 1.")
    skipped = SkippedConversationSerializer(many=True, help_text="The first 200 conversations not imported.")
    omitted = serializers.DictField(
        child=serializers.IntegerField(),
        help_text='Messages the source had that were not imported, by reason ("tool_messages", '
                  '"tool_calls", "hidden_messages", "empty_messages").',
    )

    class Meta:
        model = ImportJob
        fields = [
            "id", "kind", "source_conversation", "status", "format", "format_label", "filename", "size_bytes", "total",
            "done", "progress",
            "imported", "already_imported", "skipped_count", "skipped", "omitted", "error", "created_at", "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_imported(self, job: ImportJob) -> int:
        return len(job.conversation_ids)

    def get_skipped_count(self, job: ImportJob) -> int:
        return job.done - len(job.conversation_ids) - job.duplicates

    def get_progress(self, job: ImportJob) -> float:
        if job.status == ImportJob.Status.DONE:
            return 1.0
        return round(job.done / job.total, 4) if job.total else 0.0


class ForkJobOutputSerializer(ImportJobOutputSerializer):
    """Branch in new chat past MAX_FORK_MESSAGES (or MAX_FORK_IMAGE_BYTES): the import job (kind "branch")
    that writes the new chat, followed at GET /api/imports/<id>/ like an upload's (its `conversations` once done)."""

    messages = serializers.SerializerMethodField(help_text="Messages the new chat will hold.")

    class Meta(ImportJobOutputSerializer.Meta):
        fields = [*ImportJobOutputSerializer.Meta.fields, "messages"]
        read_only_fields = fields

    def get_messages(self, job: ImportJob) -> int:
        return int(self.context["messages"])


class ImportedConversationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    archived = serializers.BooleanField(help_text="Archived (as at its source): out of the sidebar.")


class ImportJobDetailOutputSerializer(ImportJobOutputSerializer):
    conversations = serializers.SerializerMethodField(
        help_text="Once the job has ended: the conversations it created (still existing), in file order."
    )

    class Meta(ImportJobOutputSerializer.Meta):
        fields = [*ImportJobOutputSerializer.Meta.fields, "conversations"]
        read_only_fields = fields

    @extend_schema_field(ImportedConversationSerializer(many=True))
    def get_conversations(self, job: ImportJob) -> list[dict[str, Any]]:
        if job.status not in (ImportJob.Status.DONE, ImportJob.Status.FAILED):
            return []
        return import_job_conversations(job=job)


class ImportJobListApi(PaginatedApi):
    parser_classes = [MultiPartParser]
    # Newest first, by id (importjob_owner_idx): an upload made while a client reads on shifts no page.
    pagination_class = KeysetPagination

    class InputSerializer(serializers.Serializer):
        file = serializers.FileField(
            allow_empty_file=False,
            help_text="Our JSON export, ChatGPT's conversations.json (or its export .zip), or an Open WebUI "
                      "export; at most IMPORT_MAX_BYTES.",
        )

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method == "POST":
            # Before anything reads the body (the session's CSRF check reads the form).
            request.upload_handlers.insert(0, _LimitedUpload(request))
        return super().dispatch(request, *args, **kwargs)

    @extend_schema(
        request={"multipart/form-data": InputSerializer},
        responses={
            202: ImportJobOutputSerializer,
            400: OpenApiResponse(description="No file, an empty one, or more than one."),
            413: OpenApiResponse(description="The file is larger than IMPORT_MAX_BYTES."),
            429: OpenApiResponse(description="You already have 3 imports waiting or running."),
        },
        summary="Import conversations from a file (a background job: poll its progress)",
    )
    def post(self, request: Request) -> Response:
        held = len(request.FILES.getlist("file"))
        if held > 1:
            # The field reads the last part alone: the others would be dropped without a word.
            raise serializers.ValidationError({"file": [f"Send one file per upload: this one held {held}."]})
        upload = validated(self.InputSerializer, request.data)["file"]
        try:
            job = import_job_create(owner=request.user, upload=upload)
        except ImportTooLarge as exc:
            raise UploadTooLarge(size=exc.size) from None
        except ImportBacklogFull as exc:
            return Response({"detail": exc.messages[0]}, status=status.HTTP_429_TOO_MANY_REQUESTS)
        job = import_job_get(owner=request.user, pk=job.pk)  # as stored, without the upload
        headers = {"Location": f"/api/imports/{job.pk}/"}
        return Response(ImportJobOutputSerializer(job).data, status=status.HTTP_202_ACCEPTED, headers=headers)

    @extend_schema(responses=ImportJobOutputSerializer(many=True), summary="Your imports, newest first")
    def get(self, request: Request) -> Response:
        return self.paginated_response(
            request, queryset=import_job_list(owner=request.user), serializer_class=ImportJobOutputSerializer
        )


class ImportJobDetailApi(APIView):
    @extend_schema(
        responses=ImportJobDetailOutputSerializer,
        summary="An import's status and progress; once ended, its conversations or its error",
    )
    def get(self, request: Request, pk: int) -> Response:
        job = import_job_get(owner=request.user, pk=pk)
        return Response(ImportJobDetailOutputSerializer(job).data)
