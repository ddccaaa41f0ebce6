"""Helpers shared by the optimizer tests: building conversations and re-feeding packed output."""

from __future__ import annotations

from optimizer import Msg, PackedMessage, count_message
from optimizer.recall import MemorySource, RecallItem

MODEL = "gpt-4o-mini"


def msg(mid: str, role: str, content: str, *, pinned: bool = False, counted: bool = True) -> Msg:
    """A Msg with its stored count filled in (as the app stores it)."""
    m = Msg(id=mid, role=role, content=content, pinned=pinned)
    if not counted:
        return m
    return Msg(id=mid, role=role, content=content, pinned=pinned, tokens=count_message(m, model=MODEL))


def conversation(rounds: int, *, words: int = 40, system: str = "You are a helpful assistant.") -> list[Msg]:
    """system + `rounds` user/assistant rounds + a final user question."""
    out = [msg("sys", "system", system)]
    for r in range(rounds):
        out.append(msg(f"u{r}", "user", f"Question number {r} about topic {r % 7}. " + "detail " * (words // 4)))
        out.append(msg(f"a{r}", "assistant", f"Answer number {r}. " + "explanation words here " * (words // 3)))
    out.append(msg("q", "user", "And what is the final answer?"))
    return out


def source_of(msgs: list[Msg]) -> MemorySource:
    """An in-memory recall source over `msgs` (their list order is their place in time)."""
    return MemorySource([RecallItem(id=m.id, role=m.role, content=m.content, position=k, created_at=m.created_at)
                         for k, m in enumerate(msgs)])


def refeed(packed: list[PackedMessage], *, pinned_ids: frozenset[str] = frozenset()) -> list[Msg]:
    """Turn a packed context back into input messages (what a second pack would see).

    `pinned_ids`: the caller's pins; a pinned message sent compressed (an emergency) says only
    "compressed", and its caller, who knows its pins, would still pass it as pinned.
    """
    out = []
    for p in packed:
        mid = "+".join(p.source_ids) if p.origin == "summary" else p.source_ids[0]
        pinned = p.origin == "pinned" or (p.origin == "compressed" and mid in pinned_ids)
        out.append(Msg(id=mid, role=p.role, content=p.content, pinned=pinned, tokens=p.tokens, name=p.name))
    return out


def shape(packed: list[PackedMessage]) -> list[tuple]:
    """What a packed context sends (role, content), for comparisons."""
    return [(p.role, p.content) for p in packed]
