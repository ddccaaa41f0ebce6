"""The admin's user pages, with two changes. Setting a user's password there is a reset, and revokes
their API tokens like the user's own change (services.user_password_change). Deleting a user is the
user's own deletion (account_services.account_delete: the account off at once, its data deleted by a
worker), and its page counts what goes instead of listing it. And the API tokens, which an admin can
list and revoke (delete) but neither create nor read: only their digests are stored."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.forms import AdminPasswordChangeForm
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from chatapp.chat import services
from chatapp.chat.account_services import account_delete
from chatapp.chat.selectors import account_holdings, account_is_last_admin
from chatapp.chat.token_models import ApiToken


class AdminPasswordResetForm(AdminPasswordChangeForm):
    """The admin's "Change password" form, saved through the service. An admin resets a password when an
    account is suspected compromised, so a token issued under the old password must not outlive it."""

    api_tokens_revoked = 0

    def save(self, commit: bool = True) -> User:
        # Always written, whatever `commit` says (the admin always commits): the password and the
        # revocation go together, in the service's one transaction.
        password = self.cleaned_data["password1"] if self.cleaned_data["set_usable_password"] else None
        self.api_tokens_revoked = services.user_password_change(user=self.user, password=password)
        return self.user


class AppUserAdmin(UserAdmin):
    change_password_form = AdminPasswordResetForm

    def construct_change_message(self, request: HttpRequest, form: Any, formsets: Any, add: bool = False) -> Any:
        # The one hook of the admin's password view that sees the saved form: says what the reset
        # also did, as the user's own change page does.
        revoked = getattr(form, "api_tokens_revoked", 0)
        if revoked:
            what = "API token of this account was" if revoked == 1 else f"{revoked} API tokens of this account were"
            self.message_user(request, f"The {what} revoked too.", messages.WARNING)
        return super().construct_change_message(request, form, formsets, add)

    def get_deleted_objects(self, objs: Sequence[User], request: HttpRequest) -> tuple[list, dict, set, list]:
        # Django's page draws every row the delete takes, each one read: minutes and megabytes for an
        # account of 200,000 messages. Counted instead; the worker deletes them (account_purge).
        users = list(objs)
        listed: list = []
        counts = {"users": len(users), "chats": 0, "messages": 0}
        for user in users:
            held = account_holdings(user_id=user.pk)
            listed += [f"User: {user.username}", [
                f"{held['chats']:,} chats and {held['messages']:,} messages, deleted by a background worker "
                "once the account is turned off"
            ]]
            counts["chats"] += held["chats"]
            counts["messages"] += held["messages"]
        # Listed as protected, the page refuses the delete and says why (both the page and the action).
        protected = [
            f"{u.username} is the only active administrator of this instance: make another account an "
            "administrator first"
            for u in users
            if account_is_last_admin(user=u)
        ]
        return listed, counts, set(), protected

    def delete_model(self, request: HttpRequest, obj: User) -> None:
        self._account_delete(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        for user in queryset:
            self._account_delete(request, user)

    def _account_delete(self, request: HttpRequest, user: User) -> None:
        try:
            account_delete(user=user)
        except ValidationError as exc:  # another administrator was turned off since the page was drawn
            self.message_user(request, " ".join(exc.messages), messages.ERROR)


admin.site.unregister(User)
admin.site.register(User, AppUserAdmin)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "hint", "user", "created_at")
    list_select_related = ("user",)
    search_fields = ("user__username", "name", "hint")
    fields = ("user", "name", "hint", "created_at")  # not the digest: it tells an admin nothing
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a key is shown once, to its owner: Settings or /api/auth/token/ create them

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
