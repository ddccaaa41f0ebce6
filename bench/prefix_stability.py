"""Prefix stability: how much of each prompt a provider's prompt cache could reuse from the previous one.

A long deterministic conversation is replayed turn by turn: turn k sends the history plus the new user
message, then the assistant reply is appended for the next turn. Every request is packed at the same
budget by:

  recency       plain recency truncation: system prompt + newest user message, then the newest
                messages that still fit (re-cut every turn)
  ours/<pref>   optimizer.pack with the window state carried over (PackResult.window_start passed back
                as window_start), counters updated (truncations/summaries so far)
    -trunc      summarizer_available=False: truncation only
    -worker     the web app's way: whenever a turn asks for a summary (strategy summarize with a
                summary_span), a "worker" folds the span into the rolling summary with
                optimizer.extractive_summary (length from build_summary_prompt, header from
                summary_header) before the next turn; the Summary is passed to the next pack
    -inline     the CLI's way: pack(summarize_now=optimizer.extractive_summary) writes the summary in
                the same call; PackResult.new_summary is passed to the next pack
    +recall     the same with recall on (PackConfig.recall, the default once a recall_source is
                passed): each turn gets a `MemorySource` over the request's messages, as the CLI does,
                and a block quoting old messages the newest one is about goes right before it.
                Without +recall no source is passed (recall off). Recall runs for the preferences in
                --recall-preferences only (rebuilding the in-memory index every turn is slow).

Metric. A prompt is rendered as the token sequence of its messages in send order, each message being
[start] + role tokens + [sep] + content tokens + [end] (3 + role + content tokens: the chat formula
without the 3 reply-priming tokens). reuse(k) = length of the longest common token prefix of prompt k
and prompt k-1. prefix share = sum of reuse over turns 2..T / sum of prompt tokens over turns 2..T,
i.e. the share of all prompt tokens sent that are an exact prefix of the previous request's prompt.
"cacheable" applies OpenAI's rule on top (a hit needs >= 1,024 prefix tokens and counts in 128-token
blocks). "uncached/turn" = mean prompt tokens minus cacheable tokens: what is billed at full price.
"$/turn" prices the uncached tokens per turn at the model's input price (optimizer.cost_usd,
litellm's registry); "$/turn cached" prices the whole prompt with the cacheable part at the
provider's cached-input price (what the bill would be). "recall/turn" = mean recall-block tokens.
"moves" counts turns where the window start changed (recency: first kept message after the system
prompt changed), "turns/move" how many turns append between them on average, "sum" how many
summaries were written, "over" prompts above the budget, "err"
ContextTooLargeError raised, "ms/turn" time inside pack (inline: includes writing the summary; the
worker's summarizing is not counted). Worker mode breaks the prefix twice per compaction (window move,
then the summary's arrival on the next turn); inline mode once. Target (issue 2): prefix share >= 70%.

  .venv/bin/python bench/prefix_stability.py           # 600 turns, budgets 4096,8192,16384 (~3 min)
  .venv/bin/python bench/prefix_stability.py --quick   # 150 turns, budget 4096
  .venv/bin/python bench/prefix_stability.py --recall off   # the old table only (~15 s)

Small context windows (issue 14): `--sizes realistic` resizes every message to a drawn length (user
50-400 tokens, replies 100-600, the help-desk text repeated or cut), the sizes at which a 2k-8k window
holds only a few rounds:

  .venv/bin/python bench/prefix_stability.py --sizes realistic --budgets 2048,4096,8192 --turns 200 \
      --recall off --modes trunc,worker
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import time
from dataclasses import dataclass, field
from typing import Any

from _common import encoding, load_note, make_conversation, offline_tiktoken

offline_tiktoken()

import optimizer  # noqa: E402
from optimizer.cli import memory_source  # noqa: E402
from optimizer.types import Counters, Msg, Summary  # noqa: E402

START, SEP, END = -1, -2, -3


@dataclass
class Tally:
    prompts: list[list[tuple[str, str]]] = field(default_factory=list)
    tokens: int = 0
    reused: int = 0
    cacheable: int = 0
    turns: int = 0
    moves: int = 0
    summaries: int = 0
    over_budget: int = 0
    errors: int = 0
    seconds: float = 0.0  # time spent choosing the messages (packing), rendering excluded
    uncached_usd: float = 0.0  # uncached prompt tokens at the input price, turns 2..T
    billed_usd: float = 0.0  # whole prompts, the cacheable part at the cached-input price
    recall_tokens: int = 0
    model: str = "gpt-4o-mini"


class Renderer:
    def __init__(self, model: str) -> None:
        self.enc = encoding(model)
        self.cache: dict[tuple[str, str], list[int]] = {}

    def seq(self, role: str, content: str) -> list[int]:
        key = (role, content)
        toks = self.cache.get(key)
        if toks is None:
            toks = [START, *self.enc.encode_ordinary(role), SEP, *self.enc.encode_ordinary(content), END]
            self.cache[key] = toks
        return toks

    def length(self, prompt: list[tuple[str, str]]) -> int:
        return sum(len(self.seq(r, c)) for r, c in prompt)

    def common_prefix(self, prev: list[tuple[str, str]], cur: list[tuple[str, str]]) -> int:
        n = 0
        for a, b in zip(prev, cur, strict=False):
            if a == b:
                n += len(self.seq(*a))
                continue
            sa, sb = self.seq(*a), self.seq(*b)
            for x, y in zip(sa, sb, strict=False):
                if x != y:
                    break
                n += 1
            break
        return n


def cacheable(prefix: int) -> int:
    return 0 if prefix < 1024 else 1024 + 128 * ((prefix - 1024) // 128)


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content if isinstance(p, dict))


def record(t: Tally, r: Renderer, prompt: list[tuple[str, str]], budget: int) -> None:
    n = r.length(prompt)
    if n + 3 > budget:
        t.over_budget += 1
    if t.prompts:
        pre = r.common_prefix(t.prompts[-1], prompt)
        t.tokens += n
        t.reused += pre
        t.cacheable += cacheable(pre)
        t.turns += 1
        t.uncached_usd += optimizer.cost_usd(t.model, prompt_tokens=n - cacheable(pre)) or 0.0
        t.billed_usd += optimizer.cost_usd(t.model, prompt_tokens=n, cached_tokens=cacheable(pre)) or 0.0
    t.prompts[-1:] = [prompt]  # only the previous prompt is needed


def run_recency(msgs: list[Msg], budget: int, r: Renderer, model: str) -> Tally:
    t = Tally(model=model)
    last_first = None
    for k in range(1, (len(msgs) - 1) // 2 + 1):
        t0 = time.perf_counter()
        req = msgs[: 2 * k]
        head, question, body = req[0], req[-1], req[1:-1]
        used = 3 + req[0].tokens + question.tokens
        kept: list[Msg] = []
        for m in reversed(body):
            if used + m.tokens > budget:
                break
            used += m.tokens
            kept.append(m)
        kept.reverse()
        t.seconds += time.perf_counter() - t0
        first = kept[0].id if kept else question.id
        t.moves += last_first is not None and first != last_first
        last_first = first
        record(t, r, [(m.role, text_of(m.content)) for m in [head, *kept, question]], budget)
    return t


def run_ours(msgs: list[Msg], budget: int, r: Renderer, *, preference: str, mode: str, model: str,
             with_recall: bool = False) -> Tally:
    t = Tally(model=model)
    by_id = {m.id: m for m in msgs}
    window: str | None = None
    summary: Summary | None = None
    covered: tuple[str, ...] = ()
    truncations = 0
    for k in range(1, (len(msgs) - 1) // 2 + 1):
        req = msgs[: 2 * k]
        t0 = time.perf_counter()
        try:
            res = optimizer.pack(req, budget=budget, preference=preference, model=model, window_start=window,
                                 summary=summary, counters=Counters(summaries_so_far=t.summaries,
                                                                    truncations_so_far=truncations),
                                 summarizer_available=mode != "trunc",
                                 summarize_now=optimizer.extractive_summary if mode == "inline" else None,
                                 recall_source=memory_source(req) if with_recall else None)
        except optimizer.ContextTooLargeError:
            t.errors += 1
            continue
        finally:
            t.seconds += time.perf_counter() - t0
        st = res.stats
        if window is not None and res.window_start != window:
            t.moves += 1
        window = res.window_start
        t.recall_tokens += int(st.get("recall_tokens") or 0)
        if st.get("triggered") and st.get("strategy_chosen") == "truncate":
            truncations += 1
        record(t, r, [(m.role, text_of(m.content)) for m in res.messages], budget)
        span = res.summary_span
        if mode == "inline" and res.new_summary is not None:
            summary = res.new_summary  # written inside pack (as the CLI does); carried to the next turn
            t.summaries += 1
        if mode == "worker" and span is not None and st.get("strategy_chosen") == "summarize":
            # The worker catches up before the next turn: fold the span into the rolling summary.
            span_msgs = [by_id[i] for i in span.ids if i in by_id]
            prev = optimizer.summary_body(summary.content) if summary else None
            prompt = optimizer.build_summary_prompt(span_msgs, previous_summary=prev, model=model)
            body = optimizer.extractive_summary(span_msgs, previous_summary=prev,
                                                target_tokens=prompt.target_tokens, model=model)
            covered = covered + tuple(m.id for m in span_msgs)
            header = optimizer.summary_header(
                covered_messages=len(covered),
                source_chars=sum(len(text_of(m.content)) for m in span_msgs) + len(prev or ""),
                summary_chars=len(body))
            summary = Summary(id=f"s{t.summaries}", content=f"{header}\n{body}", through_id=span.through_id,
                              covered_ids=covered)
            t.summaries += 1
    return t


def resized(conv: list[dict[str, Any]], *, model: str, seed: int) -> list[dict[str, Any]]:
    """`conv` with every user / assistant message cut or repeated to a drawn token length."""
    enc, rng = encoding(model), random.Random(f"sizes-{seed}")
    out = []
    for m in conv:
        if m["role"] == "system":
            out.append(m)
            continue
        n = rng.randint(50, 400) if m["role"] == "user" else rng.randint(100, 600)
        tokens = enc.encode_ordinary(m["content"])
        tokens = (tokens * (n // max(1, len(tokens)) + 1))[:n]
        out.append({**m, "content": enc.decode(tokens)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=600)
    ap.add_argument("--budgets", default="4096,8192,16384")
    ap.add_argument("--preferences", default="fast,balanced,quality")
    ap.add_argument("--model", default="gpt-4o-mini")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--modes", default="trunc,worker,inline", help="summary modes for ours (see above)")
    ap.add_argument("--recall", default="off,on", help="recall off, on, or both (see +recall above)")
    ap.add_argument("--recall-preferences", default="balanced", help="preferences run with recall on")
    ap.add_argument("--sizes", default="helpdesk", choices=("helpdesk", "realistic"),
                    help="message sizes: the help-desk generator's, or realistic (see above)")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.turns, a.budgets = 150, "4096"

    r = Renderer(a.model)
    conv = make_conversation(2 * a.turns + 1, seed=a.seed)
    if a.sizes == "realistic":
        conv = resized(conv, model=a.model, seed=a.seed)
    # as the app does: stored counts handed in (tokens, and chars when Msg has that field)
    has_chars = "chars" in {f.name for f in dataclasses.fields(Msg)}
    recall_modes = [x == "on" for x in a.recall.split(",")]
    msgs = [Msg(id=m["id"], role=m["role"], content=m["content"], pinned=m["pinned"],
                tokens=optimizer.count_message(Msg(id=m["id"], role=m["role"], content=m["content"]), model=a.model),
                **({"chars": len(m["content"])} if has_chars else {}))
            for m in conv]
    total = sum(m.tokens for m in msgs)
    print(f"prefix stability: {a.turns} turns ({len(msgs):,} messages, {total:,} tokens in the end), "
          f"model {a.model}; shares over turns 2..{a.turns}; {load_note()}")
    print(f"{'budget':>6} {'packer':<27} {'prefix%':>7} {'cacheable%':>10} {'prompt/turn':>11} "
          f"{'uncached/turn':>13} {'$/turn':>9} {'$/turn cached':>13} {'recall/turn':>11} "
          f"{'moves':>5} {'turns/move':>10} {'sum':>4} {'over':>4} {'err':>4} {'ms/turn':>7}  target>=70%")
    recall_prefs = set(a.recall_preferences.split(","))
    for budget in [int(b) for b in a.budgets.split(",")]:
        runs: list[tuple[str, Tally]] = [("recency (sliding window)", run_recency(msgs, budget, r, a.model))]
        for pref in a.preferences.split(","):
            for mode in a.modes.split(","):
                for with_recall in recall_modes:
                    if with_recall and pref not in recall_prefs:
                        continue
                    runs.append((f"ours/{pref}-{mode}{'+recall' if with_recall else ''}",
                                 run_ours(msgs, budget, r, preference=pref, mode=mode, model=a.model,
                                          with_recall=with_recall)))
        for label, t in runs:
            share = t.reused / max(1, t.tokens)
            target = "" if label.startswith("recency") else ("MET" if share >= 0.7 else "MISSED")
            turns = max(1, t.turns)
            print(f"{budget:>6} {label:<27} {100 * share:>7.1f} {100 * t.cacheable / max(1, t.tokens):>10.1f} "
                  f"{t.tokens / turns:>11,.0f} {(t.tokens - t.cacheable) / turns:>13,.0f} "
                  f"{t.uncached_usd / turns:>9.6f} {t.billed_usd / turns:>13.6f} "
                  f"{t.recall_tokens / a.turns:>11,.0f} "
                  f"{t.moves:>5} {a.turns / max(1, t.moves):>10.1f} {t.summaries:>4} {t.over_budget:>4} {t.errors:>4} "
                  f"{1000 * t.seconds / a.turns:>7.2f}  {target}")


if __name__ == "__main__":
    main()
