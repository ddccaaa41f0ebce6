"""Past one machine: N uvicorn processes and M Celery workers on one PostgreSQL and one Redis, under load,
with a worker killed (SIGKILL) mid-run and restarted. What a user would lose, and how fast the chat answers.

The topology, on one host (each process could run on its own machine: they share nothing but the two
servers and the same environment):

  web        --web (2) `uvicorn chatapp.asgi:application` processes on ports of their own; the load
             generator spreads the users across them (user i talks to process i mod N), as a load
             balancer would.
  workers    --workers (2) `celery -A chatapp worker -Q summaries,celery --concurrency C` with hostnames
             of their own; `-B` (the periodic sweep) on the last one only.
  PostgreSQL a fresh database `bench_load_<pid>` on --postgres (default: DATABASE_URL's server, else
             postgres://postgres@127.0.0.1:5432), migrated, dropped at the end (also on failure).
  Redis      a database number of its own on --redis (default redis://127.0.0.1:6379): the first empty one
             of 15..1 (claimed with a marker key; or --redis-db), flushed at the start and at the end.
             It is the broker (REDIS_URL) and the cache (CACHE_URL), so the per-user send limit
             (SEND_RATE_LIMIT_PER_MINUTE, 20 here as in production) and the DRF throttles are counted
             once for all web processes.
  model      the fake OpenAI server (tests/support/fake_openai.py) in a process of its own: chat replies
             stream `slow-<--chunk-ms>` (one word per chunk, ~44 chunks); summaries use each user's summary
             config `slow-<--summary-ms>` (one reply after that delay), so a summary holds a worker slot
             that long and the kill finds some in flight.

Users: --users (200), each with an API token, one conversation on a 4,000-token model config (budget
3,500 tokens; trigger 2,800, 2,450 for fast), seeded by bulk insert with a history sized so that the
trigger fires at turn k = 1..5 (spread over the users). Preferences: half quality, a quarter balanced
(both summarize: the histories are past 10,000 characters, where balanced prefers summaries), a quarter
fast (truncates: a control group without summaries). Each user sends --turns (5) messages one after the
other (send, read the SSE stream to `done`, send the next), the users arriving over --ramp (5) seconds and
then all at once, in one asyncio loop (its lag and CPU are printed: it must not be the bottleneck). Each
web process first answers a few untimed sends (tokenizer, registry and SDK loading is start-up, not load).
Time to first byte: from sending the request to the first body byte (the `start` event).

Fault: after --kill-at (40 %) of all turns have ended, the first worker (not the one running beat) is
killed with SIGKILL (its whole process group, pool children included) while it runs summaries (the jobs it
held are read with `celery inspect` just before), and started again --restart-after (3) seconds later.
Broker messages are acks_late with reject_on_worker_lost: the dead worker's unacked messages come back
after the Redis visibility timeout (CELERY_VISIBILITY_TIMEOUT, 15 s here; 1 h by default) and the job's
lease (SUMMARY_JOB_LEASE_SECONDS, 10 s here) lets the new delivery take the job over. A message Redis
had just handed to the dead worker's BRPOP, before kombu recorded it as unacked, is gone from the broker:
the sweep publishes such a queued job again after SUMMARY_QUEUED_STALE_SECONDS (60 s here, 900 s by
default); "published again by the sweep" counts what the sweeps sent (at the restart and every 30 s).

At the end the web processes stop, the summary queue is drained (bounded by --drain-timeout), and the
database is checked:
  lost messages        a send the server accepted (SSE `start`) whose user message is not stored exactly
                       once with its text, or a `done` whose reply is not stored complete with the
                       streamed text; replies left `streaming` count too
  errors               sends that did not end with `done` (HTTP status, SSE `error`, connection error)
  out-of-order users   users whose new messages are not user, reply, user, reply... in send order (each
                       reply answering the message before it)
  lost summaries       summary jobs still pending/queued/running after the drain, jobs `done` without a
                       summary, conversations where a turn chose summarize and no job exists, and killed
                       in-flight jobs that did not finish
  duplicate summaries  summary messages no job points at (written by a delivery that lost its claim),
                       one summary claimed by two jobs, two summaries of a conversation covering the same
                       range, or a later summary covering less than an earlier one (a stale write)
Exit status 1 when any of these is not 0, when the kill did not happen, or when it hit no summary.

    .venv/bin/python bench/load.py [--users 200] [--turns 5] [--web 2] [--workers 2] [--json out/load.json]
    .venv/bin/python bench/load.py --quick     # 20 users x 3 turns
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import OUT
from load_checks import (
    check_messages,
    check_order,
    check_summaries,
    failures_of,
    print_table,
    summarize,
    trigger_turns,
)
from load_seed import ACTIVE, FakeModel, UserPlan, postgres_server, private_redis_db, seed
from load_traffic import (
    Kill,
    group_cpu_seconds,
    kill_and_restart,
    machine_busy_seconds,
    run_load,
    warm_up,
)
from processes import CeleryWorker, private_postgres, start_uvicorn, stop
from web_ttfb import (
    bench_environment,
    cpu_seconds,
    django_setup,
)

# --- the run --------------------------------------------------------------------------------------------

def drain(plans: list[UserPlan], timeout: float) -> float:
    from chatapp.chat.models import SummaryJob

    ids = [p.conversation_id for p in plans]
    started = time.monotonic()
    while SummaryJob.objects.filter(conversation_id__in=ids, status__in=ACTIVE).exists():
        if time.monotonic() - started > timeout:
            break
        time.sleep(0.5)
    return time.monotonic() - started


def sweep_republished(tmp: Path) -> int:
    """Jobs the workers' sweeps published again (their log lines "summary sweep: N of M jobs published")."""
    return sum(int(m.group(1)) for log in tmp.glob("load-*.log")
               for m in re.finditer(r"summary sweep: (\d+) of \d+ jobs published", log.read_text(errors="replace")))


def stuck_jobs(plans: list[UserPlan], redis_url: str) -> dict[str, Any]:
    """What a failed drain left behind: the jobs still active, and the broker's queues and unacked messages."""
    import redis

    from chatapp.chat.models import SummaryJob

    jobs = [{k: str(v) for k, v in j.items()} for j in SummaryJob.objects.filter(
        conversation_id__in=[p.conversation_id for p in plans], status__in=ACTIVE).values(
        "id", "conversation_id", "status", "trigger", "attempts", "error", "created_at", "started_at",
        "lease_expires_at")]
    client = redis.Redis.from_url(redis_url)
    try:
        broker = {"summaries queue": client.llen("summaries"), "celery queue": client.llen("celery"),
                  "unacked": client.hlen("unacked"), "unacked_index": client.zcard("unacked_index"),
                  "keys": sorted(k.decode() for k in client.keys("*") if not k.startswith(b":"))[:30]}
        unacked = []
        for tag, raw in client.hgetall("unacked").items():
            message = json.loads(raw)[0]
            unacked.append({"tag": tag.decode(), "headers": {k: message.get("headers", {}).get(k)
                                                             for k in ("task", "argsrepr", "eta", "retries")}})
        broker["unacked messages"] = unacked[:20]
    finally:
        client.close()
    return {"jobs": jobs, "broker": broker}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--web", type=int, default=2, help="uvicorn processes")
    parser.add_argument("--workers", type=int, default=2, help="Celery workers")
    parser.add_argument("--concurrency", type=int, default=4, help="pool processes per worker")
    parser.add_argument("--chunk-ms", type=int, default=150, help="chat model delay before each streamed word")
    parser.add_argument("--summary-ms", type=int, default=2000, help="summary model delay")
    parser.add_argument("--ramp", type=float, default=5.0, help="seconds over which the users' first sends start")
    parser.add_argument("--kill-at", type=float, default=0.4, help="share of all turns ended before the kill")
    parser.add_argument("--restart-after", type=float, default=3.0, help="seconds between kill and restart")
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--send-limit", type=int, default=20, help="SEND_RATE_LIMIT_PER_MINUTE (shared in Redis)")
    parser.add_argument("--postgres", help="PostgreSQL server URL (the bench creates its own database there)")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379", help="Redis server URL (no database number)")
    parser.add_argument("--redis-db", type=int, help="Redis database number to use and flush (default: an empty one)")
    parser.add_argument("--quick", action="store_true", help="20 users x 3 turns")
    parser.add_argument("--json", type=Path, help="also write the figures as a JSON object")
    args = parser.parse_args()
    if args.quick:
        args.users, args.turns = 20, 3
    return args


def process_cpu(webs, workers: list[CeleryWorker], fake: FakeModel) -> dict[str, float]:
    cpu = {f"web {n + 1}": cpu_seconds(proc.pid) for n, (proc, _) in enumerate(webs)}
    for n, w in enumerate(workers):
        if w.proc is not None and w.proc.poll() is None:
            cpu[f"worker {n + 1}"] = group_cpu_seconds(w.proc.pid)
    cpu["fake model"] = cpu_seconds(fake.proc.pid)
    return cpu


def stop_web(proc: subprocess.Popen, timeout: float = 120) -> dict[str, Any]:
    """SIGTERM and wait (uvicorn finishes its requests, then the interpreter its summary-request thread);
    SIGKILL only past the timeout, said so in the result."""
    started = time.monotonic()
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
        killed = False
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        killed = True
    return {"seconds": round(time.monotonic() - started, 1), "killed": killed}


def keep_logs(tmp: Path) -> str:
    """The processes' logs copied out of the temporary directory, for the post-mortem."""
    kept = OUT / f"load-{os.getpid()}"
    kept.mkdir(parents=True, exist_ok=True)
    for log in tmp.glob("*.log"):
        shutil.copy(log, kept / log.name)
    return str(kept)


def run_environment(tmp: Path, *, database_url: str, redis_url: str, send_limit: int) -> dict[str, str]:
    env = bench_environment(tmp)
    env.update({
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,  # the broker
        "CACHE_URL": redis_url,  # the send rate limit and the DRF throttles: one count for every web process
        "SEND_RATE_LIMIT_PER_MINUTE": str(send_limit),
        # a killed worker's unacked messages come back 15 s later; its job's lease ends after 10 s
        "CELERY_VISIBILITY_TIMEOUT": "15", "CELERY_UNACKED_RESTORE_INTERVAL": "1",
        "CELERY_UNACKED_RESTORE_THROTTLE": "1", "SUMMARY_JOB_LEASE_SECONDS": "10",
        "SUMMARY_RETRY_BACKOFF_MS": "200", "SUMMARY_RETRY_BACKOFF_MAX_MS": "1000",
        "SUMMARY_SWEEP_INTERVAL_SECONDS": "30",
        # A queued job whose broker message is gone is published again by the sweep after this (900 s by
        # default): a message Redis handed to a worker's BRPOP just before the worker died is in no list
        # and in no unacked hash (kombu pops, then records it), so no visibility timeout brings it back.
        "SUMMARY_QUEUED_STALE_SECONDS": "60",
    })
    env.pop("CELERY_SUMMARY_QUEUE", None)
    return env


def main() -> int:
    args = parse_args()
    # `bench_load_<pid>` on the server, made and dropped through its `postgres` database.
    db_name = f"bench_load_{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="load-") as tmpdir, \
            private_postgres(f"{postgres_server(args.postgres)}/postgres", db_name) as database_url, \
            private_redis_db(args.redis, args.redis_db) as (redis_url, redis_db):
        tmp = Path(tmpdir)
        env = run_environment(tmp, database_url=database_url, redis_url=redis_url, send_limit=args.send_limit)
        django_setup(env)
        fake = FakeModel(tmp)
        webs: list = []
        # Each job's outcome in the workers' logs (INFO); beat (the periodic sweep) on the last one only.
        workers = [CeleryWorker({**env, "LOG_LEVEL": "INFO"}, tmp, name=f"load-{n + 1}-{secrets.token_hex(2)}",
                                concurrency=args.concurrency, beat=n == args.workers - 1, loglevel="INFO")
                   for n in range(args.workers)]
        try:
            chat_model, summary_model = f"slow-{args.chunk_ms}", f"slow-{args.summary_ms}"
            started = time.perf_counter()
            plans = seed(args.users, fake_url=fake.base_url, chat_model=chat_model, summary_model=summary_model,
                         turns=args.turns)
            print(f"seeded {len(plans)} users in {time.perf_counter() - started:.1f} s", flush=True)
            for w in workers:
                w.start()
            webs = [start_uvicorn(env, tmp) for _ in range(args.web)]
            for w in workers:
                w.wait_ready()
            kill = Kill()

            def on_kill(progress) -> None:
                kill_and_restart(workers[0], kill, restart_after=args.restart_after, progress=progress)

            print(f"load: {args.users} users x {args.turns} turns ...", flush=True)
            warm_up([url for _, url in webs], fake.base_url)
            before = {"machine": machine_busy_seconds(), **process_cpu(webs, workers, fake)}
            run = asyncio.run(run_load(plans, [url for _, url in webs], turns=args.turns, ramp=args.ramp,
                                       kill_at=int(args.users * args.turns * args.kill_at), on_kill=on_kill))
            load_average = f"{os.getloadavg()[0]:.1f}"
            after = {"machine": machine_busy_seconds(), **process_cpu(webs, workers, fake)}
            # worker 1's first life ended with SIGKILL, uncounted: "others" includes it; its second life is
            # counted from its restart
            cpu = {k: round(after[k] - before.get(k, 0.0) * (k != "worker 1"), 1) for k in after}
            cpu["load generator"] = round(run.bench_cpu_seconds, 1)
            ours = sum(v for k, v in cpu.items() if k != "machine")
            cpu["others (PostgreSQL, Redis, other jobs on the machine)"] = round(cpu["machine"] - ours, 1)
            # gracefully: a web process's summary-request thread finishes what it was handed before it exits
            web_stops = [stop_web(proc) for proc, _ in webs]
            webs = []
            drained = drain(plans, args.drain_timeout)
            checks = check_messages(plans, run.turns)
            checks["out_of_order_users"] = check_order(plans, run.turns)
            checks.update(check_summaries(plans, kill))
            extra = {"database": db_name, "redis_db": redis_db, "chat_model": chat_model,
                     "summary_model": summary_model, "load_average": load_average, "cpu_seconds": cpu,
                     "drain_seconds": round(drained, 1), "triggers": trigger_turns(plans),
                     "sweep_republished": sweep_republished(tmp), "web_stops": web_stops}
            result = summarize(args, plans, run, kill, checks, extra)
            result["failures"] = failures_of(result)
            result["passed"] = not result["failures"]
            if checks["lost_summaries"]:
                result["stuck"] = stuck_jobs(plans, redis_url)
            if not result["passed"]:
                result["logs"] = keep_logs(tmp)
        except BaseException:
            print(f"failed; the processes' logs are in {keep_logs(tmp)}", file=sys.stderr)
            raise
        finally:
            for proc, _ in webs:
                stop(proc)
            for w in workers:
                w.stop()
            fake.stop()
            from django.db import connections

            connections.close_all()
    print_table(result)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
