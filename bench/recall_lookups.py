"""Recall's database lookups, this checkout's against another revision's, side by side in one process.

The database recall source (chatapp/chat/recall_source.py) reads a query's terms from the full-text
index in a few statements. Their cost depends on how they are written, not only on how many rows
they return: a lookup that named every term read before it (to leave out what they found) made
PostgreSQL test each posting of the term looked up against all of them. This bench seeds a
`--messages` conversation (bench/turn_cpu.py's: a 25-word vocabulary, in most messages), then
searches it with eight pasted documents on a new subject (500 and 2,000 words: seven in ten of the
conversation's words, the others new to it) and four short questions through both
versions of `DatabaseRecallSource` (REV's file is loaded beside this checkout's; the rest of the code
is this checkout's), alternated, and prints for each: the lookup statements, the buffers they read
and their execution time (PostgreSQL's `EXPLAIN (ANALYZE, BUFFERS)` of each; the buffers repeat
exactly from run to run, the times do not), the median wall time of a search, and whether both
versions returned the same ranking.

    .venv/bin/python bench/recall_lookups.py --compare REV [--messages 10000] [--rounds 2]

SQLite in a temporary directory by default (lookups and wall times only); DATABASE_URL for
PostgreSQL (the bench deletes its user).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from web_ttfb import _WORDS, bench_environment, django_setup, seed_conversation, seed_user

ROOT = Path(__file__).resolve().parent.parent
SOURCE = "chatapp/chat/recall_source.py"


def texts(*, seed: int = 11) -> tuple[list[str], list[str]]:
    """(documents searched, questions searched)."""
    rng = random.Random(seed)
    unseen = ["".join(rng.choice("bcdfghjklmnpqrstvwxz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4)))
              for _ in range(3000)]

    def document(n: int, words: list[str]) -> str:
        return " ".join(rng.choice(_WORDS) if rng.random() < 0.7 else rng.choice(words) for _ in range(n))

    # The searched documents are on a subject new to the conversation: none of their made-up words is
    # in it, so only the conversation's common words are found (recall's costly case: no rare term
    # finds a message strong enough to stop the lookups before the very common terms).
    searched = [document(n, unseen) for n in (500, 2000) * 4]
    questions = [f"What did we say about the {rng.choice(_WORDS)} and the {rng.choice(_WORDS)}?" for _ in range(4)]
    return searched, questions


def revision_module(rev: str) -> ModuleType:
    """REV's recall source, loaded as a module of the chat app's package (its relative imports work)."""
    code = subprocess.run(["git", "show", f"{rev}:{SOURCE}"], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout
    path = Path(tempfile.mkdtemp(prefix="recall-rev-")) / "recall_source_rev.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location("chatapp.chat.recall_source_rev", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(module: ModuleType, conversation: Any, queries: list[str]) -> tuple[dict[str, float], list]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from optimizer.lexical import build_query

    postgres = connection.vendor == "postgresql"
    lookups, buffers, exec_ms, walls, results = 0, 0, 0.0, [], []
    for text in queries:
        source = module.DatabaseRecallSource(conversation=conversation)
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            results.append(source.search(build_query(text), limit=120, exclude_ids=frozenset()))
            walls.append((time.perf_counter() - started) * 1000)
        for query in captured.captured_queries:
            if "rtsv @@" not in query["sql"] and "chat_message_rfts" not in query["sql"]:
                continue
            lookups += 1
            if postgres:
                with connection.cursor() as cursor:
                    cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + query["sql"])
                    plan = cursor.fetchone()[0][0]
                exec_ms += plan["Execution Time"]
                buffers += plan["Plan"].get("Shared Hit Blocks", 0) + plan["Plan"].get("Shared Read Blocks", 0)
    return {"lookups": lookups, "buffers": buffers, "exec_ms": exec_ms,
            "wall_ms": statistics.median(walls)}, results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", required=True, help="the git revision whose recall source is measured beside")
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="recall-lookups-") as tmpdir:
        django_setup(bench_environment(Path(tmpdir)))
        from django.db import connection

        import chatapp.chat.recall_source as here
        from chatapp.chat.search_services import conversation_index_rebuild

        versions = {"this checkout": here, args.compare: revision_module(args.compare)}
        user, _, config = seed_user(username=f"bench-lookups-{secrets.token_hex(4)}", base_url="http://127.0.0.1:9/v1",
                                    model="gpt-4o-mini")
        try:
            conversation = seed_conversation(owner=user, config=config, messages=args.messages)
            searched, questions = texts()
            conversation_index_rebuild(conversation=conversation)
            rows: dict[str, dict[str, list]] = {name: {"documents": [], "questions": []} for name in versions}
            answers: dict[str, list] = {}
            for _ in range(args.rounds):
                for name, module in versions.items():
                    for kind, queries in (("documents", searched), ("questions", questions)):
                        figures, results = measure(module, conversation, queries)
                        rows[name][kind].append(figures)
                        answers.setdefault(name, []).append(results)
        finally:
            user.delete()

    print(f"\nRecall's lookups, a {args.messages:,}-message conversation, {connection.vendor}, {args.rounds} rounds "
          f"alternated (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs); per kind of query: "
          "lookup statements, buffers they read and their execution ms (PostgreSQL EXPLAIN), median ms a search:")
    print(f"{'code':24} {'queries':24} {'lookups':>8} {'buffers':>9} {'exec ms':>16} {'ms a search':>16}")
    for name, kinds in rows.items():
        for kind, runs in kinds.items():
            label = f"{len(searched)} pasted documents" if kind == "documents" else f"{len(questions)} questions"
            exec_ms = " / ".join(f"{r['exec_ms']:.0f}" for r in runs)
            walls = " / ".join(f"{r['wall_ms']:.1f}" for r in runs)
            print(f"{name:24} {label:24} {runs[0]['lookups']:>8} {runs[0]['buffers']:>9} {exec_ms:>16} {walls:>16}")
    # every round's rankings of every query, by both versions
    same = len({repr(answers[name]) for name in versions}) == 1
    print(f"same rankings from both versions: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
