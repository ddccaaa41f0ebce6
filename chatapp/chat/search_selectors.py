"""Message search: the owner's messages matching a query, ranked, a page at a time, each with a
highlighted snippet (issue 12 item 2, issue 13: results that jump to the message).

Matching is `search_match.conversation_ids_matching`'s, through the same helpers: every content word
of the query analyzed as the index stores it (`optimizer.lexical.analyze`, so "running" finds
"runs"), the last one as a prefix, scoped to the owner by the index itself (SQLite FTS5, PostgreSQL
tsvector + GIN; chat migration 0001_squashed_0029).

Ranking is BM25 (`optimizer.bm25.bm25`) over the newest `RANK_WINDOW` matching messages — all of
them when fewer match — ordered by score, then newest first. Why not the vendor's own ranking:
FTS5's bm25() counts the rows of every phrase of the query, the owner's scope token included, so a
query against an owner with a million messages paid ~25 ms before ranking anything; ts_rank over
the stored tsvector sees no term frequencies (array_to_tsvector keeps each lexeme once, without
positions) and must read every match. Newest-first is the one order both indexes serve without
reading every posting (FTS5 walks its doclists backwards; PostgreSQL sorts the matches or walks the primary
key), so a common word costs `RANK_WINDOW` rows, not its hundred thousand matches. Each candidate's
term frequencies come from its stored terms (`MessageSearch.terms`), the document frequencies and
average length from the per-conversation statistics recall keeps (`RecallTerm`, `RecallCorpus`),
summed over the conversations holding most of the candidates: a word rare where the hits are
weighs more. The window bounds the ranked list: `MAX_PAGE` pages of `PAGE_SIZE`.

Snippets (search_snippets) are cut in Python from the content of the page's messages only, around
the first word whose analyzed form matches a query term, every such word marked; both databases
therefore give the same snippet. The text is escaped: only the `<mark>` tags added here are markup.
Conversations whose title contains the query come first on page 1 as hits of their own (kind
"title", at most `TITLE_HITS`).
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import connection
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from optimizer.bm25 import bm25_norm, bm25_normed, idf
from optimizer.lexical import unspaced

from .models import Conversation, Message, MessageSearch
from .recall_source import FTS_TABLE, corpus_statistics
from .rendering import markdown_plain
from .search_match import owner_match_query, search_prefix_stems, search_terms, title_match
from .search_snippets import SnippetPart, WordMatcher, folded_spans, marked_spans, snippet_parts

# One letter would match half the titles and every word's prefix; one character of a script written
# without spaces is a word ("猫"), and is searched (as a prefix of the pairs the index holds).
MIN_QUERY_CHARS = 2
PAGE_SIZE = 20
MAX_PAGE_SIZE = 50
MAX_PAGE = 50
RANK_WINDOW = 1000  # = MAX_PAGE pages of PAGE_SIZE: every page the API serves is ranked
TITLE_HITS = 5
# Statistics are summed over the conversations holding most candidates: one index probe per
# (conversation, term), so both counts are bounded.
STAT_CONVERSATIONS = 20
STAT_EXPANSIONS = 8
# A query of one word this short is tested on the owner's newest SCAN_ROWS messages' stored terms
# before the index is asked to expand it (see _window).
SHORT_PREFIX = 3
# A stem the last word may be on its way to (search_match.search_prefix_stems) is a less sure match
# than a word that starts with what was typed: "ration" ranks "rations" above "ratio".
PREFIX_STEM_WEIGHT = 0.5
SCAN_ROWS = 2 * RANK_WINDOW

# (message id, conversation id, length, stored terms): an index row as the ranking reads it
Row = tuple[int, int, int, str]
_SEARCH_TABLE = MessageSearch._meta.db_table
# A Row's columns in the statements that read them (`s`: the search table).
_ROW_COLUMNS = "s.message_id, s.conversation_id, s.length, s.terms"
# SQLite: the Rows of an FTS5 query's matches (its one parameter), for a statement to go on from.
_FTS_ROWS = (
    f"SELECT {_ROW_COLUMNS} FROM {FTS_TABLE} f JOIN {_SEARCH_TABLE} s ON s.message_id = f.rowid "  # noqa: S608
    f"WHERE {FTS_TABLE} MATCH %s"
)


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One result: a message (kind "message") or a conversation by its title (kind "title": no
    message, `created_at` is the conversation's last activity)."""

    kind: str
    conversation_id: int
    conversation_title: str
    message_id: int | None
    role: str | None
    created_at: dt.datetime
    parts: tuple[SnippetPart, ...]
    score: float | None = None
    conversation_archived: bool = False

    @property
    def snippet_html(self) -> SafeString:
        # Safe by construction: every part is escaped; the only markup is the <mark> added here.
        return mark_safe("".join(  # noqa: S308
            f"<mark>{escape(p.text)}</mark>" if p.marked else str(escape(p.text)) for p in self.parts
        ))

    @property
    def snippet_text(self) -> str:
        return "".join(p.text for p in self.parts)


@dataclass(frozen=True, slots=True)
class SearchPage:
    query: str
    page: int
    page_size: int
    hits: list[SearchHit]
    has_more: bool
    # Matching messages ranked (at most RANK_WINDOW); `window_full`: more may match than were ranked.
    ranked: int
    window_full: bool


def message_search(*, owner: User, query: str, page: int = 1, page_size: int = PAGE_SIZE) -> SearchPage:
    """Page `page` (1-based, at most MAX_PAGE) of `owner`'s messages matching `query`, best first,
    with title hits on top of page 1. A query shorter than MIN_QUERY_CHARS finds nothing, unless it is
    a character of a script written without spaces; one made only of stop words finds titles only."""
    if not 1 <= page <= MAX_PAGE:
        raise ValueError(f"page must be between 1 and {MAX_PAGE}")
    page_size = max(1, min(int(page_size), MAX_PAGE_SIZE))
    query = " ".join(query.split())
    # Counted composed: a letter and its combining accent ("e" + U+0301, as pasted from macOS) are one.
    if len(unicodedata.normalize("NFC", query)) < MIN_QUERY_CHARS and not unspaced(query):
        return SearchPage(query=query, page=page, page_size=page_size, hits=[], has_more=False, ranked=0,
                          window_full=False)
    hits = title_hits(owner=owner, query=query) if page == 1 else []
    terms = search_terms(text=query)
    stems = search_prefix_stems(text=query, terms=terms)
    ranked: list[tuple[int, float]] = []
    window: list[Row] = []
    if terms:
        window = _window(owner_id=owner.pk, terms=terms, prefix_stems=stems)
        ranked = _rank(window=window, terms=terms, prefix_stems=stems)
    start = (page - 1) * page_size
    chosen = ranked[start : start + page_size]
    hits += _message_hits(owner=owner, chosen=chosen, terms=terms, prefix_stems=stems)
    return SearchPage(query=query, page=page, page_size=page_size, hits=hits, has_more=len(ranked) > start + page_size,
                      ranked=len(ranked), window_full=len(window) >= RANK_WINDOW)


def title_hits(*, owner: User, query: str) -> list[SearchHit]:
    """Up to TITLE_HITS of the owner's conversations whose title contains `query`, latest first."""
    rows = (
        Conversation.objects.filter(title_match(owner_id=owner.pk, text=query), owner=owner)
        .order_by("-updated_at", "-id")
        .values_list("id", "title", "updated_at", "archived_at")[:TITLE_HITS]
    )
    return [
        SearchHit(kind="title", conversation_id=pk, conversation_title=title, message_id=None, role=None,
                  created_at=updated_at, parts=marked_spans(title, folded_spans(title, query)),
                  conversation_archived=archived_at is not None)
        for pk, title, updated_at, archived_at in rows
    ]


# --- candidates and ranking --------------------------------------------------------------------------


def _window(*, owner_id: int, terms: Sequence[str], prefix_stems: Sequence[str] = ()) -> list[Row]:
    """(message id, conversation id, length, stored terms) of the newest RANK_WINDOW matches.

    A query of one short word (SHORT_PREFIX characters or fewer: "bi" while typing "bike") stands
    for many words, and the index would read every posting of each (FTS5 merges them whole before
    anything else; GIN's partial match too). It is first tested on the stored terms of the owner's
    newest messages, newest first, stopping at RANK_WINDOW matches, among at most SCAN_ROWS of them;
    only when those hold too few and older ones may exist (a rare prefix) is the index asked, which
    is then cheap. Both ways give the same window. With other words the index is asked at once: its
    intersection with them was the cheaper way on both databases at a million messages. The last
    word may also stand for `prefix_stems` (search_match.search_prefix_stems), matched whole.
    """
    whole, prefix = terms[:-1], terms[-1]
    if len(prefix) <= SHORT_PREFIX and not whole and not prefix_stems:
        complete, rows = _window_scanned(owner_id=owner_id, prefix=prefix)
        if complete or len(rows) >= RANK_WINDOW:
            return rows
    query = owner_match_query(owner_id=owner_id, terms=terms, prefix_stems=prefix_stems)
    if connection.vendor == "postgresql":
        # The rows in the same pass that finds them. Finding the ids first and reading their rows by
        # primary key after (so that a sort would carry ids only) cost 1,000 more index probes: 14.9
        # against 8.2 ms at the median of bench/scale.py's queries on its 1M fill (a throwaway probe).
        sql = (
            f"SELECT {_ROW_COLUMNS} FROM {_SEARCH_TABLE} s "  # noqa: S608
            "WHERE s.tsv @@ %s::tsquery ORDER BY s.message_id DESC LIMIT %s"
        )
    else:
        # FTS5 serves rowid order itself, backwards, and stops after LIMIT rows.
        sql = f"{_FTS_ROWS} ORDER BY f.rowid DESC LIMIT %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [query, RANK_WINDOW])
        return list(cursor.fetchall())


def _window_scanned(*, owner_id: int, prefix: str) -> tuple[bool, list[Row]]:
    """(whether every one of the owner's messages was seen, the newest RANK_WINDOW of them with a
    term starting with `prefix` among their newest SCAN_ROWS).

    Two statements: the bound (how many there are, up to SCAN_ROWS, and the oldest id among them:
    ids only), then the rows newest first from the index, tested as they come, stopping at
    RANK_WINDOW."""
    query = owner_match_query(owner_id=owner_id, terms=[], last_as_prefix=False)
    if connection.vendor == "postgresql":
        bound = (
            f"SELECT count(*), min(message_id) FROM (SELECT message_id FROM {_SEARCH_TABLE} "  # noqa: S608
            "WHERE tsv @@ %s::tsquery ORDER BY message_id DESC LIMIT %s) c"
        )
        rows = (
            f"SELECT {_ROW_COLUMNS} FROM {_SEARCH_TABLE} s "  # noqa: S608
            "WHERE s.tsv @@ %s::tsquery AND s.message_id >= %s AND strpos(' ' || s.terms, %s) > 0 "
            "ORDER BY s.message_id DESC LIMIT %s"
        )
    else:
        bound = (
            f"SELECT count(*), min(rowid) FROM (SELECT rowid FROM {FTS_TABLE} "  # noqa: S608
            f"WHERE {FTS_TABLE} MATCH %s ORDER BY rowid DESC LIMIT %s)"
        )
        rows = f"{_FTS_ROWS} AND f.rowid >= %s AND instr(' ' || s.terms, %s) > 0 ORDER BY f.rowid DESC LIMIT %s"
    with connection.cursor() as cursor:
        cursor.execute(bound, [query, SCAN_ROWS])
        count, oldest = cursor.fetchone()
        if not count:
            return True, []
        cursor.execute(rows, [query, oldest, f" {prefix}", RANK_WINDOW])
        return count < SCAN_ROWS, list(cursor.fetchall())


def _rank(*, window: list[Row], terms: Sequence[str], prefix_stems: Sequence[str] = ()) -> list[tuple[int, float]]:
    """The window's (message id, BM25 score), best first, newest first among equals.

    The last term is a prefix: each word it stands for in a candidate (one of `prefix_stems`
    included) scores as a term of its own, with its own document frequency, as a query naming those
    words would.
    """
    if not window:
        return []
    whole, prefix = list(terms[:-1]), terms[-1]
    found = _occurrences(window=window, whole=whole, prefix=prefix, prefix_stems=prefix_stems)
    expansions: Counter[str] = Counter()
    stems = set(prefix_stems)
    for counts in found:
        for t in counts:
            if t.startswith(prefix) or t in stems:
                expansions[t] += 1
    looked_up = [*whole, *(t for t, _ in expansions.most_common(STAT_EXPANSIONS) if t not in whole)]
    by_conversation = Counter(cid for _, cid, _, _ in window)
    conversations = [cid for cid, _ in by_conversation.most_common(STAT_CONVERSATIONS)]
    n_docs, total, df = corpus_statistics(conversation_ids=conversations, terms=looked_up)
    if n_docs <= 0:  # statistics cover recallable messages only: fall back on the window's own
        n_docs, total = len(window), sum(length for _, _, length, _ in window)
    avg_len = total / max(n_docs, 1)
    weights = {t: idf(min(df.get(t, 0), n_docs), n_docs) * (PREFIX_STEM_WEIGHT if t in stems else 1.0)
               for t in looked_up}
    # A prefix word beyond the ones looked up weighs like the most common of those: never more than
    # a word the statistics know.
    rest = min((weights[t] for t in looked_up if t.startswith(prefix)), default=idf(0, n_docs))
    scored = []
    for (pk, _, length, _), counts in zip(window, found, strict=True):
        norm = bm25_norm(length, avg_len)  # the same for each term of the message
        score = 0.0
        for t, tf in counts.items():
            weight = weights.get(t)
            if weight is None:
                weight = rest * (PREFIX_STEM_WEIGHT if t in stems else 1.0)
            score += bm25_normed(tf, norm, weight)
        scored.append((pk, score))
    scored.sort(key=lambda item: (-item[1], -item[0]))
    return scored


def _occurrences(
    *, window: list[Row], whole: list[str], prefix: str, prefix_stems: Sequence[str] = ()
) -> list[dict[str, int]]:
    """Per candidate, how often it holds each whole term, each word starting with the prefix, and
    each of `prefix_stems`.

    All the candidates' stored terms in one text, a line each with a space before every term: one
    search per query word, each opening with a literal (" bike") that the regular-expression engine
    skips to at C speed; only the matches are handled in Python.
    """
    starts, at = [], 0
    for _, _, _, stored in window:
        starts.append(at)
        at += len(stored) + 2
    text = "".join(f" {stored}\n" for _, _, _, stored in window)
    # Plain dicts, not a Counter each (with the message's BM25 norm computed once in _rank: 4.8 -> 3.9 ms
    # a query's ranking on bench/scale.py's 1M fill, the same scores to the bit).
    found: list[dict[str, int]] = [{} for _ in window]
    for term in [*whole, *(t for t in prefix_stems if not t.startswith(prefix) and t not in whole)]:
        for m in re.finditer(" " + re.escape(term) + "(?=[ \n])", text):
            counts = found[bisect_right(starts, m.start()) - 1]
            counts[term] = counts.get(term, 0) + 1
    skip = set(whole)  # counted above: a whole term is not counted again as the prefix's word
    for m in re.finditer(" (" + re.escape(prefix) + "[^ \n]*)", text):
        word = m.group(1)
        if word not in skip:
            counts = found[bisect_right(starts, m.start()) - 1]
            counts[word] = counts.get(word, 0) + 1
    return found


# --- the page's hits and their snippets ------------------------------------------------------------


def _message_hits(
    *, owner: User, chosen: list[tuple[int, float]], terms: Sequence[str], prefix_stems: Sequence[str] = ()
) -> list[SearchHit]:
    """The chosen messages with their snippets; their content is read here, for this page only."""
    if not chosen:
        return []
    rows = {
        row[0]: row
        # Messages of the paths shown only (issue 13): another branch's message has no place to link to.
        for row in Message.objects.filter(
            pk__in=[pk for pk, _ in chosen], conversation__owner=owner, superseded=False
        ).values_list(
            "id", "conversation_id", "conversation__title", "role", "created_at", "content",
            "conversation__archived_at",
        )
    }
    matcher = WordMatcher.for_terms(terms=terms, prefix_stems=prefix_stems)
    hits = []
    for pk, score in chosen:
        row = rows.get(pk)
        if row is None:  # deleted since it was ranked
            continue
        _, conversation_id, title, role, created_at, content, archived_at = row
        # As the chat shows it: the user's text as typed, a reply's Markdown as the words it renders.
        shown = content if role == Message.Role.USER else markdown_plain(content)
        hits.append(SearchHit(kind="message", conversation_id=conversation_id, conversation_title=title,
                              message_id=pk, role=role, created_at=created_at,
                              parts=snippet_parts(content=shown, matcher=matcher), score=score,
                              conversation_archived=archived_at is not None))
    return hits
