"""The history `seed_long_conversation` stores, simulated turn by turn as the request path would have
seen it: the trigger, the window moving to the target, summaries written after the turn that asked.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from optimizer.layout import is_static

_WORDS = [
    "context", "window", "budget", "token", "summary", "message", "history", "model", "request", "reply",
    "optimizer", "cache", "prefix", "verbatim", "pinned", "compressed", "dropped", "trigger", "target",
    "rolling", "span", "latency", "provider", "database", "index", "query", "chart", "turn", "savings",
    "cost", "the", "a", "of", "to", "and", "in", "that", "it", "with", "for", "as", "on",
]


@dataclass
class _Row:
    role: str
    tokens: int
    kind: str = "chat"
    pinned: bool = False
    content: str = ""
    summary_meta: dict = field(default_factory=dict)


def seed_text(rng: random.Random, *, chars: int, prefix: str) -> str:
    words: list[str] = [prefix]
    size = len(prefix)
    while size < chars:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:chars]


class Simulation:
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
