"""Saved prompts over the API (`/api/prompts/`): what Settings → Prompts does, and what the message box
reads for its "/" menu. Thin: the services check and write (prompt_services)."""

from __future__ import annotations

import hashlib

from django.http import HttpResponseBase
from django.utils.cache import get_conditional_response, patch_cache_control
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chatapp.chat.api.inputs import validated
from chatapp.chat.api.pagination import PaginatedApi
from chatapp.chat.prompt_models import SavedPrompt
from chatapp.chat.prompt_selectors import prompt_get, prompt_list, prompt_list_version
from chatapp.chat.prompt_services import prompt_create, prompt_delete, prompt_update


class PromptOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = SavedPrompt
        fields = ["id", "command", "title", "content", "created_at", "updated_at"]
        read_only_fields = fields
        extra_kwargs = {"command": {"help_text": "Typed after “/” in the message box to insert the content."}}


class PromptInputSerializer(serializers.Serializer):
    # Lengths and forms, blanks too, are the service's checks (its messages name the field): all fields'
    # faults said at once, where a blank refused here hid the service's word on the others.
    command = serializers.CharField(trim_whitespace=True, allow_blank=True,
                                    help_text="1 to 40 of a-z, 0-9, “-”, “_”; not “compact”.")
    title = serializers.CharField(required=False, allow_blank=True,
                                  help_text="Shown in the menu; the command if blank.")
    content = serializers.CharField(trim_whitespace=False, allow_blank=True,
                                    help_text="The text inserted into the message box.")


class PromptListApi(PaginatedApi):
    @extend_schema(
        operation_id="prompts_list",
        description="Answers with an `ETag`: asked again with `If-None-Match`, an unchanged list is a 304 "
                    "with no body (the message box's \"/\" menu reads the list at every opening).",
        responses=PromptOutputSerializer(many=True),
    )
    def get(self, request: Request) -> HttpResponseBase:
        version = f"{prompt_list_version(owner=request.user)}?{request.GET.urlencode()}"
        etag = f'"{hashlib.sha256(version.encode()).hexdigest()[:32]}"'
        response: HttpResponseBase | None = get_conditional_response(request, etag=etag)
        if response is None:
            response = self.paginated_response(request, queryset=prompt_list(owner=request.user),
                                               serializer_class=PromptOutputSerializer)
        response["ETag"] = etag
        # Kept by the browser for this user only, and always asked again (a prompt edited in another tab).
        patch_cache_control(response, private=True, no_cache=True)
        return response

    @extend_schema(request=PromptInputSerializer, responses={201: PromptOutputSerializer})
    def post(self, request: Request) -> Response:
        data = validated(PromptInputSerializer, request.data)
        prompt = prompt_create(owner=request.user, command=data["command"], title=data.get("title", ""),
                               content=data["content"])
        return Response(PromptOutputSerializer(prompt).data, status=status.HTTP_201_CREATED)


class PromptDetailApi(APIView):
    class InputSerializer(PromptInputSerializer):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            for field in self.fields.values():
                field.required = False

        def validate(self, attrs: dict) -> dict:
            if not attrs:
                raise serializers.ValidationError("Send a command, a title or a content.")
            return attrs

    @extend_schema(responses=PromptOutputSerializer)
    def get(self, request: Request, pk: int) -> Response:
        return Response(PromptOutputSerializer(prompt_get(owner=request.user, pk=pk)).data)

    @extend_schema(request=InputSerializer, responses=PromptOutputSerializer)
    def patch(self, request: Request, pk: int) -> Response:
        prompt = prompt_get(owner=request.user, pk=pk)
        data = validated(self.InputSerializer, request.data)
        prompt = prompt_update(prompt=prompt, **data)
        return Response(PromptOutputSerializer(prompt).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        prompt_delete(prompt=prompt_get(owner=request.user, pk=pk))
        return Response(status=status.HTTP_204_NO_CONTENT)
