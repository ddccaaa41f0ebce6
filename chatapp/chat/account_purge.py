"""The worker's part of deleting an account (tasks.purge_account): its data deleted in bounded steps
after account_services.account_delete turned it off.

One collector delete of a whole account (Django's `user.delete()`) loaded every row of it into the
process and held one transaction over all of them: 26 s and +340 MiB of the web process for
200,000 messages on SQLite, 46 s and +182 MiB on PostgreSQL (bench/account_delete.py, the README's
figures), and SQLite's one writer lock the whole while. Here each
step is one transaction over at most PURGE_BATCH rows of one table of one chat, read by primary key
only (`only("pk")`: no message text is loaded), through Django's collector all the same, so every
key to those rows is followed as the models say (a reply's `reply_to`, a tree's `parent`, a record's
`reply`: set null; a message's search row: deleted, and on SQLite the FTS5 tables follow it through
their delete triggers, chat migrations 0001/0002; on PostgreSQL the tsvector columns are the row's
own). Steps done stay done: a worker that dies mid-way leaves fewer rows, and the next run (the
message delivered again, acks_late; or the sweep's publish) goes on from there. The user row goes
last, through the collector again, with what is left of the account (configs, prompts, imports,
settings, the AccountDeletion row): a few rows, and any chat an import still running wrote meanwhile.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import models, transaction
from django.db.models import ForeignObjectRel
from django.utils import timezone

from chatapp.chat.account_models import AccountDeletion
from chatapp.chat.models import Conversation, Message

logger = logging.getLogger(__name__)

# Rows per step: one short transaction (SQLite's writer lock is held for a few ms; other users' turns
# wait no longer than for one of their own writes), and the primary keys of a step in memory.
PURGE_BATCH = 1000


def account_purge(*, user_id: int) -> str:
    """Delete the account `user_id` whose deletion account_delete started, chat by chat, then the user:
    "deleted", or "skipped" when there is no such deletion (done already: a second delivery)."""
    if not AccountDeletion.objects.filter(user_id=user_id).exists():
        return "skipped"
    while chats := list(
        Conversation.objects.filter(owner_id=user_id).order_by("pk").values_list("pk", flat=True)[:100]
    ):
        for conversation_id in chats:
            _conversation_purge(conversation_id=conversation_id)
            AccountDeletion.objects.filter(user_id=user_id).update(touched_at=timezone.now())
    with transaction.atomic():
        get_user_model().objects.filter(pk=user_id).delete()
    logger.info("account %s deleted", user_id)
    return "deleted"


def _conversation_purge(*, conversation_id: int) -> None:
    """Every table that hangs from the chat, step by step, its messages last (the other tables' rows
    point at them: deleted first, the collector has no key of theirs to set null), then the chat row."""
    # Hidden relations too (related_name="+": the search rows, recall terms, chart blocks), as the
    # collector's own cascade finds them; `_meta.related_objects` leaves them out.
    related = [
        rel
        for rel in Conversation._meta.get_fields(include_hidden=True)
        if isinstance(rel, ForeignObjectRel) and not rel.many_to_many and rel.on_delete is models.CASCADE
    ]
    for rel in sorted(related, key=lambda rel: rel.related_model is Message):
        table: type[models.Model] = rel.related_model  # type: ignore[assignment]  # a model, not a name, once loaded
        _rows_purge(rows=table._default_manager.filter(**{rel.field.name: conversation_id}))
    with transaction.atomic():
        Conversation.objects.filter(pk=conversation_id).delete()


def _rows_purge(*, rows: models.QuerySet) -> None:
    """Delete `rows`, PURGE_BATCH at a time. Messages newest first (a message's reply, children and
    edits are newer than it: a step seldom has a key to set null in a later one; the order is the
    index's, msg_conv_id_idx); the other tables in any order, as their index on the chat gives them
    (an order by key there would sort all of a chat's rows at every step)."""
    model = rows.model
    rows = rows.order_by("-pk") if model is Message else rows.order_by()
    deleted = 1
    while deleted:
        with transaction.atomic():
            # The step's keys as a subquery: a table no key points at (search rows, recall terms, chart
            # blocks) is then one DELETE … WHERE pk IN (SELECT … LIMIT n), no key read into Python.
            deleted, _ = model._default_manager.filter(pk__in=rows.values("pk")[:PURGE_BATCH]).only("pk").delete()


def account_purge_enqueue(*, user_id: int) -> None:
    """Hand the deletion to a worker. A broker that cannot be reached leaves it to the sweep (the account
    is already off: nothing waits on it but the space its rows take)."""
    if not _purge_publish(user_id=user_id):
        logger.warning("deletion of account %s not published: the sweep will publish it", user_id)


def _purge_publish(*, user_id: int) -> bool:
    """On the imports' queue: the other long job of one account's, which every worker of the app
    consumes (`serve`'s, and the README's `-Q summaries,celery` with the queue's default name)."""
    from chatapp.chat.tasks import purge_account  # the task module imports this one

    try:
        # One connection attempt, no publish retries: the request that deleted the account must not hang
        # on a dead broker (as import_services._publish).
        with purge_account.app.connection_for_write(transport_options={"max_retries": 0}) as conn:
            purge_account.apply_async(args=[user_id], queue=settings.CELERY_IMPORT_QUEUE, retry=False, connection=conn)
    except Exception as exc:  # kombu and redis raise several connection error types
        logger.warning("account deletion %s not published (broker unreachable: %s)", user_id, exc)
        return False
    return True


def account_purges_sweep() -> int:
    """Publish again the deletions no worker has gone on with for a lease (IMPORT_LEASE_SECONDS): its
    worker died and the broker lost the message, or it was never published. The lease is renewed here,
    so each is published at most once per lease; a second worker on the same account is harmless (each
    step deletes what is still there). Runs in the periodic sweep and at a worker's start (tasks).
    Returns how many were published."""
    now = timezone.now()
    stale = AccountDeletion.objects.filter(touched_at__lt=now - timedelta(seconds=settings.IMPORT_LEASE_SECONDS))
    published = 0
    for user_id in list(stale.values_list("user_id", flat=True)[:100]):
        if stale.filter(user_id=user_id).update(touched_at=now) and _purge_publish(user_id=user_id):
            published += 1
    return published
