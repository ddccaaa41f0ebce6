"""Recall: quote old messages that the newest one is about, with their dates, after the stable window.

Truncation and summaries decide what stays in the conversation's flow; recall brings back, for one
request, the few old messages (outside the window: evicted, or covered by a lossy summary) that the
newest user message is about. The block goes right before the newest message, so the cacheable
prefix (static layer, summary, window) does not move; it changes every turn and is paid uncached.

Rules, and why:

* Quotes are whole messages, verbatim, each under its date and speaker, in time order; a quote never
  repeats a message the request already carries, and `source_ids` names every quoted message.
* A hit comes with its neighbours: the message it answers and the one answering it, since in
  conversation the fact a question asks for is often in the adjacent turn.
* What is quoted is ranked: a hit is ranked by the exchange it brings, its own score plus half of
  its neighbours' (`NEIGHBOUR_WEIGHT`), so a message whose question and answer both match comes
  before a lone message that matches as well by itself (a greeting that names the person asked
  about, say). The search ranks messages; recall ranks the passages it will quote.
* Relevance floor: a newest message with no content word ("thanks!") recalls nothing, and hits far
  below the best one are not quoted to fill space.
* Sources: the ranking comes from a `RecallSource`. `MemorySource` is the core's in-memory BM25 over
  the messages passed in (the CLI); the web app implements the same protocol over its database's
  full-text index, with the same analyzer (`optimizer.lexical`), so both paths quote the same way.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from .bm25 import LexicalIndex
from .lexical import Query, build_query, document_terms
from .tokens import count_system, count_text

HEADER = (
    "[Recalled from earlier in this conversation: older messages that may bear on the newest one, "
    "quoted verbatim with their dates. They are not part of the current exchange.]"
)
GAP = "…"
# How many ranked hits are considered; quotes are taken from them best first until the room is used.
SEARCH_LIMIT = 120
# A hit scoring below this share of the best hit is noise, not evidence: it is not quoted.
RELATIVE_FLOOR = 0.1
# Tokens a recall block may use at most, per preference, however much room the budget leaves: the
# block changes every turn, so all of it is billed as uncached prompt tokens. On a request without
# window state this bounds what a large window costs (a 128k-token model is not filled with quotes);
# at the windows where the rule "fill the budget" matters most (8,192 tokens and below) no cap binds.
# See README (Recall).
RECALL_CAP = {"fast": 8192, "balanced": 16384, "quality": 32768}
# On a turn of a running conversation (window state carried), at most this share of the budget: the
# block is paid uncached on every turn while the rest of the prompt is a cached prefix, so each
# preference buys evidence at its own price (README, "Recall"). A request without window state (the
# CLI, a first cut, an imported conversation) has no cached prefix to protect and fills the budget.
RECALL_TURN_SHARE = {"fast": 0.10, "balanced": 0.20, "quality": 0.35}
MIN_ROOM = 48  # below this a block could not hold the header and one short quote
# A hit's rank counts its neighbours' scores at this weight: the quote is the whole exchange, and
# the neighbours are context of the hit rather than hits of their own. On the dev set (passage
# ranking over the same hits, same room) it found 1-4 points more evidence at 2,048-4,096 tokens;
# 0.25-1.0 all gained, so the value is not a fine-tuned one.
NEIGHBOUR_WEIGHT = 0.5
# Exchanges whose messages are read at a time, best first: a block holds far fewer than the search
# returns (about 15 in 3,000 tokens of chat), and reading every hit's messages fetched mostly text
# that was never quoted. More are read while the room left holds a typical exchange. The ranking
# itself needs only the neighbours' ids, read for every hit.
READ_CHUNK = 40


@dataclass(frozen=True, slots=True)
class RecallItem:
    """One message a source returns: its text for quoting and its place in the conversation."""

    id: str
    role: str
    content: str
    position: int  # orders messages in time (list index in the CLI, primary key in the app)
    created_at: dt.datetime | None = None
    name: str | None = None
    # the message's stored token count (chat formula), when the source has it: sizes a quote without
    # tokenizing it; the block itself is always counted exactly
    tokens: int | None = None
    # the id of the message just before it in the conversation, when the source knows it (None: unknown,
    # or none): a source whose positions are not consecutive (the app's ids) says so what is adjacent
    previous: str | None = None


Links = tuple[str | None, str | None]  # the ids of the messages just before and after one (None: none)


class RecallSource(Protocol):
    """Ranks old messages against a query; gives their neighbours' ids, and messages by id."""

    def search(self, query: Query, *, limit: int, exclude_ids: frozenset[str]) -> list[tuple[str, float]]:
        """Best (id, score) pairs, highest first, BM25 over `optimizer.lexical` terms."""
        ...

    def neighbours(self, ids: Sequence[str]) -> dict[str, Links]:
        """For each id of a recallable message, the ids of the recallable messages before and after it."""
        ...

    def messages(self, ids: Sequence[str]) -> dict[str, RecallItem]:
        """The recallable messages with these ids (others are left out)."""
        ...


@dataclass(frozen=True, slots=True)
class Recall:
    """A recall block: the text to send, what it quotes and why."""

    content: str
    source_ids: tuple[str, ...]  # in time order
    hit_ids: tuple[str, ...]  # the ranked hits among them (the rest are neighbours), best first
    terms: tuple[str, ...]  # the query's terms, strongest first
    tokens: int


def recall_cap(preference: str, *, budget: int, stateful: bool) -> int:
    """Most tokens a recall block may take for `preference` (see RECALL_CAP, RECALL_TURN_SHARE)."""
    cap = RECALL_CAP[preference]
    if stateful:
        cap = min(cap, math.floor(budget * RECALL_TURN_SHARE[preference]))
    return cap


def format_date(when: dt.datetime | None) -> str:
    if when is None:
        return "undated"
    return _day_line(when.date())


@lru_cache(maxsize=1024)
def _day_line(day: dt.date) -> str:
    # A block renders every quote's date, twice a turn or more, and quotes share few days.
    return f"{day:%a} {day.day} {day:%B %Y}"


def _speaker(item: RecallItem) -> str:
    return item.name or item.role


def render(items: Sequence[RecallItem], links: dict[str, Links] | None = None) -> str:
    """The block's text: a header, then the quotes in time order under a line per date, a gap line
    between two quotes the conversation does not have next to each other.

    Next to each other: consecutive positions, or one the other's neighbour by `links` or by the later
    one's `previous` (the source's own word: an app's positions are database ids, which other
    conversations and hidden branches interleave, so a question and its answer are not always
    consecutive there, nor the end of one quoted exchange and the start of the next)."""
    links = links or {}
    lines = [HEADER]
    last_day: str | None = None
    last: RecallItem | None = None
    for it in items:
        day = format_date(it.created_at)
        if day != last_day:
            lines.append(day)
            last_day = day
        elif last is not None and not _adjacent(last, it, links):
            lines.append(GAP)
        lines.append(f"{_speaker(it)}: {it.content}")
        last = it
    return "\n".join(lines)


def _adjacent(first: RecallItem, then: RecallItem, links: dict[str, Links]) -> bool:
    return (then.position == first.position + 1 or then.previous == first.id
            or links.get(first.id, (None, None))[1] == then.id or links.get(then.id, (None, None))[0] == first.id)


def _unit_ids(hit_id: str, links: dict[str, Links]) -> list[str]:
    """A hit's exchange: the message before it (what it answers), the hit, the message after it (the
    answer to it), in time order.

    In conversation the fact a question asks for sits as often in the turn next to the matching
    one as in the match itself ("Where did you go?" / "Paris!"); on the dev set quoting both
    neighbours found 13 points more evidence than quoting the hit alone in the same room.
    """
    before, after = links.get(hit_id, (None, None))
    return [i for i in (before, hit_id, after) if i is not None]


def recall(
    *,
    text: str,
    source: RecallSource,
    room: int,
    exclude_ids: frozenset[str],
    model: str,
    context: str | None = None,
) -> Recall | None:
    """The recall block for a newest message `text` within `room` tokens, or None.

    `context` is the turn the newest message answers (the assistant's previous reply); `exclude_ids`
    the messages the request already carries. None when the message has no content word, nothing
    relevant is found, or no quote fits.
    """
    if room < MIN_ROOM:
        return None
    query = build_query(text, context=context)
    if not query:
        return None
    hits = source.search(query, limit=SEARCH_LIMIT, exclude_ids=exclude_ids)
    if not hits:
        return None
    floor = hits[0][1] * RELATIVE_FLOOR
    hits = [(i, s) for i, s in hits if s >= floor]
    links = source.neighbours([i for i, _ in hits])
    ranked = [h for h in rank_passages(hits, links) if h[0] in links]
    best = _BlockFiller(source, ranked=ranked, links=links, exclude_ids=exclude_ids, room=room, model=model).run()
    if best is None:
        return None
    content, tokens, quoted, kept = best
    return Recall(
        content=content,
        source_ids=tuple(it.id for it in quoted),
        hit_ids=tuple(kept),
        terms=tuple(sorted(query.weights, key=lambda t: -query.weights[t])),
        tokens=tokens,
    )


# the block that fitted: (content, tokens, quoted items in time order, hit ids)
_Block = tuple[str, int, tuple[RecallItem, ...], list[str]]


class _BlockFiller:
    """Fills a recall block with the best exchanges: reads their messages a chunk of hits at a time
    (a block quotes far fewer than the hits), fills by estimate, then counts the block exactly and
    fills again with what is left."""

    def __init__(self, source: RecallSource, *, ranked: list[tuple[str, float]], links: dict[str, Links],
                 exclude_ids: frozenset[str], room: int, model: str) -> None:
        self.source, self.ranked, self.links, self.exclude_ids = source, ranked, links, exclude_ids
        self.room, self.model = room, model
        self.items: dict[str, RecallItem] = {}
        self.read = 0  # ranked hits whose exchanges' messages have been read
        self.chosen: dict[str, RecallItem] = {}
        self.hit_ids: list[str] = []
        self.pending: list[str] = []
        self.unit_costs: dict[str, int] = {}  # estimated cost of each exchange when first considered
        self.used = self.header = count_system(HEADER, model=model)
        self.parts: dict[str, list[str]] = {}  # a hit's quote when its exchange fits no block (_part)

    def run(self) -> _Block | None:
        """The last block that fitted, or None."""
        best: _Block | None = None
        read_more = True
        while True:
            if self._should_read(read_more):
                self._read_chunk()
            if not self.pending:
                break
            added, left = self._fill()
            # read further exchanges only when those read so far cannot use the room left
            read_more = not added and self.read < len(self.ranked) and _worth_reading_more(left, self.unit_costs)
            if not added:
                if read_more:
                    continue
                break
            content = self._fit()
            if self.used > self.room or not self.hit_ids:
                break
            quoted = tuple(sorted(self.chosen.values(), key=lambda it: it.position))
            best = (content, self.used, quoted, list(self.hit_ids))
        return best

    def _should_read(self, read_more: bool) -> bool:
        if self.read >= len(self.ranked):
            return False
        return read_more or (not self.pending and _worth_reading_more(self.room - self.used, self.unit_costs))

    def _read_chunk(self) -> None:
        """The messages of the next chunk of exchanges, best first."""
        batch = [hit_id for hit_id, _ in self.ranked[self.read : self.read + READ_CHUNK]]
        self.read += len(batch)
        wanted = {i for h in batch for i in _unit_ids(h, self.links)} - self.items.keys() - self.exclude_ids
        self.items.update(self.source.messages(sorted(wanted)))
        self.pending += batch

    def _fill(self) -> tuple[bool, int]:
        """Add the pending exchanges that fit by estimate: (whether any was added, room left)."""
        left, added, rest = self.room - self.used, False, []
        for hit_id in self.pending:
            if hit_id not in self.items:  # gone since the search (deleted, superseded)
                continue
            new = [self.items[i] for i in _unit_ids(hit_id, self.links) if i in self.items and i not in self.chosen]
            costs = {it.id: _quote_estimate(it, self.model) for it in new}
            if sum(costs.values()) > self.room - self.header:  # not even alone in a block: what of it fits
                new = self._part(hit_id, new, costs, left)
            if not new:
                continue
            cost = sum(costs[it.id] for it in new)
            self.unit_costs.setdefault(hit_id, cost)
            if cost > left:
                rest.append(hit_id)
                continue
            left -= cost
            added = True
            self.chosen.update((it.id, it) for it in new)
            self.hit_ids.append(hit_id)
        self.pending = rest
        return added, left

    def _part(self, hit_id: str, new: list[RecallItem], costs: dict[str, int], left: int) -> list[RecallItem]:
        """Of an exchange too large for any block (a neighbour is a pasted document, say), the hit with the
        neighbours that fit beside it in `left`: left out whole, the message that matched was never quoted."""
        part = [it for it in new if it.id == hit_id]
        if (room := left - sum(costs[it.id] for it in part)) < 0:
            return part  # too large for the room left: pending, as any exchange
        for it in new:
            if it.id != hit_id and costs[it.id] <= room:
                part.append(it)
                room -= costs[it.id]
        # what it quotes: the part, and the messages of its exchange other hits quote already
        self.parts[hit_id] = [*(i for i in _unit_ids(hit_id, self.links) if i in self.chosen), *(it.id for it in part)]
        return sorted(part, key=lambda it: it.position)

    def _fit(self) -> str:
        """Render the block and count it; the estimate was short: drop the weakest hits until it fits."""
        content, self.used = _render_counted(self.chosen, self.model, self.links)
        while self.used > self.room and self.hit_ids:
            self.hit_ids.pop()
            keep = {i for h in self.hit_ids for i in self.parts.get(h) or _unit_ids(h, self.links)}
            self.chosen = {i: it for i, it in self.chosen.items() if i in keep}
            content, self.used = _render_counted(self.chosen, self.model, self.links)
        return content


def rank_passages(hits: Sequence[tuple[str, float]], links: dict[str, Links]) -> list[tuple[str, float]]:
    """`hits` with the score of the exchange each one quotes: its own plus `NEIGHBOUR_WEIGHT` times
    its neighbours' (a neighbour that is not among the hits scores 0). Best first, ties in the
    order of `hits`."""
    score = dict(hits)
    ranked = []
    for k, (hit_id, s) in enumerate(hits):
        near = sum(score.get(i, 0.0) for i in links.get(hit_id, (None, None)) if i is not None)
        ranked.append((s + NEIGHBOUR_WEIGHT * near, k, hit_id))
    ranked.sort(key=lambda r: (-r[0], r[1]))
    return [(hit_id, s) for s, _, hit_id in ranked]


def _worth_reading_more(left: int, unit_costs: dict[str, int]) -> bool:
    """Whether the room left is worth the neighbourhoods of another chunk of hits: it holds at least
    a typical exchange of those seen so far (the median estimate; any room before the first)."""
    if not unit_costs:
        return True
    return left >= sorted(unit_costs.values())[len(unit_costs) // 2]


def _render_counted(chosen: dict[str, RecallItem], model: str, links: dict[str, Links]) -> tuple[str, int]:
    content = render(sorted(chosen.values(), key=lambda it: it.position), links)
    return content, count_system(content, model=model)


def _quote_estimate(item: RecallItem, model: str) -> int:
    """Tokens a quote adds: its line, plus a share for a date line or a gap marker.

    With a stored count (3 + role + content, the chat formula) the line is about that much: speaker,
    colon and newline for the overhead and role; the name may be longer than the role, hence the margin.
    """
    if item.tokens:  # 0: never counted (a row written by hand)
        return item.tokens + 3 + (count_text(item.name, model=model) if item.name else 0)
    return count_text(f"{_speaker(item)}: {item.content}\n", model=model) + 3


class MemorySource:
    """`RecallSource` over messages held in memory (the CLI, tests, benchmarks).

    Indexes user and assistant messages; positions are list indices.
    """

    def __init__(self, items: Sequence[RecallItem]) -> None:
        self.items = [it for it in items if it.role in ("user", "assistant")]
        self.by_id = {it.id: k for k, it in enumerate(self.items)}
        self._index: LexicalIndex | None = None

    @property
    def index(self) -> LexicalIndex:
        # built on first use: a request that fits its budget never searches, and should not pay for it
        if self._index is None:
            self._index = LexicalIndex([document_terms(it.content) for it in self.items])
        return self._index

    def search(self, query: Query, *, limit: int, exclude_ids: frozenset[str]) -> list[tuple[str, float]]:
        skip = [self.by_id[i] for i in exclude_ids if i in self.by_id]
        return [(self.items[k].id, s) for k, s in self.index.search(query, limit=limit, exclude=skip)]

    def neighbours(self, ids: Sequence[str]) -> dict[str, Links]:
        out: dict[str, Links] = {}
        last = len(self.items) - 1
        for i in ids:
            k = self.by_id.get(i)
            if k is not None:
                out[i] = (self.items[k - 1].id if k > 0 else None, self.items[k + 1].id if k < last else None)
        return out

    def messages(self, ids: Sequence[str]) -> dict[str, RecallItem]:
        return {i: self.items[k] for i in ids if (k := self.by_id.get(i)) is not None}
