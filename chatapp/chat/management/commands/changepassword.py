"""`manage.py changepassword USERNAME`: Django's command, with the user's API tokens revoked in the
same transaction as the new password.

A password is changed when a credential may have got out. The settings page and the admin revoke
the API tokens with it (services.user_password_change); Django's own command sets the password
only, so a leaked token outlived an operator's reset by up to API_TOKEN_DAYS. This command
overrides Django's because chatapp.chat is listed before django.contrib.auth in INSTALLED_APPS
(Django takes a command from the first app that has it).
"""

from __future__ import annotations

import getpass
from typing import Any

from django.contrib.auth.management.commands import changepassword
from django.db import transaction

from chatapp.chat import token_services


class Command(changepassword.Command):
    help = changepassword.Command.help + " Revokes the user's API tokens with it."

    def handle(self, *args: Any, **options: Any) -> str | None:
        database = options["database"]
        username = options["username"] or getpass.getuser()
        # Django's command reads the new password and saves it; both halves commit together.
        with transaction.atomic(using=database):
            done = super().handle(*args, **options)
            model = changepassword.UserModel
            user = model._default_manager.using(database).get(**{model.USERNAME_FIELD: username})
            revoked = token_services.api_tokens_revoke_all(user=user)
        if revoked:
            what = "Their API token was" if revoked == 1 else f"Their {revoked} API tokens were"
            return f"{done}\n{what} revoked: they create a new one in Settings."
        return done
