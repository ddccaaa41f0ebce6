"""Reads for background summaries (issue 4): jobs, quota, the summary in use, sweep candidates."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils import timezone

from chatapp.chat.models import Conversation, Message, SummaryJob

# The quota is a rolling day rather than a calendar day, so midnight does not release a burst.
QUOTA_WINDOW = timedelta(days=1)
# Jobs the user did not ask for explicitly count against the daily quota.
AUTOMATIC_TRIGGERS = (SummaryJob.Trigger.AUTO, SummaryJob.Trigger.AHEAD)


def summary_quota_used(*, conversation: Conversation) -> int:
    """Automatic summary jobs of the last 24 hours (cancelled ones excepted).

    Every automatic job counts, extractive ones included: the limit exists to keep the context from
    being rewritten many times a day, which unsettles the provider's prompt cache whatever wrote it.
    Manual compactions (the user asked) are not limited.
    """
    since = connection.ops.adapt_datetimefield_value(timezone.now() - QUOTA_WINDOW)
    # Plain SQL: long conversations ask it on every turn, and the ORM spent more CPU building the
    # count than the database spent on it (rowsql).
    with connection.cursor() as cursor:
        cursor.execute(_QUOTA_SQL, [conversation.pk, since, *AUTOMATIC_TRIGGERS, SummaryJob.Status.CANCELLED])
        return int(cursor.fetchone()[0])


_QUOTA_SQL = (
    f"SELECT COUNT(*) FROM {SummaryJob._meta.db_table} WHERE conversation_id = %s AND created_at >= %s "  # noqa: S608
    f"AND \"trigger\" IN ({', '.join('%s' for _ in AUTOMATIC_TRIGGERS)}) AND status <> %s"
)


def summary_quota_remaining(*, conversation: Conversation) -> int:
    """How many more automatic summaries this conversation may start today (settings.SUMMARIES_PER_DAY).

    The request path calls it before packing: at 0 it tells the optimizer no summarizer is available,
    so the selector truncates and its reason says why (see `summary_quota_reason`).
    """
    return max(0, settings.SUMMARIES_PER_DAY - summary_quota_used(conversation=conversation))


def summary_quota_reason() -> str:
    limit = settings.SUMMARIES_PER_DAY
    noun = "summary" if limit == 1 else "summaries"
    return f"daily limit of {limit} automatic {noun} for this conversation reached; truncating instead"


def summary_job_active(*, conversation: Conversation) -> SummaryJob | None:
    """The conversation's one active job (pending, awaiting, queued or running), if any."""
    return (
        SummaryJob.objects.filter(conversation=conversation, status__in=SummaryJob.ACTIVE_STATUSES)
        .order_by("-id")
        .first()
    )


def summary_job_list(*, conversation: Conversation) -> QuerySet[SummaryJob]:
    """A conversation's jobs, newest first (the API paginates)."""
    return SummaryJob.objects.filter(conversation=conversation).select_related("summary").order_by("-id")


def summary_current(*, conversation: Conversation) -> Message | None:
    """The summary in use: the active path's newest one not discarded (newer summaries replace older ones)."""
    return _summaries_kept(conversation=conversation).first()


def summary_kept_pins(*, conversation: Conversation) -> frozenset[int]:
    """The messages the summary in use passed over as pinned (Message.skipped_pin_ids): sent as pins,
    pinned now or not, until a summary folds them in."""
    return frozenset(_summaries_kept(conversation=conversation).values_list("skipped_pin_ids", flat=True).first() or ())


def _summaries_kept(*, conversation: Conversation) -> QuerySet[Message]:
    """The active path's summaries not discarded, newest first: the first is the one in use."""
    return Message.objects.filter(
        conversation=conversation, kind=Message.Kind.SUMMARY, discarded=False, superseded=False
    ).order_by("-id")


def summary_edit_chain(*, summary: Message) -> set[int]:
    """The ids of `summary`, the versions it was edited into (and theirs), and those it was edited from."""
    chain = {summary.pk}
    frontier = [summary.pk]
    while frontier:  # the edits of it, and theirs; one met already ends the walk (edits that loop)
        edits = Message.objects.filter(edited_from_id__in=frontier).values_list("id", flat=True)
        frontier = [pk for pk in edits if pk not in chain]
        chain.update(frontier)
    older = summary.edited_from_id
    while older is not None and older not in chain:  # what it was edited from
        chain.add(older)
        older = Message.objects.filter(pk=older).values_list("edited_from_id", flat=True).first()
    return chain


def summary_get(*, owner, pk: int) -> Message:
    """A summary message of one of `owner`'s conversations; anything else is a 404."""
    summary = (
        Message.objects.filter(pk=pk, kind=Message.Kind.SUMMARY, conversation__owner=owner)
        .select_related("conversation")
        .first()
    )
    if summary is None:
        raise Http404("No such summary.")
    return summary


def summary_jobs_to_sweep(*, limit: int = 500) -> list[int]:
    """Jobs whose broker message is missing or presumed lost, oldest first.

    Pending: the broker was unreachable when the job was created. Queued or running past the lease:
    the message or the worker holding it died. The filesystem broker loses a message whose worker
    is killed; Redis restores one the worker had taken (the unacked set), but not one taken in the
    instant between the pop and that record (kombu's BRPOP, then the unacked write): only this
    sweep brings that one back, after SUMMARY_QUEUED_STALE_SECONDS. The claim makes duplicates
    harmless.
    """
    now = timezone.now()
    stale = Q(status__in=[SummaryJob.Status.QUEUED, SummaryJob.Status.RUNNING]) & (
        Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True)
    )
    return list(
        SummaryJob.objects.filter(Q(status=SummaryJob.Status.PENDING) | stale)
        .order_by("id")
        .values_list("id", flat=True)[:limit]
    )
