"""An account deletion run by a real Celery worker subprocess (the embedded filesystem broker, and
Redis when REDIS_URL is set): published when the request's transaction commits, the data deleted and
then the user, nothing of another account touched."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from chatapp.chat import account_purge
from chatapp.chat.account_services import account_delete
from chatapp.chat.models import Conversation
from tests.support.account_data import account_rows, table_rows
from tests.support.worker import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_worker_deletes_the_account_handed_to_it(
    owner, long_conversation, broker, worker, settings, monkeypatch, purges_published
):
    other = get_user_model().objects.create_user(username="kim", password="a long enough password")
    Conversation.objects.create(owner=other, title="Kept")
    theirs = table_rows()
    chats = [long_conversation(config=None, rounds=30).pk, long_conversation(config=None, rounds=5).pk]
    monkeypatch.setattr(account_purge, "_purge_publish", purges_published.publish)
    settings.CELERY_IMPORT_QUEUE = broker.queue  # the test worker consumes this queue only
    worker(CELERY_IMPORT_QUEUE=broker.queue)

    account_delete(user=owner)

    wait_for(lambda: not get_user_model().objects.filter(pk=owner.pk).exists(), timeout=60, what="the deletion")
    assert account_rows(owner.pk, chats) == {}
    assert table_rows() == theirs
