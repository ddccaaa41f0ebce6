"""Reads of the message full-text index for recall: the database `RecallSource` (conversation
search builds its queries with the same helpers: search_match).

`DatabaseRecallSource` ranks a conversation's recallable messages (live user and assistant chat
messages) exactly as `optimizer.recall.MemorySource` ranks the same messages in memory: Okapi BM25
(`optimizer.bm25.bm25`, k1 = 1.2, b = 0.75) with per-term query weights, N, document
frequencies and the average length taken over the conversation's recallable messages. Neither
FTS5's bm25() (one weight per column, statistics over the whole table) nor PostgreSQL's ts_rank
(no IDF) computes that, so the database is used for what it is fast at — finding the messages of a
conversation that contain a term — and the statistics are read from rows kept at write time
(search_services). Scores are computed in Python from the stored terms of the candidates.

Fast on long conversations:

* MaxScore pruning: terms are visited by the most they can add to a score (idf x weight, very
  common terms last); once the terms not yet visited could not lift an unseen message over the
  threshold (the `limit`-th best score so far, or the share of the best that recall discards
  anyway), their postings are never read. A common term in a 100k-message conversation is then
  scored only inside the candidates already found.
* Each lookup reads one conversation's postings of one term: both vendors index each recallable
  message's terms prefixed with its conversation (`c<id>_term`: PostgreSQL's `rtsv` column, SQLite's
  chat_message_rfts), where `_c<id> & term` / `_c<id> AND term` walked every posting of the
  conversation and every posting of the term in the table (bench/fts_lookup.py).
* A very common term (`MAX_POSTINGS`) is looked up among the newest `RECENT_MESSAGES` only (the
  rows returned are bounded; PostgreSQL still walks the term's GIN entry for the bitmap), all of a
  query's in one lookup, after every rarer term.
* A lookup names only its own terms; the messages earlier lookups found are skipped in Python (a
  long query's lookups named dozens of terms to leave out, each tested against every posting).
* Few round trips: the statistics in one statement, the lookups of rare terms together (`BATCH_ROWS`)
  and the very common terms' in one, the neighbours' ids of all hits in one, and the rows of each
  chunk of exchanges recall may quote in one.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from functools import lru_cache

from django.db import connection

from chatapp.providers.llm import OFFLINE_MODEL
from optimizer.bm25 import K1, bm25_of_term_texts, idf, strongest_terms
from optimizer.lexical import Query
from optimizer.recall import RELATIVE_FLOOR, Links, RecallItem

from .image_models import MessageImage
from .models import Conversation, Message, MessageSearch, RecallCorpus, RecallTerm
from .search_services import MAX_TERM_CHARS, recall_lexeme

_SEARCH_TABLE = MessageSearch._meta.db_table
_MESSAGE_TABLE = Message._meta.db_table
_CORPUS_TABLE = RecallCorpus._meta.db_table
_TERM_TABLE = RecallTerm._meta.db_table
_IMAGE_TABLE = MessageImage._meta.db_table
FTS_TABLE = "chat_message_fts"  # SQLite only: chat migration 0001_squashed_0029
RECALL_FTS_TABLE = "chat_message_rfts"  # SQLite only: recall's scoped tokens (chat migrations 0002, 0009)
# A term in more recallable messages than MAX_POSTINGS is looked up only among the conversation's
# newest RECENT_MESSAGES: reading all of a very common term's postings is what would make a query
# slow on a long conversation. The common terms of a query are looked up together, so they return
# at most RECENT_MESSAGES rows, whatever the conversation's length.
# See DatabaseRecallSource.
MAX_POSTINGS = 1000
RECENT_MESSAGES = 2000
# Terms visited one after another are looked up in one statement while their postings add up to at
# most BATCH_ROWS: a statement's fixed cost (a round trip, the driver's and Django's work) was most
# of a rare term's lookup, and a query's terms are mostly rare. Pruning is then checked between
# batches: a batch may read rows that term-at-a-time would have skipped, at most BATCH_ROWS of them.
BATCH_ROWS = 250


@lru_cache(maxsize=8192)  # recall reads mostly what it read the turns before, and a date never changes
def _aware(value: dt.datetime | str | None) -> dt.datetime | None:
    """A `created_at` read by plain SQL as the ORM would give it. Text is ISO 8601 in UTC: SQLite's
    stored value (Django writes UTC with USE_TZ), or PostgreSQL's in the connection's UTC time zone."""
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if value is not None and value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value


def _id_in(column: str, ids: Sequence[int]) -> str:
    """`column` among `ids`, as a condition taking `_id_params(ids)`. PostgreSQL: one array parameter,
    so that the statement's text is the same whatever the number of ids and psycopg reuses its parsed
    form (it parses a statement of more than 50 parameters again on every execution, and quotes each
    one in Python): 0.29 -> 0.19 ms of the server's CPU and 0.90 -> 0.74 ms of wall time for the
    messages of 100 ids (a throwaway probe on bench/scale.py's 1M fill), two such reads a turn once
    recall quotes its fill. SQLite: an IN list."""
    if connection.vendor == "postgresql":
        return f"{column} = ANY(%s)"
    return f"{column} IN ({', '.join(['%s'] * len(ids))})"


def _id_params(ids: Sequence[int]) -> list:
    return [list(ids)] if connection.vendor == "postgresql" else list(ids)


def _pks(ids: Iterable[str]) -> list[int]:
    """Message primary keys among recall ids (ids that are not one cannot be this conversation's)."""
    return [int(i) for i in ids if str(i).isdigit()]


def fts_phrase(token: str) -> str:
    # Terms are word characters only (optimizer.lexical); quoting makes FTS5 read them as strings.
    return '"' + token.replace('"', '""') + '"'


def ts_lexeme(token: str) -> str:
    return "'" + token.replace("'", "''").replace("\\", "\\\\") + "'"


def _match_sql(*, conversation_id: int, terms: Sequence[str], since: int | None) -> tuple[str, list]:
    """SQL for the (id, length, terms) of the recallable messages of a conversation containing any of
    `terms`, served by the vendor's full-text index; only messages from id `since` on when given.

    Messages found by the terms read before are left out by the caller, not here: naming those terms
    in the query (`& !(…)`, `NOT (…)`) made PostgreSQL test each posting of the terms looked up, in
    the whole conversation, against every one of them (a pasted document's lookup of a very common
    term: 13.6 ms against 4.0 without, at 10,000 messages)."""
    # Conversation-scoped tokens (`c<id>_term`): PostgreSQL's `rtsv` column, SQLite's chat_message_rfts
    # (chat migration 0001_squashed_0029): only this conversation's postings of each term.
    postgres = connection.vendor == "postgresql"
    quote, either = (ts_lexeme, " | ") if postgres else (fts_phrase, " OR ")
    query = either.join(quote(recall_lexeme(conversation_id=conversation_id, term=t)) for t in terms)
    if postgres:
        sql = (
            f"SELECT message_id, length, terms FROM {_SEARCH_TABLE} "  # noqa: S608 (names are ours)
            "WHERE rtsv @@ %s::tsquery AND recallable"
        )
        first_id = "message_id"
    else:
        sql = (
            f"SELECT s.message_id, s.length, s.terms FROM {RECALL_FTS_TABLE} f "  # noqa: S608
            f"JOIN {_SEARCH_TABLE} s ON s.message_id = f.rowid WHERE {RECALL_FTS_TABLE} MATCH %s AND s.recallable"
        )
        first_id = "f.rowid"  # FTS5 seeks its doclists to the rowid: the cost is the range's
    params: list = [query]
    if since is not None:
        sql += f" AND {first_id} >= %s"
        params.append(since)
    return sql, params


def _lookup_batches(order: Sequence[str], *, df: dict[str, int], rows: int, common: int) -> Iterable[list[str]]:
    """`order` cut into runs whose document frequencies add up to at most `rows` (a term over `rows`
    is a run of its own), then the terms over `common`, last in `order`, all in one run: they are
    looked up among the newest messages, which one lookup of them all reads once, where a lookup a
    term read those messages again for each (pruning between them skips only messages that could
    not be returned)."""
    batch: list[str] = []
    total = 0
    for at, term in enumerate(order):
        if df[term] > common:
            if batch:
                yield batch
            yield list(order[at:])
            return
        if batch and total + df[term] > rows:
            yield batch
            batch, total = [], 0
        batch.append(term)
        total += df[term]
    if batch:
        yield batch


def _scores_add(
    scores: dict[int, float], rows: Iterable[tuple[int, int, str]], *, avg_len: float,
    weights: Sequence[tuple[str, float]], skip: set[int], through_id: int | None,
) -> None:
    """Each row's BM25 score, from its stored terms, into `scores` (rows in `skip` or after
    `through_id` left out); one call for the rows, as a common term's lookup returns thousands."""
    kept = (row for row in rows if row[0] not in skip and (through_id is None or row[0] <= through_id))
    scores.update(bm25_of_term_texts(kept, avg_len=avg_len, weights=weights))


def _best(scores: dict[int, float], limit: int) -> list[tuple[int, float]]:
    """The `limit` best (message, score) pairs, best first and ties by id, as sorting all of them
    would give; only those scoring at least the `limit`-th best are sorted (a long conversation's
    common terms score thousands of messages)."""
    items: Iterable[tuple[int, float]] = scores.items()
    if len(scores) > limit:
        kth = _kth_best(scores, limit)
        items = [(pk, s) for pk, s in items if s >= kth]
    return sorted(items, key=lambda kv: (-kv[1], kv[0]))[:limit]


def _kth_best(scores: dict[int, float], k: int) -> float:
    """The k-th highest score (there are at least k). Sorting the floats in C took a half to a quarter
    of heapq.nlargest's time at the hundreds to thousands of scores a query holds."""
    return sorted(scores.values(), reverse=True)[k - 1]


def corpus_statistics(*, conversation_ids: Sequence[int], terms: Sequence[str]) -> tuple[int, int, dict[str, int]]:
    """(recallable messages, their total length, document frequency of each of `terms` found) summed
    over these conversations: recall reads one conversation's, search those holding most of its hits.

    One round trip for the corpus rows and the terms' rows (a query's fixed cost is mostly trips)."""
    if not conversation_ids:
        return 0, 0, {}
    cids = ", ".join(["%s"] * len(conversation_ids))
    marks = ", ".join(["%s"] * len(terms)) or "NULL"
    sql = (
        f"SELECT NULL, SUM(docs), SUM(length) FROM {_CORPUS_TABLE} WHERE conversation_id IN ({cids}) "  # noqa: S608
        f"UNION ALL SELECT term, SUM(df), 0 FROM {_TERM_TABLE} "
        f"WHERE conversation_id IN ({cids}) AND df > 0 AND term IN ({marks}) GROUP BY term"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*conversation_ids, *conversation_ids, *terms])
        rows = cursor.fetchall()
    # SUM over no corpus row is NULL, and PostgreSQL sums a bigint column as a numeric.
    docs, length = next(((d or 0, n or 0) for term, d, n in rows if term is None), (0, 0))
    return int(docs), int(length), {term: int(d) for term, d, _ in rows if term is not None}


class DatabaseRecallSource:
    """`optimizer.recall.RecallSource` over one conversation's rows in the database.

    Cheap to construct (no query until `search`). `through_id` bounds the conversation (Regenerate
    and Retry answer an earlier message: nothing after it may be recalled). `offline_replies=False`:
    the offline demo model's replies are never quoted (they describe a context, see context_load);
    they are still ranked, as the index cannot tell them apart, so one may take a hit's place. `floor_ratio`: hits
    scoring below this share of the best are not returned (recall discards them anyway, and not
    having to rank them exactly is what lets common terms be skipped); 0 returns the exact top
    `limit`, as MemorySource does.

    `max_postings`, `recent`: a term in more messages than `max_postings` (a word in a sizeable
    share of a long conversation, so of low weight) is still scored in every candidate the other
    terms find, but messages that contain only such terms are looked for among the newest `recent`
    recallable messages: reading all of its postings is what would make a query's cost grow with
    the conversation. The result equals MemorySource's whenever pruning stops before such a term,
    which it does when the query has a distinctive word, and always on conversations of at most
    `recent` messages; a query made only of very common words ranks its hits among the newest messages.
    """

    def __init__(
        self,
        *,
        conversation: Conversation,
        through_id: int | None = None,
        floor_ratio: float = RELATIVE_FLOOR,
        max_postings: int = MAX_POSTINGS,
        recent: int = RECENT_MESSAGES,
        batch_rows: int = BATCH_ROWS,
        offline_replies: bool = True,
    ) -> None:
        self.conversation_id = conversation.pk
        # A message's stored count holds its images' cost (image_services.images_tokens), but a quote
        # is its text alone: in a chat that holds images, those messages are sized by their text.
        self.has_images = conversation.has_images
        self.through_id = through_id
        self.offline_replies = offline_replies
        self.floor_ratio = floor_ratio
        self.max_postings = max_postings
        self.recent = recent
        self.batch_rows = batch_rows
        # Every message text this source read, by id: the turn's record checks the recall block
        # against the stored quotes, and need not read them a second time.
        self.contents: dict[int, str] = {}
        # And their stored token counts: the turn's dropped tokens leave the quoted ones out by them.
        self.token_counts: dict[int, int] = {}

    # --- search -----------------------------------------------------------------------------------

    def search(self, query: Query, *, limit: int, exclude_ids: frozenset[str]) -> list[tuple[str, float]]:
        if not query or limit <= 0:
            return []
        n_docs, total, df = corpus_statistics(
            conversation_ids=[self.conversation_id], terms=[t for t in query.weights if len(t) <= MAX_TERM_CHARS]
        )
        if n_docs <= 0:
            return []
        avg_len = total / n_docs
        # Query order is kept for summing (the same float sums as MemorySource).
        weighted = strongest_terms({t: idf(df[t], n_docs) * query.weights[t] for t in query.weights if t in df}, df)
        if not weighted:
            return []
        # A term adds at most idf * weight * (k1 + 1) to a message's score (tf -> infinity). Terms are
        # read in order of that bound, except that very common terms (looked up among the newest
        # messages only) come after all others: a message holding a term read before was then read
        # and scored whole, which is only right when that term was read whole (MaxScore holds in
        # any order).
        bound = {t: w * (K1 + 1) for t, w in weighted.items()}
        order = sorted(weighted, key=lambda t: (df[t] > self.max_postings, -bound[t], df[t], t))
        scored = list(weighted.items())
        skip = set(_pks(exclude_ids))
        scores: dict[int, float] = {}
        left = sum(bound.values())
        seen: set[str] = set()
        read: set[int] = set()
        for batch in _lookup_batches(order, df=df, rows=self.batch_rows, common=self.max_postings):
            if left < self._threshold(scores, limit):
                break  # no message without the terms seen so far can reach the result
            common = df[batch[0]] > self.max_postings  # the very common terms, all in the last batch
            since = self._recent_start() if common else None
            # A message found again holds a term read before, so it was read then, and scored whole.
            rows = [row for row in self._lookup(terms=batch, since=since) if row[0] not in read]
            read.update(row[0] for row in rows)
            seen.update(batch)
            # The rows contain none of the terms seen before this batch, so only the others are
            # counted (a term a row lacks adds nothing: the sum is the one term-at-a-time gives).
            counted = [(t, w) for t, w in scored if t in batch or t not in seen]
            _scores_add(scores, rows, avg_len=avg_len, weights=counted, skip=skip, through_id=self.through_id)
            for term in batch:
                left -= bound[term]
        best = _best(scores, limit)
        if best and self.floor_ratio > 0:
            floor = best[0][1] * self.floor_ratio
            best = [(pk, s) for pk, s in best if s >= floor]
        return [(str(pk), s) for pk, s in best]

    def _lookup(self, *, terms: Sequence[str], since: int | None) -> list[tuple[int, int, str]]:
        sql, params = _match_sql(conversation_id=self.conversation_id, terms=terms, since=since)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()

    def _recent_start(self) -> int:
        """Id of the oldest of the newest `recent` recallable messages up to `through_id` (0: the
        conversation is shorter).

        An index-only walk of `recent` entries of (conversation, message) WHERE recallable."""
        rows = MessageSearch.objects.filter(conversation_id=self.conversation_id, recallable=True)
        if self.through_id is not None:
            rows = rows.filter(message_id__lte=self.through_id)
        row = rows.order_by("-message_id").values_list("message_id", flat=True)[self.recent - 1 : self.recent]
        return next(iter(row), 0)

    def _threshold(self, scores: dict[int, float], limit: int) -> float:
        """The score an unseen message must beat to be returned."""
        if not scores:
            return 0.0
        top = max(scores.values())
        kth = _kth_best(scores, limit) if len(scores) >= limit else 0.0
        return max(kth, top * self.floor_ratio)

    # --- neighbours and messages -------------------------------------------------------------------

    def neighbours(self, ids: Sequence[str]) -> dict[str, Links]:
        wanted = _pks(ids)
        if not wanted:
            return {}
        # One statement: each message's previous and next live message, one index seek each on
        # (conversation, message) WHERE recallable, however long the conversation. Plain SQL: building
        # these correlated subqueries through the ORM cost more than running them.
        cid, through = self.conversation_id, self.through_id
        bound = "" if through is None else " AND n.message_id <= %s"
        extra = [] if through is None else [through]
        near = f"SELECT n.message_id FROM {_SEARCH_TABLE} n WHERE n.conversation_id = %s AND n.recallable{bound}"  # noqa: S608
        sql = (
            f"SELECT s.message_id, "  # noqa: S608 (names are ours, values are parameters)
            f"({near} AND n.message_id < s.message_id ORDER BY n.message_id DESC LIMIT 1), "
            f"({near} AND n.message_id > s.message_id ORDER BY n.message_id LIMIT 1) "
            f"FROM {_SEARCH_TABLE} s WHERE s.conversation_id = %s AND s.recallable "
            f"AND {_id_in('s.message_id', wanted)}{bound.replace('n.', 's.')}"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [cid, *extra, cid, *extra, cid, *_id_params(wanted), *extra])
            rows = cursor.fetchall()
        return {
            str(pk): (None if before is None else str(before), None if after is None else str(after))
            for pk, before, after in rows
        }

    def messages(self, ids: Sequence[str]) -> dict[str, RecallItem]:
        wanted = _pks(ids)
        if not wanted:
            return {}
        bound = "" if self.through_id is None else " AND m.id <= %s"
        extra: list[int | str] = [] if self.through_id is None else [self.through_id]
        if not self.offline_replies:  # never quoted to a real model (see context_load)
            bound += " AND NOT (m.role = 'assistant' AND m.model = %s)"
            extra.append(OFFLINE_MODEL)
        # Whether the message has images (asked only in a chat that holds some: one index seek each).
        imaged = (f"EXISTS (SELECT 1 FROM {_IMAGE_TABLE} i WHERE i.message_id = m.id)"  # noqa: S608
                  if self.has_images else "FALSE")
        # Each one's previous live message (a seek, as in `neighbours`): "…" marks a gap in the chat, and
        # ids, which other chats and hidden branches interleave, cannot tell where two quoted exchanges meet.
        previous = (f"(SELECT n.message_id FROM {_SEARCH_TABLE} n WHERE n.conversation_id = m.conversation_id "  # noqa: S608
                    "AND n.recallable AND n.message_id < m.id ORDER BY n.message_id DESC LIMIT 1)")
        sql = (
            # the date as text: a C-speed fromisoformat per row instead of the driver's date loader
            f"SELECT m.id, m.role, m.content, CAST(m.created_at AS TEXT), m.token_count, {imaged}, {previous} "  # noqa: S608
            f"FROM {_MESSAGE_TABLE} m JOIN {_SEARCH_TABLE} s ON s.message_id = m.id "
            f"WHERE m.conversation_id = %s AND s.recallable AND {_id_in('m.id', wanted)}{bound}"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [self.conversation_id, *_id_params(wanted), *extra])
            rows = cursor.fetchall()
        items: dict[str, RecallItem] = {}
        for pk, role, content, created_at, tokens, has_images, before in rows:  # one pass over the rows
            self.contents[pk], self.token_counts[pk], key = content, tokens, str(pk)
            # None: counted from the text quoted, as the stored count is the text's and its images'
            items[key] = RecallItem(id=key, role=role, content=content, position=pk, created_at=_aware(created_at),
                                    tokens=None if has_images else tokens,
                                    previous=None if before is None else str(before))
        return items
