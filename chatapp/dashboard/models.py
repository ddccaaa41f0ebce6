"""The dashboard's own tables: a conversation's figures summed over its optimization records, kept
up to date as records are written (chatapp.dashboard.totals), so that no page or API call
aggregates every record of a long conversation.

Their tables keep the names they were created with in the `chat` app: the models moved to this app
by a state-only migration (since squashed into each app's 0001), no row rewritten.
"""

from __future__ import annotations

from django.db import models

from chatapp.chat.models import Conversation


class DashboardTotals(models.Model):
    """One conversation's sums over all its OptimizationRecords (the headline, the overview and the
    series' totals read this row instead of the records).

    Written in the transaction that creates or finishes a record, with F() increments under the row
    lock; `dashboard_totals_rebuild` recomputes it from the records (seeds, bulk writers, the data
    migration). Costs of records stored with both figures are summed exactly (`cost_*_usd`); records
    stored without them are priced from the model registry when counted (`registry_*_usd`) or, for
    an unknown model, counted in `unpriced_records`.
    """

    conversation = models.OneToOneField(Conversation, primary_key=True, on_delete=models.CASCADE, related_name="+")
    turns = models.PositiveIntegerField(default=0)
    tokens_full = models.PositiveBigIntegerField(default=0)
    tokens_sent = models.PositiveBigIntegerField(default=0)
    cost_full_usd = models.DecimalField(max_digits=20, decimal_places=6, default=0)
    cost_sent_usd = models.DecimalField(max_digits=20, decimal_places=6, default=0)
    registry_full_usd = models.FloatField(default=0)
    registry_sent_usd = models.FloatField(default=0)
    unpriced_records = models.PositiveIntegerField(default=0)
    # Requests the endpoint refused (record_finish: both costs stored as zero, tokens sent): billed
    # nothing, so they price no saving; a chat with only these (and unpriced ones) has none known.
    refused_turns = models.PositiveIntegerField(default=0)
    optimized_turns = models.PositiveIntegerField(default=0)
    triggered_turns = models.PositiveIntegerField(default=0)
    truncate_turns = models.PositiveIntegerField(default=0)
    summarize_turns = models.PositiveIntegerField(default=0)
    estimated_turns = models.PositiveIntegerField(default=0)
    # 1-based turn of the first request that sent less than the full history or fired the trigger.
    first_optimized_turn = models.PositiveIntegerField(null=True, blank=True)
    # Requests whose provider reported its prompt count: ours and theirs summed, and |ours - theirs|.
    provider_turns = models.PositiveIntegerField(default=0)
    provider_ours = models.PositiveBigIntegerField(default=0)
    provider_theirs = models.PositiveBigIntegerField(default=0)
    provider_abs_error = models.PositiveBigIntegerField(default=0)
    recall_turns = models.PositiveIntegerField(default=0)
    recall_messages = models.PositiveBigIntegerField(default=0)
    recall_tokens = models.PositiveBigIntegerField(default=0)
    dropped_tokens = models.PositiveBigIntegerField(default=0)
    dropped_measured = models.PositiveIntegerField(default=0)
    # The prompt-cache estimate (series.py): cached tokens and what the sent tokens cost without and
    # with the cache, over the requests whose model has an input price; the others are counted.
    cache_cached_tokens = models.PositiveBigIntegerField(default=0)
    cache_sent_usd = models.FloatField(default=0)
    cache_sent_usd_with_cache = models.FloatField(default=0)
    cache_unpriced_turns = models.PositiveIntegerField(default=0)
    cache_reported_turns = models.PositiveIntegerField(default=0)
    # The newest record counted: the next one's cache estimate compares with it, and a reader that
    # finds a newer record knows this row is behind (records written around the services).
    last_record_id = models.BigIntegerField(null=True, blank=True)
    last_model = models.CharField(max_length=200, blank=True, default="")
    last_summary_id = models.BigIntegerField(null=True, blank=True)
    last_tokens_sent = models.PositiveIntegerField(default=0)
    # Its prompts' fingerprint (stats.system_prompt_hash): the next record is marked
    # system_prompt_changed by comparing with it, where a turn's end read the two newest records.
    last_prompt_hash = models.CharField(max_length=64, blank=True, default="")
    # The message ledger (ledger.py): up to message `ledger_through_id`, how many messages and which
    # summaries the conversation holds, so the dashboard numbers messages and summaries without
    # reading all of them (readers add what comes after: an index range). Flags fixed when a
    # summary is made are counted; `discarded` changes later and is counted on the partial index
    # msg_conv_summary_idx instead. Extended when a turn ends, up to the message before its reply.
    ledger_through_id = models.BigIntegerField(null=True, blank=True)
    ledger_messages = models.PositiveIntegerField(default=0)
    summary_ids = models.JSONField(default=list)
    summaries_made = models.PositiveIntegerField(default=0)
    summaries_extractive = models.PositiveIntegerField(default=0)
    summaries_edited = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "chat_dashboardtotals"

    def __str__(self) -> str:
        return f"dashboard totals of conversation {self.conversation_id}"


class DashboardTurnBlock(models.Model):
    """Per-turn chart figures of BLOCK_TURNS consecutive requests, summed or reduced, so the series of
    a long conversation reads one row per block instead of one per record.

    Block `number` k holds turns k·BLOCK_TURNS + 1 … (k + 1)·BLOCK_TURNS. Written with the totals
    (same transaction, same lock); the series merges whole blocks into its ≤ 2,000 points.
    """

    # No index of its own: the two below start with the conversation.
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+", db_index=False)
    number = models.PositiveIntegerField()
    turns = models.PositiveSmallIntegerField(default=0)
    first_record_id = models.BigIntegerField()
    last_record_id = models.BigIntegerField()
    tokens_full_max = models.PositiveIntegerField(default=0)
    tokens_full_sum = models.PositiveBigIntegerField(default=0)
    tokens_sent_max = models.PositiveIntegerField(default=0)
    tokens_sent_min = models.PositiveIntegerField(default=0)
    tokens_sent_sum = models.PositiveBigIntegerField(default=0)
    # The block's last request's budget and trigger (step lines: the value in force at its end).
    budget_last = models.PositiveIntegerField(default=0)
    trigger_last = models.PositiveIntegerField(default=0)
    provider_max = models.PositiveIntegerField(null=True, blank=True)
    # The highest per-turn strategy code (series.STRATEGY_CODES) among the block's requests.
    strategy_max = models.PositiveSmallIntegerField(default=0)
    truncations = models.PositiveSmallIntegerField(default=0)
    summarizations = models.PositiveSmallIntegerField(default=0)
    recall_max = models.PositiveIntegerField(default=0)
    recall_sum = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "chat_dashboardturnblock"
        indexes = [
            # A record's block (turn numbers, the provider's figure when a turn ends): the first block
            # of the conversation whose last record is at or after it, one index seek.
            models.Index(fields=["conversation", "last_record_id"], name="dashblock_conv_last_idx"),
        ]
        constraints = [
            # The series: a conversation's blocks in turn order (a range of numbers); one row per block.
            models.UniqueConstraint(fields=["conversation", "number"], name="dashblock_conv_number_uniq"),
        ]

    def __str__(self) -> str:
        return f"turn block {self.number} of conversation {self.conversation_id}"
