"""API tokens that expire (settings.API_TOKEN_DAYS) and that their owner can list and revoke.

DRF's `Authorization: Token <key>` header (or `Bearer <key>`), over our own store (token_models:
digests, several tokens a user). A token leaked from a script or a shell history would otherwise work
forever: an expired token is refused with a message saying how to get a new one.
"""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _
from rest_framework.authentication import TokenAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from chatapp.chat.token_selectors import api_token_expired, api_token_with_user


class ExpiringTokenAuthentication(TokenAuthentication):
    def authenticate(self, request):  # type: ignore[no-untyped-def]
        # `Bearer <key>` as well: what OpenAI-style clients and most HTTP tools send. Read as no credentials,
        # it was answered "credentials were not provided", the key right there. One authenticator a request.
        scheme = get_authorization_header(request).split()[:1]
        if scheme and scheme[0].lower() == b"bearer":
            self.keyword = "Bearer"
        return super().authenticate(request)

    def authenticate_credentials(self, key: str):  # type: ignore[no-untyped-def]
        # TokenAuthentication's checks and words, over a lookup compiled once (every API request runs it).
        token = api_token_with_user(key=key)
        if token is None:
            raise AuthenticationFailed(_("Invalid token."))
        user = token.user
        if not user.is_active:
            raise AuthenticationFailed(_("User inactive or deleted."))
        if api_token_expired(token=token):
            raise AuthenticationFailed(
                "This API token has expired. Create a new one in Settings, or POST your username and "
                "password to /api/auth/token/."
            )
        return user, token
