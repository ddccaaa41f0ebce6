"""Writes of a whole account: a user deleting their own (Settings → Account, DELETE /api/account/).

An admin deletes one from the admin's user page, through the same cascade. Errors are Django's
ValidationError, as in services.py.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction


def account_delete(*, user: User) -> None:
    """Delete `user` and everything of theirs, for good: the caller has asked for the password again
    (login_throttle.password_confirm).

    Every table of the app reaches the user by a cascading key (chats with their messages, search
    index, records, totals and summary jobs; model configs and their keys, prompts, imports, API
    tokens, share links, settings), so one delete takes all of it and leaves no row behind. Jobs
    already queued for the account find their row gone when a worker runs them and skip
    (summary_runner, title_services, import_services look their job up first); one running now
    stores nothing more, its writes fenced by its job's row. The user's other sessions end with it:
    a session of a user who no longer exists is signed out (Django's auth middleware).
    """
    with transaction.atomic():
        # The row first, locked: an import or a token made for the account meanwhile waits, then fails
        # its key, instead of being left behind under a user that is gone.
        User.objects.select_for_update().filter(pk=user.pk).values_list("pk", flat=True).first()
        user.delete()
