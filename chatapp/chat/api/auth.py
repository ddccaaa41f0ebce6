"""API tokens that expire (settings.API_TOKEN_DAYS) and that their owner can list and revoke.

DRF's Token (one per user) is kept as the store; what it lacked is an end: a token leaked from a
script or a shell history worked forever. An expired token is refused with a message saying how to
get a new one; `/api/auth/token/` replaces an expired token instead of handing it back.
"""

from __future__ import annotations

from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from chatapp.chat.selectors import api_token_expired


class ExpiringTokenAuthentication(TokenAuthentication):
    def authenticate_credentials(self, key: str):  # type: ignore[no-untyped-def]
        user, token = super().authenticate_credentials(key)
        if api_token_expired(token=token):
            raise AuthenticationFailed(
                "This API token has expired. Create a new one in Settings, or POST your username and "
                "password to /api/auth/token/."
            )
        return user, token
