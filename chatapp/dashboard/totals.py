"""Writes of the dashboard's aggregates (DashboardTotals, DashboardTurnBlock): each record counted once,
in the transaction that creates it, and corrected in the one that finishes it; rebuilt from the
records by `dashboard_totals_rebuild` (seeds, bulk writers, the data migration, a reader that finds
the row behind).

Every figure is a record's *contribution* (`record_contribution`): what it adds to each sum. Creating
a record adds its contribution, finishing it adds (after - before), and the rebuild sums them all,
so the three paths cannot disagree. Increments are F() expressions applied under the totals row's
lock: concurrent turns of a conversation add up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models.fields.json import KT

import optimizer
from chatapp.chat.models import Conversation, OptimizationRecord
from chatapp.chat.rowsql import Statement, row_read, row_update, row_update_statement, statements_run
from chatapp.dashboard.costs import DEFAULT_TRIGGER_RATIO, model_prices
from chatapp.dashboard.ledger import LEDGER_FIELDS, ledger_extend, ledger_rebuild_fields
from chatapp.dashboard.models import DashboardTotals, DashboardTurnBlock

# Turns per DashboardTurnBlock: the series of a 50,000-turn conversation reads 3,125 rows.
BLOCK_TURNS = 16

# Per-turn strategy codes of the series; "window" = no new decision, the earlier window still applies.
STRATEGY_CODES: tuple[str, ...] = ("none", "window", "truncate", "summarize")
_CODE = {name: i for i, name in enumerate(STRATEGY_CODES)}

# A per-call cache of registry prices by (model, registry provider).
Prices = dict[tuple[str, str | None], dict[str, float | None]]

# OpenAI caches prompt prefixes from this length on; shorter prompts are never served from cache.
PROMPT_CACHE_MIN_TOKENS = 1024

# The record columns a contribution is computed from (plus `trigger_tokens`, from `stats`).
FACT_FIELDS: tuple[str, ...] = (
    "id", "conversation_id", "model", "summary_id", "triggered", "strategy", "tokens_full", "tokens_sent", "budget",
    "estimated", "provider_prompt_tokens", "provider_cached_tokens", "cost_full_usd", "cost_sent_usd", "recall_tokens",
    "recall_message_count", "dropped_tokens", "reply_id", "registry_provider",
)


@dataclass(frozen=True)
class PreviousRequest:
    """What the next record's prompt-cache estimate compares with: the request before it."""

    model: str
    summary_id: int | None
    tokens_sent: int
    prompt_hash: str = ""  # its prompts' fingerprint ("" without any): record_finish's prompt-change mark


def record_facts(*, record: OptimizationRecord) -> dict[str, Any]:
    """A record object's facts, as `FACT_FIELDS` + `trigger_tokens` + `prompt_hash` (its prompts'
    fingerprint, "" without any) read them from the database (`_facts_query`)."""
    facts = {name: getattr(record, name) for name in FACT_FIELDS}
    facts["trigger_tokens"] = (record.stats or {}).get("trigger_tokens")
    facts["prompt_hash"] = (record.stats or {}).get("system_prompt_hash") or ""
    return facts


def record_trigger(facts: Mapping[str, Any]) -> int:
    try:
        return int(float(facts["trigger_tokens"]))
    except (TypeError, ValueError):
        # Records written without stats: the optimizer's default trigger share of the budget.
        return int(facts["budget"] * DEFAULT_TRIGGER_RATIO)


def record_code(facts: Mapping[str, Any]) -> int:
    """The series' strategy code of one request (STRATEGY_CODES)."""
    if facts["strategy"] in ("truncate", "summarize"):
        return _CODE[facts["strategy"]]
    return _CODE["window"] if facts["tokens_sent"] < facts["tokens_full"] else _CODE["none"]


def record_refused(facts: Mapping[str, Any]) -> bool:
    """A request the endpoint refused: record_finish stored both its costs as zero (billed nothing)
    where its model's price gives the full history a cost. Zero is also the price of a free model
    (litellm lists some at $0) and, stored to six decimals, of a few tokens on a cheap one: those
    were billed, at nothing."""
    full, sent = facts["cost_full_usd"], facts["cost_sent_usd"]
    if not facts["tokens_sent"] or full is None or sent is None or full or sent:
        return False
    listed = optimizer.cost_usd(facts["model"], prompt_tokens=facts["tokens_full"], provider=_provider(facts))
    return listed is not None and round(listed, 6) > 0


def _provider(facts: Mapping[str, Any]) -> str | None:
    """The registry provider the record's endpoint named when it was made ("" stored: none)."""
    return facts.get("registry_provider") or None


def _prices(facts: Mapping[str, Any], prices: Prices) -> dict[str, float | None]:
    key = (facts["model"], _provider(facts))
    if key not in prices:
        prices[key] = model_prices(key[0], provider=key[1]) or {}
    return prices[key]


def record_contribution(
    facts: Mapping[str, Any], *, previous: PreviousRequest | None, prices: Prices
) -> dict[str, Any]:
    """What one record adds to each additive DashboardTotals field (`prices`: a per-call lookup cache)."""
    full, sent = facts["tokens_full"], facts["tokens_sent"]
    provider, reported = facts["provider_prompt_tokens"], facts["provider_cached_tokens"]
    dropped = facts["dropped_tokens"]
    out: dict[str, Any] = {
        "turns": 1, "tokens_full": full, "tokens_sent": sent,
        "optimized_turns": int(sent < full), "triggered_turns": int(bool(facts["triggered"])),
        "truncate_turns": int(facts["strategy"] == "truncate"),
        "summarize_turns": int(facts["strategy"] == "summarize"),
        "estimated_turns": int(bool(facts["estimated"])),
        "recall_turns": int(facts["recall_message_count"] > 0), "recall_messages": facts["recall_message_count"],
        "recall_tokens": facts["recall_tokens"],
        "dropped_tokens": dropped or 0, "dropped_measured": int(dropped is not None),
        "provider_turns": 0, "provider_ours": 0, "provider_theirs": 0, "provider_abs_error": 0,
        "cost_full_usd": Decimal(0), "cost_sent_usd": Decimal(0), "registry_full_usd": 0.0, "registry_sent_usd": 0.0,
        "unpriced_records": 0, "refused_turns": int(record_refused(facts)),
        "cache_cached_tokens": 0, "cache_sent_usd": 0.0, "cache_sent_usd_with_cache": 0.0, "cache_unpriced_turns": 0,
        "cache_reported_turns": int(reported is not None),
    }
    if provider is not None:
        out.update(provider_turns=1, provider_ours=sent, provider_theirs=provider,
                   provider_abs_error=abs(sent - provider))
    if facts["cost_full_usd"] is not None and facts["cost_sent_usd"] is not None:
        out.update(cost_full_usd=Decimal(facts["cost_full_usd"]), cost_sent_usd=Decimal(facts["cost_sent_usd"]))
    else:
        # Stored without costs: priced from the registry now, the provider's cache hits at the cached
        # price in both (record_finish._usage_fields says why).
        model = facts["model"]
        cached = min(reported, sent) if reported else 0
        cost_full = optimizer.cost_usd(model, prompt_tokens=full, cached_tokens=cached, provider=_provider(facts))
        cost_sent = optimizer.cost_usd(model, prompt_tokens=sent, cached_tokens=cached, provider=_provider(facts))
        if cost_full is None or cost_sent is None:
            out["unpriced_records"] = 1
        else:
            out.update(registry_full_usd=cost_full, registry_sent_usd=cost_sent)
    _add_cache_estimate(out, facts, previous=previous, prices=prices)
    return out


def _add_cache_estimate(out: dict[str, Any], facts: Mapping[str, Any], *, previous: PreviousRequest | None,
                        prices: Prices) -> None:
    """Cost of what was sent if the provider's prompt cache served the stable prefix.

    Between two triggers the request path keeps the window, so each request starts with the whole
    previous request (same model, same summary): that prefix is billed at the cached-input price
    where the model has one. An estimate — the cache also expires when the conversation idles — used
    only for turns whose endpoint did not report its cached prompt tokens (a measurement beats it).
    """
    sent, reported = facts["tokens_sent"], facts["provider_cached_tokens"]
    if record_refused(facts):
        # Refused by the endpoint, billed nothing (record_finish): no spend to estimate. A turn stored
        # at $0 but billed (a free model, a few tokens rounded to six decimals) is estimated as any other.
        return
    cached = 0
    if reported is not None:
        cached = min(reported, sent)
    elif (
        previous is not None and not facts["triggered"] and previous.model == facts["model"]
        and previous.summary_id == facts["summary_id"] and previous.tokens_sent >= PROMPT_CACHE_MIN_TOKENS
    ):
        cached = min(previous.tokens_sent, sent)
    # A token figure: counted whatever the price, so the share cached reads the same with an unpriced
    # turn among the others (the money below is summed over the priced ones, the others counted).
    out["cache_cached_tokens"] = cached
    price = _prices(facts, prices)
    input_price = price.get("input")
    if input_price is None:
        out["cache_unpriced_turns"] = 1
        return
    cached_price = price.get("cached_input")
    if cached_price is None:  # 0.0 is a price (a free cache hit), not a missing one
        cached_price = input_price
    out["cache_sent_usd"] = sent * input_price
    out["cache_sent_usd_with_cache"] = (sent - cached) * input_price + cached * cached_price


def _nonzero(delta: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in delta.items() if value}


# What counting a record reads of its conversation's totals row (under its lock).
_ADD_FIELDS = ("turns", "first_optimized_turn", "last_record_id", "last_model", "last_summary_id", "last_tokens_sent",
               "last_prompt_hash")


def _previous_of(totals: Mapping[str, Any]) -> PreviousRequest | None:
    if totals["last_record_id"] is None:
        return None
    return PreviousRequest(model=totals["last_model"], summary_id=totals["last_summary_id"],
                           tokens_sent=totals["last_tokens_sent"], prompt_hash=totals["last_prompt_hash"])


def dashboard_totals_record_add(*, record: OptimizationRecord) -> tuple[dict[str, Any], PreviousRequest | None]:
    """Count a record just created, in its transaction: the totals row and the record's turn block.

    Two statements: the totals row read under its lock (the turn number and the previous request
    come from it), then its increments with the block's update in one round trip (an insert follows
    for a block's first turn), in plain SQL (rowsql: the ORM's statements cost ten times the CPU, on
    every turn).
    The turn number is the count so far plus one, so records must be counted in id order: the request
    path writes them under the conversation's send lock, one turn at a time. Returns the record's facts
    and the request before it, as counted: what `dashboard_totals_record_finish` corrects from.
    """
    where = {"conversation_id": record.conversation_id}
    with transaction.atomic(savepoint=False):
        totals = row_read(DashboardTotals, where=where, fields=_ADD_FIELDS, lock=True)
        if totals is None:  # the conversation's first record
            DashboardTotals.objects.get_or_create(conversation_id=record.conversation_id)
            totals = row_read(DashboardTotals, where=where, fields=_ADD_FIELDS, lock=True)
            assert totals is not None  # just created, in this transaction
        previous = _previous_of(totals)
        facts = record_facts(record=record)
        delta = record_contribution(facts, previous=previous, prices={})
        turn = totals["turns"] + 1
        assign: dict[str, Any] = {"last_record_id": record.pk, "last_model": record.model,
                                  "last_summary_id": record.summary_id, "last_tokens_sent": record.tokens_sent,
                                  "last_prompt_hash": facts["prompt_hash"]}
        if totals["first_optimized_turn"] is None and (delta["optimized_turns"] or delta["triggered_turns"]):
            assign["first_optimized_turn"] = turn
        totals_update = row_update_statement(DashboardTotals, where=where, add=_nonzero(delta), assign=assign)
        _block_add(conversation_id=record.conversation_id, turn=turn, facts=facts, before=totals_update)
    return facts, previous


def _block_add(*, conversation_id: int, turn: int, facts: Mapping[str, Any], before: Statement) -> None:
    """The request into its turn block, after `before` (another table's write) in the same round trip:
    the block's update closes the list, so its row count says whether the block must be created."""
    number = (turn - 1) // BLOCK_TURNS
    first = new_block(facts)
    if not (turn - 1) % BLOCK_TURNS:  # a block's first turn: nothing to update
        statements_run([before])
        DashboardTurnBlock.objects.create(conversation_id=conversation_id, number=number, **first)
        return
    high = {name: first[name] for name in ("tokens_full_max", "tokens_sent_max", "strategy_max", "recall_max")}
    if first["provider_max"] is not None:
        high["provider_max"] = first["provider_max"]
    block_update = row_update_statement(
        DashboardTurnBlock, where={"conversation_id": conversation_id, "number": number},
        add={"turns": 1, **{name: first[name] for name in (
            "tokens_full_sum", "tokens_sent_sum", "truncations", "summarizations", "recall_sum")}},
        assign={name: first[name] for name in ("last_record_id", "budget_last", "trigger_last")},
        high=high, low={"tokens_sent_min": first["tokens_sent_min"]},
    )
    if not statements_run([before, block_update]):  # the block was never written (a rebuild's gap)
        DashboardTurnBlock.objects.create(conversation_id=conversation_id, number=number, **first)


def new_block(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a block holding this one request."""
    code = record_code(facts)
    full, sent, recall = facts["tokens_full"], facts["tokens_sent"], facts["recall_tokens"]
    return {
        "turns": 1, "first_record_id": facts["id"], "last_record_id": facts["id"],
        "tokens_full_max": full, "tokens_full_sum": full, "tokens_sent_max": sent, "tokens_sent_min": sent,
        "tokens_sent_sum": sent, "budget_last": facts["budget"], "trigger_last": record_trigger(facts),
        "provider_max": facts["provider_prompt_tokens"], "strategy_max": code,
        "truncations": int(facts["strategy"] == "truncate"), "summarizations": int(facts["strategy"] == "summarize"),
        "recall_max": recall, "recall_sum": recall,
    }


def block_merge(block: dict[str, Any], facts: Mapping[str, Any]) -> None:
    """Add one more (later) request to a block's fields, as `_block_add` does in SQL."""
    one = new_block(facts)
    block["turns"] += 1
    block["last_record_id"] = one["last_record_id"]
    for name in ("tokens_full_max", "tokens_sent_max", "strategy_max", "recall_max"):
        block[name] = max(block[name], one[name])
    block["tokens_sent_min"] = min(block["tokens_sent_min"], one["tokens_sent_min"])
    for name in ("tokens_full_sum", "tokens_sent_sum", "truncations", "summarizations", "recall_sum"):
        block[name] += one[name]
    block["budget_last"], block["trigger_last"] = one["budget_last"], one["trigger_last"]
    if one["provider_max"] is not None:
        block["provider_max"] = max(block["provider_max"] or 0, one["provider_max"])


def _facts_query(**filters: Any) -> Any:
    return (
        OptimizationRecord.objects.filter(**filters)
        .annotate(trigger_tokens=KT("stats__trigger_tokens"), prompt_hash=KT("stats__system_prompt_hash"))
        .values(*FACT_FIELDS, "trigger_tokens", "prompt_hash")
    )


def dashboard_totals_record_finish(
    *, facts: Mapping[str, Any], previous: PreviousRequest | None, fields: dict[str, Any]
) -> None:
    """Update a record when its turn ends (`fields`, as QuerySet.update takes them: the provider's
    figures, the tokens dropped, a cheaper cost when the provider's cache served part of the prompt)
    and correct the totals by what its contribution became, in one transaction. Its facts as counted
    and the request before it are in hand (dashboard_totals_record_add returned them; nothing else
    writes a record), so neither is read again."""
    record_id = facts["id"]
    with transaction.atomic(savepoint=False):
        # The record's row first, then the totals' (the order every writer takes them in).
        if not row_update(OptimizationRecord, where={"id": record_id}, assign=fields):
            return
        row = row_read(DashboardTotals, where={"conversation_id": facts["conversation_id"]}, fields=LEDGER_FIELDS,
                       lock=True)
        if row is None:
            return  # never counted: the next reader rebuilds the row from the records
        totals = DashboardTotals(conversation_id=facts["conversation_id"], **row)
        after = {**facts, **{name: value for name, value in fields.items() if name in facts}}
        _totals_correct(totals=totals, before=facts, after=after, previous=previous)


def _totals_correct(
    *, totals: DashboardTotals, before: Mapping[str, Any], after: Mapping[str, Any], previous: PreviousRequest | None
) -> None:
    """Correct the locked totals (its ledger fields read) and the record's turn block by what its
    contribution became."""
    prices: Prices = {}
    old = record_contribution(before, previous=previous, prices=prices)
    new = record_contribution(after, previous=previous, prices=prices)
    delta = _nonzero({name: new[name] - old[name] for name in new})
    # The turn is over: the messages made before it started join the ledger (ledger.py).
    reply_id = after["reply_id"]
    ledger = ledger_extend(totals=totals, through_id=reply_id - 1 if reply_id is not None else None)
    # Other tables' writes, reading nothing back: one round trip.
    statements: list[Statement] = []
    if delta or ledger:
        statements.append(row_update_statement(DashboardTotals, where={"conversation_id": totals.conversation_id},
                                               add=delta, assign=ledger))
    provider = after["provider_prompt_tokens"]
    record_id = after["id"]
    if provider is not None and provider != before["provider_prompt_tokens"]:
        statements.append(row_update_statement(
            DashboardTurnBlock,
            where={"conversation_id": totals.conversation_id, "last_record_id__gte": record_id,
                   "first_record_id__lte": record_id},
            high={"provider_max": provider},
        ))
    if statements:
        statements_run(statements)


def totals_from_facts(rows: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The totals row's fields and the turn blocks of records given in turn order (pure: the rebuild
    and the data migration share it)."""
    totals: dict[str, Any] = {}
    blocks: list[dict[str, Any]] = []
    prices: Prices = {}
    previous: PreviousRequest | None = None
    last: Mapping[str, Any] | None = None
    for turn, facts in enumerate(rows, start=1):
        delta = record_contribution(facts, previous=previous, prices=prices)
        for name, value in delta.items():
            totals[name] = totals.get(name, 0) + value
        if totals.get("first_optimized_turn") is None and (delta["optimized_turns"] or delta["triggered_turns"]):
            totals["first_optimized_turn"] = turn
        if (turn - 1) % BLOCK_TURNS:
            block_merge(blocks[-1], facts)
        else:
            blocks.append({"number": (turn - 1) // BLOCK_TURNS, **new_block(facts)})
        previous = PreviousRequest(model=facts["model"], summary_id=facts["summary_id"],
                                   tokens_sent=facts["tokens_sent"], prompt_hash=facts.get("prompt_hash") or "")
        last = facts
    if last is not None:
        totals.update(last_record_id=last["id"], last_model=last["model"], last_summary_id=last["summary_id"],
                      last_tokens_sent=last["tokens_sent"], last_prompt_hash=last.get("prompt_hash") or "")
        if last["reply_id"] is not None:
            # Where the message ledger may end (ledger.py): the message before the newest reply.
            totals["ledger_through_id"] = last["reply_id"] - 1
    return totals, blocks


def dashboard_totals_rebuild(*, conversation: Conversation) -> DashboardTotals:
    """Recompute a conversation's totals row and turn blocks from all its records (one pass in turn
    order), and its message ledger through the message before the newest record's reply, under the
    conversation's lock so no turn starts meanwhile."""
    with transaction.atomic():
        Conversation.objects.select_for_update().filter(pk=conversation.pk).values_list("pk").first()
        rows = _facts_query(conversation_id=conversation.pk).order_by("id").iterator(chunk_size=2000)
        fields, blocks = totals_from_facts(rows)
        through = fields.pop("ledger_through_id", None)
        fields.update(ledger_rebuild_fields(conversation_id=conversation.pk, through_id=through))
        defaults = {field.name: field.get_default() for field in DashboardTotals._meta.concrete_fields
                    if not field.primary_key and field.name not in ("created_at", "updated_at")}
        totals, _ = DashboardTotals.objects.update_or_create(conversation_id=conversation.pk,
                                                             defaults={**defaults, **fields})
        DashboardTurnBlock.objects.filter(conversation_id=conversation.pk).delete()
        DashboardTurnBlock.objects.bulk_create(
            [DashboardTurnBlock(conversation_id=conversation.pk, **block) for block in blocks], batch_size=1000
        )
    return totals
