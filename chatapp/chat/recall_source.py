"""Reads of the message full-text index: the database `RecallSource` and conversation search.

`DatabaseRecallSource` ranks a conversation's recallable messages (live user and assistant chat
messages) exactly as `optimizer.recall.MemorySource` ranks the same messages in memory: Okapi BM25
(`optimizer.lexical.bm25`, k1 = 1.2, b = 0.75) with per-term query weights, N, document
frequencies and the average length taken over the conversation's recallable messages. Neither
FTS5's bm25() (one weight per column, statistics over the whole table) nor PostgreSQL's ts_rank
(no IDF) computes that, so the database is used for what it is fast at — finding the messages of a
conversation that contain a term — and the statistics are read from rows kept at write time
(search_services). Scores are computed in Python from the stored terms of the candidates.

Fast on long conversations by MaxScore pruning: terms are visited rarest-first (highest possible
contribution first); once the terms not yet visited could not lift an unseen message over the
threshold (the `limit`-th best score so far, or the share of the best that recall discards anyway),
their postings are never read. A common term in a 100k-message conversation is then looked up only
inside the candidates already found.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import OuterRef, Subquery
from django.db.models.expressions import RawSQL

from optimizer.lexical import K1, Query, analyze, bm25, idf
from optimizer.recall import RELATIVE_FLOOR, Neighbourhood, RecallItem

from .models import Conversation, Message, MessageSearch, RecallCorpus, RecallTerm
from .search_services import MAX_TERM_CHARS

_SEARCH_TABLE = MessageSearch._meta.db_table
_FTS_TABLE = "chat_message_fts"  # SQLite only: created by migration 0002
# A term in more recallable messages than this is read newest-first up to this many: reading all of
# a very common term's postings is what would make a query slow on a long conversation. See
# DatabaseRecallSource.
MAX_POSTINGS = 1000


def _fts_phrase(token: str) -> str:
    # Terms are word characters only (optimizer.lexical); quoting makes FTS5 read them as strings.
    return '"' + token.replace('"', '""') + '"'


def _ts_lexeme(token: str) -> str:
    return "'" + token.replace("'", "''").replace("\\", "\\\\") + "'"


def _match_sql(*, scope: str, term: str, seen: Sequence[str], newest: int | None = None) -> tuple[str, list]:
    """SQL for the (id, length, terms) of the recallable messages in `scope` containing `term` but
    none of `seen` (those were fetched already), served by the vendor's full-text index; only the
    `newest` ones when given."""
    tail = "" if newest is None else f" ORDER BY message_id DESC LIMIT {int(newest)}"
    if connection.vendor == "postgresql":
        query = f"{_ts_lexeme(scope)} & {_ts_lexeme(term)}"
        if seen:
            query += " & !(" + " | ".join(_ts_lexeme(t) for t in seen) + ")"
        sql = (
            f"SELECT message_id, length, terms FROM {_SEARCH_TABLE} "  # noqa: S608 (names are ours)
            "WHERE tsv @@ %s::tsquery AND recallable" + tail
        )
        return sql, [query]
    query = f"{_fts_phrase(scope)} AND {_fts_phrase(term)}"
    if seen:
        query = f"{_fts_phrase(scope)} AND ({_fts_phrase(term)} NOT (" + " OR ".join(map(_fts_phrase, seen)) + "))"
    sql = (
        f"SELECT s.message_id, s.length, s.terms FROM {_FTS_TABLE} f "  # noqa: S608
        f"JOIN {_SEARCH_TABLE} s ON s.message_id = f.rowid WHERE {_FTS_TABLE} MATCH %s AND s.recallable"
        + tail.replace("message_id", "f.rowid")
    )
    return sql, [query]


class DatabaseRecallSource:
    """`optimizer.recall.RecallSource` over one conversation's rows in the database.

    Cheap to construct (no query until `search`). `through_id` bounds the conversation (Regenerate
    and Retry answer an earlier message: nothing after it may be recalled). `floor_ratio`: hits
    scoring below this share of the best are not returned (recall discards them anyway, and not
    having to rank them exactly is what lets common terms be skipped); 0 returns the exact top
    `limit`, as MemorySource does.

    `max_postings`: a term in more messages than this (a word in a sizeable share of a long
    conversation, so of low weight) is still scored in every candidate the other terms find, but
    messages that contain only such terms are looked for among the newest `max_postings` of them.
    The result equals MemorySource's whenever pruning stops before such a term, which it does when
    the query has a distinctive word; a query made only of very common words ranks its hits among
    the newest messages.
    """

    def __init__(
        self,
        *,
        conversation: Conversation,
        through_id: int | None = None,
        floor_ratio: float = RELATIVE_FLOOR,
        max_postings: int = MAX_POSTINGS,
    ) -> None:
        self.conversation_id = conversation.pk
        self.scope = f"_c{conversation.pk}"
        self.through_id = through_id
        self.floor_ratio = floor_ratio
        self.max_postings = max_postings

    # --- search -----------------------------------------------------------------------------------

    def search(self, query: Query, *, limit: int, exclude_ids: frozenset[str]) -> list[tuple[str, float]]:
        if not query or limit <= 0:
            return []
        corpus = RecallCorpus.objects.filter(conversation_id=self.conversation_id).values_list("docs", "length").first()
        if not corpus or corpus[0] <= 0:
            return []
        n_docs, total = corpus
        avg_len = total / n_docs
        wanted = [t for t in query.weights if len(t) <= MAX_TERM_CHARS]
        df = dict(
            RecallTerm.objects.filter(conversation_id=self.conversation_id, term__in=wanted, df__gt=0)
            .values_list("term", "df")
        )
        # Query order is kept for summing (the same float sums as MemorySource).
        weighted = {t: idf(df[t], n_docs) * query.weights[t] for t in query.weights if t in df}
        if not weighted:
            return []
        # A term adds at most idf * weight * (k1 + 1) to a message's score (tf -> infinity).
        bound = {t: w * (K1 + 1) for t, w in weighted.items()}
        order = sorted(weighted, key=lambda t: (-bound[t], df[t], t))
        scored = list(weighted.items())
        skip = {int(i) for i in exclude_ids if str(i).isdigit()}
        scores: dict[int, float] = {}
        left = sum(bound.values())
        seen: list[str] = []
        for term in order:
            if left < self._threshold(scores, limit):
                break  # no message without the terms seen so far can reach the result
            newest = self.max_postings if df[term] > self.max_postings else None
            sql, params = _match_sql(scope=self.scope, term=term, seen=seen, newest=newest)
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                rows = cursor.fetchall()
            for pk, length, terms in rows:
                if pk in skip or (self.through_id is not None and pk > self.through_id):
                    continue
                tokens = terms.split()
                score = 0.0
                for t, w in scored:
                    tf = tokens.count(t)
                    if tf:
                        score += bm25(tf, length, avg_len, w)
                scores[pk] = score
            seen.append(term)
            left -= bound[term]
        best = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        if best and self.floor_ratio > 0:
            floor = best[0][1] * self.floor_ratio
            best = [(pk, s) for pk, s in best if s >= floor]
        return [(str(pk), s) for pk, s in best]

    def _threshold(self, scores: dict[int, float], limit: int) -> float:
        """The score an unseen message must beat to be returned."""
        if not scores:
            return 0.0
        top = max(scores.values())
        kth = sorted(scores.values(), reverse=True)[limit - 1] if len(scores) >= limit else 0.0
        return max(kth, top * self.floor_ratio)

    # --- around -----------------------------------------------------------------------------------

    def around(self, ids: Sequence[str]) -> dict[str, Neighbourhood]:
        wanted = [int(i) for i in ids if str(i).isdigit()]
        if not wanted:
            return {}
        live = MessageSearch.objects.filter(conversation_id=self.conversation_id, recallable=True)
        if self.through_id is not None:
            live = live.filter(message_id__lte=self.through_id)
        # One index seek each on (conversation, message) WHERE recallable, however long the conversation.
        before = live.filter(message_id__lt=OuterRef("message_id")).order_by("-message_id").values("message_id")[:1]
        after = live.filter(message_id__gt=OuterRef("message_id")).order_by("message_id").values("message_id")[:1]
        links = list(
            live.filter(message_id__in=wanted)
            .annotate(before=Subquery(before), after=Subquery(after))
            .values_list("message_id", "before", "after")
        )
        needed = {pk for row in links for pk in row if pk is not None}
        items = {
            pk: RecallItem(id=str(pk), role=role, content=content, position=pk, created_at=created_at)
            for pk, role, content, created_at in Message.objects.filter(
                conversation_id=self.conversation_id, pk__in=needed
            ).values_list("id", "role", "content", "created_at")
        }
        out: dict[str, Neighbourhood] = {}
        for pk, prev_pk, next_pk in links:
            hit = items.get(pk)
            if hit is None:
                continue
            out[str(pk)] = Neighbourhood(
                hit=hit,
                before=items.get(prev_pk) if prev_pk is not None else None,
                after=items.get(next_pk) if next_pk is not None else None,
            )
        return out


# --- conversation search --------------------------------------------------------------------------


def conversation_ids_matching(*, owner: AbstractBaseUser, text: str) -> RawSQL | None:
    """A subquery of the ids of `owner`'s conversations with a chat message containing every content
    word of `text` (the last one as a prefix: search as you type), through the full-text index.

    None when `text` has no content word (only stop words): there is nothing to look up.
    """
    terms = [t for t in dict.fromkeys(analyze(text)) if len(t) <= MAX_TERM_CHARS]
    if not terms:
        return None
    owner_scope = f"_u{owner.pk}"
    if connection.vendor == "postgresql":
        query = " & ".join([_ts_lexeme(owner_scope), *map(_ts_lexeme, terms[:-1]), _ts_lexeme(terms[-1]) + ":*"])
        return RawSQL(  # noqa: S611 (the text is a bound parameter; names are ours)
            f"SELECT conversation_id FROM {_SEARCH_TABLE} WHERE tsv @@ %s::tsquery",  # noqa: S608
            [query],
        )
    query = " AND ".join([_fts_phrase(owner_scope), *map(_fts_phrase, terms[:-1]), _fts_phrase(terms[-1]) + " *"])
    return RawSQL(  # noqa: S611 (the text is a bound parameter; names are ours)
        f"SELECT s.conversation_id FROM {_FTS_TABLE} f JOIN {_SEARCH_TABLE} s "  # noqa: S608
        f"ON s.message_id = f.rowid WHERE {_FTS_TABLE} MATCH %s",
        [query],
    )

