"""Seed a long conversation with realistic optimization records (dashboard development, bench, tests).

The records are simulated the way the request path produces them: the history grows turn by turn,
nothing is optimized until the sent context crosses the trigger, then the verbatim window jumps
forward to the target and the evicted messages are dropped (truncate) or folded into a rolling
summary that a background job writes after the turn (summarize). Oversized messages in the window
are sent compressed; pinned messages and the first user message always travel.

    python manage.py seed_long_conversation --username demo --messages 10000
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from chatapp.chat.branch_services import conversation_path_thread
from chatapp.chat.context import is_offline_reply
from chatapp.chat.models import Conversation, Message, OptimizationRecord, SummaryJob
from chatapp.chat.search_services import conversation_index_rebuild
from chatapp.chat.seed_simulation import Simulation, seed_text
from chatapp.dashboard.totals import dashboard_totals_rebuild

# Used only when the optimizer's price lookup is unavailable: gpt-4o-mini list prices.
_FALLBACK_INPUT_PRICE = 0.15 / 1_000_000


_FALLBACK_OUTPUT_PRICE = 0.60 / 1_000_000


def _price_per_token(model: str) -> tuple[float, float]:
    try:
        import optimizer

        info = optimizer.model_info(model)
    except (ImportError, AttributeError):
        info = None
    if info is None or getattr(info, "input_cost_per_token", None) is None:
        return _FALLBACK_INPUT_PRICE, _FALLBACK_OUTPUT_PRICE
    return float(info.input_cost_per_token), float(info.output_cost_per_token or 0)


def _money(value: float) -> Decimal:
    return Decimal(f"{value:.6f}")


@dataclass(frozen=True)
class _Pricing:
    model: str
    in_price: float
    out_price: float


def conversation_seed_long(
    *,
    owner,
    messages: int = 10_000,
    model: str = "gpt-4o-mini",
    context_window: int = 16_384,
    max_output_tokens: int = 1_024,
    preference: str = "balanced",
    title: str | None = None,
    seed: int = 7,
    provider_share: float = 0.8,
) -> Conversation:
    """Create a conversation of `messages` chat messages with one OptimizationRecord per user turn."""
    rng = random.Random(seed)
    pricing = _Pricing(model, *_price_per_token(model))
    budget = context_window - max_output_tokens
    sim = Simulation(rng=rng, budget=budget, preference=preference)
    turns = max(1, messages // 2)
    for turn in range(turns):
        sim.turn(turn, turns)

    with transaction.atomic():
        conversation = Conversation.objects.create(
            owner=owner,
            title=title or f"Long conversation ({messages:,} messages)",
            title_is_custom=True,
        )
        objs = _message_objects(sim, conversation=conversation, rng=rng, pricing=pricing)
        created = Message.objects.bulk_create(objs, batch_size=1000)
        ids = [m.pk for m in created]
        summary_updates, jobs = _summary_jobs(sim, conversation=conversation, created=created, model=model)
        Message.objects.bulk_update(summary_updates, ["covers_from_id", "covers_through_id"], batch_size=500)
        # bulk_create bypasses message_append and its index call: index the chat messages in one pass,
        # so recall and the sidebar search work on the seeded conversation (summaries are not indexed).
        conversation_index_rebuild(conversation=conversation)
        conversation_path_thread(conversation_id=conversation.pk)  # one path, as sends would make it
        SummaryJob.objects.bulk_create(jobs, batch_size=500)
        records = [
            _record(plan, conversation=conversation, ids=ids, rng=rng, pricing=pricing, preference=preference,
                    context_window=context_window, budget=budget, sim=sim, provider_share=provider_share)
            for plan in sim.record_plans
        ]
        OptimizationRecord.objects.bulk_create(records, batch_size=250)
        # bulk_create bypasses record_create and its totals call: count the records in one pass.
        dashboard_totals_rebuild(conversation=conversation)

        chat_rows = [sim.rows[p] for p in sim.chat]
        conversation.window_start_id = ids[sim.chat[sim.win_k]] if sim.win_k is not None else None
        conversation.live_message_count = len(chat_rows)
        conversation.live_token_count = sum(r.tokens for r in chat_rows)
        conversation.live_char_count = sum(objs[p].char_count for p in sim.chat)
        demo = [objs[p] for p in sim.chat if is_offline_reply(role=objs[p].role, model=objs[p].model)]
        conversation.offline_reply_count = len(demo)
        conversation.offline_reply_chars = sum(m.char_count for m in demo)
        conversation.offline_reply_tokens = sum(m.token_count for m in demo)
        conversation.truncation_count = sim.truncations
        conversation.summary_count = sim.summaries
        conversation.save(update_fields=[
            "window_start_id", "live_message_count", "live_token_count", "live_char_count", "offline_reply_count",
            "offline_reply_chars", "offline_reply_tokens", "truncation_count", "summary_count",
        ])
    return conversation


def _message_objects(sim: Simulation, *, conversation: Conversation, rng: random.Random,
                     pricing: _Pricing) -> list[Message]:
    objs = []
    for n, row in enumerate(sim.rows):
        if row.kind == "summary":
            meta = row.summary_meta
            chars = row.tokens * 4
            content = seed_text(rng, chars=chars, prefix=(
                f"[Conversation summary — covers {len(meta['covered']):,} messages, "
                f"{meta['source_tokens'] * 4:,} → {chars:,} characters]\n"
            ))
            objs.append(Message(
                conversation=conversation, role="system", kind="summary", content=content,
                token_count=row.tokens, char_count=len(content), model="" if meta["extractive"] else pricing.model,
                covered_message_count=len(meta["covered"]), source_chars=meta["source_tokens"] * 4,
                extractive=meta["extractive"],
                cost_usd=None if meta["extractive"] else _money(
                    meta["prompt_tokens"] * pricing.in_price + meta["completion_tokens"] * pricing.out_price),
            ))
        else:
            chars = max(4, row.tokens * 4 - 16)
            content = seed_text(rng, chars=chars, prefix=f"#{n} {row.role}:")
            objs.append(Message(
                conversation=conversation, role=row.role, content=content, token_count=row.tokens,
                char_count=len(content), pinned=row.pinned,
                model=pricing.model if row.role == "assistant" else "",
            ))
    return objs


def _summary_jobs(sim: Simulation, *, conversation: Conversation, created: list[Message],
                  model: str) -> tuple[list[Message], list[SummaryJob]]:
    """Summary coverage, now that ids exist, and the finished job behind each summary."""
    ids = [m.pk for m in created]
    now = timezone.now()
    jobs = []
    summary_updates = []
    for pos, row in enumerate(sim.rows):
        if row.kind != "summary":
            continue
        meta = row.summary_meta
        msg = created[pos]
        msg.covers_from_id = ids[meta["covered"][0]]
        msg.covers_through_id = ids[meta["covered"][-1]]
        summary_updates.append(msg)
        finished = now - timedelta(minutes=len(sim.rows) - pos)
        jobs.append(SummaryJob(
            conversation=conversation, status=SummaryJob.Status.DONE, trigger=SummaryJob.Trigger.AUTO,
            span_from_id=msg.covers_from_id, span_through_id=msg.covers_through_id, attempts=1,
            summary=msg, model="" if meta["extractive"] else model,
            prompt_tokens=None if meta["extractive"] else meta["prompt_tokens"],
            completion_tokens=None if meta["extractive"] else meta["completion_tokens"],
            cost_usd=msg.cost_usd,
            started_at=finished - timedelta(seconds=meta["duration_s"]), finished_at=finished,
        ))
    return summary_updates, jobs


def _record(plan: dict, *, conversation: Conversation, ids: list[int], rng: random.Random, pricing: _Pricing,
            preference: str, context_window: int, budget: int, sim: Simulation,
            provider_share: float) -> OptimizationRecord:
    sent = [
        {"source_ids": [str(ids[p]) for p in e["pos"]], "origin": e["origin"], "tokens": e["tokens"]}
        for e in plan["entries"]
    ]
    tokens_sent = plan["tokens_sent"]
    provider = (
        tokens_sent + rng.randint(-max(1, tokens_sent // 80), max(1, tokens_sent // 60))
        if rng.random() < provider_share else None
    )
    return OptimizationRecord(
        conversation=conversation,
        reply_id=ids[plan["reply"]],
        preference=preference,
        model=pricing.model,
        context_window=context_window,
        budget=budget,
        triggered=plan["triggered"],
        window_start_id=ids[plan["window_start"]] if plan["window_start"] is not None else None,
        strategy=plan["strategy"],
        reason=plan["reason"],
        scores=plan["scores"],
        tokens_full=plan["tokens_full"],
        tokens_sent=tokens_sent,
        provider_prompt_tokens=provider,
        estimated=False,
        sent=sent,
        dropped_ranges=[[ids[a], ids[b]] for a, b in plan["dropped_runs"]],
        summary_id=ids[plan["summary"]] if plan["summary"] is not None else None,
        messages_before=plan["messages_before"],
        messages_after=plan["messages_after"],
        pack_ms=round(rng.uniform(0.2, 2.5), 3),
        cost_sent_usd=_money(tokens_sent * pricing.in_price),
        cost_full_usd=_money(plan["tokens_full"] * pricing.in_price),
        stats={
            "optimization_applied": plan["tokens_sent"] < plan["tokens_full"],
            "strategy_chosen": plan["strategy"],
            "budget": budget,
            "trigger_tokens": sim.trigger,
            "target_tokens": sim.target,
            "tokens_before": plan["tokens_full"],
            "tokens_after": tokens_sent,
            "tokens_saved": plan["tokens_full"] - tokens_sent,
        },
    )


class Command(BaseCommand):
    help = "Create a long conversation with simulated optimization records (for the dashboard)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="demo")
        parser.add_argument("--password", default="", help="set when the user is created (default: unusable)")
        parser.add_argument("--messages", type=int, default=10_000)
        parser.add_argument("--model", default="gpt-4o-mini")
        parser.add_argument("--context-window", type=int, default=16_384)
        parser.add_argument("--max-output-tokens", type=int, default=1_024)
        parser.add_argument("--preference", default="balanced", choices=["fast", "balanced", "quality"])
        parser.add_argument("--seed", type=int, default=7)

    def handle(self, *args, **opts):
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(username=opts["username"])
        if created:
            if opts["password"]:
                user.set_password(opts["password"])
            else:
                user.set_unusable_password()
            user.save()
        conversation = conversation_seed_long(
            owner=user,
            messages=opts["messages"],
            model=opts["model"],
            context_window=opts["context_window"],
            max_output_tokens=opts["max_output_tokens"],
            preference=opts["preference"],
            seed=opts["seed"],
        )
        self.stdout.write(
            f"Conversation {conversation.pk} for {user.username}: "
            f"{conversation.live_message_count:,} messages, "
            f"{OptimizationRecord.objects.filter(conversation=conversation).count():,} records. "
            f"Dashboard: /c/{conversation.pk}/dashboard/"
        )
