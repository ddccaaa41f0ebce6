"""The admin's user pages, with one change: setting a user's password there is a reset, and revokes
their API token like the user's own change (services.user_password_change)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.forms import AdminPasswordChangeForm
from django.contrib.auth.models import User
from django.http import HttpRequest

from chatapp.chat import services


class AdminPasswordResetForm(AdminPasswordChangeForm):
    """The admin's "Change password" form, saved through the service. An admin resets a password when an
    account is suspected compromised, so a token issued under the old password must not outlive it."""

    api_token_revoked = False

    def save(self, commit: bool = True) -> User:
        # Always written, whatever `commit` says (the admin always commits): the password and the
        # revocation go together, in the service's one transaction.
        password = self.cleaned_data["password1"] if self.cleaned_data["set_usable_password"] else None
        self.api_token_revoked = services.user_password_change(user=self.user, password=password)
        return self.user


class AppUserAdmin(UserAdmin):
    change_password_form = AdminPasswordResetForm

    def construct_change_message(self, request: HttpRequest, form: Any, formsets: Any, add: bool = False) -> Any:
        # The one hook of the admin's password view that sees the saved form: says what the reset
        # also did, as the user's own change page does.
        if getattr(form, "api_token_revoked", False):
            self.message_user(request, "The API token of this account was revoked too.", messages.WARNING)
        return super().construct_change_message(request, form, formsets, add)


admin.site.unregister(User)
admin.site.register(User, AppUserAdmin)
