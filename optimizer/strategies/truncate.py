"""Truncate: choose the recent window, cutting whole rounds from the front.

Nothing moves until the history reaches the trigger (0.8 of the budget); then the window is cut to
the target (0.5), not just under the line, so the next requests append to an unchanged prefix that
provider prompt caches reuse. The window start the caller stores comes back as `state.ws_state`
and stays put while the context is under the trigger.

The window is the newest whole rounds that fit the target; the newest round is always taken (its
oversized messages compressed). The design notes' minimum recent window (4 / 6 / 8 rounds by
conversation length) yields to the target: when those rounds were allowed past it, a small context
window (4k tokens, long messages) ended every cut above the trigger again, so the window moved on
nearly every turn and no prompt prefix was ever reused. A passed summary that crowds out the newest
round is dropped. Replies after the newest user message (the newest round's, e.g. regenerated ones)
that do not fit beside the must-keeps are shrunk, then left out oldest first (`fit_replies`), never the
newest message itself. If the must-keeps and the newest message still do not fit, oversized must-keeps
are compressed too (an emergency), the summary kept if it fits beside them, and if even that fails
`ContextTooLargeError` reports the numbers; once the rest fits, they grow back into the room left
under the trigger (`give_back`), so they are cut only as far as the request needs.
"""

from __future__ import annotations

from ..layout import starts_round
from ..tokens import REPLY_PRIMING
from ..types import ContextTooLargeError
from .base import PackState

MUST_KEEP_DETAIL = "system, pinned, first and newest messages; oversized ones compressed"
# The least an oversized must-keep may be compressed to (the oversize share of the budget): below it
# the omission marker and some of its words do not fit, and the message would go out as a marker
# alone, its words gone: a budget that small cannot send it (ContextTooLargeError), not send it empty.
MIN_COMPRESSED_TOKENS = 32


def choose_window(state: PackState, lo: int, base: int) -> tuple[int, int]:
    """Walk whole rounds back from the end: (window start, tokens used including `base`).

    The newest round is always taken; further rounds while they fit the target. The window starts
    at or after `lo`.
    """
    msgs, static = state.msgs, state.layout.static_set
    used, ws, rounds, acc = base, state.n, 0, 0
    for i in range(state.n - 1, lo - 1, -1):
        if i not in static:
            acc += state.eff(i)
        if starts_round(msgs, i):
            if rounds and used + acc > state.target:
                break
            used, ws, rounds, acc = used + acc, i, rounds + 1, 0
    return ws, used


def fit_replies(state: PackState) -> None:
    """Shrink the replies after the newest user message (a regenerated answer, say: the newest round,
    which the window always takes) until the context fits the budget, before any must-keep is touched.

    They share the room the rest leaves, a reply shorter than its share sent whole, the others cut to
    one limit, never below `MIN_COMPRESSED_TOKENS` (a marker alone says nothing); where even that
    does not fit, the oldest replies are left out first. The newest message itself (a reply, a tool
    result) is never left out: the hard rule names it beside the must-keeps, and a model asked to go
    on from a call whose result it never saw answers something else. When it has no room even at its
    floor, it waits for the emergency, which makes room for it as for the newest question.
    """
    newest, static = state.layout.newest_user, state.layout.static_set
    if newest < 0 or state.ws > newest:
        return
    replies = [i for i in range(newest + 1, state.n) if i not in static and i not in state.dropped]
    if not replies:
        return
    current = sum(state.eff(i) for i in replies)
    room = current - (state.used - state.budget)
    if room < 0:
        # The rest alone is over the budget: a must-keep will be compressed whatever the replies
        # cost (the emergency), so they stay as they are, compressed like any oversized message.
        return
    kept = 1 if replies[-1] == state.n - 1 else 0
    while len(replies) > kept and _floor(state, replies) > room:
        state.dropped.add(replies.pop(0))
    if not replies or _floor(state, replies) > room:
        state.used -= current - sum(state.eff(i) for i in replies)
        return
    cap = _level([state.toks[i] for i in replies], room)
    state.caps.update((i, cap) for i in replies)
    state.used += sum(state.eff(i) for i in replies) - current


def give_back(state: PackState) -> None:
    """Grow the must-keeps the emergency compressed into the room left under the trigger.

    The emergency cuts each to the oversize line whatever the rest of the request leaves: a paste
    three times the budget went out at a quarter of it beside half the budget unused. They share the
    room under the trigger (the line a conversation grows to before a cut; what is above it stays
    for recall, as on any request), one limit for all, a must-keep under it sent whole. The window is
    chosen first: the rounds it holds are not given up for a paste. A summary written now (the CLI's
    `summarize_now`) takes its room under the trigger too, so on such a request the must-keeps come
    first and the evicted span is reported for a worker instead.
    """
    grown = sorted(i for i in state.must_compressed if state.is_compressed(i))
    if not grown:
        return
    current = sum(state.eff(i) for i in grown)
    cap = _level([state.toks[i] for i in grown], current + min(state.budget, state.trigger - 1) - state.used)
    if cap <= state.oversize:
        return
    state.caps.update((i, cap) for i in grown)
    state.used += sum(state.eff(i) for i in grown) - current


def _floor(state: PackState, replies: list[int]) -> int:
    """The least `replies` may cost as sent: each whole, or cut to `MIN_COMPRESSED_TOKENS`."""
    return sum(min(state.toks[i], MIN_COMPRESSED_TOKENS) for i in replies)


def _level(sizes: list[int], room: int) -> int:
    """The largest limit c with sum(min(size, c)) <= room: the sizes under it whole, the rest cut to it."""
    left, count = room, len(sizes)
    for size in sorted(sizes):
        if size * count > left:
            return left // count
        left -= size
        count -= 1
    return max(sizes)


class TruncateStrategy:
    """Sets `ws` / `used` / `triggered`; may drop the passed summary or compress must-keeps."""

    name = "truncate"

    def apply(self, state: PackState) -> None:
        passed = state.summary_tokens, state.lo  # the summary as passed, should a cut drop it
        state.fixed = state.fixed_tokens()
        state.triggered = True
        if state.ws_state >= 0 and state.lo == state.ws_state:
            # the stored window, unchanged, while it stays under the trigger
            static = state.layout.static_set
            window = sum(state.eff(i) for i in range(state.lo, state.n) if i not in static)
            state.ws, state.used = state.lo, state.fixed + state.summary_tokens + window
            state.triggered = state.used >= state.trigger
        if state.triggered:
            # at a cut the summary in use shares the target with the window: the whole of the gap up
            # to the trigger is left for the conversation to grow into before the next cut
            state.ws, state.used = choose_window(state, state.lo, state.fixed + state.summary_tokens)
            if state.summary_tokens and state.used > state.budget:
                # without the summary, what it covered may be sent verbatim again (from the stored start)
                self._without_summary(state)
        if state.used > state.budget:
            fit_replies(state)
        if state.used > state.budget:
            self._emergency(state, passed=passed)

    @staticmethod
    def _without_summary(state: PackState) -> None:
        state.summary_tokens, state.lo = 0, max(state.ws_state, 0)
        state.ws, state.used = choose_window(state, state.lo, state.fixed)

    def _emergency(self, state: PackState, *, passed: tuple[int, int]) -> None:
        """Compress oversized must-keeps too, and try the window again with the passed summary (the
        room compression made may hold it), then without; if even that does not fit, report the numbers."""
        oversized = [i for i in state.layout.must_keep if state.toks[i] > state.oversize]
        if oversized and state.oversize < MIN_COMPRESSED_TOKENS:
            # the newest message, whatever its role, is kept as they are, so its cost is theirs too;
            # and the newest round cannot be cut, so a greeting opening it is needed as well
            kept = state.layout.must_keep | {state.n - 1}
            needed = max(sum(state.toks[i] for i in kept) + REPLY_PRIMING, state.used)
            raise ContextTooLargeError(needed=needed, budget=state.budget, detail=MUST_KEEP_DETAIL)
        state.must_compressed.update(oversized)
        state.fixed = state.fixed_tokens()
        state.summary_tokens, state.lo = passed
        if state.summary_tokens:
            state.ws, state.used = choose_window(state, state.lo, state.fixed + state.summary_tokens)
        if not state.summary_tokens or state.used > state.budget:
            self._without_summary(state)
        if state.used > state.budget:
            # the room compression made goes to the replies after the newest question first
            fit_replies(state)
        if state.used > state.budget:
            raise ContextTooLargeError(needed=state.used, budget=state.budget, detail=MUST_KEEP_DETAIL)
        give_back(state)
