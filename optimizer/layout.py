"""The layout of a packed context, defined once: static layer, recent window, newest message.

In send order:

    static layer   system messages, pinned messages, the first user message (with `keep_first_user`)
    summary        the newest rolling summary, when one is passed and fits
    recent window  whole rounds up to the newest message

A round is a user message and the replies after it; the window is a suffix of whole rounds, so it
never opens with an orphaned reply. Position 0 also opens a round: a history may begin with an
assistant greeting, and that greeting must be sendable as a window of its own. The must-keep
messages (static layer plus the newest user message) are always sent, compressed only in an
emergency.

Two entry points on the same rule, so no caller re-derives it:

* `plan_layout` for `pack`: positions over a message list, found by passes that run in C, because a
  long history must not cost a Python loop per message on every request.
* `is_static` / `message_place` on one message's plain attributes, for the web app, the dashboard and
  (through the API) the browser, which know a message's role, pin and whether it is the first user
  message, but not its position in a `Msg` list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Place = Literal["static", "window", "evicted"]


class Positioned(Protocol):
    """What the layout reads from a message (`Msg` has both)."""

    @property
    def role(self) -> str: ...

    @property
    def pinned(self) -> bool: ...


def is_static(*, role: str, pinned: bool, is_first_user: bool, keep_first_user: bool = True) -> bool:
    """Whether a message belongs to the static layer, which is sent whatever the window."""
    return role == "system" or pinned or (keep_first_user and is_first_user and role == "user")


def message_place(
    *, role: str, pinned: bool, is_first_user: bool, before_window: bool, keep_first_user: bool = True
) -> Place:
    """Where one message stands given the stored window start.

    `before_window`: the message precedes the window start. "evicted" messages are the ones a
    request does not send as themselves (a summary may stand for them, recall may quote them).
    """
    if is_static(role=role, pinned=pinned, is_first_user=is_first_user, keep_first_user=keep_first_user):
        return "static"
    return "evicted" if before_window else "window"


@dataclass(frozen=True, slots=True)
class Layout:
    """Positions in one message list; -1 stands for "none"."""

    static: tuple[int, ...]  # ascending
    static_set: frozenset[int]
    first_user: int
    newest_user: int
    must_keep: frozenset[int]  # the static layer plus the newest user message


def positions_of(values: list[Any], value: Any) -> list[int]:
    """Positions of `value` in `values`, found by C-level `list.index` (cheap when rare)."""
    out: list[int] = []
    i = -1
    try:
        while True:
            i = values.index(value, i + 1)
            out.append(i)
    except ValueError:
        return out


def plan_layout(msgs: Sequence[Positioned], *, keep_first_user: bool = True) -> Layout:
    """The static layer, first and newest user messages and must-keeps of `msgs` (chronological)."""
    n = len(msgs)
    static = positions_of([m.role for m in msgs], "system")
    pins = [m.pinned for m in msgs]
    if any(pins):
        static = sorted({*static, *positions_of(pins, True)})
    first_user = next((i for i in range(n) if msgs[i].role == "user"), -1)
    if keep_first_user and first_user >= 0 and first_user not in static:
        static = sorted([*static, first_user])
    static_set = frozenset(static)
    newest_user = next((i for i in range(n - 1, -1, -1) if msgs[i].role == "user"), -1)
    must = static_set | ({newest_user} if newest_user >= 0 else set())
    return Layout(tuple(static), static_set, first_user, newest_user, frozenset(must))


def starts_round(msgs: Sequence[Positioned], i: int) -> bool:
    """Whether the window may start at position `i`."""
    return i == 0 or msgs[i].role == "user"


def snap_to_round(msgs: Sequence[Positioned], i: int, newest_user: int) -> int:
    """The first round start at or after `i` (-1 stays -1: no window state).

    A stored window start may point at a reply (the caller's state predates an edit); moving forward,
    not back, keeps the window from growing past what the trigger allowed. Past the end, the newest
    round is the window.
    """
    n = len(msgs)
    while 0 < i < n and not starts_round(msgs, i):
        i += 1
    if i >= n:
        i = max(newest_user, 0)
    return i


def next_round_after(msgs: Sequence[Positioned], i: int) -> int:
    """The first user message after position `i`, or -1."""
    return next((k for k in range(i + 1, len(msgs)) if msgs[k].role == "user"), -1)


def segments(lo: int, hi: int, static: Sequence[int]) -> list[tuple[int, int]]:
    """[lo, hi) minus the static positions (ascending), as a few contiguous ranges."""
    out = []
    start = lo
    for s in static:
        if s < lo:
            continue
        if s >= hi:
            break
        if s > start:
            out.append((start, s))
        start = s + 1
    if hi > start:
        out.append((start, hi))
    return out
