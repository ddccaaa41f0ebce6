"""Server CPU per chat turn over a long run of turns in one conversation, block by block.

`bench/scale.py` and `bench/web_ttfb.py` time a few dozen turns just after seeding. A conversation
that goes on is another state: the window has been cut a few times, and recall quotes the turns
this run wrote itself (the questions come back to the same subjects). This bench sends `--turns`
questions, one after another, into a 10,000-message conversation (indexed for recall; window
16,384 tokens) behind one uvicorn process on the instant fake model, and prints per block of
`--block` turns: the server's CPU per turn (user + system, /proc), and from the turns' records the
median recall block, tokens sent, packing time and the window cuts. The first blocks are the
"fresh" state, the last ones the "settled" state; both medians are printed side by side.

    .venv/bin/python bench/turn_cpu.py [--turns 300] [--block 25] [--messages 10000] [--documents WORDS]

`--documents WORDS`: each send is a pasted document of WORDS words instead of a question (seven
words in ten from the conversation's vocabulary, so a few of its terms are in most messages; the
others made-up words, unseen until an earlier document used them): the worst case of recall's
database lookups, whose very common terms are read after all the rare ones. The pack ms column then
shows what a long newest message costs to pack.

SQLite in a temporary directory by default; DATABASE_URL for PostgreSQL (the bench deletes its user).
Run it on two commits (a git worktree of the older one) to compare them: the figures are this
machine's, and its speed drifts, so compare runs made close together.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from web_ttfb import (
    _WORDS,
    bench_environment,
    cpu_seconds,
    django_setup,
    seed_conversation,
    seed_user,
    sends_timed,
    uvicorn_process,
)


def question(i: int) -> str:
    """The i-th question: it comes back to two of the conversation's subjects, as users do."""
    first, second = _WORDS[(i * 7) % len(_WORDS)], _WORDS[(i * 11 + 3) % len(_WORDS)]
    return f"Question {i}: what did we decide about the {first} and the {second} back then?"


def documents(words: int, *, seed: int = 7) -> Iterator[str]:
    """Pasted documents of `words` words, the same sequence for every commit measured."""
    rng = random.Random(seed)
    unseen = ["".join(rng.choice("bcdfghjklmnpqrstvwxz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4)))
              for _ in range(3000)]
    while True:
        yield " ".join(rng.choice(_WORDS) if rng.random() < 0.7 else rng.choice(unseen) for _ in range(words))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--block", type=int, default=25)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--documents", type=int, default=0, help="send pasted documents of this many words")
    args = parser.parse_args()
    pasted = documents(args.documents) if args.documents else None

    import httpx

    from tests.support.fake_openai import FakeOpenAI

    with tempfile.TemporaryDirectory(prefix="turn-cpu-") as tmpdir, FakeOpenAI() as fake:
        tmp = Path(tmpdir)
        env = bench_environment(tmp)
        django_setup(env)
        from django.db import connection

        from chatapp.chat.models import OptimizationRecord
        from chatapp.chat.search_services import conversation_index_rebuild

        user, token, config = seed_user(username=f"bench-turns-{secrets.token_hex(4)}", base_url=fake.base_url,
                                        model="fake-echo")
        try:
            conversation = seed_conversation(owner=user, config=config, messages=args.messages)
            conversation_index_rebuild(conversation=conversation)
            blocks: list[float] = []
            with uvicorn_process(env, tmp) as (url, pid), httpx.Client(
                base_url=url, headers={"Authorization": f"Token {token}"}, timeout=120
            ) as client:
                sends_timed(client, conversation.pk, (f"warm-up {i}" for i in range(3)))
                for start in range(0, args.turns, args.block):
                    before = cpu_seconds(pid)
                    sends_timed(client, conversation.pk, (next(pasted) if pasted else question(i)
                                                          for i in range(start, start + args.block)))
                    blocks.append((cpu_seconds(pid) - before) * 1000 / args.block)
            records = list(
                OptimizationRecord.objects.filter(conversation=conversation).order_by("id")
                .values("triggered", "recall_tokens", "tokens_sent", "pack_ms")
            )[3:]
            sent = f"pasted documents of {args.documents:,} words" if pasted else "questions"
            print(f"\nServer CPU per turn, {args.turns} turns ({sent}) in a {args.messages:,}-message conversation, "
                  f"{connection.vendor}, one uvicorn process, model fake-echo (instant):")
            print(f"{'turns':>10} {'CPU ms/turn':>12} {'recall tokens':>14} {'tokens sent':>12} {'pack ms':>8} "
                  f"{'cuts':>5}")
            for k, cpu in enumerate(blocks):
                rows = records[k * args.block:(k + 1) * args.block]
                print(f"{k * args.block + 1:>4}-{(k + 1) * args.block:<5} {cpu:>12.1f} "
                      f"{statistics.median(r['recall_tokens'] for r in rows):>14.0f} "
                      f"{statistics.median(r['tokens_sent'] for r in rows):>12.0f} "
                      f"{statistics.median(r['pack_ms'] for r in rows):>8.2f} {sum(r['triggered'] for r in rows):>5}")
            half = max(1, len(blocks) // 3)
            print(f"\nfresh (first {half * args.block} turns): {statistics.median(blocks[:half]):.1f} ms/turn; "
                  f"settled (last {half * args.block}): {statistics.median(blocks[-half:]):.1f} ms/turn "
                  f"(medians of the blocks; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
        finally:
            user.delete()
    return 0


if __name__ == "__main__":
    sys.exit(main())
