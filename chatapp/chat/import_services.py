"""Conversation imports (issue 13): an upload becomes an ImportJob, and a Celery task imports it.

Life cycle. `import_job_create` stores the upload (compressed, in the job row: a worker on another
machine shares the database, not the disk) and publishes the job's id after commit. The task
(`tasks.import_conversations`) calls `import_job_run`, which claims the job with a conditional
update (queued → running, `attempts` + 1: the fencing token) so a message delivered twice imports
once, then:

1. reads the whole file once (`imports.document_open` + `count`): a file that is not JSON, is cut
   short or is not a known export fails the job with that reason and stores nothing;
2. imports conversation by conversation, each in ONE transaction that also moves the job's progress
   (`done`, the new id) under the fencing token: a conversation is stored whole or not at all, and
   the job's record always matches what is stored. A conversation that fails its checks is skipped
   with its reason (`skipped`), the others go on. One this owner imported before (the same
   fingerprint, `records.record_fingerprint`: a later export of the same chats) is counted in
   `duplicates` and left as it is;
3. ends `done` (with the skipped ones) and drops the file.

A worker that dies mid-import leaves the job running with a lease. Once the lease has run out,
the message comes back (acks_late: Redis redelivers it) or the periodic sweep publishes the job
again (`import_jobs_sweep`: the filesystem broker loses an unacknowledged message), and the next
delivery takes over and resumes after the last stored conversation (`done` is the next index).
A queued job has a lease too, from its upload: a message lost before any worker took it (a broker
restarted without persistence) is published again by the same sweep.
Taking over is bounded (`MAX_ATTEMPTS`): a file that kills its worker every time (out of memory)
fails instead of looping.
"""

from __future__ import annotations

import logging
import zlib
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from chatapp.chat.body_limit import import_too_large_words
from chatapp.chat.import_models import ImportedConversation, ImportJob
from chatapp.chat.import_writing import ModelChoice, conversation_import
from chatapp.chat.imports import ConversationError, ConversationRecord, ImportFileError, document_open
from chatapp.chat.imports.records import record_fingerprint, record_fingerprint_shown_branch, where
from chatapp.chat.models import Conversation
from chatapp.chat.size_limits import TooLarge
from chatapp.chat.textsafe import text_storable
from chatapp.env_celery import recheck_wait

logger = logging.getLogger(__name__)

Status = ImportJob.Status
MAX_ATTEMPTS = 3
# zlib level 1: JSON still shrinks several times, at a fraction of the default level's CPU.
_COMPRESS_LEVEL = 1
# The most skipped conversations kept with their reasons (a foreign file would list each item).
MAX_SKIPPED_LISTED = 200
# Imports one owner may have queued or running at once. Jobs share the workers' default queue with
# every user's chat titles: without a bound, one account (or a script that uploads again on each
# timeout) could queue file after file and hold everyone's titles and imports behind them.
MAX_UNFINISHED_IMPORTS = 3


class ImportTooLarge(TooLarge):
    """The upload is larger than settings.IMPORT_MAX_BYTES (`limit` and `size` in bytes); nothing was stored."""

    @staticmethod
    def describe(*, limit: int, size: int) -> str:
        return import_too_large_words(limit=limit, size=size)


class ImportBacklogFull(ValidationError):
    """`owner` already has MAX_UNFINISHED_IMPORTS imports queued or running; nothing was stored.
    `then`: what to do again once one has finished."""

    def __init__(self, *, then: str = "upload this file again") -> None:
        super().__init__(
            f"You already have {MAX_UNFINISHED_IMPORTS} imports waiting or running: wait until one has "
            f"finished, then {then}.", code="throttled",
        )


def _unfinished_imports(*, owner: User) -> int:
    return ImportJob.objects.filter(owner=owner, status__in=(Status.QUEUED, Status.RUNNING)).count()


def import_backlog_check(*, owner: User, then: str = "upload this file again") -> None:
    """ImportBacklogFull when `owner` has MAX_UNFINISHED_IMPORTS imports queued or running: asked before a
    payload is compressed, which would only be dropped (import_job_store counts again under a lock)."""
    if _unfinished_imports(owner=owner) >= MAX_UNFINISHED_IMPORTS:
        raise ImportBacklogFull(then=then)


class ImportPayload:
    """A job's payload compressed as it is written, so the whole text is never held beside its
    compressed copy. ImportTooLarge once past settings.IMPORT_MAX_BYTES (read when it is made)."""

    def __init__(self) -> None:
        self.limit: int = settings.IMPORT_MAX_BYTES
        self.size = 0
        self._compressor = zlib.compressobj(_COMPRESS_LEVEL)
        self._parts: list[bytes] = []

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.limit:
            raise ImportTooLarge(limit=self.limit, size=self.size)
        self._parts.append(self._compressor.compress(chunk))

    def compressed(self) -> bytes:
        return b"".join([*self._parts, self._compressor.flush()])


def import_job_create(*, owner: User, upload: UploadedFile) -> ImportJob:
    """Store the upload as a queued job of `owner` and publish it once committed. ImportBacklogFull
    when `owner` has MAX_UNFINISHED_IMPORTS imports queued or running."""
    import_backlog_check(owner=owner)
    payload = ImportPayload()
    if upload.size is not None and upload.size > payload.limit:
        raise ImportTooLarge(limit=payload.limit, size=upload.size)
    for chunk in upload.chunks():
        payload.write(chunk)  # the size counted again: the client may not have announced it truthfully
    if payload.size == 0:
        raise ValidationError({"file": ["The file is empty."]}, code="empty")
    name = " ".join((upload.name or "").split())[:255]
    return import_job_store(owner=owner, payload=payload, filename=name)


def import_job_store(*, owner: User, payload: ImportPayload, filename: str, then: str = "upload this file again",
                     source_conversation_id: int | None = None) -> ImportJob:
    """Store `payload` as a queued job of `owner` and publish it once committed; a branch's job
    (Kind.BRANCH) names its `source_conversation_id`. ImportBacklogFull (`then`) when the backlog is full."""
    with transaction.atomic():
        # Counted again under the owner's row lock: two uploads at once cannot both take the last place.
        User.objects.select_for_update().filter(pk=owner.pk).values_list("pk", flat=True).first()
        import_backlog_check(owner=owner, then=then)
        kind = ImportJob.Kind.UPLOAD if source_conversation_id is None else ImportJob.Kind.BRANCH
        # A lease from the start: if no worker has claimed the job when it ends (the message was lost),
        # the sweep publishes the job again, as for a worker that died.
        job = ImportJob.objects.create(owner=owner, kind=kind, source_conversation_id=source_conversation_id,
                                       filename=filename, size_bytes=payload.size, payload=payload.compressed(),
                                       lease_expires_at=_lease_end())
        job_id = job.pk
        transaction.on_commit(lambda: import_job_enqueue(job_id=job_id))
    return job


def import_job_enqueue(*, job_id: int) -> bool:
    """Publish a new upload's job to the import queue; if the broker cannot be reached the job fails at
    once, saying so (the user can upload again), instead of waiting in a queue nobody reads."""
    if _publish(job_id=job_id):
        return True
    import_job_fail(job_id=job_id, reason="The background workers could not be reached, so the import did "
                                           "not start. Try again in a moment.", statuses=(Status.QUEUED,))
    return False


def _publish(*, job_id: int) -> bool:
    """Send the job's id to the import queue; False (logged) when the broker cannot be reached."""
    from chatapp.chat.tasks import import_conversations  # the task module imports this one

    try:
        # One connection attempt, no publish retries: an upload must not hang on a dead broker.
        with import_conversations.app.connection_for_write(transport_options={"max_retries": 0}) as conn:
            import_conversations.apply_async(
                args=[job_id], queue=settings.CELERY_IMPORT_QUEUE, retry=False, connection=conn
            )
    except Exception as exc:  # kombu and redis raise several connection error types
        logger.warning("import job %s not published (broker unreachable: %s)", job_id, exc)
        return False
    return True


def import_job_fail(
    *, job_id: int, reason: str, statuses: tuple[str, ...] = (Status.QUEUED, Status.RUNNING), attempt: int | None = None
) -> None:
    """End a job failed with `reason` (what was imported before stays, listed). `attempt`: only while
    that delivery still holds it (a stale one must not fail, and drop the file of, the one that took over)."""
    jobs = ImportJob.objects.filter(pk=job_id, status__in=statuses)
    if attempt is not None:
        jobs = jobs.filter(attempts=attempt)
    jobs.update(
        # A reason may quote the file (the keys a foreign JSON has), which may hold what no column stores.
        status=Status.FAILED, error=text_storable(reason)[:2000], finished_at=timezone.now(), lease_expires_at=None,
        payload=b"",
    )


def import_jobs_sweep() -> int:
    """Publish again the imports whose lease ran out: their worker died and the broker lost the
    unacknowledged message (the filesystem broker does; Redis redelivers it too — a duplicate is
    run once), or no worker ever received the queued job's message. They go back to queued, so the
    next delivery claims them at once and resumes; the lease is renewed here, so a job is published at
    most once per lease. Runs in the periodic summary sweep (tasks.sweep_pending_summary_jobs).
    Returns how many were published."""
    now = timezone.now()
    stale = ImportJob.objects.filter(status__in=[Status.QUEUED, Status.RUNNING], lease_expires_at__lt=now)
    published = 0
    for job_id in list(stale.values_list("pk", flat=True)[:100]):
        requeued = stale.filter(pk=job_id).update(status=Status.QUEUED, lease_expires_at=_lease_end())
        # Not import_job_enqueue, which fails an upload the broker never got: this job may be half
        # imported, and failing it would drop its file (the rest lost; an upload again imports the
        # first part twice). Left queued, it is published by the sweep after its renewed lease.
        if requeued and _publish(job_id=job_id):
            published += 1
    return published


@dataclass(frozen=True, slots=True)
class ImportRunOutcome:
    """What one delivery did; the task needs `status` and, when busy, `retry_in`."""

    job_id: int
    status: Literal["done", "failed", "skipped", "busy"]
    detail: str = ""
    retry_in: float = 0.0


class _ClaimLost(Exception):
    """Another delivery took the job over: this one stops without writing."""


def import_job_run(*, job_id: int) -> ImportRunOutcome:
    """One delivery of the job: claim it, import what is left, end it."""
    job = ImportJob.objects.filter(pk=job_id).first()
    if job is None or job.status in (Status.DONE, Status.FAILED):
        return ImportRunOutcome(job_id=job_id, status="skipped", detail="no such job, or it has ended")
    now = timezone.now()
    if job.status == Status.RUNNING and job.lease_expires_at is not None and job.lease_expires_at > now:
        wait = recheck_wait((job.lease_expires_at - now).total_seconds() + 1)
        return ImportRunOutcome(job_id=job_id, status="busy", detail="another worker holds it", retry_in=wait)
    attempt = job.attempts + 1
    claimed = ImportJob.objects.filter(
        Q(status=Status.QUEUED) | Q(status=Status.RUNNING, lease_expires_at__lte=now)
        | Q(status=Status.RUNNING, lease_expires_at__isnull=True),
        pk=job_id,
        attempts=job.attempts,
    ).update(status=Status.RUNNING, attempts=attempt, started_at=Coalesce(F("started_at"), Value(now)),
             lease_expires_at=_lease_end())
    if not claimed:
        return ImportRunOutcome(job_id=job_id, status="skipped", detail="claimed by another delivery")
    job.refresh_from_db()
    if not User.objects.filter(pk=job.owner_id, is_active=True).exists():
        # An admin turned the account off after the upload: it can do nothing else, nor is anything
        # written to it. Failed, not left queued (the sweep would publish it again and again), the file dropped.
        reason = "The account was turned off before the import ran: nothing was imported. Upload the file again."
        import_job_fail(job_id=job_id, reason=reason, attempt=attempt)
        return ImportRunOutcome(job_id=job_id, status="failed", detail=reason)
    if attempt > MAX_ATTEMPTS:
        reason = (f"The import stopped {attempt - 1} times before it could finish (its worker was stopped, or ran "
                  f"out of memory); {len(job.conversation_ids)} of {job.total} conversations were imported.")
        import_job_fail(job_id=job_id, reason=reason, attempt=attempt)
        return ImportRunOutcome(job_id=job_id, status="failed", detail=reason)
    try:
        return _Import(job=job, attempt=attempt).run()
    except ImportFileError as exc:
        import_job_fail(job_id=job_id, reason=str(exc), attempt=attempt)
        return ImportRunOutcome(job_id=job_id, status="failed", detail=str(exc))
    except _ClaimLost:
        return ImportRunOutcome(job_id=job_id, status="skipped", detail="taken over by another delivery")
    except Exception as exc:
        # A crash (a bug, a database error) fails this delivery's attempt only: one paused past its lease
        # and then crashing must not fail the delivery that took over. The task logs and re-raises.
        import_job_fail(job_id=job_id, reason=f"Internal error while importing ({type(exc).__name__}).",
                        attempt=attempt)
        raise


def branch_original_keep(*, conversation_id: int, source_id: int | None) -> None:
    """Give a branch (`conversation_id`) its original chat's model as it is set there, its offline flag and
    its folder: the import matches a config by name and model, gives a chat that follows the default (no
    config of its own) the default itself, and a folder by its name, which may have changed since the
    branch's export was read. An original deleted meanwhile leaves what its export said."""
    if source_id is None:
        return
    source = Conversation.objects.filter(pk=source_id).values("llm_config_id", "offline", "folder_id").first()
    if source is not None:
        Conversation.objects.filter(pk=conversation_id).update(
            llm_config=source["llm_config_id"], offline=source["offline"], folder=source["folder_id"]
        )


def _lease_end() -> Any:
    return timezone.now() + timedelta(seconds=settings.IMPORT_LEASE_SECONDS)


class _Import:
    """One delivery's import of a claimed job; every write is fenced by `attempt`."""

    def __init__(self, *, job: ImportJob, attempt: int) -> None:
        self.job = job
        self.attempt = attempt
        self.ids: list[int] = list(job.conversation_ids)
        self.skipped: list[dict[str, Any]] = list(job.skipped)
        self.duplicates = job.duplicates
        self.omitted: Counter[str] = Counter(job.omitted)
        self.models = ModelChoice(owner=job.owner)

    def _fenced(self, **fields: Any) -> None:
        fields.setdefault("lease_expires_at", _lease_end())
        mine = ImportJob.objects.filter(pk=self.job.pk, attempts=self.attempt, status=Status.RUNNING)
        updated = mine.update(**fields)
        if not updated:
            raise _ClaimLost

    def run(self) -> ImportRunOutcome:
        data = zlib.decompress(self.job.payload)
        self.job.payload = b""  # the compressed copy is not needed any more
        document = document_open(data, max_bytes=settings.IMPORT_MAX_BYTES)
        total = document.count()
        self._fenced(format=document.format, total=total)
        for index, record in document.conversations(start=self.job.done):
            if isinstance(record, ConversationError):
                self._skip(index=index, title="", error=str(record))
            else:
                self._store(index=index, record=record)
        self._fenced(status=Status.DONE, finished_at=timezone.now(), payload=b"", lease_expires_at=None)
        detail = (f"{len(self.ids)} imported, {self.duplicates} imported before, {len(self.skipped)} skipped, "
                  f"of {total} ({document.label})")
        return ImportRunOutcome(job_id=self.job.pk, status="done", detail=detail)

    def _store(self, *, index: int, record: ConversationRecord) -> None:
        branch = self.job.kind == ImportJob.Kind.BRANCH
        fingerprint = record_fingerprint(record)
        # Chats imported before the shown branch was left out of the fingerprint are found by the earlier one.
        # A branch is not looked for: branching again from the same message makes another new chat.
        fingerprints = () if branch else (fingerprint, record_fingerprint_shown_branch(record),
                                          *record.earlier_fingerprints)
        if self._imported_before(fingerprints):
            self._duplicate()
            return
        source_id = self.job.source_conversation_id
        if branch and source_id is not None and Conversation.objects.filter(pk=source_id).exists():
            # Its original's folder is given below: the name its export said may be one it no longer has,
            # and a folder of that name must not be made for it.
            record.folder = ""
        try:
            with transaction.atomic():
                conversation = conversation_import(
                    owner=self.job.owner, record=record, index=index, models=self.models
                )
                if branch:
                    branch_original_keep(conversation_id=conversation.pk, source_id=source_id)
                else:
                    ImportedConversation.objects.create(
                        owner=self.job.owner, conversation=conversation, fingerprint=fingerprint
                    )
                omitted = self.omitted + Counter(record.omitted)
                self._fenced(done=F("done") + 1, conversation_ids=[*self.ids, conversation.pk], omitted=dict(omitted))
        except ConversationError as exc:
            self._skip(index=index, title=record.title, error=str(exc))
            return
        except DatabaseError as exc:
            # The same conversation stored meanwhile by another import of this owner (the unique
            # fingerprint), or a value the database refuses (a check, a range): rolled back either way.
            if isinstance(exc, IntegrityError) and self._imported_before(fingerprints):
                self._duplicate()
            else:
                self._refused(index=index, record=record, exc=exc)
            return
        self.ids.append(conversation.pk)
        self.omitted = omitted

    def _duplicate(self) -> None:
        self._fenced(done=F("done") + 1, duplicates=F("duplicates") + 1)
        self.duplicates += 1

    def _imported_before(self, fingerprints: tuple[str, ...]) -> bool:
        if not fingerprints:
            return False
        return ImportedConversation.objects.filter(owner=self.job.owner, fingerprint__in=fingerprints).exists()

    def _refused(self, *, index: int, record: ConversationRecord, exc: DatabaseError) -> None:
        logger.warning("import job %s: conversation %s refused by the database: %s", self.job.pk, index, exc)
        message = f"{where(index, record.title)}: the database refused it ({type(exc).__name__})"
        self._skip(index=index, title=record.title, error=message)

    def _skip(self, *, index: int, title: str, error: str) -> None:
        if len(self.skipped) < MAX_SKIPPED_LISTED:
            # Text from the file: a NUL that PostgreSQL's jsonb refuses must not fail the whole job.
            self.skipped.append(
                {"index": index, "title": text_storable(title[:200]), "error": text_storable(error[:1000])}
            )
        self._fenced(done=F("done") + 1, skipped=self.skipped)
