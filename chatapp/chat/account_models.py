"""An account its user deleted, while a worker deletes its data (account_services.account_delete,
account_purge). Registered through models.py, which imports this module."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AccountDeletion(models.Model):
    """The account is turned off and its data is being deleted, in steps, by a worker. The row goes
    last, with the user's (its key cascades): while it is here the deletion is not done, and the sweep
    publishes it again once no worker has gone on with it for a lease (account_purge.account_purges_sweep)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, primary_key=True, on_delete=models.CASCADE, related_name="+")
    requested_at = models.DateTimeField(auto_now_add=True)
    # A worker's last step on it (a chat deleted), or the last publish: the sweep's lease starts here.
    touched_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"deletion of user {self.user_id}"
