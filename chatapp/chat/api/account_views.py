"""The account itself: `DELETE /api/account/` deletes it with everything in it, as Settings → Account →
Delete account… does, asked for the password again (under the failed sign-in limits, as
/api/auth/token/). Thin: the deletion is account_services.account_delete (the account off at once,
its data deleted by a worker after)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import Throttled
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chatapp.chat.account_services import LAST_ADMIN, account_delete
from chatapp.chat.api.inputs import validated
from chatapp.chat.login_throttle import TooManyFailures, password_confirm


class AccountApi(APIView):
    class InputSerializer(serializers.Serializer):
        password = serializers.CharField(
            trim_whitespace=False, write_only=True, help_text="The account's password, asked again."
        )

    @extend_schema(
        operation_id="account_delete",
        summary="Delete your account and everything in it, for good",
        description=(
            "Chats with their messages, model configs and their keys, prompts, imports, API tokens (this "
            "one too), share links and dashboard records. The account is off at once (no sign-in, no "
            "token); a background worker then deletes its data. Wrong passwords count as failed sign-ins."
        ),
        request=InputSerializer,
        responses={
            204: OpenApiResponse(description="Deleted."),
            400: OpenApiResponse(description="No password, or not the account's."),
            409: OpenApiResponse(description="The account is the instance's last active administrator."),
            429: OpenApiResponse(description="Too many failed sign-ins: see retry_after."),
        },
    )
    def delete(self, request: Request) -> Response:
        password = validated(self.InputSerializer, request.data)["password"]
        try:
            password_confirm(request=request, user=request.user, password=password)
        except TooManyFailures as exc:
            raise Throttled(wait=exc.wait, detail="Too many failed sign-ins. Try again later.") from None
        except ValidationError as exc:  # a 400 naming the field (api.errors), its code kept
            raise ValidationError({"password": exc.error_list}) from None
        try:
            account_delete(user=request.user)
        except ValidationError as exc:
            if getattr(exc, "code", None) != LAST_ADMIN:
                raise
            return Response({"detail": exc.messages[0]}, status=status.HTTP_409_CONFLICT)
        return Response(status=status.HTTP_204_NO_CONTENT)
