"""Scale: the turn, search, exports and dashboard with a million messages in the tables.

For each database (SQLite, PostgreSQL) in a process of its own, on a fresh database:

1. fill: one conversation of 100,000 messages with one optimization record per turn (50,000; the
   dashboard's seed) and 999 conversations of mixed sizes (a long tail: most are short, a few are
   tens of thousands) for 1,000,000 messages in all, every message indexed for search and recall,
   all owned by the bench user (owner-scoped search then has the whole million to look through);
   `ANALYZE` (PostgreSQL: `VACUUM ANALYZE`, as autovacuum would leave the tables; SQLite: sampled, as the
   product's `PRAGMA optimize` leaves them, chatapp/sqlite3);
2. time to first byte of a new conversation's first send with the full tables and with empty ones:
   a second database of the same kind, empty, behind a uvicorn process of its own, the two asked in
   turn, request by request, so that both medians see the same machine;
3. against one uvicorn process (the product's server), on a fake model that answers at once
   (tests/support/fake_openai.py): time to first byte of a send in the 100,000-message
   conversation, the server's CPU per turn, message search, the streamed export of that
   conversation (first byte, growth of the server's RSS while it streams), its dashboard (page
   plus the five calls its script makes) and the server's RSS across 100 dashboard loads;
4. in this process, through the ASGI application itself: the database queries a send runs before
   its first byte (every cursor execute counted, in any thread).

    .venv/bin/python bench/scale.py [--quick] [--json FILE] [--databases sqlite,postgres]

`--quick` does the same at a tenth of the size. SCALE_PROFILE_DIR=DIR profiles the server during the
CPU-per-turn turns (see turn_profiler). PostgreSQL is reached at DATABASE_URL's server
(default postgres://postgres@127.0.0.1:5432/), in a database of the bench's own, dropped afterwards.
Every figure is a median in ms unless its name says otherwise.
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
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from processes import private_postgres
from scale_fill import fill
from scale_probes import (
    dashboard_urls,
    empty_reference,
    export_first_byte,
    get_timed,
    new_conversation_ttfb_pairs,
    queries_before_first_byte,
    recall_tokens_median,
    reference_child,
    rss_mib,
    session_cookie,
    timed_turns,
)
from web_ttfb import (
    PYTHON,
    ROOT,
    bench_environment,
    seed_user,
    timed_send,
    uvicorn_process,
)

# cpu_ms_per_turn: the median of CPU_ROUNDS rounds of CPU_TURNS turns, each round behind a uvicorn
# process of its own (the TTFB of a 100k conversation is the median of all their turns). One round's
# figure moved by a quarter between processes running the same code on a quiet machine
# (bench/turn_cpu.py's blocks too), which one round of 100 turns could not tell from a change.
CPU_TURNS = 100
CPU_ROUNDS = 5

KEYS = (
    "ttfb_new_conversation_empty_table", "ttfb_new_conversation_1m_table", "ttfb_100k_conversation",
    "queries_before_first_byte", "queries_before_first_byte_new_conversation", "statements_per_turn",
    "wide_reads_on_turn_path", "cpu_ms_per_turn", "cpu_ms_per_turn_first_round", "search_1m",
    "export_first_byte_100k", "export_rss_growth_mib", "dashboard_page_and_api_100k",
    "dashboard_rss_growth_mib_100_loads",
)
TARGETS = {
    "ttfb_new_conversation_1m_table": "<= 1.2 x empty",
    "queries_before_first_byte": "<= 5",
    "wide_reads_on_turn_path": "0 (PostgreSQL EXPLAIN ANALYZE: > 10k rows in a node)",
    "cpu_ms_per_turn": "<= 15", "search_1m": "<= 50",
    "export_first_byte_100k": "<= 300", "export_rss_growth_mib": "<= 30",
    "dashboard_page_and_api_100k": "<= 300", "dashboard_rss_growth_mib_100_loads": "<= 50",
}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    from tests.support.fake_openai import FakeOpenAI

    total, big, conversations = (100_000, 10_000, 100) if args.quick else (1_000_000, 100_000, 1_000)
    requests = args.requests
    out: dict[str, Any] = {"messages": total, "big_conversation": big, "conversations": conversations}
    with tempfile.TemporaryDirectory(prefix="scale-") as tmpdir, FakeOpenAI() as fake:
        tmp = Path(tmpdir)
        env = bench_environment(tmp)
        os.environ.update(env)
        import django

        from chatapp.instance import instance_prepare

        instance_prepare()
        django.setup()
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0, interactive=False)
        out["database"] = connection.vendor
        user, token, config = seed_user(username=f"bench-scale-{secrets.token_hex(4)}", base_url=fake.base_url,
                                        model="fake-echo")
        auth = {"Authorization": f"Token {token}"}

        print(f"[{connection.vendor}] filling {total:,} messages in {conversations:,} conversations...",
              file=sys.stderr, flush=True)
        large, words, seconds = fill(owner=user, config=config, total=total, big=big, conversations=conversations)
        out["fill_seconds"] = round(seconds, 1)
        print(f"[{connection.vendor}] filled in {seconds:.0f} s", file=sys.stderr, flush=True)

        from chatapp.chat.models import Conversation

        probe = Conversation.objects.create(owner=user, llm_config=config, title="probe")
        new_count, new_scans, _ = queries_before_first_byte(token=token, conversation_id=probe.pk,
                                                         text="a first question")
        big_count, big_scans, big_total = queries_before_first_byte(token=token, conversation_id=large.pk,
                                                         text="what did we say about the plan?")
        out["queries_before_first_byte_new_conversation"] = new_count
        out["queries_before_first_byte"] = big_count
        # The whole send; SQLite counts its three "BEGIN IMMEDIATE"s, and runs one by one the writes
        # PostgreSQL sends in one round trip (rowsql.statements_run).
        out["statements_per_turn"] = big_total
        out["wide_reads_on_turn_path"] = len(new_scans) + len(big_scans)
        for scan in new_scans + big_scans:
            print(f"[{connection.vendor}] wide read on the turn path: {scan}", file=sys.stderr)

        with empty_reference(env, tmp / "empty", fake.base_url) as (ref_env, ref_token), \
                uvicorn_process(ref_env, tmp / "empty") as (ref_url, _), \
                httpx.Client(base_url=ref_url, headers={"Authorization": f"Token {ref_token}"}, timeout=120) as ref, \
                uvicorn_process(env, tmp) as (url, _), httpx.Client(base_url=url, headers=auth, timeout=120) as c:
            on_full, on_empty = new_conversation_ttfb_pairs(c, ref, requests)
            out["ttfb_new_conversation_1m_table"] = statistics.median(on_full)
            out["ttfb_new_conversation_empty_table"] = statistics.median(on_empty)

        rounds, samples, recall_blocks = [], [], []
        for r in range(CPU_ROUNDS):
            with uvicorn_process(env, tmp) as (url, pid), httpx.Client(base_url=url, headers=auth, timeout=300) as c:
                for i in range(2):
                    timed_send(c, large.pk, f"warm-up {r}.{i}")
                # /proc counts CPU in 10 ms ticks: over 20 turns the figure moved in 0.5 ms steps.
                per_round = max(requests, CPU_TURNS)
                cpu, turns = timed_turns(c, pid=pid, conversation_id=large.pk, words=words, requests=per_round,
                                         vendor=connection.vendor, first=r * per_round, profile=r == 0)
                rounds.append(round(cpu, 1))
                samples += turns
            recall_blocks.append(recall_tokens_median(conversation_id=large.pk, turns=per_round))
        out["cpu_ms_per_turn"] = statistics.median(rounds)
        out["cpu_ms_per_turn_rounds"] = rounds
        # The conversation as the fill left it; later rounds see the turns of those before them (a
        # conversation that goes on: recall finds them, see bench/turn_cpu.py).
        out["cpu_ms_per_turn_first_round"] = rounds[0]
        # What grows from round to round: recall finds the earlier rounds' questions and quotes them.
        out["recall_tokens_by_round"] = recall_blocks
        out["ttfb_100k_conversation"] = statistics.median(samples)

        with uvicorn_process(env, tmp) as (url, pid), httpx.Client(base_url=url, headers=auth, timeout=300) as c:
            search = []
            rng = random.Random(5)
            for i in range(requests):
                # Common, middling and rare words; two-word queries; the last word typed halfway.
                q = rng.choice(words[:50]) if i % 4 == 0 else rng.choice(words[200:5000])
                if i % 3 == 0:
                    q += " " + rng.choice(words[50:2000])[:3]
                started = time.perf_counter()
                response = c.get("/api/search/", params={"q": q})
                if response.status_code == 404:  # no search API on this checkout
                    search = []
                    break
                response.raise_for_status()
                search.append((time.perf_counter() - started) * 1000)
            out["search_1m"] = statistics.median(search) if search else None
            out["search_ms_by_query"] = [round(ms, 1) for ms in search]
            print(f"[{connection.vendor}] search, ms by query: {out['search_ms_by_query']}", file=sys.stderr)

            exports = [export_first_byte(c, f"/api/conversations/{large.pk}/export/?format={fmt}", pid)
                       for fmt in ("json", "markdown")]
            if all(exports):
                out["export_first_byte_100k"] = max(e[0] for e in exports if e)
                out["export_rss_growth_mib"] = max(e[1] for e in exports if e)
                out["export_bytes"] = [e[2] for e in exports if e]

            c.cookies.update(session_cookie(user))
            urls = dashboard_urls(large)
            for u in urls:
                get_timed(c, u)  # warm-up
            per_url = {u: [get_timed(c, u)[0] for _ in range(5)] for u in urls}
            out["dashboard_page_and_api_100k"] = sum(statistics.median(v) for v in per_url.values())
            out["dashboard_bytes"] = {u.split("?")[0]: get_timed(c, u)[1] for u in urls}
            before = rss_mib(pid)
            for _ in range(100):
                for u in urls:
                    get_timed(c, u)
            out["dashboard_rss_growth_mib_100_loads"] = rss_mib(pid) - before
    # No clean-up here: the database is the bench's own (a temporary SQLite file, or a PostgreSQL
    # database the parent drops), and one DELETE cascading over a million rows is not what is measured.
    return out


# --- the parent: one child per database, side by side ----------------------------------------------------

def child(args: argparse.Namespace, database: str) -> dict[str, Any]:
    env = dict(os.environ)
    with ExitStack() as stack:
        if database == "postgres":
            server = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
            env["DATABASE_URL"] = stack.enter_context(
                private_postgres(server.rsplit("/", 1)[0] + "/postgres", f"bench_scale_{os.getpid()}"))
        else:
            env.pop("DATABASE_URL", None)
        cmd = [PYTHON, str(Path(__file__).resolve()), "--child", "--requests", str(args.requests)]
        if args.quick:
            cmd.append("--quick")
        # The child's progress goes to stderr (shown as it runs); its last stdout line is the result.
        proc = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=False)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        print("\n".join(lines))
        raise RuntimeError(f"{database} run failed (exit {proc.returncode})")
    return json.loads(lines[-1])


def fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.1f}" if isinstance(value, float) else f"{value:,}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the size (100k messages)")
    parser.add_argument("--json", default="", help="write the figures to this file")
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--requests", type=int, default=20, help="timed requests per figure")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--reference-child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reference_child:
        return reference_child(args.reference_child)
    if args.child:
        result = measure(args)
        print(json.dumps(result), flush=True)
        return 0

    databases = args.databases.split(",")
    results = {db: child(args, db) for db in databases}
    size = "100k (--quick)" if args.quick else "1M"
    print(f"\nScale, {size} messages in the tables; medians in ms unless named (load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    print(f"{'figure':44}" + "".join(f"{db:>12}" for db in databases) + "   target")
    for key in KEYS:
        print(f"{key:44}" + "".join(f"{fmt(results[db].get(key)):>12}" for db in databases)
              + f"   {TARGETS.get(key, '')}")
    for db in databases:
        r = results[db]
        ratio = r["ttfb_new_conversation_1m_table"] / r["ttfb_new_conversation_empty_table"]
        print(f"{db}: new-conversation TTFB full/empty = {ratio:.2f} (target <= 1.2); fill {r['fill_seconds']} s; "
              f"CPU per turn by round (ms): {', '.join(map(str, r.get('cpu_ms_per_turn_rounds', [])))}; "
              f"recall block by round (median tokens): {', '.join(map(str, r.get('recall_tokens_by_round', [])))}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
