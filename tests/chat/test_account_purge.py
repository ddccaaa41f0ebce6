"""A deleted account is turned off in the request and its data deleted by a worker afterwards, in
bounded steps (account_services.account_delete, account_purge): nothing of it left in any table (the
search index's FTS tables included), nothing of another account touched, safe to run twice and to
finish after a worker died mid-way; the last active administrator cannot delete their own account."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.utils import timezone

from chatapp.chat import account_purge, tasks
from chatapp.chat.account_models import AccountDeletion
from chatapp.chat.account_services import account_delete
from chatapp.chat.management.commands.seed_long_conversation import conversation_seed_long
from chatapp.chat.models import Conversation, Message
from tests.support.account_data import account_rows, account_with_everything, table_rows
from tests.support.accounts import PASSWORD, api_key_for, token_client

pytestmark = pytest.mark.django_db(transaction=True)


def _big_account(user, fake_openai) -> list[int]:
    """One of everything, and a seeded chat whose messages, records, summaries and recall terms take
    many batches at PURGE_BATCH = 7 (its messages threaded: each one's parent in an earlier batch)."""
    account_with_everything(user, fake_openai)
    conversation_seed_long(owner=user, messages=100)
    return list(Conversation.objects.filter(owner=user).values_list("pk", flat=True))


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(account_purge, "PURGE_BATCH", 7)


def test_the_request_turns_the_account_off_and_the_worker_deletes_all_of_it(
    user, other_user, fake_openai, small_batches, purges_published
):
    _big_account(other_user, fake_openai)
    theirs = table_rows()
    chats = _big_account(user, fake_openai)
    key = api_key_for(user)
    elsewhere = Client()  # another browser of the user's, signed in
    elsewhere.force_login(user)
    assert Message.objects.filter(conversation_id__in=chats).count() > 10 * account_purge.PURGE_BATCH

    account_delete(user=user)

    # At once: turned off, no sign-in, no token; the data waits for the worker, published to it.
    kept = get_user_model().objects.get(pk=user.pk)
    assert not kept.is_active and not kept.has_usable_password()
    assert not Client().login(username=user.username, password=PASSWORD)
    tokened = Client(HTTP_AUTHORIZATION=f"Token {key}")
    assert tokened.get("/api/conversations/").status_code == 401
    assert elsewhere.get("/settings/")["Location"].startswith("/accounts/login/")
    assert purges_published == [user.pk]

    assert tasks.purge_account.apply(args=[user.pk]).get() == "deleted"

    assert account_rows(user.pk, chats) == {}
    assert table_rows() == theirs


def test_a_second_run_finds_nothing_to_do(user, other_user, fake_openai, purges_published):
    _big_account(other_user, fake_openai)
    theirs = table_rows()
    chats = _big_account(user, fake_openai)
    account_delete(user=user)

    outcomes = [tasks.purge_account.apply(args=[user.pk]).get() for _ in range(2)]

    assert outcomes == ["deleted", "skipped"]
    assert account_rows(user.pk, chats) == {} and table_rows() == theirs


def test_a_worker_that_died_mid_way_is_run_again_and_finishes(
    user, other_user, fake_openai, small_batches, purges_published, monkeypatch
):
    _big_account(other_user, fake_openai)
    theirs = table_rows()
    chats = _big_account(user, fake_openai)
    account_delete(user=user)
    real = account_purge._rows_purge
    calls = []

    def dies_on_the_fourth_step(**kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise SystemExit("worker killed")
        return real(**kwargs)

    monkeypatch.setattr(account_purge, "_rows_purge", dies_on_the_fourth_step)
    with pytest.raises(SystemExit):
        account_purge.account_purge(user_id=user.pk)
    assert account_rows(user.pk, chats) != {}  # part of it done, the rest left for the next run
    monkeypatch.setattr(account_purge, "_rows_purge", real)

    assert account_purge.account_purge(user_id=user.pk) == "deleted"
    assert account_rows(user.pk, chats) == {} and table_rows() == theirs


def test_the_sweep_publishes_again_a_deletion_no_worker_went_on_with(user, purges_published):
    account_delete(user=user)
    assert account_purge.account_purges_sweep() == 0  # just asked: its worker may be on it
    AccountDeletion.objects.filter(user_id=user.pk).update(touched_at=timezone.now() - timezone.timedelta(hours=1))

    assert account_purge.account_purges_sweep() == 1
    assert purges_published == [user.pk, user.pk]
    assert account_purge.account_purges_sweep() == 0  # once per lease


def test_the_last_active_administrator_cannot_delete_their_account(purges_published):
    users = get_user_model().objects
    admin = users.create_superuser(username="root", password=PASSWORD)
    users.create_superuser(username="retired", password=PASSWORD, is_active=False)
    api = token_client(admin)

    refused = api.delete("/api/account/", {"password": PASSWORD}, format="json")

    assert refused.status_code == 409 and "administrator" in refused.json()["detail"]
    page = Client()
    page.force_login(admin)
    shown = page.post("/accounts/delete/", {"password": PASSWORD})
    assert shown.status_code == 200 and "administrator" in shown.content.decode()
    assert users.get(pk=admin.pk).is_active and purges_published == []

    users.create_superuser(username="second", password=PASSWORD)
    assert api.delete("/api/account/", {"password": PASSWORD}, format="json").status_code == 204
    assert not users.get(pk=admin.pk).is_active and purges_published == [admin.pk]


def test_no_statement_of_the_worker_deletes_more_than_a_step(user, fake_openai, small_batches, purges_published):
    """Every table of a chat goes PURGE_BATCH rows a transaction, the recall terms and the search rows
    (related_name="+", which Django's `related_objects` leaves out) included: none in one statement."""
    chats = _big_account(user, fake_openai)
    account_delete(user=user)
    counts: list[tuple[int, str]] = []

    def counted(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if sql.startswith("DELETE"):
            counts.append((context["cursor"].rowcount, sql.split(" WHERE ")[0]))
        return result

    with connection.execute_wrapper(counted):
        account_purge.account_purge(user_id=user.pk)

    assert account_rows(user.pk, chats) == {}
    assert {sql for deleted, sql in counts if deleted > account_purge.PURGE_BATCH} == set()
    assert any(deleted == account_purge.PURGE_BATCH and "recallterm" in sql for deleted, sql in counts)
