"""The dashboard's stored aggregates (DashboardTotals, DashboardTurnBlock, the summary ledger) equal a
from-scratch recomputation over the records and messages: after real turns through the request
path, after a rebuild, and when turns write concurrently."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.db.models import Count, F, Q, Sum

import optimizer
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from chatapp.dashboard.figures import dashboard_totals_get
from chatapp.dashboard.headline import dashboard_headline
from chatapp.dashboard.models import DashboardTotals, DashboardTurnBlock
from chatapp.dashboard.totals import (
    BLOCK_TURNS,
    PreviousRequest,
    dashboard_totals_rebuild,
    dashboard_totals_record_add,
    dashboard_totals_record_finish,
    record_facts,
)
from tests.dashboard.factories import make_conversation, make_record, make_summary
from tests.support.chat import make_config, send

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_rate_limit")]

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo"]


def from_scratch(conversation: Conversation) -> dict:
    """Every DashboardTotals figure recomputed from the records, the way the dashboard computed them on
    each read before they were stored (database aggregates, then one pass for the cache estimate)."""
    records = OptimizationRecord.objects.filter(conversation=conversation)
    priced = Q(cost_full_usd__isnull=False, cost_sent_usd__isnull=False)
    provider = Q(provider_prompt_tokens__isnull=False)
    sums = {
        "turns": Count("id"), "tokens_full": Sum("tokens_full"), "tokens_sent": Sum("tokens_sent"),
        "cost_full_usd": Sum("cost_full_usd", filter=priced), "cost_sent_usd": Sum("cost_sent_usd", filter=priced),
        "optimized_turns": Count("id", filter=Q(tokens_sent__lt=F("tokens_full"))),
        "triggered_turns": Count("id", filter=Q(triggered=True)),
        "truncate_turns": Count("id", filter=Q(strategy="truncate")),
        "summarize_turns": Count("id", filter=Q(strategy="summarize")),
        "estimated_turns": Count("id", filter=Q(estimated=True)),
        "provider_turns": Count("id", filter=provider), "provider_ours": Sum("tokens_sent", filter=provider),
        "provider_theirs": Sum("provider_prompt_tokens", filter=provider),
        "recall_turns": Count("id", filter=Q(recall_message_count__gt=0)),
        "recall_messages": Sum("recall_message_count"), "recall_tokens": Sum("recall_tokens"),
        "dropped_tokens": Sum("dropped_tokens"),
        "dropped_measured": Count("id", filter=Q(dropped_tokens__isnull=False)),
    }
    # (named apart from the columns they sum: an aggregate may not share a column's name)
    agg = records.aggregate(**{f"x_{name}": value for name, value in sums.items()})
    out = {name: (agg[f"x_{name}"] or 0) for name in sums}
    rows = list(records.order_by("id").values(
        "id", "model", "summary_id", "triggered", "tokens_full", "tokens_sent", "provider_prompt_tokens",
        "provider_cached_tokens", "cost_full_usd", "cost_sent_usd",
    ))
    out["provider_abs_error"] = sum(abs(r["tokens_sent"] - r["provider_prompt_tokens"]) for r in rows
                                    if r["provider_prompt_tokens"] is not None)
    out["first_optimized_turn"] = next(
        (k for k, r in enumerate(rows, start=1) if r["tokens_sent"] < r["tokens_full"] or r["triggered"]), None
    )
    unpriced = [r for r in rows if r["cost_full_usd"] is None or r["cost_sent_usd"] is None]
    out["unpriced_records"] = sum(1 for r in unpriced if optimizer.cost_usd(r["model"], prompt_tokens=1) is None)
    out["refused_turns"] = sum(  # billed nothing where the price gives the full history a cost
        1 for r in rows if r["tokens_sent"] and r["cost_full_usd"] == 0 == r["cost_sent_usd"]
        and round(optimizer.cost_usd(r["model"], prompt_tokens=r["tokens_full"]) or 0, 6) > 0
    )
    cached = sent_usd = with_cache = 0.0
    reported = unpriced_turns = 0
    previous = None
    for r in rows:
        hit = 0
        if r["provider_cached_tokens"] is not None:
            hit = min(r["provider_cached_tokens"], r["tokens_sent"])
            reported += 1
        elif (previous is not None and not r["triggered"] and previous["model"] == r["model"]
              and previous["summary_id"] == r["summary_id"] and previous["tokens_sent"] >= 1024):
            hit = min(previous["tokens_sent"], r["tokens_sent"])
        info = optimizer.model_info(r["model"])
        cached += hit
        if info is None or info.input_cost_per_token is None:
            unpriced_turns += 1
        else:
            cached_price = info.cached_input_cost_per_token
            cached_price = info.input_cost_per_token if cached_price is None else cached_price
            sent_usd += r["tokens_sent"] * info.input_cost_per_token
            with_cache += (r["tokens_sent"] - hit) * info.input_cost_per_token + hit * cached_price
        previous = r
    out.update(cache_cached_tokens=cached, cache_sent_usd=sent_usd, cache_sent_usd_with_cache=with_cache,
               cache_reported_turns=reported, cache_unpriced_turns=unpriced_turns)
    out["last_record_id"] = rows[-1]["id"] if rows else None
    return out


MONEY = ("cost_full_usd", "cost_sent_usd", "cache_sent_usd", "cache_sent_usd_with_cache")


def assert_totals_match(conversation: Conversation) -> DashboardTotals:
    """The stored row (read as stored: no reader has had a chance to rebuild it) against from_scratch,
    and the turn blocks against the records grouped BLOCK_TURNS at a time."""
    stored = DashboardTotals.objects.get(conversation=conversation)
    expected = from_scratch(conversation)
    for name, value in expected.items():
        got = getattr(stored, name)
        if name in MONEY:
            assert float(got) == pytest.approx(float(value), rel=1e-9, abs=1e-9), name
        else:
            assert got == value, name
    records = list(OptimizationRecord.objects.filter(conversation=conversation).order_by("id"))
    blocks = list(DashboardTurnBlock.objects.filter(conversation=conversation).order_by("number"))
    assert [b.number for b in blocks] == list(range(len(blocks)))
    for block in blocks:
        part = records[block.number * BLOCK_TURNS:(block.number + 1) * BLOCK_TURNS]
        assert block.turns == len(part)
        assert (block.first_record_id, block.last_record_id) == (part[0].pk, part[-1].pk)
        assert block.tokens_full_sum == sum(r.tokens_full for r in part)
        assert block.tokens_sent_sum == sum(r.tokens_sent for r in part)
        assert (block.tokens_sent_min, block.tokens_sent_max) == (min(r.tokens_sent for r in part),
                                                                   max(r.tokens_sent for r in part))
        assert block.tokens_full_max == max(r.tokens_full for r in part)
        assert block.budget_last == part[-1].budget
        provided = [r.provider_prompt_tokens for r in part if r.provider_prompt_tokens is not None]
        assert block.provider_max == (max(provided) if provided else None)
        assert block.truncations == sum(r.strategy == "truncate" for r in part)
        assert block.summarizations == sum(r.strategy == "summarize" for r in part)
        assert block.recall_sum == sum(r.recall_tokens for r in part)
    assert sum(b.turns for b in blocks) == len(records)
    return stored


def test_stored_totals_equal_a_recomputation_after_real_turns(fake_openai):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username="ada", password="a long test password 1")
    # A priced model (the fake answers to its name) with a small window: the trigger fires, records get
    # costs, the fake reports prompt and cached tokens, so each turn's end corrects the totals.
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=1600, max_output=200)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    summary = None
    for turn in range(20):
        if turn == 9:
            chat = list(Message.objects.filter(conversation=conversation).order_by("id"))
            summary = make_summary(conversation=conversation, covers=(chat[1], chat[-5]), covered=len(chat) - 5,
                                   content="[Summary] turns so far.", tokens=12)
        text = f"Turn {turn}: " + " ".join(WORDS[(turn + k) % len(WORDS)] for k in range(110))
        assert send(user, conversation, text).names[-1] == "done"

    records = OptimizationRecord.objects.filter(conversation=conversation)
    assert records.count() == 20
    assert records.filter(provider_prompt_tokens__isnull=False).count() == 20
    assert records.filter(provider_cached_tokens__gt=0).exists(), "the fake's cache hits must be counted"
    assert records.filter(tokens_sent__lt=F("tokens_full")).exists(), "the small window should optimize"
    assert records.filter(summary=summary).exists()
    stored = assert_totals_match(conversation)
    assert stored.turns == 20 and stored.dropped_measured == 20 and stored.provider_turns == 20
    # The summary ledger: the summary is in it, up to the message before the newest reply.
    newest = records.order_by("-id").first()
    assert stored.ledger_through_id == newest.reply_id - 1
    assert stored.ledger_messages == Message.objects.filter(conversation=conversation, id__lt=newest.reply_id).count()
    assert stored.summary_ids == [summary.pk] and stored.summaries_made == 1
    # What the headline shows is what the records say.
    headline = dashboard_headline(conversation=conversation)
    assert headline["turns"] == 20
    assert headline["tokens"]["saved"] == stored.tokens_full - stored.tokens_sent
    assert headline["summaries"]["made"] == 1


def test_rebuild_equals_the_incremental_row(user):
    c = make_conversation(owner=user)
    for k in range(40):
        make_record(conversation=c, tokens_full=1000 + 120 * k, tokens_sent=min(1000 + 120 * k, 2500),
                    strategy="truncate" if k % 9 == 8 else "none", triggered=k % 9 == 8,
                    cost_full=None if k % 5 else "0.010000", cost_sent=None if k % 5 else "0.004000",
                    provider=900 + 110 * k if k % 3 else None, provider_cached_tokens=1024 if k % 4 == 1 else None,
                    recall_tokens=30 if k % 7 == 3 else 0, recall_message_count=2 if k % 7 == 3 else 0,
                    dropped_tokens=k if k % 2 else None, model="no-such-model-xyz" if k == 17 else "gpt-4o-mini",
                    stats={"trigger_tokens": 2000 + k, "system_prompt_hash": "ab12" if k < 39 else "cd34"})
    incremental = assert_totals_match(c)
    assert incremental.last_prompt_hash == "cd34"  # the newest record's prompts, for the next one to compare
    rebuilt = dashboard_totals_rebuild(conversation=c)
    for field in DashboardTotals._meta.concrete_fields:
        if field.name in ("created_at", "updated_at"):
            continue
        a, b = getattr(incremental, field.attname), getattr(rebuilt, field.attname)
        if isinstance(a, float | Decimal):
            assert float(a) == pytest.approx(float(b), rel=1e-9), field.name
        else:
            assert a == b, field.name
    assert_totals_match(c)


def test_records_written_around_the_services_are_counted_by_the_next_reader(user, caplog):
    c = make_conversation(owner=user)
    make_record(conversation=c, tokens_full=500, tokens_sent=500)
    # A restore or a script: the row says one record, the table holds two.
    OptimizationRecord.objects.create(conversation=c, preference="balanced", model="gpt-4o-mini", context_window=1200,
                                      budget=1000, strategy="truncate", tokens_full=900, tokens_sent=400)
    assert DashboardTotals.objects.get(conversation=c).turns == 1
    assert dashboard_totals_get(conversation=c).turns == 2
    assert "rebuilt" in caplog.text
    assert dashboard_headline(conversation=c)["tokens"]["saved"] == 500
    assert_totals_match(c)


@pytest.mark.django_db(transaction=True)
def test_concurrent_turns_and_turn_ends_add_up(django_user_model):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers: PostgreSQL (SQLite lets one writer at a time into the whole database)")
    owner = django_user_model.objects.create_user(username="ada", password="a long test password 1")
    c = make_conversation(owner=owner)
    first = [make_record(conversation=c, tokens_full=100 + k, tokens_sent=100) for k in range(30)]
    # What dashboard_totals_record_add counted for each (the request path keeps it in the turn).
    counted = [(record_facts(record=r), None if i == 0 else PreviousRequest(
        model=first[i - 1].model, summary_id=first[i - 1].summary_id, tokens_sent=first[i - 1].tokens_sent))
        for i, r in enumerate(first)]
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def turns(k: int) -> None:
        for i in range(12):
            with transaction.atomic():
                # As chat_turn_start: the conversation's row is locked while the turn's record is written.
                Conversation.objects.select_for_update().filter(pk=c.pk).first()
                record = OptimizationRecord.objects.create(
                    conversation=c, preference="balanced", model="gpt-4o-mini", context_window=1200, budget=1000,
                    strategy="none", tokens_full=1000 + k * 100 + i, tokens_sent=900,
                )
                dashboard_totals_record_add(record=record)

    def ends(k: int) -> None:
        for facts, previous in counted[k::2]:
            with transaction.atomic():
                dashboard_totals_record_finish(facts=facts, previous=previous, fields={
                    "provider_prompt_tokens": 95 + k, "provider_cached_tokens": 0, "dropped_tokens": 7,
                })

    def run(work, k: int) -> None:
        try:
            start.wait()
            work(k)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(turns, k)) for k in range(4)]
    threads += [threading.Thread(target=run, args=(ends, k)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    stored = assert_totals_match(c)
    assert stored.turns == 30 + 4 * 12
    assert stored.provider_turns == stored.dropped_measured == 30
    assert stored.dropped_tokens == 30 * 7
