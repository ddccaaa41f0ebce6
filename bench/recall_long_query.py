"""Recall against a very long newest message: time by query length, to show how it grows.

A newest message can be a pasted document of 20,000 words; its terms are the query. The conversation
it is asked in holds pasted material of its own (logs, code, notes: many distinct identifiers), so
most of the query's terms are in the index and many messages match some of them. Timed, for queries
of 1,250 to 20,000 words drawn from the conversation's vocabulary:

  search        optimizer.bm25.LexicalIndex.search through `MemorySource` (the CLI's in-memory index,
                built once, untimed), limit 120 as recall asks
  recall        optimizer.recall.recall over the same source (query building, search, quoting)
  score rows    optimizer.bm25.bm25_of_term_texts over every message's stored terms: what the web
                app's database recall source does with the rows its full-text lookup returns

Each column is followed by its growth from the previous row, where the query doubles: about 2x is
linear in the query's length, 4x quadratic. Figures are medians of --repeat runs in ms (GC off in
the timed call); the load average is printed.

  .venv/bin/python bench/recall_long_query.py            # 1,250 .. 20,000 words, 2,000 messages
  .venv/bin/python bench/recall_long_query.py --quick    # 1,250 .. 5,000 words
"""

from __future__ import annotations

import argparse
import gc
import random
import time
from collections.abc import Callable
from typing import Any

from _common import load_note, median, offline_tiktoken

offline_tiktoken()

from optimizer.bm25 import bm25_of_term_texts, idf  # noqa: E402
from optimizer.lexical import build_query, document_terms  # noqa: E402
from optimizer.recall import SEARCH_LIMIT, MemorySource, RecallItem, recall  # noqa: E402

MODEL = "gpt-4o-mini"
_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "pa", "de", "gu", "ri"]


def vocabulary(size: int, rng: random.Random) -> list[str]:
    """Distinct made-up identifiers (no stop word, no stemmer suffix worth the name)."""
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(5)))
    return sorted(words)


def conversation(messages: int, words_each: int, vocab: list[str], rng: random.Random) -> list[RecallItem]:
    return [RecallItem(id=f"m{k}", role="user" if k % 2 == 0 else "assistant",
                       content=" ".join(rng.choice(vocab) for _ in range(words_each)), position=k)
            for k in range(messages)]


def timed(fn: Callable[[], Any], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        gc_was = gc.isenabled()
        gc.disable()
        try:
            start = time.perf_counter()
            fn()
            runs.append((time.perf_counter() - start) * 1000)
        finally:
            if gc_was:
                gc.enable()
    return median(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--words-per-message", type=int, default=80)
    ap.add_argument("--vocabulary", type=int, default=30_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    lengths = [1250, 2500, 5000] if a.quick else [1250, 2500, 5000, 10_000, 20_000]

    rng = random.Random(0)
    vocab = vocabulary(a.vocabulary, rng)
    items = conversation(a.messages, a.words_per_message, vocab, rng)
    source = MemorySource(items)
    _ = source.index  # built once, as a long-lived process keeps it
    rows = [(k, len(terms), " ".join(terms)) for k, terms in enumerate(document_terms(it.content) for it in items)]
    avg_len = sum(r[1] for r in rows) / len(rows)
    recall(text="warm up the encoder", source=source, room=2048, exclude_ids=frozenset(), model=MODEL)

    print(f"{a.messages:,} messages of {a.words_per_message} words from {a.vocabulary:,} identifiers; "
          f"median of {a.repeat} runs, ms; {load_note()}")
    print(f"{'query words':>11} {'terms':>6} {'search':>9} {'x':>5} {'recall':>9} {'x':>5} {'score rows':>11} {'x':>5}")
    previous: tuple[float, float, float] | None = None
    for n in lengths:
        text = " ".join(rng.choice(vocab) for _ in range(n))
        query = build_query(text)
        weights = [(t, idf(len(source.index.postings.get(t, ())), len(rows)) * w) for t, w in query.weights.items()]
        figures = (
            timed(lambda: source.search(query, limit=SEARCH_LIMIT, exclude_ids=frozenset()), a.repeat),  # noqa: B023
            timed(lambda: recall(text=text, source=source, room=2048, exclude_ids=frozenset(),  # noqa: B023
                                 model=MODEL), a.repeat),
            timed(lambda: list(bm25_of_term_texts(rows, avg_len=avg_len, weights=weights)), a.repeat),  # noqa: B023
        )
        growth = [""] * 3 if previous is None else [f"{now / then:.1f}" for now, then in zip(figures, previous,
                                                                                             strict=True)]
        print(f"{n:>11,} {len(query.weights):>6,} {figures[0]:>9.1f} {growth[0]:>5} {figures[1]:>9.1f} {growth[1]:>5} "
              f"{figures[2]:>11.1f} {growth[2]:>5}", flush=True)
        previous = figures


if __name__ == "__main__":
    main()
