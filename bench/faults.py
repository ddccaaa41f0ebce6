"""Faults replayed against real processes: what a user would lose, and what they would see fail.

Each scenario runs against a real `uvicorn chatapp.asgi:application` child process on the database
of DATABASE_URL (PostgreSQL in CI; a temporary SQLite file without it) and the local fake OpenAI
endpoint, and prints one row:

  slow streams       --streams (200) replies streaming at once on one web process (a slow model,
                     --chunk-ms between chunks), while a bystander reads the conversation list every
                     100 ms. survived = replies ended with `done` and stored complete; lost = user
                     messages not stored; errors = sends or bystander requests that failed. The
                     bystander's p50 / p95 are printed beside it. Before issue 11 a stream held a
                     pooled connection for its whole length: 10 streams starved everything else.
  web SIGKILL        --killed (5) replies streaming, the web process killed with SIGKILL after 4 s,
                     then the periodic sweep (STREAM_ORPHAN_SECONDS=5 here) and a Retry of each on a
                     new process. survived = replies finished as interrupted with their checkpointed
                     text and answered again by Retry; lost = replies still `streaming`, or with no
                     text though the client had received some. "chars lost" = characters the client
                     saw that the checkpoint (every 3 s) had not stored yet.

  worker kills       --jobs (20) summary jobs (one per user, a slow summary model) on a real Celery
                     worker (private redis-server), the worker killed with SIGKILL --kills (20) times
                     while it works, restarted each time. survived = jobs done with exactly one
                     summary; lost = jobs that never finished; errors = duplicated summaries.
  Redis down         the private Redis stopped for --redis-down (30) seconds: chat messages sent
                     meanwhile (they must be answered) and /compact requested (the jobs stay pending),
                     then Redis back and the worker's sweep publishes them. survived = messages
                     answered + jobs done; lost = messages or jobs missing; errors = sends that failed.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/test .venv/bin/python bench/faults.py
    .venv/bin/python bench/faults.py --streams 50 --json out/faults.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from processes import CeleryWorker, PrivateRedis, start_uvicorn, stop, wait_until
from web_ttfb import ROOT, bench_environment, django_setup, percentile, seed_user


@dataclass
class Row:
    scenario: str
    tried: int
    survived: int
    lost: int
    errors: int
    note: str = ""
    samples: list[str] = field(default_factory=list)


async def stream_one(client, *, path: str, text: str, seen: dict[str, str], key: str,
                     opened: dict[str, float] | None = None) -> str:
    """Send and read the SSE body; 'done', 'error', or what went wrong. Deltas go to seen[key];
    the wall-clock time of the first delta goes to opened[key]."""
    try:
        async with client.stream("POST", path, json={"content": text, "client_key": secrets.token_hex(8)}) as response:
            if response.status_code != 200:
                return f"HTTP {response.status_code}"
            buffer, last = "", "cut"
            async for chunk in response.aiter_text():
                buffer += chunk
                while "\n\n" in buffer:
                    block, buffer = buffer.split("\n\n", 1)
                    lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
                    name = lines.get("event")
                    if name == "delta":
                        seen[key] = seen.get(key, "") + json.loads(lines["data"])["text"]
                        if opened is not None:
                            opened.setdefault(key, time.time())
                    if name in ("done", "error"):
                        last = name
            return last
    except Exception as exc:  # the connection died: reported as what the user saw
        return type(exc).__name__


# The fake model echoes up to 40 words of the question: a long question makes a long, slow reply.
_LONG_ASK = "please answer at length " + " ".join(f"point{n}" for n in range(40))


def bystander_loop(url: str, token: str, stop_file: str, out_file: str) -> None:
    """Another user's reads, from a process of its own, so that the load generator's event loop
    (200 SSE bodies parsed in Python) and the fake model's threads are not timed as the server's
    latency. One JSON line per request: wall-clock start, milliseconds, error or null."""
    import httpx

    with httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}, timeout=60) as client, \
            open(out_file, "w") as out:
        while not os.path.exists(stop_file):
            at, started, error = time.time(), time.perf_counter(), None
            try:
                response = client.get("/api/conversations/?limit=5")
                if response.status_code != 200:
                    error = f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                error = type(exc).__name__
            out.write(json.dumps([at, (time.perf_counter() - started) * 1000, error]) + "\n")
            out.flush()
            time.sleep(0.1)


def _latency(samples: list[list], start: float, end: float) -> str:
    ms = [s[1] for s in samples if start <= s[0] < end]
    if not ms:
        return "no requests"
    return f"p50 {statistics.median(ms):.0f} ms, p95 {percentile(ms, 0.95):.0f} ms ({len(ms)} requests)"


def slow_streams(env: dict[str, str], tmp: Path, fake_url: str, *, streams: int, chunk_ms: int) -> Row:
    import multiprocessing

    import httpx

    from chatapp.chat.models import Conversation, Message

    user, token, config = seed_user(username=f"faults-{secrets.token_hex(3)}", base_url=fake_url,
                                    model=f"slow-{chunk_ms}")
    conversations = [Conversation.objects.create(owner=user, llm_config=config) for _ in range(streams)]
    other, other_token, _ = seed_user(username=f"faults-{secrets.token_hex(3)}", base_url=fake_url, model="fake-echo")
    for n in range(5):
        Conversation.objects.create(owner=other, title=f"bystander {n}")
    proc, url = start_uvicorn(env, tmp)
    headers = {"Authorization": f"Token {token}"}
    stop_file, out_file = tmp / "bystander.stop", tmp / "bystander.jsonl"
    bystander = multiprocessing.get_context("spawn").Process(
        target=bystander_loop, args=(url, other_token, str(stop_file), str(out_file)))
    opened: dict[str, float] = {}
    finished: list[float] = []

    async def run() -> tuple[float, list[str]]:
        limits = httpx.Limits(max_connections=streams + 10)
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120, limits=limits) as client:
            seen: dict[str, str] = {}

            async def one(c: Conversation) -> str:
                outcome = await stream_one(client, path=f"/api/conversations/{c.pk}/messages/",
                                           text=_LONG_ASK, seen=seen, key=str(c.pk), opened=opened)
                finished.append(time.time())
                return outcome

            started = time.time()
            sends = [asyncio.create_task(one(c)) for c in conversations]
            return started, list(await asyncio.gather(*sends))

    bystander.start()
    try:
        time.sleep(2.0)  # the bystander's idle baseline
        sent_at, outcomes = asyncio.run(run())
        time.sleep(1.0)
    finally:
        stop_file.touch()
        bystander.join(timeout=70)
        stop(proc)
    samples = [json.loads(line) for line in out_file.read_text().splitlines()]
    stored_users = Message.objects.filter(conversation__in=conversations, role="user").count()
    complete = Message.objects.filter(conversation__in=conversations, role="assistant", status="complete").count()
    survived = sum(1 for o in outcomes if o == "done")
    # Phases by wall clock: idle before the sends; the burst while the sends are accepted (until
    # every stream has shown its first delta); the steady state while all of them stream.
    all_open = max(opened.values()) if len(opened) == streams else max(finished)
    first_done = min(finished)
    steady_end = first_done if first_done > all_open else all_open
    note = (f"bystander idle {_latency(samples, 0, sent_at)}; while {streams} sends are accepted "
            f"({all_open - sent_at:.1f} s) {_latency(samples, sent_at, all_open)}; while all {streams} stream "
            f"({steady_end - all_open:.1f} s) {_latency(samples, all_open, steady_end)}; "
            f"replies stored complete {complete}/{streams}")
    failures = [o for o in outcomes if o != "done"] + [s[2] for s in samples if s[2]]
    user.delete()
    other.delete()
    return Row("slow streams", streams, min(survived, complete), streams - stored_users, len(failures), note,
               failures[:5])


def web_sigkill(env: dict[str, str], tmp: Path, fake_url: str, *, killed: int) -> Row:
    import httpx

    from chatapp.chat.models import Conversation, Message
    from chatapp.chat.reply_stream import reply_orphans_finish

    user, token, config = seed_user(username=f"faults-kill-{secrets.token_hex(3)}", base_url=fake_url,
                                    model="slow-250")
    conversations = [Conversation.objects.create(owner=user, llm_config=config) for _ in range(killed)]
    headers = {"Authorization": f"Token {token}"}
    seen: dict[str, str] = {}
    proc, url = start_uvicorn(env, tmp)

    async def run() -> None:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
            sends = [asyncio.create_task(stream_one(client, path=f"/api/conversations/{c.pk}/messages/",
                                                    text="tell me a long story", seen=seen, key=str(c.pk)))
                     for c in conversations]
            await asyncio.sleep(4.0)  # past the first checkpoint (every 3 s)
            os.kill(proc.pid, signal.SIGKILL)
            await asyncio.gather(*sends)

    try:
        asyncio.run(run())
    finally:
        proc.wait(timeout=10)
    time.sleep(float(env["STREAM_ORPHAN_SECONDS"]) + 1)
    finished = reply_orphans_finish()
    lost, chars_lost, survived, errors = 0, 0, 0, []
    proc, url = start_uvicorn(env, tmp)
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
            for c in conversations:
                reply = Message.objects.filter(conversation=c, role="assistant").order_by("id").first()
                saw = seen.get(str(c.pk), "")
                if reply is None or reply.status == "streaming" or (saw and not reply.content):
                    lost += 1
                    continue
                chars_lost += max(0, len(saw) - len(reply.content))
                question = Message.objects.get(conversation=c, role="user")
                with client.stream("POST", f"/api/messages/{question.pk}/retry/") as response:
                    body = response.read().decode()
                if response.status_code == 200 and "event: done" in body:
                    survived += 1
                else:
                    errors.append(f"retry: HTTP {response.status_code}")
    finally:
        stop(proc)
    user.delete()
    note = f"{finished} finished by the sweep; chars lost {chars_lost} of {sum(len(v) for v in seen.values())} seen"
    return Row("web SIGKILL mid-stream", killed, survived, lost, len(errors), note, errors[:5])


def _summary_users(fake_url: str, n: int, *, model: str) -> tuple[list, list[str]]:
    """n users, each with one 40-message conversation and an API token."""
    from web_ttfb import seed_conversation

    conversations, tokens = [], []
    for _ in range(n):
        user, token, config = seed_user(username=f"faults-sum-{secrets.token_hex(3)}", base_url=fake_url,
                                        model=model)
        conversations.append(seed_conversation(owner=user, config=config, messages=40))
        tokens.append(token)
    return conversations, tokens


def worker_kills(fake_url: str, worker: CeleryWorker, *, jobs: int, kills: int) -> Row:
    from chatapp.chat.models import Message, SummaryJob
    from chatapp.chat.summary_services import summary_job_request

    conversations, _ = _summary_users(fake_url, jobs, model="slow-1500")
    worker.start()
    requested = [summary_job_request(conversation=c, trigger="manual") for c in conversations]
    ids = [j.pk for j in requested]

    def finished() -> bool:
        return not SummaryJob.objects.filter(pk__in=ids).exclude(status__in=["done", "failed", "cancelled"]).exists()

    done_kills = 0
    while done_kills < kills and not finished():
        # kill while a job is inside its (1.5 s) model call
        if not wait_until(lambda: SummaryJob.objects.filter(pk__in=ids, status="running").exists(), 15):
            break
        time.sleep(0.5)
        worker.kill9()
        done_kills += 1
        worker.start()
    wait_until(finished, 180)
    worker.kill9()
    states = dict(SummaryJob.objects.filter(pk__in=ids).values_list("pk", "status"))
    summaries = {c.pk: Message.objects.filter(conversation=c, kind="summary").count() for c in conversations}
    survived = sum(1 for c, j in zip(conversations, ids, strict=True) if states[j] == "done" and summaries[c.pk] == 1)
    duplicates = sum(1 for n in summaries.values() if n > 1)
    gave_up = sum(1 for j in ids if states[j] == "failed")
    # lost: a job that never ended, or ended done without its summary; a job killed more times than
    # its attempt limit ends "failed", said so in the chat (nothing stored is lost): reported apart
    lost = sum(1 for c, j in zip(conversations, ids, strict=True)
               if states[j] not in ("done", "failed") or (states[j] == "done" and summaries[c.pk] == 0))
    for c in conversations:
        c.owner.delete()
    return Row("worker kills mid-summary", jobs, survived, lost, duplicates,
               f"{done_kills} SIGKILLs of the worker inside a model call; {gave_up} jobs gave up after "
               "their attempt limit (shown failed)")


def redis_down(url_env: dict[str, str], tmp: Path, fake_url: str, redis_server: PrivateRedis,
               worker: CeleryWorker, *, seconds: int) -> Row:
    import httpx

    from chatapp.chat.models import Message, SummaryJob

    conversations, tokens = _summary_users(fake_url, 5, model="fake-echo")
    proc, url = start_uvicorn(url_env, tmp)
    errors: list[str] = []
    answered, job_ids = 0, []
    try:
        redis_server.stop()
        started = time.monotonic()
        for c, token in zip(conversations, tokens, strict=True):
            with httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}, timeout=60) as client:
                with client.stream("POST", f"/api/conversations/{c.pk}/messages/",
                                   json={"content": "still there while the queue is down?"}) as response:
                    body = response.read().decode()
                if response.status_code == 200 and "event: done" in body:
                    answered += 1
                else:
                    errors.append(f"send: HTTP {response.status_code}")
                compact = client.post(f"/api/conversations/{c.pk}/compact/", json={})
                if compact.status_code >= 400:
                    errors.append(f"compact: HTTP {compact.status_code}")
                else:
                    job_ids.append(compact.json()["id"])
        time.sleep(max(0.0, seconds - (time.monotonic() - started)))
        redis_server.start()
        worker.start()
        wait_until(lambda: SummaryJob.objects.filter(pk__in=job_ids, status="done").count() == len(job_ids), 120)
    finally:
        stop(proc)
        worker.kill9()
    done = SummaryJob.objects.filter(pk__in=job_ids, status="done").count()
    stored = Message.objects.filter(conversation__in=conversations, role="user",
                                    content="still there while the queue is down?").count()
    lost = (len(conversations) - stored) + (len(job_ids) - done)
    for c in conversations:
        c.owner.delete()
    return Row(f"Redis down {seconds} s", 2 * len(conversations), answered + done, lost, len(errors),
               f"{answered} messages answered while it was down; {done}/{len(job_ids)} summaries done after",
               errors[:5])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--chunk-ms", type=int, default=400, help="model delay between streamed chunks")
    parser.add_argument("--killed", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--redis-down", type=int, default=30, help="seconds")
    parser.add_argument("--only", help="comma-separated scenarios: streams,sigkill,worker,redis (default: all)")
    parser.add_argument("--json", type=Path, help="also write the rows as a JSON list")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.support.fake_openai import FakeOpenAI

    with tempfile.TemporaryDirectory(prefix="faults-") as tmpdir, FakeOpenAI() as fake:
        tmp = Path(tmpdir)
        redis_server = PrivateRedis(tmp)
        redis_server.start()
        env = bench_environment(tmp)
        env.update({
            "STREAM_ORPHAN_SECONDS": "5",
            # the web side and the worker share a private Redis, which the last scenario stops
            "REDIS_URL": redis_server.url,
            # a killed worker's message comes back within seconds; the sweep runs every 2 s
            "CELERY_VISIBILITY_TIMEOUT": "5", "CELERY_UNACKED_RESTORE_INTERVAL": "1",
            "CELERY_UNACKED_RESTORE_THROTTLE": "1", "SUMMARY_JOB_LEASE_SECONDS": "6",
            "SUMMARY_SWEEP_INTERVAL_SECONDS": "2", "CELERY_BROKER_CONNECT_TIMEOUT": "1",
            "SUMMARY_RETRY_BACKOFF_MS": "200", "SUMMARY_RETRY_BACKOFF_MAX_MS": "1000",
        })
        django_setup(env)
        db = "PostgreSQL" if os.environ.get("DATABASE_URL") else "SQLite (temp dir)"
        worker = CeleryWorker(env, tmp)
        try:
            scenarios = {
                "streams": lambda: slow_streams(env, tmp, fake.base_url, streams=args.streams,
                                                chunk_ms=args.chunk_ms),
                "sigkill": lambda: web_sigkill(env, tmp, fake.base_url, killed=args.killed),
                "worker": lambda: worker_kills(fake.base_url, worker, jobs=args.jobs, kills=args.kills),
                "redis": lambda: redis_down(env, tmp, fake.base_url, redis_server, worker,
                                            seconds=args.redis_down),
            }
            chosen = args.only.split(",") if args.only else list(scenarios)
            rows = [scenarios[name]() for name in chosen]
        finally:
            worker.kill9()
            redis_server.stop()
    print(f"faults on one uvicorn process, {db}, pool {os.environ.get('DATABASE_POOL_SIZE', '10')}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'scenario':<24} {'tried':>6} {'survived':>9} {'lost':>5} {'errors':>7}  note")
    for r in rows:
        print(f"{r.scenario:<24} {r.tried:>6} {r.survived:>9} {r.lost:>5} {r.errors:>7}  {r.note}")
        for sample in r.samples:
            print(f"{'':<24} e.g. {sample}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    return 0 if all(r.lost == 0 and r.errors == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
