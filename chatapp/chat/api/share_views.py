"""Read-only share links (issue 13): `POST /api/conversations/<id>/share/` makes a link of the
conversation as it is now, `GET /api/shares/` lists the live ones, `DELETE /api/shares/<id>/` revokes
one. Thin views over share_services / share_selectors; every lookup is scoped to the requesting user,
so another user's conversation or link answers 404 like a missing one.
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chatapp.chat.api.pagination import KeysetPagination, PaginatedApi
from chatapp.chat.models import ConversationShare
from chatapp.chat.selectors import conversation_get
from chatapp.chat.share_selectors import share_get, share_list
from chatapp.chat.share_services import conversation_share_create, conversation_share_revoke


class ShareOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField(help_text="The conversation's title when it was shared.")
    conversation_id = serializers.IntegerField()
    conversation_archived = serializers.SerializerMethodField(
        help_text="The chat is archived (out of the sidebar); its link still opens."
    )
    created_at = serializers.DateTimeField()

    def get_conversation_archived(self, share: ConversationShare) -> bool:
        return share.conversation.archived_at is not None


class ShareCreatedSerializer(ShareOutputSerializer):
    url = serializers.SerializerMethodField(
        help_text="The public page (/s/<token>/): anyone with it can read the snapshot, without an account. "
        "Shown this once: only a digest of its token is stored, so no list shows it again."
    )

    def get_url(self, share: ConversationShare) -> str:
        path = reverse("share-page", args=[self.context["token"]])
        return self.context["request"].build_absolute_uri(path)


class ConversationShareApi(APIView):
    @extend_schema(
        operation_id="conversation_share_create",
        summary="Share a read-only snapshot of the conversation by link",
        description=(
            "The link shows the conversation's user messages and replies (complete or stopped; not "
            "regenerated-away, failed or summary messages) up to its newest message now: what is said "
            "later is not shown. Nothing of the owner (username, models, keys, settings) is on the page, "
            "which search engines are asked not to index. The link is in this answer only (a digest of its "
            "token is stored): each call makes a new one."
        ),
        request=None,
        responses={201: ShareCreatedSerializer, 404: OpenApiResponse(description="Not your conversation.")},
    )
    def post(self, request: Request, pk: int) -> Response:
        conversation = conversation_get(owner=request.user, pk=pk)
        issued = conversation_share_create(owner=request.user, conversation=conversation)
        context = {"request": request, "token": issued.token}
        return Response(ShareCreatedSerializer(issued.share, context=context).data, status=status.HTTP_201_CREATED)


class SharePagination(KeysetPagination):
    # share_list's order, newest first; a link revoked while a client reads on shifts no page (share_owner_live_id_idx).
    key_field = "created_at"


class ShareListApi(PaginatedApi):
    pagination_class = SharePagination

    @extend_schema(
        operation_id="shares_list",
        summary="Your live share links, newest first",
        responses=ShareOutputSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        # Without their links: only the answer that made one holds it.
        return self.paginated_response(
            request, queryset=share_list(owner=request.user), serializer_class=ShareOutputSerializer
        )


class ShareDetailApi(APIView):
    @extend_schema(
        operation_id="share_revoke",
        summary="Revoke a share link: its page answers 404 from now on",
        request=None,
        responses={
            204: OpenApiResponse(description="Revoked."),
            404: OpenApiResponse(description="Not your link, or already revoked."),
        },
    )
    def delete(self, request: Request, pk: int) -> Response:
        share = share_get(owner=request.user, pk=pk)
        conversation_share_revoke(owner=request.user, share=share)
        return Response(status=status.HTTP_204_NO_CONTENT)
