"""An admin deletes an account (the admin's user page; a user deletes their own in Settings:
tests/chat/test_account_delete.py): everything
of it goes with it — chats with their messages, search index, records and dashboard totals, share
links, API tokens, prompts, model configs, imports and summary jobs — its links and tokens stop at
once, and nothing of another account is touched."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from chatapp.chat import tasks
from chatapp.chat.management.commands.seed_long_conversation import conversation_seed_long
from chatapp.chat.models import Message
from tests.support.account_data import account_with_everything, table_rows

pytestmark = pytest.mark.django_db(transaction=True)


def _admin_client(username: str = "root") -> Client:
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser(username=username, password="a long admin password"))
    return admin


def test_an_admin_deleting_an_account_takes_all_of_it_and_nothing_else(user, other_user, fake_openai, purges_published):
    account_with_everything(other_user, fake_openai)
    theirs = table_rows()
    link, key = account_with_everything(user, fake_openai)
    admin = _admin_client()

    assert admin.get(f"/admin/auth/user/{user.pk}/delete/").status_code == 200
    deleted = admin.post(f"/admin/auth/user/{user.pk}/delete/", {"post": "yes"})

    # As the user's own deletion: off at once (links and tokens stop), the data deleted by a worker.
    assert deleted.status_code == 302 and purges_published == [user.pk]
    assert not get_user_model().objects.get(pk=user.pk).is_active
    assert Client().get(f"/s/{link}/").status_code == 404
    tokened = APIClient()
    tokened.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert tokened.get("/api/conversations/").status_code == 401
    assert tasks.purge_account.apply(args=[user.pk]).get() == "deleted"
    assert not get_user_model().objects.filter(pk=user.pk).exists()
    assert table_rows() == theirs


def test_the_admins_delete_page_counts_an_accounts_messages_instead_of_listing_them(user, fake_openai):
    """Django's page lists every row a delete would take, each read and drawn: 200,000 messages made it
    a page of megabytes that took minutes. It says how many chats and messages go instead."""
    account_with_everything(user, fake_openai)
    conversation_seed_long(owner=user, messages=120)

    page = _admin_client().get(f"/admin/auth/user/{user.pk}/delete/")

    text = page.content.decode()
    assert page.status_code == 200
    assert "2 chats" in text and f"{Message.objects.filter(conversation__owner=user).count()} messages" in text
    assert "Message:" not in text and "Trip to Lisbon" not in text  # no row drawn one by one


def test_the_admins_delete_selected_action_hands_each_account_to_the_worker(user, other_user, purges_published):
    admin = _admin_client()

    chosen = {"action": "delete_selected", "_selected_action": [user.pk, other_user.pk]}
    confirm = admin.post("/admin/auth/user/", chosen)
    assert confirm.status_code == 200 and "Are you sure" in confirm.content.decode()
    done = admin.post("/admin/auth/user/", {**chosen, "post": "yes"})

    assert done.status_code == 302 and sorted(purges_published) == sorted([user.pk, other_user.pk])
    assert not get_user_model().objects.filter(pk__in=[user.pk, other_user.pk], is_active=True).exists()


def test_the_admin_cannot_delete_the_last_active_administrator(purges_published):
    admin = _admin_client()
    root = get_user_model().objects.get(username="root")

    page = admin.get(f"/admin/auth/user/{root.pk}/delete/")
    refused = admin.post(f"/admin/auth/user/{root.pk}/delete/", {"post": "yes"})

    assert "only active administrator" in page.content.decode()
    assert refused.status_code == 200 and "only active administrator" in refused.content.decode()
    assert get_user_model().objects.get(pk=root.pk).is_active and purges_published == []
