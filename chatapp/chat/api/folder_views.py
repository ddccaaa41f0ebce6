"""Chat folders over the API (`/api/folders/`): list, make, rename and delete; a chat is put in one by
`PATCH /api/conversations/<id>/ {folder}` (views.ConversationDetailApi), as its other marks are. Thin
function views: the services check and write (folder_services), another user's folder is a 404."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from chatapp.chat.api.inputs import validated
from chatapp.chat.folder_models import Folder
from chatapp.chat.folder_selectors import folder_get, folder_list
from chatapp.chat.folder_services import folder_create, folder_delete, folder_rename


class FolderOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = Folder
        fields = ["id", "name", "created_at"]
        read_only_fields = fields


class FolderInputSerializer(serializers.Serializer):
    # Blank and length are the service's checks, so its words (and codes) answer them.
    name = serializers.CharField(
        allow_blank=True, help_text="1 to 80 characters, unique among your folders whatever the case."
    )


@extend_schema(
    methods=["GET"],
    operation_id="folders_list",
    responses=FolderOutputSerializer(many=True),
    description="Your folders by name, whole (at most 100): not paged.",
)
@extend_schema(
    methods=["POST"],
    operation_id="folders_create",
    request=FolderInputSerializer,
    responses={201: FolderOutputSerializer},
)
@api_view(["GET", "POST"])
def folder_list_api(request: Request) -> Response:
    if request.method == "GET":
        return Response(FolderOutputSerializer(folder_list(owner=request.user), many=True).data)
    folder = folder_create(owner=request.user, name=validated(FolderInputSerializer, request.data)["name"])
    return Response(FolderOutputSerializer(folder).data, status=status.HTTP_201_CREATED)


@extend_schema(
    methods=["PATCH"], operation_id="folders_rename", request=FolderInputSerializer, responses=FolderOutputSerializer
)
@extend_schema(
    methods=["DELETE"],
    operation_id="folders_delete",
    responses={204: None},
    description="Deletes the folder, never its chats: they are back in the main list (`folder` null).",
)
@api_view(["PATCH", "DELETE"])
def folder_detail_api(request: Request, pk: int) -> Response:
    folder = folder_get(owner=request.user, pk=pk)
    if request.method == "DELETE":
        folder_delete(folder=folder)
        return Response(status=status.HTTP_204_NO_CONTENT)
    folder = folder_rename(folder=folder, name=validated(FolderInputSerializer, request.data)["name"])
    return Response(FolderOutputSerializer(folder).data)
