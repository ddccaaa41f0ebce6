from django.core.exceptions import ValidationError
from django.urls import include, path
from drf_spectacular.utils import OpenApiResponse, extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework import serializers
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import Throttled
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle

from chatapp.chat.api import (
    account_views,
    export_views,
    folder_views,
    image_views,
    search_views,
    stream_views,
    summary_views,
    views,
)
from chatapp.chat.api import import_views as import_api
from chatapp.chat.api import prompt_views as prompt_api
from chatapp.chat.api import share_views as share_api
from chatapp.chat.api.parsers import PARSERS
from chatapp.chat.login_throttle import login_attempt_start, login_failures_clear
from chatapp.chat.token_models import ApiToken
from chatapp.chat.token_selectors import api_token_expires_at
from chatapp.chat.token_services import api_token_create


# DRF's token view names its own parsers: the bounded ones instead (its body is unauthenticated), and
# password guesses are throttled per client address (settings: "auth_token"). It checks the same
# passwords as the login page, so it keeps that page's failed sign-in limits too (login_throttle): the
# per-username one above all, which guesses spread over many addresses would otherwise go around here.
class TokenApi(ObtainAuthToken):
    # Credentials are in the body: an expired token in the header must not block its own renewal.
    authentication_classes = ()
    parser_classes = PARSERS
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "auth_token"

    class InputSerializer(AuthTokenSerializer):
        name = serializers.CharField(
            required=False, allow_blank=True, max_length=80, write_only=True,
            help_text="What the token is for (Settings lists it by this name). Default: \"API sign-in\".",
        )

    # The answer's shape, for the schema: drf-spectacular documents DRF's input serializer as the answer
    # too ({token}), without the expiry a client needs to renew in time.
    class OutputSerializer(serializers.Serializer):
        token = serializers.CharField(help_text="The key, shown this once: only a digest of it is stored.")
        expires_at = serializers.DateTimeField(help_text="The token stops working then (API_TOKEN_DAYS).")

    serializer_class = InputSerializer

    @extend_schema(
        request=InputSerializer,
        responses={200: OutputSerializer, 409: OpenApiResponse(description="All 20 tokens were made in Settings.")},
        summary="A new API token for a username and password: each call makes one. Past 20, the oldest made "
                "this way is revoked; 409 when all 20 were made in Settings.",
    )
    def post(self, request, *args, **kwargs):  # type: ignore[no-untyped-def]
        data = request.data
        username = str(data.get("username") or "") if hasattr(data, "get") else ""
        # Counted as a failure from here on (a ValidationError below keeps it so): see login_attempt_start.
        wait = login_attempt_start(request=request, username=username)
        if wait:
            # Refused whatever the password, as the login page does past the limits.
            raise Throttled(wait=wait, detail="Too many failed sign-ins. Try again later.")
        serializer = self.get_serializer(data=data)
        serializer.is_valid(raise_exception=True)
        login_failures_clear(request=request, username=username)
        try:
            issued = api_token_create(user=serializer.validated_data["user"],
                                      name=serializer.validated_data.get("name", ""), made_in=ApiToken.MadeIn.API)
        except ValidationError as exc:
            if getattr(exc, "code", None) != "conflict":
                raise
            return Response({"detail": exc.messages[0]}, status=409)
        return Response({"token": issued.key, "expires_at": api_token_expires_at(token=issued.token).isoformat()})


obtain_auth_token = TokenApi.as_view()

urlpatterns = [
    path("auth/token/", obtain_auth_token, name="api-token"),
    path("conversations/", views.ConversationListApi.as_view(), name="api-conversations"),
    path("conversations/archive/", views.ConversationArchiveAllApi.as_view(), name="api-archive-all"),
    path("conversations/export/", export_views.AccountExportApi.as_view(), name="api-export-all"),
    path("conversations/<int:pk>/", views.ConversationDetailApi.as_view(), name="api-conversation"),
    # GET: timeline (views.MessageListApi); POST: send, streamed (APP-B's stream_views).
    path("conversations/<int:pk>/messages/", stream_views.ConversationMessagesApi.as_view(), name="api-messages"),
    path("conversations/<int:pk>/export/", export_views.ConversationExportApi.as_view(), name="api-export"),
    path("conversations/<int:pk>/context/", views.ConversationContextApi.as_view(), name="api-context"),
    path("conversations/<int:pk>/records/", views.OptimizationRecordListApi.as_view(), name="api-records"),
    path("conversations/<int:pk>/compact/", summary_views.ConversationCompactApi.as_view(), name="api-compact"),
    path("conversations/<int:pk>/summary-jobs/", summary_views.SummaryJobListApi.as_view(), name="api-summary-jobs"),
    path(
        "conversations/<int:pk>/summary-jobs/<int:job_pk>/dismiss/",
        summary_views.SummaryJobDismissApi.as_view(),
        name="api-summary-job-dismiss",
    ),
    path("conversations/<int:pk>/share/", share_api.ConversationShareApi.as_view(), name="api-conversation-share"),
    path("shares/", share_api.ShareListApi.as_view(), name="api-shares"),
    path("shares/<int:pk>/", share_api.ShareDetailApi.as_view(), name="api-share"),
    path("summaries/<int:pk>/", summary_views.SummaryDetailApi.as_view(), name="api-summary"),
    path("messages/<int:pk>/pin/", views.MessagePinApi.as_view(), name="api-message-pin"),
    path("messages/<int:pk>/fork/", views.message_fork_api, name="api-message-fork"),
    path("messages/<int:pk>/stop/", stream_views.message_stop_api, name="api-message-stop"),
    path("messages/<int:pk>/regenerate/", stream_views.message_regenerate_api, name="api-message-regenerate"),
    path("messages/<int:pk>/retry/", stream_views.message_retry_api, name="api-message-retry"),
    path("messages/<int:pk>/edit/", stream_views.message_edit_api, name="api-message-edit"),
    path("messages/<int:pk>/branch/", stream_views.message_branch_api, name="api-message-branch"),
    path("images/<int:pk>/", image_views.image_api, name="api-image"),
    path("settings/", views.UserSettingsApi.as_view(), name="api-settings"),
    path("account/", account_views.AccountApi.as_view(), name="api-account"),
    path("search/", search_views.SearchApi.as_view(), name="api-search"),
    path("folders/", folder_views.folder_list_api, name="api-folders"),
    path("folders/<int:pk>/", folder_views.folder_detail_api, name="api-folder"),
    path("prompts/", prompt_api.PromptListApi.as_view(), name="api-prompts"),
    path("prompts/<int:pk>/", prompt_api.PromptDetailApi.as_view(), name="api-prompt"),
    path("configs/", include("chatapp.providers.api_urls")),
    path("dashboard/", include("chatapp.dashboard.api_urls")),
    path("imports/", import_api.ImportJobListApi.as_view(), name="api-imports"),
    path("imports/<int:pk>/", import_api.ImportJobDetailApi.as_view(), name="api-import"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]
