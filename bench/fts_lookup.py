"""SQLite recall lookups: what one term's lookup costs as the conversation and the table grow, read
through the conversation token and the term (`_c<id> AND term`) beside a conversation-scoped token
(`c<id>_term`).

Recall looks a term up in one conversation. Through chat_message_fts that is `_c<id> AND term`, so
FTS5 walks the conversation token's doclist (every message of the conversation) and the term's
(every message of every conversation holding it). Recall reads chat_message_rfts instead (chat
migration 0002), which indexes each term prefixed with its conversation, as PostgreSQL's `rtsv`
does, and reads only that conversation's postings. This bench builds standalone FTS5 tables with the migration's
tokenizer settings (no Django; synthetic terms with a Zipf-like spread, 12 per message) and times
both lookups, in this process's CPU per query:

- 100k messages, the conversation 10k of them;
- 1M messages, the same conversation size (the table grew);
- 1M messages, the conversation 100k (the conversation grew too: bench/scale.py's large one).

    .venv/bin/python bench/fts_lookup.py [--repeat 50]

It showed why bench/scale.py's SQLite CPU per turn grew with the fill when PostgreSQL's did not.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

VOCABULARY = 20_000
TERMS_PER_MESSAGE = 12
# Terms from common to rare (their rank in the vocabulary).
PROBES = (5, 50, 500, 5000)


def build(path: Path, *, messages: int, conversations: dict[int, int]) -> sqlite3.Connection:
    """`messages` rows; conversation k holds conversations[k] of them, spread evenly; the rest go to
    999 others."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE s (id INTEGER PRIMARY KEY, scope TEXT, terms TEXT, rterms TEXT)")
    db.execute(
        "CREATE VIRTUAL TABLE f USING fts5(scope, terms, rterms, content='s', content_rowid='id', "
        "tokenize=\"ascii tokenchars '_'\", detail=none)"
    )
    rng = random.Random(1)
    vocabulary = [f"w{i}" for i in range(VOCABULARY)]
    weights = [1 / (i + 1) for i in range(VOCABULARY)]
    every = {conv: messages // size for conv, size in conversations.items()}
    batch: list[tuple[int, str, str, str]] = []
    for i in range(1, messages + 1):
        conv = next((c for c, step in every.items() if i % step == 0), 100 + i % 999)
        terms = rng.choices(vocabulary, weights, k=TERMS_PER_MESSAGE)
        batch.append((i, f"_c{conv} _u1", " ".join(terms), " ".join(f"c{conv}_{t}" for t in terms)))
        if len(batch) == 50_000 or i == messages:
            db.executemany("INSERT INTO s VALUES (?, ?, ?, ?)", batch)
            db.executemany("INSERT INTO f (rowid, scope, terms, rterms) VALUES (?, ?, ?, ?)", batch)
            batch = []
    db.commit()
    return db


def cpu_ms(db: sqlite3.Connection, match: str, repeat: int) -> tuple[float, int]:
    rows = db.execute("SELECT rowid FROM f WHERE f MATCH ?", (match,)).fetchall()  # warm
    started = time.process_time()
    for _ in range(repeat):
        db.execute("SELECT rowid FROM f WHERE f MATCH ?", (match,)).fetchall()
    return (time.process_time() - started) * 1000 / repeat, len(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    cases = (
        ("100k messages, conversation 10k", 100_000, {1: 10_000}, 1),
        ("1M messages, conversation 10k", 1_000_000, {1: 10_000, 2: 100_000}, 1),
        ("1M messages, conversation 100k", 1_000_000, {1: 10_000, 2: 100_000}, 2),
    )
    print(f"CPU ms per lookup of one term in one conversation (FTS5, detail=none; {args.repeat} runs):")
    print(f"{'case':<34} {'term rank':>9} {'hits':>6} {'_c AND term':>12} {'scoped token':>13} {'ratio':>6}")
    with tempfile.TemporaryDirectory(prefix="fts-lookup-") as tmpdir:
        built: dict[int, sqlite3.Connection] = {}
        for name, messages, conversations, conv in cases:
            if messages not in built:
                built[messages] = build(Path(tmpdir) / f"{messages}.sqlite3", messages=messages,
                                        conversations=conversations)
            db = built[messages]
            for rank in PROBES:
                today, hits = cpu_ms(db, f"_c{conv} AND w{rank}", args.repeat)
                scoped, scoped_hits = cpu_ms(db, f"c{conv}_w{rank}", args.repeat)
                assert scoped_hits == hits, (name, rank, hits, scoped_hits)
                print(f"{name:<34} {rank:>9} {hits:>6} {today:>12.3f} {scoped:>13.3f} {today / scoped:>5.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
