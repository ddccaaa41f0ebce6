"""Packing time of a pasted document: a chat turn whose newest message is hundreds of words long.

A question is a few terms; a pasted document (a log, an article, notes) is hundreds, and recall
searches it by its 64 strongest (`optimizer.bm25.MAX_QUERY_TERMS`). Most are rare in the
conversation, a few are words it uses all the time: the worst case of the database recall source,
whose very common terms are looked up among the newest messages after all the rare ones. This bench
seeds a `--messages` conversation (as `bench/turn_cpu.py`'s: a 25-word vocabulary, so its words are
in most messages), sends `--sends` documents of 500 and of 2,000 words behind one uvicorn process on
the instant fake model (seven words in ten from the conversation's vocabulary, the others unseen
made-up words), and prints the median `pack_ms` of their turns' records (the server's packing of the
context, recall included) beside the same for short questions.

    .venv/bin/python bench/recall_pasted.py [--messages 10000] [--sends 5] [--compare REV]

SQLite in a temporary directory by default; DATABASE_URL for PostgreSQL (the bench deletes its
user). `--compare REV` measures a git worktree of REV the same way, one after the other, in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
SIZES = (500, 2000)


def documents(words: list[str], *, sends: int, seed: int = 7) -> dict[str, list[str]]:
    """`sends` texts of each size, and as many short questions, the same for every tree measured."""
    rng = random.Random(seed)
    unseen = ["".join(rng.choice("bcdfghjklmnpqrstvwxz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4)))
              for _ in range(3000)]

    def text(n: int) -> str:
        return " ".join(rng.choice(words) if rng.random() < 0.7 else rng.choice(unseen) for _ in range(n))

    out = {f"{n} words": [text(n) for _ in range(sends)] for n in SIZES}
    out["question"] = [f"What did we say about the {rng.choice(words)} and the {rng.choice(words)}?"
                       for _ in range(sends)]
    return out


def measure(tree: Path, *, messages: int, sends: int) -> dict[str, float]:
    """Median pack_ms per kind of text, for `tree`'s server (run in a child process of its own)."""
    sys.path[:0] = [str(tree / "bench"), str(tree)]
    os.chdir(tree)
    import httpx
    from web_ttfb import (
        _WORDS,
        bench_environment,
        django_setup,
        seed_conversation,
        seed_user,
        sends_timed,
        uvicorn_process,
    )

    from tests.support.fake_openai import FakeOpenAI

    with tempfile.TemporaryDirectory(prefix="recall-pasted-") as tmpdir, FakeOpenAI() as fake:
        tmp = Path(tmpdir)
        env = bench_environment(tmp)
        django_setup(env)
        from chatapp.chat.models import OptimizationRecord
        from chatapp.chat.search_services import conversation_index_rebuild

        user, token, config = seed_user(username=f"bench-pasted-{secrets.token_hex(4)}", base_url=fake.base_url,
                                        model="fake-echo")
        try:
            conversation = seed_conversation(owner=user, config=config, messages=messages)
            conversation_index_rebuild(conversation=conversation)
            figures: dict[str, float] = {}
            with uvicorn_process(env, tmp) as (url, _pid), httpx.Client(
                base_url=url, headers={"Authorization": f"Token {token}"}, timeout=300
            ) as client:
                sends_timed(client, conversation.pk, (f"warm-up {i}" for i in range(3)))
                for kind, texts in documents(list(_WORDS), sends=sends).items():
                    last = OptimizationRecord.objects.filter(conversation=conversation).order_by("-id").first()
                    sends_timed(client, conversation.pk, texts)
                    times = OptimizationRecord.objects.filter(conversation=conversation, id__gt=last.pk).values_list(
                        "pack_ms", flat=True)
                    figures[kind] = statistics.median(times)
        finally:
            user.delete()
    return figures


def run(tree: Path, *, messages: int, sends: int) -> dict[str, float]:
    proc = subprocess.run(
        [PYTHON, str(Path(__file__).resolve()), "--child", str(tree), str(messages), str(sends)],
        cwd=tree, capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{tree}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--sends", type=int, default=5)
    parser.add_argument("--compare", default="", help="a git revision measured the same way, side by side")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        tree, messages, sends = args.child
        print(json.dumps(measure(Path(tree), messages=int(messages), sends=int(sends))))
        return 0

    from _common import revision_tree  # the parent's only: a child measures its own tree's code

    trees = [("this checkout", ROOT)]
    with ExitStack() as stack:
        if args.compare:
            trees.append((args.compare, stack.enter_context(revision_tree(args.compare))))
        rows = [(name, run(tree, messages=args.messages, sends=args.sends)) for name, tree in trees]
    vendor = "PostgreSQL" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "SQLite"
    print(f"\nPacking time of a turn (median pack_ms of {args.sends} sends each), a {args.messages:,}-message "
          f"conversation, {vendor}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs:")
    kinds = list(rows[0][1])
    print(f"{'code':24}" + "".join(f"{k:>14}" for k in kinds))
    for name, figures in rows:
        print(f"{name:24}" + "".join(f"{figures[k]:>14.1f}" for k in kinds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
