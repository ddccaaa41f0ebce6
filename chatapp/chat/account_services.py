"""Writes of a whole account: a user deleting their own (Settings → Account, DELETE /api/account/).

An admin's delete of a user (its page, or Delete selected users) is the same deletion (admin.py calls
account_delete). Errors are Django's ValidationError, as in services.py.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from chatapp.chat.account_models import AccountDeletion
from chatapp.chat.account_purge import account_purge_enqueue
from chatapp.chat.token_models import ApiToken

# The code of the refusal to delete the last active administrator: the API answers it with a 409.
LAST_ADMIN = "last_admin"


def account_delete(*, user: User) -> None:
    """Delete `user` and everything of theirs, for good: the caller has asked for the password again
    (login_throttle.password_confirm).

    The request only turns the account off; a worker deletes its data (account_purge, in steps: one
    collector delete held the request 26 s for 200,000 messages on SQLite and loaded every row into
    the web process, +340 MiB). Off at once: no sign-in (is_active, and no usable password, so an admin
    ticking *Active* again cannot bring back a half-deleted account with its old password), its API
    tokens deleted, and its other sessions signed out at their next request (Django's auth checks the
    session's password hash, and a user who is not active). Its share links answer 404 and the jobs
    queued for it call no model and write nothing, as for any account turned off; once the worker is
    done they find nothing and skip. Deleting an account whose deletion has started again is harmless.
    """
    with transaction.atomic():
        # The row first, locked: an import or a token made for the account meanwhile waits, then finds
        # the account off, instead of being made for it after this.
        locked = User.objects.select_for_update().filter(pk=user.pk).first()
        if locked is None:
            return
        if locked.is_superuser and locked.is_active:
            _last_admin_refuse(user_id=locked.pk)
        locked.is_active = False
        locked.set_unusable_password()
        locked.save(update_fields=["is_active", "password"])
        ApiToken.objects.filter(user_id=locked.pk).delete()
        AccountDeletion.objects.get_or_create(user_id=locked.pk, defaults={"touched_at": timezone.now()})
        user_id = locked.pk
        transaction.on_commit(lambda: account_purge_enqueue(user_id=user_id))


def _last_admin_refuse(*, user_id: int) -> None:
    """Refuse to turn off the last active administrator: no one could then administer the instance (the
    admin site, other accounts). The other administrators' rows are locked (on PostgreSQL; SQLite runs
    one write at a time), so two of the last two deleting at once cannot both go."""
    others = User.objects.select_for_update().filter(is_superuser=True, is_active=True).exclude(pk=user_id)
    if not list(others.values_list("pk", flat=True)):
        raise ValidationError(
            "You are the only administrator of this instance: make another account an administrator "
            "(the admin's user page, Superuser status) before you delete yours.",
            code=LAST_ADMIN,
        )
