"""Sign-in by username whatever its case.

Django's sign-up form refuses a username that differs from an existing one only by case, so "Ada" names
the account "ada" for every new user; Django's ModelBackend matched it exactly, and told "Ada" that the
password was wrong. An exact match still comes first: accounts that differ only by case (made before
that rule, or by an admin) each keep their own name, and a name in a third case signs in neither. The
per-username sign-in limit already counts names case-blind (login_throttle).

Django's ModelBackend stays listed after it (settings.AUTHENTICATION_BACKENDS): a session records the
backend that signed it in, and one signed in by ModelBackend (before this backend, or by sign-up) is
valid only while that backend is listed. This one ends a failed sign-in itself (PermissionDenied), so
ModelBackend never hashes the password a second time.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest


def _user_named(username: str) -> AbstractBaseUser | None:
    users = get_user_model()._default_manager
    field = get_user_model().USERNAME_FIELD
    exact = users.filter(**{field: username}).first()
    if exact is not None:
        return exact
    found = list(users.filter(**{f"{field}__iexact": username})[:2])
    return found[0] if len(found) == 1 else None


class UsernameAnyCaseBackend(ModelBackend):
    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> AbstractBaseUser | None:
        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if username is None or password is None:
            return None
        user = _user_named(username)
        if user is None:
            # as ModelBackend: hash the password anyway, so a missing name takes as long as a wrong password
            get_user_model()().set_password(password)
            raise PermissionDenied
        if user.check_password(password) and self.user_can_authenticate(user):
            return user
        raise PermissionDenied
