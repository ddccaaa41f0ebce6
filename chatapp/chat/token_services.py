"""Writes of API tokens (token_models): created with a key shown once, revoked one by one, or all at a
password change (services.user_password_change).

Errors are django.core.exceptions.ValidationError keyed by field name, as in services.py.
"""

from __future__ import annotations

import secrets
from typing import NamedTuple

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from .textsafe import text_problem
from .token_models import HINT_CHARS, ApiToken, key_digest
from .token_selectors import api_token_expired

# A script that asks /api/auth/token/ for a token on every run would otherwise pile them up: past this
# many, creating one revokes the oldest (Settings says so before it happens).
MAX_TOKENS_PER_USER = 20
NAME_MAX_CHARS = 80


class IssuedToken(NamedTuple):
    token: ApiToken
    key: str  # shown to the user once; only its digest is stored


def _password_unchanged_lock(*, user: User) -> None:
    """Lock `user`'s row, refusing if their password changed since `user` was read (the caller signed
    them in with the password `user` holds). Inside the caller's transaction.

    A password change revokes the tokens (services.user_password_change) by updating this row first: a
    change that committed while the caller was still checking the old password (hashing it takes a good
    part of a second) is seen here, or the token issued would outlive the password it was issued
    under; a change that starts now waits for the caller's commit, then revokes what it issued."""
    current = User.objects.select_for_update().filter(pk=user.pk).values_list("password", flat=True).first()
    if current != user.password:
        raise ValidationError({"password": ["The password was changed meanwhile: sign in with the new one."]})


def api_token_create(*, user: User, name: str, made_in: str) -> IssuedToken:
    """A new token for `user`, named `name` (white space folded, cut to NAME_MAX_CHARS; blank: where it
    was made), its key returned once. The user's expired tokens are deleted. Past MAX_TOKENS_PER_USER
    live ones, the oldest goes: any token for one made in Settings (which asks first), only one made by
    an API sign-in for a sign-in, which is refused when there is none (a script signing in on every run
    must not revoke what the user made in Settings). Refused too if the password the caller checked has
    changed since (ValidationError on `password`), or the name is not storable text (on `name`)."""
    if made_in not in ApiToken.MadeIn.values:
        raise ValueError(f"made_in is one of {ApiToken.MadeIn.values}")
    if text_problem(name):
        raise ValidationError({"name": ["A name cannot hold a NUL character or an unpaired surrogate."]})
    name = " ".join(name.split())[:NAME_MAX_CHARS] or ApiToken.MadeIn(made_in).label
    key = secrets.token_hex(20)  # 160 random bits, the 40 hex characters DRF's keys had
    with transaction.atomic():
        _password_unchanged_lock(user=user)
        held = list(ApiToken.objects.filter(user=user).order_by("-created_at", "-id"))
        gone = [t for t in held if api_token_expired(token=t)]
        live = [t for t in held if t not in gone]
        if len(live) >= MAX_TOKENS_PER_USER:
            replaceable = [t for t in live if made_in == ApiToken.MadeIn.SETTINGS or t.made_in == made_in]
            if not replaceable:
                raise ValidationError(
                    f"You hold {MAX_TOKENS_PER_USER} API tokens, the most there can be, all made in Settings: "
                    "revoke one there first.", code="conflict",
                )
            gone += replaceable[-(len(live) - MAX_TOKENS_PER_USER + 1):]
        if gone:
            ApiToken.objects.filter(pk__in=[t.pk for t in gone]).delete()
        token = ApiToken.objects.create(user=user, digest=key_digest(key), hint=key[:HINT_CHARS], name=name,
                                        made_in=made_in)
    return IssuedToken(token=token, key=key)


def api_token_revoke(*, user: User, token_id: int) -> ApiToken | None:
    """Revoke one of `user`'s tokens; the token revoked, or None if `user` has no such token."""
    token = ApiToken.objects.filter(user=user, pk=token_id).first()
    if token is not None:
        ApiToken.objects.filter(pk=token.pk).delete()
    return token


def api_tokens_revoke_all(*, user: User) -> int:
    """Revoke every token of `user`; how many there were."""
    deleted, _ = ApiToken.objects.filter(user=user).delete()
    return deleted

