"""The request as every chat template accepts it: one leading system message, roles alternating.

`pack` keeps the layout that caches well: system prompt, pins and the original request, the summary,
the recent window, a recall block, the newest message. Chat templates of many local models (Llama,
Mistral, Gemma... served by vLLM, llama.cpp or Ollama) refuse parts of that: a system message
anywhere but first, two user or two assistant messages in a row, an assistant message first.
`shape_request` rewrites a packed context for the wire, losing no text and keeping the order:

* One leading system message: the static layer's system messages, then the summary, joined. The
  summary changes only when a new one lands, so the cached prefix holds between summaries.
* The recall block opens the newest user message (its header says it quotes earlier conversation).
  Both change every turn, so the prefix before them stays cached as it was.
* An empty reply (one stopped before its first word) is left out: a model has nothing to read in it.
* Consecutive messages of one role are merged: a question whose reply was stopped before its first
  word (or failed) and the next one; a pinned user message next to the original request.
* A conversation whose first turn is the assistant's gets a short user line before it.

Tool messages pass through. Every change is named in `notes`, for the optimization record; `tokens`
counts the request as shaped. Joining only saves per-message overhead; the one addition is the user
line (about 15 tokens) before a request that starts with the assistant (an imported greeting, a
pinned reply), and `pack` makes room for it (`bridge_tokens`), so a shaped request stays inside the
budget.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .tokens import REPLY_PRIMING, count_message
from .types import Msg, PackedMessage

JOIN = "\n\n"
BRIDGE = "[The conversation so far begins with the assistant's message below.]"


@dataclass(frozen=True, slots=True)
class ShapedRequest:
    """Messages for the model API (`role`, `content`, `name` when given), what changed, and their tokens."""

    messages: list[dict[str, Any]]
    notes: tuple[str, ...]
    tokens: int


@dataclass(slots=True)
class _Part:
    role: str
    content: str | list[dict[str, Any]]
    name: str | None
    tokens: int
    merged: int = 1  # packed messages in this one


def shape_request(packed: Sequence[PackedMessage], *, model: str) -> ShapedRequest:
    """`packed` rewritten into the shape every chat template accepts (see the module docstring)."""
    notes: Counter[str] = Counter()
    rest = [p for p in packed if p.role != "system"]
    newest = max((k for k, p in enumerate(rest) if p.role == "user"), default=-1)
    recall = next((p for p in packed if p.origin == "recall"), None) if newest >= 0 else None
    system = [p for p in packed if p.role == "system" and p is not recall]

    parts: list[_Part] = []
    if system:
        parts.append(_Part("system", _joined([p.content for p in system]), None, sum(p.tokens for p in system),
                           len(system)))
        what = "the summary" if any(p.origin == "summary" for p in system) else "system messages"
        if len(system) > 1:
            notes[f"{what} joined to the leading system message"] += 1
        elif packed[0] is not system[0]:
            notes[f"{what} moved to the leading system message"] += 1
    for k, p in enumerate(rest):
        if p.role == "assistant" and isinstance(p.content, str) and not p.content.strip():
            notes["an empty reply (stopped before its first word) left out"] += 1
            continue
        part = _Part(p.role, p.content, p.name, p.tokens)
        if k == newest and recall is not None:
            part = _Part(p.role, _joined([recall.content, p.content]), p.name, p.tokens + recall.tokens, 2)
            notes["the recall block opens the newest message"] += 1
        last = parts[-1] if parts else None
        if last is not None and last.role == part.role and part.role in ("user", "assistant"):
            last.content = _joined([last.content, part.content])
            last.name = last.name if last.name == part.name else None
            last.tokens += part.tokens
            last.merged += part.merged
            notes[f"consecutive {part.role} messages merged"] += 1
            continue
        if part.role == "assistant" and (last is None or last.role == "system"):
            parts.append(_Part("user", BRIDGE, None, 0, 0))
            notes["a user line put before the assistant's first message"] += 1
        parts.append(part)

    messages = []
    tokens = REPLY_PRIMING
    for part in parts:
        message: dict[str, Any] = {"role": part.role, "content": part.content}
        if part.name:
            message["name"] = part.name
        messages.append(message)
        # a message that stands as packed keeps its count; a merged or new one is counted as sent
        tokens += part.tokens if part.merged == 1 else count_message(message, model=model)
    return ShapedRequest(
        messages=messages, notes=tuple(n if k == 1 else f"{n} ({k} times)" for n, k in notes.items()), tokens=tokens
    )


def bridge_tokens(msgs: Sequence[Msg] | Sequence[PackedMessage], *, model: str) -> int:
    """The tokens of the user line `shape_request` puts before a request whose first message past the
    system ones is the assistant's (0 for any other): `pack` makes room for it."""
    first = next((m for m in msgs if m.role != "system"), None)
    if first is None or first.role != "assistant":
        return 0
    return count_message({"role": "user", "content": BRIDGE}, model=model)


def _joined(contents: Sequence[str | list[dict[str, Any]]]) -> str | list[dict[str, Any]]:
    """Contents as one: text joined by a blank line; parts lists (images) concatenated."""
    if all(isinstance(c, str) for c in contents):
        return JOIN.join(c for c in contents if isinstance(c, str))
    out: list[dict[str, Any]] = []
    for c in contents:
        out.extend([{"type": "text", "text": c}] if isinstance(c, str) else c)
    return out
