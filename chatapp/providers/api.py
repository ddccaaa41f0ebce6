"""JSON API for model configs: list, create, edit (a changed endpoint clears the stored key), make
default, test the connection (throttled), and the registry's facts about a model name. Thin, as
views.py.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from chatapp.chat.api.inputs import ChangesSomething, validated
from chatapp.chat.dbconn import db_connection_release
from chatapp.providers.llm import llm_target_for, llm_test_connection
from chatapp.providers.models import LLMConfig
from chatapp.providers.netguard import base_url_unresolved
from chatapp.providers.ollama import ollama_window_note
from chatapp.providers.selectors import llm_config_get, llm_config_list, llm_config_output_warning
from chatapp.providers.services import (
    KEY_LEFT_BEHIND,
    llm_config_create,
    llm_config_delete,
    llm_config_key_left_behind,
    llm_config_make_default,
    llm_config_update,
    model_window_lookup,
)


class LLMConfigOutputSerializer(serializers.ModelSerializer):
    has_api_key = serializers.BooleanField(read_only=True)
    accepts_images = serializers.BooleanField(
        allow_null=True, read_only=True, help_text="As set; null: as the model registry says (see sees_images)."
    )
    sees_images = serializers.BooleanField(
        read_only=True, help_text="Whether the model is sent images: accepts_images, else the registry's word."
    )

    class Meta:
        model = LLMConfig
        # Never api_key_encrypted: not even the ciphertext leaves the server.
        fields = [
            "id",
            "name",
            "base_url",
            "model",
            "has_api_key",
            "api_key_last4",
            "context_window",
            "context_window_source",
            "max_output_tokens",
            "temperature",
            "is_default",
            "accepts_images",
            "sees_images",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class LLMConfigSavedOutputSerializer(LLMConfigOutputSerializer):
    """A config as a create or an edit answers it: with what the user should know of the save, when any.
    The views add `notice` to the output's data; named here so the schema says it may come."""

    # Not read_only: the schema counts a read-only field as always present.
    notice = serializers.CharField(
        required=False,
        help_text="Only when there is something to say: the stored key was cleared (the address moved to "
        "another server), or the address's host does not resolve from here.",
    )

    class Meta(LLMConfigOutputSerializer.Meta):
        fields = [*LLMConfigOutputSerializer.Meta.fields, "notice"]
        read_only_fields = LLMConfigOutputSerializer.Meta.fields


class LLMConfigInputSerializer(serializers.Serializer):
    """Shape only; the rules (window > output, URL safety, unique name) live in the services."""

    name = serializers.CharField(max_length=100)
    base_url = serializers.CharField(max_length=500)
    model = serializers.CharField(max_length=200)
    api_key = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        max_length=1000,
        style={"input_type": "password"},
        help_text="Write-only. Never returned: responses carry has_api_key and api_key_last4.",
    )
    context_window = serializers.IntegerField(
        min_value=1, required=False, allow_null=True, help_text="Leave empty to fill it from the model registry."
    )
    max_output_tokens = serializers.IntegerField(min_value=1, required=False)
    temperature = serializers.FloatField(min_value=0, max_value=2, required=False)
    is_default = serializers.BooleanField(required=False)
    accepts_images = serializers.BooleanField(
        required=False, allow_null=True,
        help_text="Send the model a message's images (else a \"[image: WxH]\" placeholder each). Null: as the model "
        "registry says (supports_vision), off for a model it does not know.",
    )


class LLMConfigListApi(APIView):
    # A subclass of its own so the schema names it after this view (see api/schema.py).
    class InputSerializer(LLMConfigInputSerializer):
        pass

    @extend_schema(responses=LLMConfigOutputSerializer(many=True))
    def get(self, request: Request) -> Response:
        configs = llm_config_list(owner=request.user)
        return Response(LLMConfigOutputSerializer(configs, many=True).data)

    @extend_schema(request=InputSerializer, responses={201: LLMConfigSavedOutputSerializer})
    def post(self, request: Request) -> Response:
        config = llm_config_create(owner=request.user, **validated(self.InputSerializer, request.data))
        data = LLMConfigOutputSerializer(config).data
        unresolved = base_url_unresolved(config.base_url)
        if unresolved:
            data["notice"] = unresolved
        return Response(data, status=status.HTTP_201_CREATED)


class LLMConfigDetailApi(APIView):
    class InputSerializer(ChangesSomething, LLMConfigInputSerializer):
        # The key is write-only, so an empty api_key means "unchanged"; removing it is explicit.
        clear_api_key = serializers.BooleanField(
            required=False, help_text="Remove the stored API key (an api_key sent with it is stored instead).")

    @extend_schema(responses=LLMConfigOutputSerializer)
    def get(self, request: Request, pk: int) -> Response:
        config = llm_config_get(owner=request.user, pk=pk)
        return Response(LLMConfigOutputSerializer(config).data)

    @extend_schema(request=InputSerializer(partial=True), responses=LLMConfigSavedOutputSerializer)
    def patch(self, request: Request, pk: int) -> Response:
        config = llm_config_get(owner=request.user, pk=pk)
        fields = validated(self.InputSerializer, request.data, partial=True)
        left_behind = llm_config_key_left_behind(config=config, fields=fields)
        config = llm_config_update(config=config, **fields)
        data = LLMConfigOutputSerializer(config).data
        notices = [KEY_LEFT_BEHIND] if left_behind else []
        notices += [text for text in [base_url_unresolved(config.base_url)] if text]
        if notices:
            data["notice"] = " ".join(notices)
        return Response(data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, pk: int) -> Response:
        config = llm_config_get(owner=request.user, pk=pk)
        llm_config_delete(config=config)
        return Response(status=status.HTTP_204_NO_CONTENT)


class LLMConfigMakeDefaultApi(APIView):
    @extend_schema(request=None, responses=LLMConfigOutputSerializer)
    def post(self, request: Request, pk: int) -> Response:
        config = llm_config_get(owner=request.user, pk=pk)
        config = llm_config_make_default(config=config)
        return Response(LLMConfigOutputSerializer(config).data)


class LLMConfigTestApi(APIView):
    # Each test is a request to an endpoint the user names: bounded per user (settings).
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "config_test"
    class OutputSerializer(serializers.Serializer):
        ok = serializers.BooleanField()
        message = serializers.CharField(help_text="The result in plain words (never contains the key).")

    @extend_schema(
        request=None,
        responses=OutputSerializer,
        summary="Test the connection: lists the endpoint's models or makes a one-token request",
    )
    def post(self, request: Request, pk: int) -> Response:
        config = llm_config_get(owner=request.user, pk=pk)
        target = llm_target_for(config=config)
        # The endpoint may take its whole timeout to answer: no pooled connection waits with it.
        db_connection_release()
        ok, message = llm_test_connection(target=target)
        # The test asks for one token, so it passes a max output the model cannot write: said here.
        warning = llm_config_output_warning(config=config)
        if warning:
            message = f"{message} {warning}"
        return Response(self.OutputSerializer({"ok": ok, "message": message}).data)


class ModelInfoApi(APIView):
    class FilterSerializer(serializers.Serializer):
        model = serializers.CharField(max_length=200)
        # The endpoint's host may say which provider's entry of that name is meant (api.mistral.ai).
        base_url = serializers.CharField(max_length=500, required=False, allow_blank=True)

    class OutputSerializer(serializers.Serializer):
        model = serializers.CharField()
        context_window = serializers.IntegerField()
        # Same name as on a config, so clients (and the schema) see one field and one enum.
        context_window_source = serializers.ChoiceField(choices=LLMConfig.WindowSource.choices)
        context_window_source_label = serializers.CharField()
        context_window_note = serializers.CharField(
            allow_blank=True, help_text="Where the endpoint's window comes from, when it is not the model's (Ollama)")

    @extend_schema(
        parameters=[OpenApiParameter("model", str, required=True, description="Model name, e.g. gpt-4o-mini"),
                    OpenApiParameter("base_url", str, description="The endpoint's base URL, e.g. https://api.mistral.ai/v1")],
        responses=OutputSerializer,
        summary="Context window for a model name, and where the value comes from",
    )
    def get(self, request: Request) -> Response:
        query = validated(self.FilterSerializer, request.query_params)
        model = query["model"]
        window, source = model_window_lookup(model=model, base_url=query.get("base_url", ""))
        data = {
            "model": model,
            "context_window": window,
            "context_window_source": source,
            "context_window_source_label": LLMConfig.WindowSource(source).label,
            "context_window_note": ollama_window_note(query.get("base_url", "")),
        }
        return Response(self.OutputSerializer(data).data)
