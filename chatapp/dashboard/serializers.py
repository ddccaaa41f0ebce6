"""The shapes of the dashboard's JSON answers, for the OpenAPI schema.

The selectors build these answers as plain dicts (the series alone holds an array per field with an
entry per request, which a serializer per value would slow down for nothing); these serializers
describe them, and tests/dashboard/test_api_shapes.py checks that every answer matches its
serializer key for key, so the schema cannot drift from what is sent.
"""

from __future__ import annotations

from rest_framework import serializers

_int = serializers.IntegerField
_float = serializers.FloatField
_str = serializers.CharField
_bool = serializers.BooleanField


def _ints(**kwargs: object) -> serializers.ListField:
    return serializers.ListField(child=_int(allow_null=True), **kwargs)


# --- headline -------------------------------------------------------------------------------------


class ConversationRefSerializer(serializers.Serializer):
    id = _int()
    title = _str()


class TokenTotalsSerializer(serializers.Serializer):
    full = _int(help_text="Tokens the whole history would have taken, summed over the requests")
    sent = _int(help_text="Tokens actually sent")
    saved = _int()
    saved_share = _float(allow_null=True)
    dropped = _int(help_text="Tokens left out with no summary standing in (measured when each turn ended)")
    summarized = _int(help_text="Tokens replaced by summaries or compressed")
    dropped_unmeasured = _int(help_text="Requests from before dropped tokens were measured")


class PricesSerializer(serializers.Serializer):
    input = _float(allow_null=True)
    cached_input = _float(allow_null=True)
    output = _float(allow_null=True)


class MoneySerializer(serializers.Serializer):
    full_usd = _float(allow_null=True)
    sent_usd = _float(allow_null=True)
    gross_saved_usd = _float(allow_null=True)
    summary_cost_usd = _float(allow_null=True)
    net_saved_usd = _float(allow_null=True)
    unpriced_records = _int()
    refused_turns = _int(help_text="Requests not billed (refused by the endpoint, or never sent): no saving priced")
    prices = PricesSerializer(allow_null=True)


class StrategyTotalsSerializer(serializers.Serializer):
    optimized_turns = _int()
    triggered_turns = _int()
    truncate = _int()
    summarize = _int()
    first_optimized_turn = _int(allow_null=True)


class SummaryTotalsSerializer(serializers.Serializer):
    made = _int()
    live = _int()
    discarded = _int()
    extractive = _int()
    edited = _int()
    jobs = _int()
    jobs_done = _int()
    jobs_failed = _int()
    latest_failure = _str(allow_null=True, help_text="The latest failed summary job's reason (null: none failed)")


class UsageSerializer(serializers.Serializer):
    record_id = _int()
    model = _str()
    tokens = _int()
    budget = _int()
    context_window = _int()
    ratio = _float()
    full = _int()
    estimated = _bool()
    at = serializers.DateTimeField()


class AccuracySerializer(serializers.Serializer):
    requests = _int()
    ours = _int()
    provider = _int()
    error_share = _float(allow_null=True)
    bias_share = _float(allow_null=True)


class RecallTotalsSerializer(serializers.Serializer):
    turns = _int()
    messages = _int()
    tokens = _int()


class HeadlineSerializer(serializers.Serializer):
    conversation = ConversationRefSerializer()
    turns = _int()
    tokens = TokenTotalsSerializer()
    money = MoneySerializer()
    strategies = StrategyTotalsSerializer()
    summaries = SummaryTotalsSerializer()
    usage = UsageSerializer(allow_null=True, help_text="The latest request against its budget")
    accuracy = AccuracySerializer(allow_null=True, help_text="Our token counts against the provider's")
    estimated_turns = _int()
    recall = RecallTotalsSerializer()


# --- series and map ------------------------------------------------------------------------------


class CacheEstimateSerializer(serializers.Serializer):
    cached_tokens = _int()
    cached_share = _float()
    sent_usd = _float(allow_null=True)
    sent_usd_with_cache = _float(allow_null=True)
    provider_reported_turns = _int()
    unpriced_turns = _int(help_text="Turns whose model has no input price: left out of the two costs")
    refused_turns = _int(help_text="Requests billed nothing (refused by the endpoint, or never sent): neither "
                                   "reported nor estimated")


class SeriesTotalsSerializer(serializers.Serializer):
    """Exact sums over every request of the conversation (stored as records are written), whatever
    the range or the buckets drawn."""

    turns = _int()
    tokens_full = _int()
    tokens_sent = _int()
    tokens_saved = _int()
    recall_tokens = _int()
    optimized_turns = _int()
    triggered_turns = _int()
    truncations = _int()
    summarizations = _int()


class SeriesSerializer(serializers.Serializer):
    """One entry per point in every array below. A point is one turn when the range holds at most
    2,000 turns, else a bucket of `bucket_size` consecutive turns (whole blocks of 16; the last may
    hold fewer), its turns in `turn_first` … `turn_last`. Per field, a bucket holds what its chart
    needs: the largest per-request value for the lines drawn against the budget (a saw-tooth keeps
    its peaks; `tokens_sent_min` its troughs), the last request's value for the step lines, exact
    sums for totals, and the running total at its last turn for the cumulative line."""

    count = _int(help_text="Requests (turns) in the conversation")
    points = _int(help_text="Entries in each array below")
    bucket_size = _int(help_text="Turns per point: 1 = one point per turn")
    first_turn = _int(help_text="First turn covered by the points (0: none)")
    last_turn = _int(help_text="Last turn covered by the points (0: none)")
    strategy_codes = serializers.ListField(child=_str(), help_text="Names of the codes in `strategy`")
    first_optimized_turn = _int(allow_null=True, help_text="1-based turn of the first optimized request")
    first_optimized_index = _int(allow_null=True, help_text="The point holding `first_optimized_turn`, if drawn")
    ids = _ints(help_text="Record id of each point's last turn")
    turn_first = _ints(help_text="First turn (1-based) of each point")
    turn_last = _ints(help_text="Last turn of each point (the x axis)")
    tokens_full = _ints(help_text="Full-history tokens: the largest request of the point")
    tokens_full_sum = _ints(help_text="Full-history tokens summed over the point's requests")
    tokens_sent = _ints(help_text="Tokens sent: the largest request of the point")
    tokens_sent_min = _ints(help_text="Tokens sent: the smallest request of the point")
    tokens_sent_sum = _ints(help_text="Tokens sent summed over the point's requests")
    budget = _ints(help_text="Budget of the point's last request")
    trigger = _ints(help_text="Trigger of the point's last request")
    provider_prompt_tokens = _ints(help_text="Provider's prompt count: the largest reported in the point; null if none")
    strategy = _ints(help_text="Highest strategy code of the point's requests (summarize > truncate > window > none)")
    truncations = _ints(help_text="Requests of the point that truncated")
    summarizations = _ints(help_text="Requests of the point that summarized")
    saved_cumulative = _ints(help_text="Tokens not sent from turn 1 through the point's last turn (exact)")
    recall_tokens = _ints(help_text="Recall block tokens (part of the sent): the largest of the point")
    recall_tokens_sum = _ints(help_text="Recall block tokens summed over the point's requests")
    totals = SeriesTotalsSerializer()
    prompt_cache_estimate = CacheEstimateSerializer(allow_null=True)


class MessageMapSerializer(serializers.Serializer):
    count = _int(help_text="Messages")
    record_id = _int(allow_null=True, help_text="The request the statuses describe (the latest)")
    summary_id = _int(allow_null=True)
    statuses = serializers.ListField(child=_str(), help_text="Status names; `status_runs` uses their index")
    status_labels = serializers.ListField(child=_str())
    status_counts = serializers.DictField(child=_int())
    id_runs = serializers.ListField(child=_ints(), help_text="[first id, length] of each run of consecutive ids")
    roles = _str(help_text="One character per message: u(ser), a(ssistant), s(ystem)")
    status_runs = serializers.ListField(child=_ints(), help_text="[status index, length] runs")


# --- one turn --------------------------------------------------------------------------------------


# One optimization record's columns, as both the record list (api.DashboardRecordListApi) and the
# turn detail send them; each adds its own. A comment, not a docstring: the schema would take a
# docstring as both subclasses' description.
class RecordSerializer(serializers.Serializer):
    id = _int()
    turn = _int()
    created_at = serializers.DateTimeField()
    reply_id = _int(allow_null=True)
    preference = _str()
    model = _str()
    context_window = _int()
    budget = _int()
    triggered = _bool()
    window_start_id = _int(allow_null=True)
    strategy = _str()
    reason = _str()
    tokens_full = _int()
    tokens_sent = _int()
    provider_prompt_tokens = _int(allow_null=True)
    estimated = _bool()
    messages_before = _int()
    messages_after = _int()
    pack_ms = _float()
    cost_sent_usd = _float(allow_null=True)
    cost_full_usd = _float(allow_null=True)
    recall_tokens = _int()
    recall_message_count = _int()
    reply_status = _str(allow_null=True, help_text="How the turn's reply ended: complete, stopped, error (failed "
                                                   "or interrupted) or streaming; null: no reply opened")


class RecordDetailSerializer(RecordSerializer):
    scores = serializers.DictField(child=_float(allow_null=True))
    on_active_path = _bool(help_text="False: the turn's reply is on another branch (edited, regenerated or switched "
                                     "away from); its tokens and cost still count in the totals.")


class RecallQuoteSerializer(serializers.Serializer):
    id = _int()
    role = _str(allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)
    tokens = _int(allow_null=True)
    hit = _bool(help_text="Found by the search (else quoted as a hit's neighbour)")
    rank = _int(allow_null=True, help_text="1 = the best match")


class RecallDetailSerializer(serializers.Serializer):
    terms = serializers.ListField(child=_str())
    hit_ids = _ints()
    quotes = RecallQuoteSerializer(many=True)


class SentEntrySerializer(serializers.Serializer):
    position = _int()
    origin = _str(help_text="verbatim, pinned, compressed, summary or recall")
    tokens = _int(allow_null=True)
    source_ids = _ints()
    role = _str()
    content = _str()
    original_tokens = _int()
    compressed = _bool()
    content_is_sent_text = _bool()
    images = _int(help_text="Images sent with the message to a model that sees them (their cost is in tokens); "
                            "one that does not was sent their placeholders, in content")
    recall = RecallDetailSerializer(allow_null=True)
    system_prompt = _str(
        allow_null=True, help_text="instructions (the user's custom instructions) or conversation (the chat's system "
        "prompt); null for a message. Its `content` is the text the record kept, exactly as sent."
    )
    missing = _bool()
    edited_after = _bool()
    edited = _bool()
    replaced_by_id = _int(allow_null=True)
    covers = _ints(allow_null=True, help_text="[first id, last id, message count] a summary covers")


class SummaryRefSerializer(serializers.Serializer):
    id = _int()
    covers_from_id = _int(allow_null=True)
    covers_through_id = _int(allow_null=True)
    covered_message_count = _int(allow_null=True)


class RecordContextSerializer(serializers.Serializer):
    record = RecordDetailSerializer()
    entries = SentEntrySerializer(many=True)
    recalled_ids = _ints()
    entry_tokens = _int()
    request_shape = serializers.ListField(child=_str())
    dropped_ranges = serializers.ListField(child=_ints())
    numbers = serializers.DictField(child=_int(), help_text="Users' numbering of the messages shown, by id")
    summary_numbers = serializers.DictField(child=_int())
    summary = SummaryRefSerializer(allow_null=True)


# --- across conversations --------------------------------------------------------------------------


class ConversationSavingsSerializer(serializers.Serializer):
    id = _int()
    title = _str()
    archived = serializers.BooleanField(help_text="Archived: out of the sidebar, kept whole")
    turns = _int()
    optimized_turns = _int()
    tokens_full = _int()
    tokens_sent = _int()
    tokens_saved = _int()
    saved_share = _float(allow_null=True)
    net_saved_usd = _float(allow_null=True)
    summary_cost_usd = _float(help_text="What the conversation's summary jobs cost (its net is net of it)")


class OverviewMoneySerializer(serializers.Serializer):
    full_usd = _float(allow_null=True)
    sent_usd = _float(allow_null=True)
    summary_cost_usd = _float(allow_null=True)
    net_saved_usd = _float(allow_null=True)
    summary_cost_other_usd = _float(
        help_text="What summarizing the conversations with no saving known cost (not in the net)")
    unpriced_records = _int()
    refused_turns = _int(help_text="Requests billed nothing: refused by the endpoint, or never sent")


class OverviewSummariesSerializer(serializers.Serializer):
    made = _int()
    jobs = _int()


class OverviewSerializer(serializers.Serializer):
    conversations = _int()
    conversations_with_records = _int()
    turns = _int()
    tokens = TokenTotalsSerializer()
    money = OverviewMoneySerializer()
    summaries = OverviewSummariesSerializer()
    optimized_turns = _int()
    top = ConversationSavingsSerializer(many=True)
