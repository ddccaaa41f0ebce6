"""Reads of conversation imports: a user's jobs and what a job imported. Owner-scoped: another user's
job answers Http404, like one that does not exist. The stored upload (`payload`) is never read here."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from chatapp.chat.import_models import ImportJob
from chatapp.chat.models import Conversation

# Ids per `IN (...)` read: below every database's bound on query parameters.
_IN_CHUNK = 500


def import_job_list(*, owner: User) -> QuerySet[ImportJob]:
    """The owner's imports, newest first (the importjob_owner_idx index)."""
    return ImportJob.objects.filter(owner=owner).defer("payload").order_by("-id")


def import_job_get(*, owner: User, pk: int) -> ImportJob:
    return get_object_or_404(ImportJob.objects.defer("payload"), owner=owner, pk=pk)


def import_job_conversations(*, job: ImportJob) -> list[dict[str, Any]]:
    """The conversations the job created that still exist, as {"id", "title", "archived"}, in file order.
    `archived`: out of the sidebar (archived at the source, or since), so the report says where it is."""
    ids: list[int] = list(job.conversation_ids)
    found: dict[int, tuple[str, bool]] = {}
    for start in range(0, len(ids), _IN_CHUNK):
        rows = Conversation.objects.filter(owner_id=job.owner_id, pk__in=ids[start:start + _IN_CHUNK])
        found.update((pk, (title, archived_at is not None))
                     for pk, title, archived_at in rows.values_list("id", "title", "archived_at"))
    return [{"id": pk, "title": found[pk][0], "archived": found[pk][1]} for pk in ids if pk in found]
