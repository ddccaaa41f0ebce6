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

from tests.support.account_data import account_with_everything, table_rows

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_deleting_an_account_takes_all_of_it_and_nothing_else(user, other_user, fake_openai):
    account_with_everything(other_user, fake_openai)
    theirs = table_rows()
    link, key = account_with_everything(user, fake_openai)
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser(username="root", password="a long admin password"))

    assert admin.get(f"/admin/auth/user/{user.pk}/delete/").status_code == 200
    deleted = admin.post(f"/admin/auth/user/{user.pk}/delete/", {"post": "yes"})

    assert deleted.status_code == 302 and not get_user_model().objects.filter(pk=user.pk).exists()
    assert table_rows() == theirs
    assert Client().get(f"/s/{link}/").status_code == 404
    tokened = APIClient()
    tokened.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert tokened.get("/api/conversations/").status_code == 401
