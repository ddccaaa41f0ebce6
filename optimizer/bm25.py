"""Okapi BM25 ranking for recall and search (k1 = 1.2, b = 0.75): the formula SQLite FTS5's
`bm25()` computes, so that a database that ranks natively and the in-memory index agree.

The terms it ranks come from `optimizer.lexical` (one analyzer for every path); this module only
scores them: the formula in parts (`bm25_norm` once per document, `bm25_normed` per term), the
database's stored terms scored without splitting them (`bm25_of_term_texts`), and the core's
in-memory inverted index (`LexicalIndex`).
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence

from .lexical import Query

K1 = 1.2
B = 0.75


def idf(df: int, n_docs: int) -> float:
    """BM25's inverse document frequency, floored just above zero as FTS5 does for very common terms."""
    value = math.log((n_docs - df + 0.5) / (df + 0.5))
    return value if value > 1e-6 else 1e-6


# A longer newest message (a pasted document: hundreds of distinct terms) is searched by this many of
# its strongest terms, as query reduction for long queries does (Lucene's MoreLikeThis keeps 25): its
# other terms add little to any ranking, and each one was a lookup, so a 500-word message cost
# PostgreSQL over a second of recall. A question's terms are far fewer: it is searched whole.
MAX_QUERY_TERMS = 64


def strongest_terms(weighted: Mapping[str, float], df: Mapping[str, int]) -> dict[str, float]:
    """`weighted` (term: idf x query weight), in its order, cut to its `MAX_QUERY_TERMS` strongest
    when longer. A term in one message only (`df` 1) comes after the others: the message holding it is
    the newest one itself, which recall never returns, so it can find nothing."""
    if len(weighted) <= MAX_QUERY_TERMS:
        return dict(weighted)
    kept = set(sorted(weighted, key=lambda t: (df[t] < 2, -weighted[t], t))[:MAX_QUERY_TERMS])
    return {t: w for t, w in weighted.items() if t in kept}


def bm25_norm(doc_len: int, avg_len: float) -> float:
    """BM25's length normalisation: the part of the denominator every term of a document shares, so
    that a caller scoring many terms of one document computes it once (`bm25_normed`)."""
    return K1 * (1 - B + B * doc_len / max(avg_len, 1e-9))


def bm25_normed(tf: int, norm: float, term_idf: float) -> float:
    """One term's BM25 score given its document's `bm25_norm`: the same float as `bm25`."""
    return term_idf * tf * (K1 + 1) / (tf + norm)


def bm25(tf: int, doc_len: int, avg_len: float, term_idf: float) -> float:
    return bm25_normed(tf, bm25_norm(doc_len, avg_len), term_idf)


def bm25_of_term_texts(
    docs: Iterable[tuple[int, int, str]], *, avg_len: float, weights: Sequence[tuple[str, float]]
) -> Iterator[tuple[int, float]]:
    """(key, BM25 score) of documents given as (key, length, their terms joined by single spaces),
    for query terms with their idf x weight: the floats `bm25` gives, summed term by term in the
    order of `weights`. Counting " t " in the terms with every separator doubled counts whole terms,
    repeats included, without splitting a document into a list (the database's stored terms).

    A query of many terms (a pasted document as the newest message) counts the other way round:
    scanning every document once per query term cost terms x documents x their length, and a longer
    query matches more documents too, so a 20,000-word message took tens of seconds where counting a
    document's terms once is linear in each (bench/recall_long_query.py). Both give the same floats.
    """
    if len(weights) > _SCAN_TERMS_MAX:
        yield from _scores_by_counting(docs, avg_len=avg_len, weights=weights)
        return
    needles = [(f" {term} ", weight) for term, weight in weights]
    for key, length, terms in docs:
        spaced = f"  {terms.replace(' ', '  ')}  "
        norm = bm25_norm(length, avg_len)  # the same for each term of the document
        score = 0.0
        for needle, weight in needles:
            tf = spaced.count(needle)
            if tf:
                score += bm25_normed(tf, norm, weight)
        yield key, score


# Up to this many query terms a document's text is scanned once per term (C speed, no list built);
# past it its terms are counted once. Either is exact; a typical question has under 10 terms.
_SCAN_TERMS_MAX = 16


def _scores_by_counting(
    docs: Iterable[tuple[int, int, str]], *, avg_len: float, weights: Sequence[tuple[str, float]]
) -> Iterator[tuple[int, float]]:
    places: dict[str, list[tuple[int, float]]] = {}  # term -> its (place in `weights`, weight)
    for k, (term, weight) in enumerate(weights):
        places.setdefault(term, []).append((k, weight))
    for key, length, terms in docs:
        counts = Counter(t for t in terms.split(" ") if t in places)
        norm = bm25_norm(length, avg_len)
        score = 0.0
        # summed in the order of `weights`, as the scan adds them up: the same float
        for _, weight, tf in sorted((k, weight, tf) for term, tf in counts.items() for k, weight in places[term]):
            score += bm25_normed(tf, norm, weight)
        yield key, score


# The bound is checked once the postings read come to this share of the documents found (1/8).
_CHECK_EVERY_SHARE = 8


class LexicalIndex:
    """An in-memory inverted index over documents given as term lists; BM25 search.

    Built once per conversation (the CLI builds it per request; a long-running caller keeps it).
    """

    def __init__(self, docs: Sequence[Sequence[str]]) -> None:
        self.n = len(docs)
        self.lengths = [len(d) for d in docs]
        self.avg_len = (sum(self.lengths) / self.n) if self.n else 0.0
        self.norms = [bm25_norm(length, self.avg_len) for length in self.lengths]
        self.postings: dict[str, dict[int, int]] = {}  # term -> {document: term frequency}
        for i, d in enumerate(docs):
            for term, tf in Counter(d).items():
                self.postings.setdefault(term, {})[i] = tf

    def search(self, query: Query, *, limit: int, exclude: Iterable[int] = ()) -> list[tuple[int, float]]:
        """Best `limit` (document, score) pairs, highest first; documents in `exclude` are skipped.

        Exact, and cheap when the query has a distinctive word (MaxScore): terms are read in order of
        the most they can add to a score; once the terms left could not lift a document that has none
        of the terms read so far above the `limit`-th best partial score, their postings are read
        only for the documents already found. Scores are then summed in query order, as a plain
        term-at-a-time pass would.
        """
        if limit <= 0:
            return []
        skip = set(exclude)
        weighted = {t: idf(len(p), self.n) * w for t, w in query.weights.items() if (p := self.postings.get(t))}
        weighted = strongest_terms(weighted, {t: len(self.postings[t]) for t in weighted})
        # a term adds at most idf * weight * (k1 + 1) to a score (tf -> infinity)
        order = sorted(weighted, key=lambda t: -weighted[t])
        left = sum(weighted.values()) * (K1 + 1)
        partial: dict[int, float] = {}
        read = 0  # postings read since the bound was last checked
        for term in order:
            postings = self.postings[term]
            # The check is a pass over `partial` (in C, some times cheaper a document than reading a
            # posting here): made when the postings read since the last one and this term's come to
            # a share of it, its cost stays in proportion to the reading it may save or follows.
            # Checked before every term, a query of thousands of rare terms cost terms x documents.
            # A term with many postings is always checked before; a later break is still exact.
            if len(partial) >= limit and (read + len(postings)) * _CHECK_EVERY_SHARE >= len(partial):
                read = 0
                if left < heapq.nlargest(limit, partial.values())[-1]:
                    break  # no document outside `partial` can reach the result
            w = weighted[term]
            read += len(postings)
            for doc, tf in postings.items():
                if doc not in skip:
                    partial[doc] = partial.get(doc, 0.0) + bm25_normed(tf, self.norms[doc], w)
            left -= w * (K1 + 1)
        scores = self._scores(partial, weighted)
        return heapq.nsmallest(limit, scores.items(), key=lambda kv: (-kv[1], kv[0]))

    def _scores(self, docs: Iterable[int], weighted: dict[str, float]) -> dict[int, float]:
        """The whole scores of `docs`, summed in query order. Term at a time, over each term's postings
        or over `docs`, whichever is fewer: the floats a pass over every query term for each document
        adds up, without that pass's terms x documents."""
        scores = dict.fromkeys(docs, 0.0)
        for term, w in weighted.items():
            postings = self.postings[term]
            if len(postings) <= len(scores):
                for doc, tf in postings.items():
                    if doc in scores:
                        scores[doc] += bm25_normed(tf, self.norms[doc], w)
            else:
                for doc in scores:
                    tf_doc = postings.get(doc)
                    if tf_doc:
                        scores[doc] += bm25_normed(tf_doc, self.norms[doc], w)
        return scores
