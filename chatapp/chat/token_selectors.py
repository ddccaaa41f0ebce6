"""Reads of API tokens (token_models). A key is looked up by its digest: the key itself is never stored."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone

from .rowsql import CompiledQuery
from .token_models import ApiToken, key_digest


def _token_query(_shape: None, *, digest: str) -> QuerySet[ApiToken]:
    return ApiToken.objects.select_related("user").filter(digest=digest)


# Every API request authenticates: compiled once (rowsql.CompiledQuery).
_TOKEN_WITH_USER = CompiledQuery(_token_query)


def api_token_with_user(*, key: str) -> ApiToken | None:
    """The API token whose key is `key`, with its user loaded, or None."""
    found = _TOKEN_WITH_USER.instances(None, digest=key_digest(key))
    return found[0] if found else None


def api_token_list(*, user: User) -> list[ApiToken]:
    """The user's tokens, newest first, expired ones included (until the next one is created)."""
    return list(ApiToken.objects.filter(user=user).order_by("-created_at", "-id"))


def api_token_expires_at(*, token: ApiToken) -> datetime:
    """API tokens end settings.API_TOKEN_DAYS after they were created."""
    return token.created_at + timedelta(days=settings.API_TOKEN_DAYS)


def api_token_expired(*, token: ApiToken) -> bool:
    return api_token_expires_at(token=token) <= timezone.now()
