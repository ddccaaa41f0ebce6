"""Recall latency at 1k / 10k / 100k messages: the core in memory, and the web app through its database.

The same deterministic conversation (`_common.make_conversation`, system prompt included) and the
same queries are timed by:

  core         optimizer.recall.recall over `optimizer.recall.MemorySource` built once per size (the
               build is timed separately: the CLI pays it per request, a long-lived process once)
  app recall   optimizer.recall.recall over the web app's `DatabaseRecallSource`
               (chatapp/chat/recall_source.py: full-text index lookups, BM25 statistics kept at write
               time), i.e. the recall part of a chat turn, queries and all
  app turn     the whole server-side packing of a chat turn: `context_build` (load the static layer,
               summary and window, pack, recall, store the window) for a conversation whose newest
               message is the query, appended with `message_append` (untimed) as a turn stores it

The app rows run in a child process per database: SQLite (bench/out/recall_latency.sqlite3, migrated
here) and PostgreSQL when DATABASE_URL is set (or --postgres URL). Each size is one conversation of a
throwaway user, bulk-inserted and indexed with the app's `conversation_index_rebuild`, and deleted
with the user at the end.

Queries: deterministic user questions naming a detail of an older message (a build number, a person,
a topic and an error, as a user asking back would), every one outside the recent window; the
request's window (the newest 40 messages) is excluded from recall as pack excludes what it sends.
Room for the block: --room tokens (default 2048). Figures are wall-clock median and p95 (nearest
rank) in ms, GC disabled in the timed call; the load average is printed. Target (issue): <= 10 ms
server time per turn at 100k messages.

  .venv/bin/python bench/recall_latency.py            # 1k,10k,100k; SQLite (+ PostgreSQL with DATABASE_URL)
  .venv/bin/python bench/recall_latency.py --quick    # 1k,10k, 15 queries
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from _common import OUT, PYTHON, ROOT, load_note, make_conversation, median, offline_tiktoken, percentile

offline_tiktoken()

from optimizer.recall import MemorySource, RecallItem, recall  # noqa: E402

MODEL = "gpt-4o-mini"
WINDOW = 40  # newest messages treated as sent in the flow (excluded from recall)
APP_SQLITE = OUT / "recall_latency.sqlite3"
TARGET_MS = 10.0
_NUMBER = re.compile(r"\b\d{3,6}\b")
_QUOTED = re.compile(r"'([^']+)'")


def queries(msgs: list[dict[str, Any]], count: int, seed: int) -> list[str]:
    """Questions asking back about a detail of an old message (outside the window)."""
    rng = random.Random(f"q-{len(msgs)}-{seed}")
    old = [m for m in msgs[1:-WINDOW] if m["role"] in ("user", "assistant")]
    out = []
    while len(out) < count:
        m = rng.choice(old)
        text = m["content"]
        numbers = _NUMBER.findall(text)
        errors = _QUOTED.findall(text)
        words = [w for w in re.findall(r"[A-Z][a-z]+", text) if len(w) > 3]
        if numbers and rng.random() < 0.5:
            out.append(f"What was the value {rng.choice(numbers)} about again?")
        elif errors and words:
            out.append(f"Remind me what we said about {rng.choice(words)} and '{rng.choice(errors)}'?")
        elif words:
            out.append(f"Earlier you mentioned {rng.choice(words)}, what was that about?")
    return out


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc_was = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        result = fn()
        return time.perf_counter() - t0, result
    finally:
        if gc_was:
            gc.enable()


def stats(seconds: list[float]) -> dict[str, float]:
    return {"median": 1000 * median(seconds), "p95": 1000 * percentile(seconds, 95)}


# --- core ------------------------------------------------------------------------------------------

def core_run(msgs: list[dict[str, Any]], qs: list[str], room: int) -> dict[str, Any]:
    items = [RecallItem(id=m["id"], role=m["role"], content=m["content"], position=k) for k, m in enumerate(msgs)]
    build, source = timed(lambda: MemorySource(items))
    exclude = frozenset(m["id"] for m in msgs[-WINDOW:])
    recall(text=qs[0], source=source, room=room, exclude_ids=exclude, model=MODEL)  # warm-up: loads the tokenizer
    times, quoted = [], 0
    for q in qs:
        sec, block = timed(lambda q=q: recall(text=q, source=source, room=room, exclude_ids=exclude, model=MODEL))
        times.append(sec)
        quoted += block is not None
    return {"build_ms": 1000 * build, "recall": stats(times), "hits": quoted}


# --- app (child process, one database) -------------------------------------------------------------

def app_child(sizes: list[int], n_queries: int, room: int, seed: int) -> dict[str, Any]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")
    import django

    from chatapp.instance import instance_prepare

    instance_prepare()
    django.setup()
    import uuid

    from django.contrib.auth import get_user_model
    from django.db import connection

    import optimizer
    from chatapp.chat.context_pack import context_build
    from chatapp.chat.message_services import message_append
    from chatapp.chat.models import Conversation, Message
    from chatapp.chat.recall_source import DatabaseRecallSource
    from chatapp.chat.search_services import conversation_index_rebuild
    from chatapp.providers.llm import offline_target

    owner = get_user_model().objects.create_user(username=f"bench-recall-{uuid.uuid4().hex[:12]}")
    # A 16k-window model with the default reply reserve: the budget a long conversation runs in.
    target = offline_target()
    import dataclasses

    target = dataclasses.replace(target, model=MODEL, context_window=16384 + 2000, max_output_tokens=2000)
    out: dict[str, Any] = {"vendor": connection.vendor}
    try:
        for n in sizes:
            msgs = make_conversation(n, seed=seed)
            qs = queries(msgs, n_queries, seed)
            t0 = time.perf_counter()
            counts = [optimizer.count_message({"role": m["role"], "content": m["content"]}, model=MODEL) for m in msgs]
            conv = Conversation.objects.create(owner=owner, live_message_count=n,
                                               live_char_count=sum(len(m["content"]) for m in msgs),
                                               live_token_count=sum(counts))
            rows = Message.objects.bulk_create(
                [Message(conversation=conv, role=m["role"], content=m["content"], token_count=c,
                         char_count=len(m["content"]), pinned=m["pinned"]) for m, c in zip(msgs, counts, strict=True)],
                batch_size=2000,
            )
            conversation_index_rebuild(conversation=conv)
            if connection.vendor == "postgresql":
                # fresh statistics and visibility map (the earlier sizes' rows are deleted), as
                # autovacuum would soon have
                with connection.cursor() as cursor:
                    cursor.execute("VACUUM ANALYZE")
            load_s = time.perf_counter() - t0
            exclude = frozenset(str(r.pk) for r in rows[-WINDOW:])
            # warm-up: first queries pay connection set-up and cold caches
            source = DatabaseRecallSource(conversation=conv)
            recall(text=qs[0], source=source, room=room, exclude_ids=exclude, model=MODEL)
            rec_times, hits = [], 0
            for q in qs:
                sec, block = timed(lambda q=q, conv=conv, exclude=exclude: recall(
                    text=q, source=DatabaseRecallSource(conversation=conv), room=room, exclude_ids=exclude,
                    model=MODEL))
                rec_times.append(sec)
                hits += block is not None
            # whole turns: the query stored as the newest message, then the turn's packing timed
            context_build(conversation=conv, preference="balanced", target=target)  # sets the window
            turn_times, recalled = [], 0
            for q in qs:
                message_append(conversation=conv, role="user", content=q, token_model=MODEL)
                sec, (result, _) = timed(lambda conv=conv: context_build(conversation=conv, preference="balanced",
                                                                         target=target))
                turn_times.append(sec)
                recalled += bool(result.info.recall_ids)
                # the reply, so the next turn is a new round (not timed)
                message_append(conversation=conv, role="assistant", content="Noted.", token_model=MODEL)
            out[str(n)] = {"load_s": load_s, "recall": stats(rec_times), "hits": hits,
                           "turn": stats(turn_times), "turn_recalled": recalled}
            conv.delete()
    finally:
        owner.delete()
    return out


def run_app(db_url: str, a: argparse.Namespace) -> dict[str, Any] | None:
    env = dict(os.environ, DATABASE_URL=db_url)
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    cmd = [PYTHON, __file__, "--child", "--sizes", a.sizes, "--queries", str(a.queries), "--room", str(a.room),
           "--seed", str(a.seed)]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if run.returncode != 0:
        print(f"app run on {db_url.split(':', 1)[0]} failed:\n{run.stderr[-3000:]}", file=sys.stderr)
        return None
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--room", type=int, default=2048, help="tokens the recall block may use")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--postgres", default=None, help="PostgreSQL URL (default: DATABASE_URL if it is one)")
    ap.add_argument("--no-app", action="store_true", help="core only")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.quick:
        a.sizes, a.queries = "1000,10000", 15
    sizes = [int(s) for s in a.sizes.split(",")]
    if a.child:
        print(json.dumps(app_child(sizes, a.queries, a.room, a.seed)))
        return
    OUT.mkdir(parents=True, exist_ok=True)

    core = {}
    for n in sizes:
        msgs = make_conversation(n, seed=a.seed)
        core[n] = core_run(msgs, queries(msgs, a.queries, a.seed), a.room)
    apps: dict[str, dict[str, Any] | None] = {}
    if not a.no_app:
        apps["SQLite"] = run_app(f"sqlite:///{APP_SQLITE}", a)
        pg = a.postgres or (os.environ.get("DATABASE_URL") if os.environ.get("DATABASE_URL", "").startswith(
            "postgres") else None)
        if pg:
            apps["PostgreSQL"] = run_app(pg, a)

    print_tables(core, apps, sizes, a)


def print_tables(core: dict, apps: dict[str, dict[str, Any] | None], sizes: list[int], a: argparse.Namespace) -> None:
    print(f"recall latency: {a.queries} queries per size, room {a.room} tokens, window {WINDOW} messages "
          f"excluded, model {MODEL}; median / p95 ms; {load_note()}")
    head = "| messages | core: MemorySource build | core: recall |"
    sep = "|---|---|---|"
    for name in apps:
        head += f" {name}: recall | {name}: whole turn (context_build) |"
        sep += "---|---|"
    print(head + f" target <= {TARGET_MS:g} ms/turn at 100k |")
    print(sep + "---|")
    for n in sizes:
        c = core[n]
        line = f"| {n:,} | {c['build_ms']:,.0f} | {c['recall']['median']:.2f} / {c['recall']['p95']:.2f} |"
        verdict = []
        for name, res in apps.items():
            r = (res or {}).get(str(n))
            if r is None:
                line += " (failed) | (failed) |"
                continue
            line += (f" {r['recall']['median']:.2f} / {r['recall']['p95']:.2f} "
                     f"| {r['turn']['median']:.2f} / {r['turn']['p95']:.2f} |")
            if n >= 100_000:
                verdict.append(f"{name} {'MET' if r['turn']['median'] <= TARGET_MS else 'MISSED'}")
        print(line + f" {', '.join(verdict)} |")
    print()
    for n in sizes:
        note = f"{n:,} messages: core quoted for {core[n]['hits']}/{a.queries} queries"
        for name, res in apps.items():
            r = (res or {}).get(str(n))
            if r:
                note += (f"; {name} quoted for {r['hits']}/{a.queries} (recall), turns sent a recall block "
                         f"{r['turn_recalled']}/{a.queries}, load + index {r['load_s']:.1f} s")
        print(note)


if __name__ == "__main__":
    main()
