"""JSON API: thin views. Reads go through selectors, writes through services.

Every object lookup is scoped to the requesting user by a selector that raises Http404, so another
user's ids answer exactly like ids that do not exist: a 404 in the address, a 400 naming the field in a
body (_named_in_body). Services raise Django ValidationError; the
exception handler in api/errors.py answers it as a 400 with field errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.contrib.auth.models import User
from django.db.models import prefetch_related_objects
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chatapp.chat.api.import_views import ForkJobOutputSerializer
from chatapp.chat.api.inputs import ChangesSomething, validated
from chatapp.chat.api.pagination import BeforeIdPagination, KeysetPagination, PaginatedApi
from chatapp.chat.api.serializers import (
    ConversationDetailOutputSerializer,
    ConversationOutputSerializer,
    MessageOutputSerializer,
    OptimizationRecordOutputSerializer,
    UserSettingsOutputSerializer,
)
from chatapp.chat.branch_selectors import message_sibling_places
from chatapp.chat.folder_models import Folder
from chatapp.chat.folder_selectors import folder_get
from chatapp.chat.fork_services import ForkQueued, conversation_fork
from chatapp.chat.gauge import context_gauge
from chatapp.chat.image_services import images_prefetch
from chatapp.chat.import_selectors import import_job_get
from chatapp.chat.import_services import ImportBacklogFull
from chatapp.chat.message_services import message_pin_set
from chatapp.chat.models import Preference
from chatapp.chat.search_match import MAX_QUERY_CHARS
from chatapp.chat.selectors import (
    conversation_get,
    conversation_list,
    message_get,
    message_list,
    optimization_record_list,
    user_settings_get,
)
from chatapp.chat.services import (
    conversation_archive_all,
    conversation_create,
    conversation_delete,
    conversation_update,
    user_settings_update,
)
from chatapp.providers.models import LLMConfig
from chatapp.providers.selectors import llm_config_get

_Owned = TypeVar("_Owned")

_PROMPT_HELP = (
    "Sent first in every request (custom instructions, then the chat's system prompt, in one leading "
    "system message), never dropped by the optimizer, counted against the context budget; at most 20,000 "
    "characters, \"\" removes it. A change applies from the next message and is marked on its optimization "
    "record (stats.system_prompt_changed)."
)


def _named_in_body(*, lookup: Callable[[], _Owned], field: str, missing: str) -> _Owned:
    """An object a request body names by id, looked up among the user's own (`lookup`: Http404 for
    another user's, as for a missing one). Either is a bad value of `field` (400 naming it), not a 404:
    the address the request went to exists, and a client reading a 404 would take it for gone."""
    try:
        return lookup()
    except Http404:
        raise serializers.ValidationError({field: [missing]}) from None


def _owned_config_or_field_error(*, user: User, pk: int | None, field: str) -> LLMConfig | None:
    if pk is None:
        return None
    return _named_in_body(lookup=lambda: llm_config_get(owner=user, pk=pk), field=field,
                          missing="No such model configuration.")


def _owned_folder_or_field_error(*, user: User, pk: int | None) -> Folder | None:
    if pk is None:
        return None
    # The same words as conversation_folder_set's for one deleted meanwhile.
    return _named_in_body(lookup=lambda: folder_get(owner=user, pk=pk), field="folder", missing="No such folder.")


class ConversationPagination(KeysetPagination):
    # The list's order, last activity first (conversation_list); conv_owner_updated_id_idx serves the seek.
    key_field = "updated_at"


class ConversationListApi(PaginatedApi):
    pagination_class = ConversationPagination

    class FilterSerializer(serializers.Serializer):
        # A CharField refuses a NUL (400): PostgreSQL cannot take one as a parameter (a 500 otherwise).
        q = serializers.CharField(required=False, default="", allow_blank=True, trim_whitespace=True,
                                  max_length=MAX_QUERY_CHARS)
        archived = serializers.BooleanField(required=False, allow_null=True, default=None)

    class InputSerializer(serializers.Serializer):
        title = serializers.CharField(max_length=200, required=False)
        llm_config = serializers.IntegerField(
            required=False,
            allow_null=True,
            help_text="The chat's model: one of your config ids; absent or null = your default config now "
            "(kept when the default changes later).",
        )
        offline = serializers.BooleanField(
            required=False, default=False, help_text="Chat with the built-in offline demo model."
        )
        system_prompt = serializers.CharField(required=False, default="", allow_blank=True, help_text=_PROMPT_HELP)

        def validate(self, attrs: dict) -> dict:
            if attrs.get("offline") and attrs.get("llm_config") is not None:
                raise serializers.ValidationError({"offline": ["Send either a config or offline, not both."]})
            return attrs

    @extend_schema(
        operation_id="conversations_list",
        parameters=[
            OpenApiParameter("q", str, description="Search titles and message content."),
            OpenApiParameter("archived", bool, description="true: only archived chats; false: only the others; "
                             "absent: both."),
        ],
        responses=ConversationOutputSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        filters = validated(self.FilterSerializer, request.query_params)
        conversations = conversation_list(owner=request.user, query=filters["q"] or None, archived=filters["archived"])
        return self.paginated_response(request, queryset=conversations, serializer_class=ConversationOutputSerializer)

    @extend_schema(request=InputSerializer, responses={201: ConversationOutputSerializer})
    def post(self, request: Request) -> Response:
        data = validated(self.InputSerializer, request.data)
        config = _owned_config_or_field_error(user=request.user, pk=data.get("llm_config"), field="llm_config")
        conversation = conversation_create(
            owner=request.user, title=data.get("title"), llm_config=config, offline=data["offline"],
            system_prompt=data["system_prompt"],
        )
        return Response(ConversationOutputSerializer(conversation).data, status=status.HTTP_201_CREATED)


class ConversationDetailApi(APIView):
    class InputSerializer(serializers.Serializer):
        title = serializers.CharField(max_length=200, required=False)
        llm_config = serializers.IntegerField(
            required=False,
            allow_null=True,
            help_text="Switch the conversation's model: one of your config ids; null = your default config now.",
        )
        offline = serializers.BooleanField(
            required=False,
            help_text="true: switch to the built-in offline demo model; false: leave it for your default config "
            "(no change for a chat that is not offline).",
        )
        system_prompt = serializers.CharField(required=False, allow_blank=True, help_text=_PROMPT_HELP)
        pinned = serializers.BooleanField(required=False, help_text="true: pin the chat to the top of the sidebar.")
        archived = serializers.BooleanField(
            required=False, help_text="true: archive the chat (out of the sidebar; a send brings it back)."
        )
        folder = serializers.IntegerField(
            required=False, allow_null=True, help_text="Put the chat in this folder of yours; null: in none."
        )

        def validate(self, attrs: dict) -> dict:
            if not attrs:
                raise serializers.ValidationError(
                    "Send a title, an llm_config, offline, a system_prompt, pinned, archived or folder."
                )
            if attrs.get("offline") and attrs.get("llm_config") is not None:
                raise serializers.ValidationError({"offline": ["Send either a config or offline, not both."]})
            return attrs

    @extend_schema(responses=ConversationDetailOutputSerializer)
    def get(self, request: Request, pk: int) -> Response:
        conversation = conversation_get(owner=request.user, pk=pk)
        return Response(ConversationDetailOutputSerializer(conversation).data)

    @extend_schema(request=InputSerializer, responses=ConversationDetailOutputSerializer)
    def patch(self, request: Request, pk: int) -> Response:
        conversation = conversation_get(owner=request.user, pk=pk)
        data = validated(self.InputSerializer, request.data)
        # The ids in the body read first: one not the user's is a 400 naming its field before any write.
        config = _owned_config_or_field_error(user=request.user, pk=data.get("llm_config"), field="llm_config")
        folder = _owned_folder_or_field_error(user=request.user, pk=data.get("folder"))
        conversation = conversation_update(conversation=conversation, changes=data, llm_config=config, folder=folder)
        return Response(ConversationDetailOutputSerializer(conversation).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        conversation = conversation_get(owner=request.user, pk=pk)
        conversation_delete(conversation=conversation)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConversationArchiveAllApi(APIView):
    class InputSerializer(serializers.Serializer):
        archived = serializers.BooleanField(
            help_text="true: archive every chat of yours; false: bring every archived chat back."
        )

    class OutputSerializer(serializers.Serializer):
        changed = serializers.IntegerField(help_text="How many chats this archived or brought back.")

    @extend_schema(operation_id="conversations_archive_all", request=InputSerializer,
                   responses=OutputSerializer)
    def post(self, request: Request) -> Response:
        archived = validated(self.InputSerializer, request.data)["archived"]
        changed = conversation_archive_all(owner=request.user, archived=archived)
        return Response(self.OutputSerializer({"changed": changed}).data)


class MessageListApi(APIView):
    pagination_class = BeforeIdPagination

    @extend_schema(
        operation_id="conversations_messages_list",
        summary="Timeline page of the active path: newest first by page, each page oldest → newest",
        responses=MessageOutputSerializer(many=True),
    )
    def get(self, request: Request, pk: int) -> Response:
        conversation = conversation_get(owner=request.user, pk=pk)
        paginator = self.pagination_class()
        page = paginator.paginate(
            fetch=lambda before_id, limit: message_list(conversation=conversation, before_id=before_id, limit=limit),
            request=request,
        )
        if conversation.has_images:  # a page's images in one query; none in a chat that never held one
            prefetch_related_objects(page, images_prefetch())
        context = {"conversation": conversation, "siblings": message_sibling_places(messages=page)}
        data = MessageOutputSerializer(page, many=True, context=context).data
        return paginator.get_paginated_response(data)


class MessagePinApi(APIView):
    class InputSerializer(serializers.Serializer):
        pinned = serializers.BooleanField()

    @extend_schema(request=InputSerializer, responses=MessageOutputSerializer)
    def post(self, request: Request, pk: int) -> Response:
        message = message_get(owner=request.user, pk=pk)
        message = message_pin_set(message=message, pinned=validated(self.InputSerializer, request.data)["pinned"])
        return Response(MessageOutputSerializer(message).data)


@extend_schema(
    operation_id="messages_fork",
    summary="Branch in new chat: a new chat holding the shown path up to this message",
    description="Up to 5,000 messages and 32 MB of images the new chat is written in the request (201). A longer "
                "path, or one of more images, is written by the import worker: 202 and its job, to follow at "
                "GET /api/imports/<id>/ (its `conversations` once done, else its `error` or `skipped`).",
    request=None,
    responses={
        201: ConversationOutputSerializer,
        202: ForkJobOutputSerializer,
        400: OpenApiResponse(description="A message that cannot be branched from, or a path past the import limit."),
        429: OpenApiResponse(description="A longer path while you already have 3 imports waiting or running."),
    },
)
@api_view(["POST"])
def message_fork_api(request: Request, pk: int) -> Response:
    try:
        fork = conversation_fork(owner=request.user, message_id=pk)
    except ImportBacklogFull as exc:
        return Response({"detail": exc.messages[0]}, status=status.HTTP_429_TOO_MANY_REQUESTS)
    if isinstance(fork, ForkQueued):
        job = import_job_get(owner=request.user, pk=fork.job.pk)  # as stored, without the payload
        data = ForkJobOutputSerializer(job, context={"messages": fork.messages}).data
        return Response(data, status=status.HTTP_202_ACCEPTED, headers={"Location": f"/api/imports/{job.pk}/"})
    return Response(ConversationOutputSerializer(fork).data, status=status.HTTP_201_CREATED)


class ConversationContextApi(APIView):
    class OutputSerializer(serializers.Serializer):
        tokens = serializers.IntegerField(help_text="Tokens the next request will send.")
        budget = serializers.IntegerField(help_text="Context window minus the reserved output.")
        ratio = serializers.FloatField(allow_null=True)
        history_tokens = serializers.IntegerField(help_text="What the whole live history would take.")
        history_ratio = serializers.FloatField(allow_null=True)
        window_start_id = serializers.IntegerField(allow_null=True)
        strategy = serializers.CharField()
        estimated = serializers.BooleanField(help_text="Counts are estimates (model unknown to tiktoken).")
        summary_through_id = serializers.IntegerField(
            allow_null=True, help_text="Last message the summary sent covers (null: no summary sent)."
        )
        summary_quota_reached = serializers.BooleanField(
            help_text="Today's automatic summaries are used up: the chat truncates instead."
        )
        prompt_shortened = serializers.BooleanField(
            help_text="The system prompt or custom instructions do not fit the budget beside the newest "
            "message: they are sent shortened (head and tail)."
        )
        shortened_message_ids = serializers.ListField(
            child=serializers.IntegerField(),
            help_text="Messages too long for the budget beside the rest: sent shortened (head and tail).",
        )

    @extend_schema(responses=OutputSerializer, summary="Context gauge for the next request")
    def get(self, request: Request, pk: int) -> Response:
        conversation = conversation_get(owner=request.user, pk=pk)
        gauge = context_gauge(conversation=conversation, user=request.user)
        return Response(self.OutputSerializer(gauge).data)


class OptimizationRecordListApi(PaginatedApi):
    @extend_schema(
        operation_id="conversations_records_list",
        summary="What the optimizer decided for each request, in turn order",
        responses=OptimizationRecordOutputSerializer(many=True),
    )
    def get(self, request: Request, pk: int) -> Response:
        conversation = conversation_get(owner=request.user, pk=pk)
        return self.paginated_response(
            request,
            queryset=optimization_record_list(conversation=conversation),
            serializer_class=OptimizationRecordOutputSerializer,
        )


class UserSettingsApi(APIView):
    class InputSerializer(ChangesSomething):
        preference = serializers.ChoiceField(choices=Preference.choices, required=False)
        auto_optimize = serializers.BooleanField(required=False)
        confirm_compaction = serializers.BooleanField(required=False)
        generate_titles = serializers.BooleanField(
            required=False, help_text="Name a new chat with the model after its first reply (title_services)."
        )
        summary_config = serializers.IntegerField(
            required=False, allow_null=True, help_text="Config used for summaries; null = the conversation's own."
        )
        custom_instructions = serializers.CharField(required=False, allow_blank=True, help_text=_PROMPT_HELP)

    @extend_schema(responses=UserSettingsOutputSerializer)
    def get(self, request: Request) -> Response:
        return Response(UserSettingsOutputSerializer(user_settings_get(user=request.user)).data)

    @extend_schema(request=InputSerializer, responses=UserSettingsOutputSerializer)
    def patch(self, request: Request) -> Response:
        changes = dict(validated(self.InputSerializer, request.data))
        if "summary_config" in changes:
            changes["summary_config"] = _owned_config_or_field_error(
                user=request.user, pk=changes["summary_config"], field="summary_config"
            )
        user_settings = user_settings_update(user=request.user, **changes)
        return Response(UserSettingsOutputSerializer(user_settings).data)
