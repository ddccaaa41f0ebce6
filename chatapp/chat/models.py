"""Data model. Business logic lives in services.py (writes) and selectors.py (reads), not here.

Stored history is never destroyed: optimization chooses what to send at request time. Messages are
ordered by primary key within a conversation (ids grow with time), so "the window from message X"
is `id >= X` and served by the (conversation, id) index.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from chatapp.chat.job_models import LeasedJob
from chatapp.chat.jsontext import FastJSONEncoder
from chatapp.providers.models import LLMConfig


class Preference(models.TextChoices):
    FAST = "fast", "Fast"
    BALANCED = "balanced", "Balanced"
    QUALITY = "quality", "Quality"


class UserSettings(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_settings")
    preference = models.CharField(max_length=16, choices=Preference.choices, default=Preference.BALANCED)
    auto_optimize = models.BooleanField(default=True)
    # Issue 4: ask before an automatic compaction instead of enqueuing it.
    confirm_compaction = models.BooleanField(default=False)
    # A new chat is named by the model after its first reply (title_services), as ChatGPT, Open WebUI
    # and LibreChat do; off: the first words of the first message stay its title.
    generate_titles = models.BooleanField(default=True)
    # Issue 4: a separate (cheaper) model for summaries; null = the conversation's own config.
    summary_config = models.ForeignKey(LLMConfig, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # Issue 13: sent first in every chat of the user (before the chat's system prompt) and never
    # dropped by the optimizer; at most services.SYSTEM_PROMPT_MAX_CHARS.
    custom_instructions = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"settings of user {self.user_id}"


class Conversation(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200, default="New chat")
    title_is_custom = models.BooleanField(default=False)
    # The model was asked to name the chat (title_services): once, after its first complete reply. Set
    # for chats made before that existed, and imported ones, so their titles are not replaced.
    title_requested = models.BooleanField(default=False)
    # The chat's model, fixed when it starts and changed only by the user. Null with `offline` false
    # only when the config was deleted (or none was default): the owner's default is used then.
    llm_config = models.ForeignKey(LLMConfig, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The chat talks to the built-in offline demo model and stays with it when a real model is added:
    # the demo's replies describe the context and are not conversation to send another model.
    offline = models.BooleanField(default=False)
    # One of its messages has an image (image_services): only then does a turn look for the packed ones'.
    has_images = models.BooleanField(default=False)
    # Issue 13: this chat's system prompt, sent after the owner's custom instructions and never dropped.
    system_prompt = models.TextField(blank=True, default="")
    # Optimizer window state: id of the first message of the verbatim window. It moves only when the
    # trigger fires, so consecutive requests share a stable prefix (provider prompt caches).
    window_start_id = models.BigIntegerField(null=True, blank=True)
    # Running totals over the live (sendable) chat messages, kept by services on every write so the
    # request path never aggregates or loads the whole history.
    live_message_count = models.PositiveIntegerField(default=0)
    live_char_count = models.PositiveBigIntegerField(default=0)
    live_token_count = models.PositiveBigIntegerField(default=0)
    # The offline demo model's replies among those totals: a request to a real model leaves them out
    # (context.live_history), so the history it packs is the difference.
    offline_reply_count = models.PositiveIntegerField(default=0)
    offline_reply_chars = models.PositiveBigIntegerField(default=0)
    offline_reply_tokens = models.PositiveBigIntegerField(default=0)
    truncation_count = models.PositiveIntegerField(default=0)
    summary_count = models.PositiveIntegerField(default=0)
    # Set when the chat moved to a model with another tokenizer (o200k ↔ cl100k): the stored counts
    # are not recounted (that reads the whole history), so from then on they are marked estimated.
    token_counts_mixed = models.BooleanField(default=False)
    # When the turn now running here started (null: none). Turns are one at a time: a send takes the
    # claim with one conditional UPDATE of this row and gives it back when its reply is stored, so the
    # message can be acknowledged before the context is packed (turn_claim).
    turn_claimed_at = models.DateTimeField(null=True, blank=True)
    # Pinned to the top of the sidebar (when; null: not pinned). Not activity: updated_at stays.
    pinned_at = models.DateTimeField(null=True, blank=True)
    # Archived: out of the sidebar, listed in Settings (when; null: not). A turn brings it back (turn_claim).
    archived_at = models.DateTimeField(null=True, blank=True)
    # In one folder of the owner's, or none (null); its folder deleted, the chat is back in the main list.
    folder = models.ForeignKey("chat.Folder", null=True, blank=True, on_delete=models.SET_NULL, db_index=False,
                               related_name="conversations")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            # Sidebar, GET /api/conversations/: last activity first, id breaking ties (conversation_list);
            # the API's next page seeks its cursor (the last row's time and id) here, a range scan.
            models.Index(fields=["owner", "-updated_at", "-id"], name="conv_owner_updated_id_idx"),
            # Sidebar: a user's pinned chats; Settings: the archived ones. Latest first, few rows of many.
            models.Index(fields=["owner", "-pinned_at"], condition=models.Q(pinned_at__isnull=False),
                         name="conv_owner_pinned_idx"),
            models.Index(fields=["owner", "-archived_at"], condition=models.Q(archived_at__isnull=False),
                         name="conv_owner_archived_idx"),
            # Sidebar: each folder's chats by last activity; a folder's delete sets its chats' column null.
            models.Index(fields=["folder", "-updated_at"], condition=models.Q(folder__isnull=False),
                         name="conv_folder_updated_idx"),
        ]

    def __str__(self) -> str:
        return self.title


class Message(models.Model):
    class Role(models.TextChoices):
        SYSTEM = "system", "System"
        USER = "user", "User"
        ASSISTANT = "assistant", "Assistant"

    class Kind(models.TextChoices):
        CHAT = "chat", "Chat"
        SUMMARY = "summary", "Summary"

    class Status(models.TextChoices):
        COMPLETE = "complete", "Complete"
        STREAMING = "streaming", "Streaming"
        STOPPED = "stopped", "Stopped"
        ERROR = "error", "Error"

    # What a chat message may be to be sent again (context.live_chat_q): a reply the user stopped is
    # kept as far as it went, as shown, so "go on" after Stop reaches a model that knows what it said.
    LIVE_STATUSES = (Status.COMPLETE, Status.STOPPED)

    # No index of its own: msg_conv_id_idx (conversation, id) serves every lookup by conversation in
    # id order. With both, PostgreSQL read a long conversation through the one-column index and
    # sorted 100,000 rows on disk for the dashboard's message map.
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages", db_index=False)
    role = models.CharField(max_length=16, choices=Role.choices)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.CHAT)
    content = models.TextField()
    # A reasoning model's thinking before this reply's answer (providers.thinking): shown folded,
    # never sent back to a model, counted, summarized, recalled nor searched. Null: none. Nullable with
    # no default so that adding it rewrites no table (migration 0017).
    reasoning = models.TextField(null=True, blank=True)  # noqa: DJ001 - null here is "none", and no table rewrite
    # Why the model ended a complete reply, as it said (llm.Finish): "length" is a reply cut at the
    # output limit, which the chat marks and offers to continue. Null: not said, not a model's reply,
    # or stored before migration 0018 (nullable, like `reasoning`, so no table is rewritten).
    finish_reason = models.CharField(max_length=32, null=True, blank=True)  # noqa: DJ001 - null: not said
    # Full chat-format token count (OpenAI per-message overhead included), computed once at write.
    token_count = models.PositiveIntegerField(default=0)
    char_count = models.PositiveIntegerField(default=0)
    pinned = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.COMPLETE)
    # Off the active path (issue 13, branches): a message of another branch (an edited user message,
    # a regenerated or retried reply, what followed them) or a summary written for one. Kept, never
    # sent, recalled or counted; the timeline shows the active path only. Every root-to-leaf path is
    # increasing in id, so the active path is "superseded=False in id order" for every existing reader.
    superseded = models.BooleanField(default=False)
    # The tree: the chat message this one follows (null for a root: the first message and its edits).
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children", db_index=False
    )
    # For a message off the active path: the id of the message whose switch-away hid it (the first of
    # its hidden branch). Switching back to that message brings back exactly these rows: the path
    # that was active under it, found by one index read instead of a walk down the tree.
    off_path_by = models.BigIntegerField(null=True, blank=True)
    # For an assistant reply: the user message it answers.
    reply_to = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replies")
    model = models.CharField(max_length=200, blank=True, default="")
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    # Summary messages (kind=summary): the range of message ids they cover, inclusive.
    covers_from_id = models.BigIntegerField(null=True, blank=True)
    covers_through_id = models.BigIntegerField(null=True, blank=True)
    covered_message_count = models.PositiveIntegerField(null=True, blank=True)
    source_chars = models.PositiveIntegerField(null=True, blank=True)
    extractive = models.BooleanField(default=False)
    discarded = models.BooleanField(default=False)
    edited = models.BooleanField(default=False)
    # A summary's pinned messages that no summary holds: its span passed over them (a pin is sent as
    # itself anyway), and so did its predecessors' for those still listed. One unpinned later is sent
    # as itself until a summary folds it in (context.context_load, summary_writing.span_plan). Null:
    # none. Migration 0013 filled it for the summaries stored before it.
    skipped_pin_ids = models.JSONField(null=True, blank=True)
    # An edited summary is a new message (records keep pointing at the exact text they sent); this is
    # the summary it replaced, which is kept, discarded.
    edited_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    # A user message's idempotency key from the client ("" if none): the same send twice (a double
    # click, a retried request) is stored once.
    client_key = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            # Request path: the verbatim window (conversation, id >= window_start) and timeline pages.
            # The columns after (conversation, id) make it cover the dashboard's message map, which
            # classifies every message of a conversation: read from the index alone, a 100,000-message
            # map took 17 ms of PostgreSQL instead of 170-270 (heap pages), and SQLite's 146 ms went to 97.
            models.Index(
                fields=["conversation", "id", "superseded", "kind", "role", "discarded", "status"],
                name="msg_conv_id_idx",
            ),
            # Request path: the static layer (pins) without scanning history.
            models.Index(fields=["conversation", "id"], condition=Q(pinned=True), name="msg_conv_pinned_idx"),
            # Request path: system messages of the static layer, same reason.
            models.Index(
                fields=["conversation", "id"],
                condition=Q(role="system", kind="chat"),
                name="msg_conv_system_idx",
            ),
            # Send: a conversation's reply still streaming (one at a time) and a repeated client key.
            models.Index(fields=["conversation"], condition=Q(status="streaming"), name="msg_conv_streaming_idx"),
            # Request path: the newest live summary of the active path.
            models.Index(
                fields=["conversation", "-id"],
                condition=Q(kind="summary", discarded=False, superseded=False),
                name="msg_conv_summary_path_idx",
            ),
            # Dashboard: a conversation's summaries in order, whatever their state (the ledger's
            # numbering reads those after its end; the headline counts the live ones among them).
            # Without it each read filtered every message of the conversation (73 ms at 100k).
            models.Index(fields=["conversation", "id"], condition=Q(kind="summary"), name="msg_conv_summary_idx"),
            # Sibling counts of a timeline page (children of its messages' parents, in id order).
            models.Index(fields=["parent", "id"], name="msg_parent_idx"),
            # Send: the tail of the active path (the new message's parent), however many messages of
            # other branches are newer; also the active path's timeline pages.
            models.Index(
                fields=["conversation", "id"], condition=Q(kind="chat", superseded=False), name="msg_conv_path_idx"
            ),
            # Sibling counts of a conversation's roots (its first message and the edits of it).
            models.Index(
                fields=["conversation", "id"],
                condition=Q(kind="chat", parent__isnull=True),
                name="msg_conv_root_idx",
            ),
            # Dashboard: the replaced versions (regenerated replies, edited questions) that the users'
            # numbering skips, without reading the conversation's other messages.
            models.Index(
                fields=["conversation", "id"],
                condition=Q(kind="chat", superseded=True),
                name="msg_conv_superseded_idx",
            ),
            # Branch switch: the rows a switch back to a message brings back onto the active path.
            models.Index(
                fields=["conversation", "off_path_by"],
                condition=Q(off_path_by__isnull=False),
                name="msg_conv_off_path_idx",
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=~Q(kind="summary") | Q(role="system"), name="msg_summary_is_system"),
            models.UniqueConstraint(
                fields=["conversation", "client_key"], condition=~Q(client_key=""), name="msg_conv_client_key_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role}#{self.pk}"

    @property
    def cut_at_output_limit(self) -> bool:
        """A complete reply the model ended at its output limit: it stops mid-sentence (marked so)."""
        return self.status == self.Status.COMPLETE and self.finish_reason == "length"


class OptimizationRecord(models.Model):
    """What the optimizer decided for one model request: enough to rebuild what the model saw."""

    class Strategy(models.TextChoices):
        NONE = "none", "None"
        TRUNCATE = "truncate", "Truncate"
        SUMMARIZE = "summarize", "Summarize"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="optimization_records")
    reply = models.ForeignKey(Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    preference = models.CharField(max_length=16, choices=Preference.choices)
    model = models.CharField(max_length=200)
    # The registry's provider prefix the endpoint's host named at request time (provider_for_base_url,
    # null for other hosts): the model is priced as its window was found, whatever the base URL is later.
    # Nullable with no default (chat migration 0023): neither database rewrites the records' table.
    registry_provider = models.CharField(max_length=32, null=True, blank=True)  # noqa: DJ001
    context_window = models.PositiveIntegerField()
    budget = models.PositiveIntegerField()
    triggered = models.BooleanField(default=False)
    window_start_id = models.BigIntegerField(null=True, blank=True)
    strategy = models.CharField(max_length=16, choices=Strategy.choices)
    reason = models.TextField(blank=True, default="")
    scores = models.JSONField(default=dict)
    tokens_full = models.PositiveIntegerField()
    tokens_sent = models.PositiveIntegerField()
    provider_prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    # Prompt tokens the provider served from its prompt cache (usage.prompt_tokens_details); null when
    # the endpoint does not report it.
    provider_cached_tokens = models.PositiveIntegerField(null=True, blank=True)
    estimated = models.BooleanField(default=False)
    # [{"source_ids": [...], "origin": "verbatim|pinned|compressed|summary|recall", "tokens": n}, ...] in
    # send order; see turn_records._sent_entry for what each origin adds to rebuild its text exactly.
    # Written on every turn, an entry per message sent: encoded by orjson (jsontext).
    sent = models.JSONField(default=list, encoder=FastJSONEncoder)
    # Message ids not sent and not covered by the summary used, as [first, last] id ranges. Messages
    # quoted by a recall block were sent (as quotes), so they are not in these ranges.
    dropped_ranges = models.JSONField(default=list)
    # Stored tokens of the live messages in `dropped_ranges`: what this turn left out with no summary
    # standing in, as opposed to what summaries replaced. Measured when the turn ends (off the first
    # byte's path); null for turns that never ended and records older than the column.
    dropped_tokens = models.PositiveIntegerField(null=True, blank=True)
    # The recall block (optimizer.recall), if one was sent: its tokens and how many old messages it
    # quoted. Its `sent` entry has the details; these columns let the dashboard sum and chart recall
    # per turn without reading every record's `sent` list.
    recall_tokens = models.PositiveIntegerField(default=0)
    recall_message_count = models.PositiveIntegerField(default=0)
    summary = models.ForeignKey(Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    messages_before = models.PositiveIntegerField(default=0)
    messages_after = models.PositiveIntegerField(default=0)
    pack_ms = models.FloatField(default=0)
    cost_sent_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    cost_full_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    stats = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            # Dashboard: a conversation's records in turn order.
            models.Index(fields=["conversation", "id"], name="optrec_conv_id_idx"),
        ]

    def __str__(self) -> str:
        return f"record #{self.pk} ({self.strategy})"


class SummaryJob(LeasedJob):
    """A background summary of one span of a conversation (issue 4)."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending (broker unreachable, will be enqueued)"
        AWAITING_CONFIRMATION = "awaiting", "Waiting for your confirmation"
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    class Trigger(models.TextChoices):
        AUTO = "auto", "Automatic"
        AHEAD = "ahead", "Ahead of need"
        MANUAL = "manual", "Compact now"

    ACTIVE_STATUSES = (Status.PENDING, Status.AWAITING_CONFIRMATION, Status.QUEUED, Status.RUNNING)

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="summary_jobs")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    trigger = models.CharField(max_length=16, choices=Trigger.choices, default=Trigger.AUTO)
    instructions = models.TextField(blank=True, default="")
    # Planned span (inclusive message ids); the task re-reads and re-plans if the conversation moved.
    span_from_id = models.BigIntegerField(null=True, blank=True)
    span_through_id = models.BigIntegerField(null=True, blank=True)
    summary = models.ForeignKey(Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    model = models.CharField(max_length=200, blank=True, default="")
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)

    class Meta:
        indexes = [
            # Chat and API: the latest job of a conversation; sweep: pending jobs.
            models.Index(fields=["conversation", "-id"], name="sumjob_conv_idx"),
            models.Index(fields=["status", "id"], name="sumjob_status_idx"),
            # Every turn: the daily quota's count of a conversation's jobs since a time
            # (summary_selectors.summary_quota_used), read from the index alone.
            models.Index(fields=["conversation", "created_at", "trigger", "status"], name="sumjob_quota_idx"),
        ]
        constraints = [
            # One summary job per conversation at a time, enforced by the database.
            models.UniqueConstraint(
                fields=["conversation"],
                condition=Q(status__in=["pending", "awaiting", "queued", "running"]),
                name="sumjob_one_active_per_conversation",
            ),
        ]

    def __str__(self) -> str:
        return f"summary job #{self.pk} ({self.status})"


# Tables in modules of their own (this one is at its size bound): imports' jobs and fingerprints, the
# full-text index and recall statistics, share links, saved prompts, API tokens, folders, images and
# account deletions.
from chatapp.chat.account_models import AccountDeletion  # noqa: E402, F401
from chatapp.chat.folder_models import Folder  # noqa: E402, F401
from chatapp.chat.image_models import MessageImage  # noqa: E402, F401
from chatapp.chat.import_models import ImportedConversation, ImportJob  # noqa: E402, F401
from chatapp.chat.prompt_models import SavedPrompt  # noqa: E402, F401
from chatapp.chat.search_models import MessageSearch, RecallCorpus, RecallTerm  # noqa: E402, F401
from chatapp.chat.share_models import ConversationShare  # noqa: E402, F401
from chatapp.chat.token_models import ApiToken  # noqa: E402, F401
