"""The import job's table (issue 13: import conversations). Registered through models.py, which
imports this module (models.py is near the 400-line bound a module keeps to).

The uploaded file is kept in the database (zlib-compressed), not in var/: a worker on another
machine reads the job from the shared database and has no access to the web machine's disk. It is
emptied when the job ends, so the table holds only what is still to be imported.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from chatapp.chat.job_models import LeasedJob


class ImportJob(LeasedJob):
    """An uploaded file imported conversation by conversation (import_services).

    Its lease (LeasedJob) is extended after every conversation; a queued job's lease ends when its
    message is published again (import_jobs_sweep). `error`: why the whole file could not be imported
    (status failed).
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    class Format(models.TextChoices):
        UNKNOWN = "", "Not read yet"
        LONGCHAT = "longchat", "Longchat export"
        CHATGPT = "chatgpt", "ChatGPT conversations.json"
        OPENWEBUI = "openwebui", "Open WebUI export"

    class Kind(models.TextChoices):
        UPLOAD = "upload", "Uploaded file"
        # Branch in new chat past MAX_FORK_MESSAGES or MAX_FORK_IMAGE_BYTES (fork_services): the path as our
        # export, written by the worker. Not checked against earlier imports (a branch is meant to be made
        # again) nor recorded as one.
        BRANCH = "branch", "Branch in new chat"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="import_jobs")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.UPLOAD)
    # A branch's original chat, whose model and offline flag the new chat takes as it is when the job runs;
    # null once deleted (the payload holds the rest: the branch is still written, as its export reads).
    source_conversation = models.ForeignKey(
        "chat.Conversation", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    filename = models.CharField(max_length=255, blank=True, default="")
    size_bytes = models.PositiveBigIntegerField(default=0)
    # The upload, zlib-compressed; b"" once the job has ended.
    payload = models.BinaryField(default=b"")
    format = models.CharField(max_length=16, choices=Format.choices, blank=True, default=Format.UNKNOWN)
    # Progress: conversations in the file, and those handled (imported or skipped) so far.
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    # Ids of the conversations created, in file order; each is added in the transaction that stored it.
    conversation_ids = models.JSONField(default=list, blank=True)
    # Conversations of the file this owner had already imported (ImportedConversation): left as they are.
    duplicates = models.PositiveIntegerField(default=0)
    # Conversations not imported: [{"index": 0-based position in the file, "title", "error"}].
    skipped = models.JSONField(default=list, blank=True)
    # What the source had that was not imported, by reason: {"tool_messages": 12, ...}.
    omitted = models.JSONField(default=dict, blank=True)

    class Meta:
        indexes = [
            # Settings and API: the owner's imports, newest first (every read is owner-scoped).
            models.Index(fields=["owner", "-id"], name="importjob_owner_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(done__lte=F("total")), name="importjob_done_within_total"),
            models.CheckConstraint(condition=Q(duplicates__lte=F("done")), name="importjob_duplicates_within_done"),
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "done", "failed"]), name="importjob_status_valid"
            ),
            models.CheckConstraint(condition=Q(kind__in=["upload", "branch"]), name="importjob_kind_valid"),
        ]

    def __str__(self) -> str:
        return f"import job #{self.pk} ({self.status})"


class ImportedConversation(models.Model):
    """A conversation an import created, under the fingerprint of what the file held
    (`imports.records.record_fingerprint`), so that the same conversation in a later file of the same
    owner is recognised and not imported twice. Deleting the chat deletes this row: importing the file
    again then brings the chat back."""

    # No index of its own: the unique constraint below starts with the owner.
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_index=False)
    conversation = models.OneToOneField("chat.Conversation", on_delete=models.CASCADE, related_name="+")
    fingerprint = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # Serves the import's lookup of each conversation (owner, fingerprint), and makes two imports
            # of one file running at once store each conversation once.
            models.UniqueConstraint(fields=["owner", "fingerprint"], name="importedconv_owner_fp_uniq"),
        ]

    def __str__(self) -> str:
        return f"imported conversation {self.conversation_id}"
