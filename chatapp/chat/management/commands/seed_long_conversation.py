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
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from chatapp.chat.models import Conversation, Message, OptimizationRecord, SummaryJob
from chatapp.chat.search_services import conversation_index_rebuild
from optimizer.layout import is_static

# Used only when the optimizer's price lookup is unavailable: gpt-4o-mini list prices.
_FALLBACK_INPUT_PRICE = 0.15 / 1_000_000
_FALLBACK_OUTPUT_PRICE = 0.60 / 1_000_000

_WORDS = [
    "context", "window", "budget", "token", "summary", "message", "history", "model", "request", "reply",
    "optimizer", "cache", "prefix", "verbatim", "pinned", "compressed", "dropped", "trigger", "target",
    "rolling", "span", "latency", "provider", "database", "index", "query", "chart", "turn", "savings",
    "cost", "the", "a", "of", "to", "and", "in", "that", "it", "with", "for", "as", "on",
]


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


@dataclass
class _Row:
    role: str
    tokens: int
    kind: str = "chat"
    pinned: bool = False
    content: str = ""
    summary_meta: dict = field(default_factory=dict)


def _text(rng: random.Random, *, chars: int, prefix: str) -> str:
    words: list[str] = [prefix]
    size = len(prefix)
    while size < chars:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:chars]


class _Simulation:
    """The history as the request path would have seen it, turn by turn (nothing stored yet).

    `rows` are every message in creation order (summaries included); `chat` the positions in `rows`
    of chat messages, chronological (chat order k); `static` the chat-order indices of the first user
    message and pinned messages; `win_k` the chat-order index of the first verbatim-window message
    (None: everything is sent); `summary` the newest finished summary {"pos", "through_k", "tokens"}.
    """

    def __init__(self, *, rng: random.Random, budget: int, preference: str) -> None:
        self.rng, self.preference = rng, preference
        self.trigger = int(budget * 0.8)
        self.target = int(budget * 0.5)
        self.oversize = int(budget * 0.25)
        self.compressed_to = int(budget * 0.08)
        self.rows: list[_Row] = []
        self.chat: list[int] = []
        self.static: list[int] = []
        self.static_set: set[int] = set()
        self.win_k: int | None = None
        self.win_tokens = 0  # effective tokens of the non-static window messages
        self.summary: dict | None = None
        self.pending_summary: dict | None = None  # a job requested this turn, written after the reply
        self.truncations = self.summaries = self.triggers = 0
        self.full_tokens = 0
        self.record_plans: list[dict] = []

    def eff(self, k: int) -> int:
        tokens = self.rows[self.chat[k]].tokens
        return self.compressed_to if tokens > self.oversize else tokens

    def request_tokens(self) -> int:
        with_summary = self.summary["tokens"] if (self.summary is not None and self.win_k is not None) else 0
        return 3 + sum(self.rows[self.chat[k]].tokens for k in self.static) + with_summary + self.win_tokens

    def append(self, row: _Row, *, keep: bool) -> int:
        self.rows.append(row)
        self.chat.append(len(self.rows) - 1)
        k = len(self.chat) - 1
        self.full_tokens += row.tokens
        if keep:
            self.static.append(k)
            self.static_set.add(k)
        else:
            self.win_tokens += self.eff(k)
        return k

    def turn(self, turn: int, turns: int) -> None:
        rng = self.rng
        big = turn > 0 and turn % 97 == 41
        pinned = turn in {2, turns // 3}
        user_k = self.append(
            _Row(role="user", tokens=rng.randint(4000, 5200) if big else rng.randint(25, 260), pinned=pinned),
            keep=is_static(role="user", pinned=pinned, is_first_user=turn == 0),
        )
        strategy, triggered, reason, scores = self._cut(user_k)
        used_summary = self.summary if self.win_k is not None else None
        entries = self._entries(user_k, used_summary)
        dropped_runs = self._dropped_runs(used_summary)
        tokens_full = self.full_tokens + 3
        reply_k = self.append(
            _Row(role="assistant", tokens=rng.randint(3800, 5000) if turn % 89 == 57 else rng.randint(40, 420)),
            keep=False,
        )
        self.record_plans.append({
            "reply": self.chat[reply_k],
            "strategy": strategy,
            "triggered": triggered,
            "reason": reason,
            "scores": scores,
            "window_start": self.chat[self.win_k] if self.win_k is not None else None,
            "summary": used_summary["pos"] if used_summary else None,
            "entries": entries,
            "dropped_runs": [r[:2] for r in dropped_runs],
            "tokens_full": tokens_full,
            "tokens_sent": 3 + sum(e["tokens"] for e in entries),
            "messages_before": user_k + 1,
            "messages_after": sum(1 for e in entries if e["origin"] != "summary"),
        })
        # The background job finishes after the reply: the summary is there from the next turn on.
        if self.pending_summary is not None:
            self._summary_written(self.pending_summary["through_k"])
            self.pending_summary = None

    def _cut(self, user_k: int) -> tuple[str, bool, str, dict]:
        """(strategy, triggered, reason, scores) of this turn; a trigger moves the window."""
        if self.request_tokens() <= self.trigger:
            reason = (
                "Under the trigger: everything is sent verbatim." if self.win_k is None
                else "Under the trigger: the current window is kept, so the prompt prefix stays cacheable."
            )
            return "none", False, reason, {}
        self.triggers += 1
        strategy = "summarize" if (self.preference != "fast" and self.triggers % 4 == 1) else "truncate"
        scores = {
            "truncate": round(self.rng.uniform(0.3, 0.7), 3),
            "summarize": round(self.rng.uniform(0.3, 0.7), 3),
        }
        reason = (
            "Long history with earlier decisions worth keeping: summarize the evicted span."
            if strategy == "summarize"
            else "Recent turns carry the thread: drop the oldest span and keep the window verbatim."
        )
        # Move the window forward until the request fits the target (never past this message).
        k = self.win_k or 0
        self.win_k = k
        while k < user_k and self.request_tokens() > self.target:
            if k not in self.static_set:
                self.win_tokens -= self.eff(k)
            k += 1
            self.win_k = k
        evicted_through = max(j for j in range(self.win_k) if j not in self.static_set)
        if strategy == "summarize":
            self.summaries += 1
            self.pending_summary = {"through_k": evicted_through}
        else:
            self.truncations += 1
        return strategy, True, reason, scores

    def _entries(self, user_k: int, used_summary: dict | None) -> list[dict]:
        rows, chat = self.rows, self.chat
        entries: list[dict] = [
            {"pos": [chat[k]], "origin": "pinned" if rows[chat[k]].pinned else "verbatim",
             "tokens": rows[chat[k]].tokens}
            for k in self.static
        ]
        if used_summary is not None:
            entries.append({"pos": [used_summary["pos"]], "origin": "summary", "tokens": used_summary["tokens"]})
        for k in range(self.win_k or 0, user_k + 1):
            if k in self.static_set:
                continue
            origin = "compressed" if rows[chat[k]].tokens > self.oversize else "verbatim"
            entries.append({"pos": [chat[k]], "origin": origin, "tokens": self.eff(k)})
        return entries

    def _dropped_runs(self, used_summary: dict | None) -> list[list[int]]:
        """[first row, last row, last k] of each run of evicted messages no summary covers."""
        runs: list[list[int]] = []
        if self.win_k is None:
            return runs
        covered_k = used_summary["through_k"] if used_summary else -1
        for k in range(covered_k + 1, self.win_k):
            if k in self.static_set:
                continue
            if runs and runs[-1][2] == k - 1:
                runs[-1][1] = self.chat[k]
                runs[-1][2] = k
            else:
                runs.append([self.chat[k], self.chat[k], k])
        return runs

    def _summary_written(self, through_k: int) -> None:
        covered = [self.chat[k] for k in range(through_k + 1) if k not in self.static_set]
        source_tokens = sum(self.rows[p].tokens for p in covered)
        summary_tokens = min(900, 180 + source_tokens // 400)
        self.rows.append(_Row(role="system", kind="summary", tokens=summary_tokens, summary_meta={
            "covered": covered,
            "extractive": self.summaries % 5 == 0,
            "source_tokens": source_tokens,
            "prompt_tokens": source_tokens + (self.summary["tokens"] if self.summary else 0) + 120,
            "completion_tokens": summary_tokens,
            "duration_s": round(self.rng.uniform(1.2, 6.5), 2),
        }))
        self.summary = {"pos": len(self.rows) - 1, "through_k": through_k, "tokens": summary_tokens}


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
    sim = _Simulation(rng=rng, budget=budget, preference=preference)
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
        SummaryJob.objects.bulk_create(jobs, batch_size=500)
        records = [
            _record(plan, conversation=conversation, ids=ids, rng=rng, pricing=pricing, preference=preference,
                    context_window=context_window, budget=budget, sim=sim, provider_share=provider_share)
            for plan in sim.record_plans
        ]
        OptimizationRecord.objects.bulk_create(records, batch_size=250)

        chat_rows = [sim.rows[p] for p in sim.chat]
        conversation.window_start_id = ids[sim.chat[sim.win_k]] if sim.win_k is not None else None
        conversation.live_message_count = len(chat_rows)
        conversation.live_token_count = sum(r.tokens for r in chat_rows)
        conversation.live_char_count = sum(objs[p].char_count for p in sim.chat)
        conversation.truncation_count = sim.truncations
        conversation.summary_count = sim.summaries
        conversation.save(update_fields=[
            "window_start_id", "live_message_count", "live_token_count", "live_char_count",
            "truncation_count", "summary_count",
        ])
    return conversation


def _message_objects(sim: _Simulation, *, conversation: Conversation, rng: random.Random,
                     pricing: _Pricing) -> list[Message]:
    objs = []
    for n, row in enumerate(sim.rows):
        if row.kind == "summary":
            meta = row.summary_meta
            chars = row.tokens * 4
            content = _text(rng, chars=chars, prefix=(
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
            content = _text(rng, chars=chars, prefix=f"#{n} {row.role}:")
            objs.append(Message(
                conversation=conversation, role=row.role, content=content, token_count=row.tokens,
                char_count=len(content), pinned=row.pinned,
                model=pricing.model if row.role == "assistant" else "",
            ))
    return objs


def _summary_jobs(sim: _Simulation, *, conversation: Conversation, created: list[Message],
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
            preference: str, context_window: int, budget: int, sim: _Simulation,
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
