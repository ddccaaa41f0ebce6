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
import ast
import asyncio
import json
import os
import re
import secrets
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from processes import CeleryWorker, private_postgres, start_uvicorn, stop  # noqa: E402 - bench scripts are run by path
from web_ttfb import (  # noqa: E402
    _WORDS,
    PYTHON,
    ROOT,
    bench_environment,
    cpu_seconds,
    django_setup,
    percentile,
    seed_user,
)

WINDOW, MAX_OUTPUT = 4_000, 500  # budget 3,500: trigger 2,800 (fast 2,450)
TRIGGER = {"quality": 2_800, "balanced": 2_800, "fast": 2_450}
PREFERENCES = ("quality", "quality", "balanced", "fast")  # user i: PREFERENCES[i % 4]
ASK_WORDS = 30  # words per message sent: the fake model echoes them (reply ~44 chunks)
ACTIVE = ("pending", "awaiting", "queued", "running")


# --- the servers: a private PostgreSQL database and Redis database number ---------------------------------

def postgres_server(option: str | None) -> str:
    url = option or os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        url = "postgres://postgres@127.0.0.1:5432"
    parsed = urlparse(url)
    return f"{parsed.scheme}://{parsed.netloc}"


@contextmanager
def private_redis_db(server: str, wanted: int | None):
    """A Redis database number of this run's own (never 0): --redis-db, or the first empty one of 15..1,
    claimed with a marker key (SET NX) so two runs cannot take the same; flushed before and after."""
    import redis

    base = server.rstrip("/")
    if wanted == 0:
        raise SystemExit("--redis-db 0 is not allowed: the bench flushes its database")
    chosen = None
    for number in [wanted] if wanted is not None else range(15, 0, -1):
        client = redis.Redis.from_url(f"{base}/{number}")
        if wanted is not None:
            chosen = number
            break
        if client.dbsize() == 0 and client.set("bench-load:owner", os.getpid(), nx=True):
            if client.dbsize() == 1:
                chosen = number
                break
            client.delete("bench-load:owner")  # someone else began writing there meanwhile
        client.close()
    if chosen is None:
        raise SystemExit("no empty Redis database among 1..15: pass --redis-db N")
    client.flushdb()
    try:
        yield f"{base}/{chosen}", chosen
    finally:
        client.flushdb()
        client.close()


# --- processes ------------------------------------------------------------------------------------------

class FakeModel:
    """tests/support/fake_openai.py as a process of its own (its threads then take no CPU from the
    load generator's event loop)."""

    def __init__(self, tmp: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([PYTHON, str(ROOT / "tests" / "support" / "fake_openai.py")], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=(tmp / "fake-model.log").open("wb"), text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else ""
        match = re.search(r"(http://\S+/v1)", line)
        if match is None:
            self.stop()
            raise RuntimeError(f"fake model server did not start: {line!r}")
        self.base_url = match.group(1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


# --- seeding --------------------------------------------------------------------------------------------

@dataclass
class UserPlan:
    index: int
    token: str
    conversation_id: int
    preference: str
    trigger_turn: int  # the turn whose request should pass the trigger (planned; the run reports the actual)
    seed_last_id: int = 0


def ask_text(user: int, turn: int) -> str:
    words = " ".join(_WORDS[(user * 11 + turn * 5 + j * 3) % len(_WORDS)] for j in range(ASK_WORDS - 4))
    return f"u{user} turn {turn + 1} about {words}"


def _history(target_tokens: int, model: str) -> list[tuple[str, str, int]]:
    """(role, content, token count) rows, user first, ending with a reply, totalling ~target_tokens."""
    import optimizer

    def row(i: int, role: str, length: int) -> tuple[str, str, int]:
        content = f"#{i} " + " ".join(_WORDS[(i * 7 + j * 3) % len(_WORDS)] for j in range(max(1, length)))
        return role, content, optimizer.count_message({"role": role, "content": content}, model=model)

    rows: list[tuple[str, str, int]] = []
    total, i = 0, 0
    while True:  # whole rounds while a round of the largest size still fits, then one round sized to the rest
        question = row(i, "user", 15 + (i * 37) % 30)
        answer = row(i + 1, "assistant", 80 + (i * 53) % 90)
        if total + question[2] + answer[2] + 200 > target_tokens:
            break
        rows += [question, answer]
        total += question[2] + answer[2]
        i += 2
    question = row(i, "user", 15)
    rows.append(question)
    total += question[2]
    answer = row(i + 1, "assistant", target_tokens - total - 6)  # the words are one token each
    while total + answer[2] > target_tokens and len(answer[1].split()) > 2:
        answer = row(i + 1, "assistant", len(answer[1].split()) - 1 - (total + answer[2] - target_tokens))
    rows.append(answer)
    return rows


def seed(n: int, *, fake_url: str, chat_model: str, summary_model: str, turns: int) -> list[UserPlan]:
    """n users (token, settings, a chat and a summary config), one conversation each, histories by bulk insert."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from rest_framework.authtoken.models import Token

    import optimizer
    from chatapp.chat.models import Conversation, Message, UserSettings
    from chatapp.providers.crypto import secret_encrypt
    from chatapp.providers.models import LLMConfig
    from tests.support.fake_openai import echo_reply

    user_model = get_user_model()
    unusable = make_password(None)
    users = user_model.objects.bulk_create(
        [user_model(username=f"load-{i:04d}", password=unusable) for i in range(n)])
    tokens = Token.objects.bulk_create([Token(key=Token.generate_key(), user=u) for u in users])
    key = secret_encrypt("sk-bench-0000")

    def config(user, name: str, model: str, default: bool) -> LLMConfig:
        return LLMConfig(owner=user, name=name, base_url=fake_url, model=model, api_key_encrypted=key,
                         api_key_last4="0000", context_window=WINDOW, max_output_tokens=MAX_OUTPUT, temperature=0.0,
                         is_default=default)

    chats = LLMConfig.objects.bulk_create([config(u, "chat", chat_model, True) for u in users])
    summaries = LLMConfig.objects.bulk_create([config(u, "summaries", summary_model, False) for u in users])
    UserSettings.objects.bulk_create([
        UserSettings(user=u, preference=PREFERENCES[i % len(PREFERENCES)], summary_config=summaries[i])
        for i, u in enumerate(users)])
    conversations = Conversation.objects.bulk_create(
        [Conversation(owner=u, llm_config=chats[i], title=f"load {i}") for i, u in enumerate(users)])
    # Growth of one turn: the message sent and the fake model's echo of it.
    ask = optimizer.count_message({"role": "user", "content": ask_text(0, 0)}, model=chat_model)
    sample = [{"role": "user" if n % 2 == 0 else "assistant", "content": ask_text(0, 0)} for n in range(31)]
    growth = ask + optimizer.count_message({"role": "assistant", "content": echo_reply(sample)}, model=chat_model)
    plans, rows = [], []
    for i, conversation in enumerate(conversations):
        preference = PREFERENCES[i % len(PREFERENCES)]
        k = 1 + i % min(5, turns)
        # turn j's request holds history + ask + (j-1) * growth: past the trigger first at turn k
        history = _history(TRIGGER[preference] - ask - (k - 1) * growth + growth // 2, chat_model)
        rows.extend(Message(conversation=conversation, role=r, content=c, char_count=len(c), token_count=t)
                    for r, c, t in history)
        conversation.live_message_count = len(history)
        conversation.live_char_count = sum(len(c) for _, c, _ in history)
        conversation.live_token_count = sum(t for _, _, t in history)
        plans.append(UserPlan(i, tokens[i].key, conversation.pk, preference, k))
    created = Message.objects.bulk_create(rows, batch_size=5000)
    Conversation.objects.bulk_update(conversations, ["live_message_count", "live_char_count", "live_token_count"])
    last = {}
    for m in created:
        last[m.conversation_id] = max(last.get(m.conversation_id, 0), m.pk)
    for p in plans:
        p.seed_last_id = last[p.conversation_id]
    return plans


# --- the load -------------------------------------------------------------------------------------------

@dataclass
class Turn:
    user: int
    turn: int
    key: str
    text: str
    web: int
    sent_at: float = 0.0
    ttfb_ms: float | None = None
    outcome: str = ""  # done, error:<kind>, HTTP <status>, <exception name>
    user_message_id: int | None = None
    reply_id: int | None = None
    streamed: str = ""


def _sse_events(buffer: str) -> tuple[list[tuple[str, Any]], str]:
    events = []
    while "\n\n" in buffer:
        block, buffer = buffer.split("\n\n", 1)
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
        if "event" in lines:
            events.append((lines["event"], json.loads(lines.get("data", "null"))))
    return events, buffer


async def send_turn(client, plan: UserPlan, turn: Turn) -> None:
    import httpx

    headers = {"Authorization": f"Token {plan.token}"}
    body = {"content": turn.text, "client_key": turn.key}
    turn.sent_at = time.perf_counter()
    try:
        async with client.stream("POST", f"/api/conversations/{plan.conversation_id}/messages/", json=body,
                                 headers=headers) as response:
            if response.status_code != 200:
                await response.aread()
                turn.outcome = f"HTTP {response.status_code}"
                return
            buffer = ""
            async for chunk in response.aiter_text():
                if turn.ttfb_ms is None:
                    turn.ttfb_ms = (time.perf_counter() - turn.sent_at) * 1000
                events, buffer = _sse_events(buffer + chunk)
                for name, data in events:
                    _take_event(turn, name, data)
            turn.outcome = turn.outcome or "cut"
    except httpx.HTTPError as exc:
        turn.outcome = type(exc).__name__


def _take_event(turn: Turn, name: str, data: Any) -> None:
    if name == "start":
        turn.user_message_id = data["user_message"]["id"]
        turn.reply_id = data["assistant_message"]["id"]
    elif name == "delta":
        turn.streamed += data["text"]
    elif name == "done":
        turn.outcome = "done"
    elif name == "error":
        turn.outcome = f"error:{data.get('kind', '?')}"


@dataclass
class LoadRun:
    turns: list[Turn] = field(default_factory=list)
    wall_seconds: float = 0.0
    loop_lag_ms: list[float] = field(default_factory=list)
    bench_cpu_seconds: float = 0.0
    finished: int = 0  # turns ended so far


def warm_up(urls: list[str], fake_url: str) -> None:
    """A few sends to each web process from a user of its own (not counted): the first turn of a process
    loads the tokenizer, the model registry and the SDK, which is start-up, not load."""
    import httpx

    from chatapp.chat.models import Conversation, UserSettings

    user, token, config = seed_user(username="load-warm-up", base_url=fake_url, model="fake-echo")
    UserSettings.objects.create(user=user, preference="fast")
    for url in urls:
        conversation = Conversation.objects.create(owner=user, llm_config=config)
        with httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}, timeout=60) as client:
            for n in range(3):
                response = client.post(f"/api/conversations/{conversation.pk}/messages/",
                                       json={"content": f"warm-up {n}"})
                if response.status_code != 200 or "event: done" not in response.text:
                    raise RuntimeError(f"warm-up send failed: HTTP {response.status_code} {response.text[-300:]}")


async def run_load(plans: list[UserPlan], urls: list[str], *, turns: int, kill_at: int, ramp: float,
                   on_kill) -> LoadRun:
    import httpx

    run = LoadRun()
    kill_started = asyncio.Event()
    limits = httpx.Limits(max_connections=len(plans) + 10, max_keepalive_connections=len(plans) + 10)
    clients = [httpx.AsyncClient(base_url=u, timeout=httpx.Timeout(120, connect=30), limits=limits) for u in urls]

    async def user(plan: UserPlan) -> None:
        web = plan.index % len(urls)
        await asyncio.sleep(ramp * plan.index / len(plans))  # users arrive over the ramp, then stay
        for t in range(turns):
            turn = Turn(plan.index, t, f"load-{plan.index}-{t}-{secrets.token_hex(3)}", ask_text(plan.index, t), web)
            run.turns.append(turn)
            await send_turn(clients[web], plan, turn)
            run.finished += 1
            if run.finished >= kill_at:
                kill_started.set()

    async def lag_monitor() -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.05)
            run.loop_lag_ms.append((time.perf_counter() - before - 0.05) * 1000)

    async def killer() -> None:
        await kill_started.wait()
        await asyncio.get_running_loop().run_in_executor(None, on_kill, lambda: run.finished)

    monitor = asyncio.create_task(lag_monitor())
    kill_task = asyncio.create_task(killer())
    cpu_before, started = time.process_time(), time.perf_counter()
    try:
        await asyncio.gather(*(user(p) for p in plans))
        run.wall_seconds = time.perf_counter() - started
        run.bench_cpu_seconds = time.process_time() - cpu_before
        if kill_started.is_set():  # the restarted worker must be up before the drain
            await asyncio.wait_for(kill_task, timeout=300)
    finally:
        monitor.cancel()
        if not kill_task.done():
            kill_task.cancel()
        for c in clients:
            await c.aclose()
    return run


# --- the kill -------------------------------------------------------------------------------------------

@dataclass
class Kill:
    happened: bool = False
    at_turns: int = 0
    in_flight: list[int] = field(default_factory=list)  # job ids active or reserved on the killed worker
    running_at_kill: list[int] = field(default_factory=list)  # of those, claimed (running) in the database
    waited_for_jobs_s: float = 0.0
    restart_ready_s: float = 0.0
    error: str = ""


def _job_ids(inspect_reply: dict | None, hostname: str) -> list[int]:
    ids = []
    for task in (inspect_reply or {}).get(hostname) or []:
        args = task.get("args")
        if isinstance(args, str):
            args = ast.literal_eval(args)
        if task.get("name") == "optimizer.tasks.summarize_conversation" and args:
            ids.append(int(args[0]))
    return ids


def kill_and_restart(worker: CeleryWorker, kill: Kill, *, restart_after: float, progress) -> None:
    """Runs on a thread of the load's event loop: waits (<= 30 s) until the worker holds summary jobs,
    reads which, kills it with SIGKILL, starts it again after restart_after seconds."""
    from django.db import connection

    from chatapp.celery import app
    from chatapp.chat.models import SummaryJob

    try:
        started = time.monotonic()
        inspect = app.control.inspect(destination=[worker.hostname], timeout=2.0)
        while True:
            held = _job_ids(inspect.active(), worker.hostname)
            if held or time.monotonic() - started > 30:
                break
            time.sleep(0.5)
        held += _job_ids(inspect.reserved(), worker.hostname)
        kill.waited_for_jobs_s = time.monotonic() - started
        kill.in_flight = sorted(set(held))
        kill.at_turns = progress()
        worker.kill9()
        kill.happened = True
        kill.running_at_kill = list(SummaryJob.objects.filter(pk__in=kill.in_flight, status="running")
                                    .values_list("pk", flat=True))
        time.sleep(restart_after)
        worker.start()
        kill.restart_ready_s = worker.wait_ready()
    except Exception as exc:  # reported, and the run goes on: the checks say what it cost
        kill.error = f"{type(exc).__name__}: {exc}"
    finally:
        connection.close()


# --- CPU accounting -------------------------------------------------------------------------------------

def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (all CPUs, every process: /proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU of the live processes of a process group (a worker and its pool children)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        if int(fields[2]) == pgid:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


# --- the checks -----------------------------------------------------------------------------------------

def check_messages(plans: list[UserPlan], turns: list[Turn]) -> dict[str, Any]:
    from chatapp.chat.models import Message

    conversation_ids = [p.conversation_id for p in plans]
    by_key: dict[str, list[dict]] = defaultdict(list)
    for m in Message.objects.filter(conversation_id__in=conversation_ids, role="user").exclude(client_key="") \
            .values("id", "client_key", "content"):
        by_key[m["client_key"]].append(m)
    replies = {m["id"]: m for m in Message.objects.filter(conversation_id__in=conversation_ids, role="assistant")
               .values("id", "status", "content", "reply_to_id")}
    lost, incomplete, duplicated = 0, 0, 0
    for t in turns:
        stored = by_key.get(t.key, [])
        duplicated += max(0, len(stored) - 1)
        if t.user_message_id is not None and (len(stored) != 1 or stored[0]["content"] != t.text):
            lost += 1
        if t.outcome == "done":
            reply = replies.get(t.reply_id or -1)
            if reply is None or reply["status"] != "complete" or reply["content"] != t.streamed:
                incomplete += 1
    left_streaming = sum(1 for r in replies.values() if r["status"] == "streaming")
    error_replies = sum(1 for r in replies.values() if r["status"] in ("error", "stopped"))
    return {"lost_user_messages": lost, "incomplete_replies": incomplete, "replies_left_streaming": left_streaming,
            "duplicate_messages": duplicated, "error_replies_stored": error_replies,
            "lost_messages": lost + incomplete + left_streaming}


def check_order(plans: list[UserPlan], turns: list[Turn]) -> int:
    """Users whose new chat messages are not u1, r1, u2, r2, ... in send order (each reply answering the
    message before it)."""
    from chatapp.chat.models import Message

    sent: dict[int, list[Turn]] = defaultdict(list)
    for t in sorted(turns, key=lambda t: (t.user, t.turn)):
        if t.user_message_id is not None:
            sent[t.user].append(t)
    rows: dict[int, list[dict]] = defaultdict(list)
    plan_of = {p.conversation_id: p for p in plans}
    for m in (Message.objects.filter(conversation_id__in=list(plan_of), kind="chat")
              .order_by("conversation_id", "id").values("id", "conversation_id", "role", "client_key", "reply_to_id")):
        if m["id"] > plan_of[m["conversation_id"]].seed_last_id:
            rows[plan_of[m["conversation_id"]].index].append(m)
    bad = 0
    for plan in plans:
        got, expected = rows.get(plan.index, []), sent.get(plan.index, [])
        users = [m for m in got if m["role"] == "user"]
        ok = [m["client_key"] for m in users] == [t.key for t in expected] and len(got) == 2 * len(users)
        ok = ok and all(got[2 * n]["role"] == "user" and got[2 * n + 1]["role"] == "assistant"
                        and got[2 * n + 1]["reply_to_id"] == got[2 * n]["id"] for n in range(len(users)))
        bad += 0 if ok else 1
    return bad


def check_summaries(plans: list[UserPlan], kill: Kill) -> dict[str, Any]:
    from chatapp.chat.models import Message, OptimizationRecord, SummaryJob

    conversation_ids = [p.conversation_id for p in plans]
    jobs = list(SummaryJob.objects.filter(conversation_id__in=conversation_ids)
                .values("id", "conversation_id", "status", "trigger", "attempts", "summary_id", "created_at"))
    summaries = list(Message.objects.filter(conversation_id__in=conversation_ids, kind="summary").order_by("id")
                     .values("id", "conversation_id", "covers_from_id", "covers_through_id"))
    records = list(OptimizationRecord.objects.filter(conversation_id__in=conversation_ids)
                   .order_by("conversation_id", "id").values_list("conversation_id", "strategy", "created_at"))
    decided_turns: dict[int, list[int]] = defaultdict(list)
    decided_at: dict[int, list] = defaultdict(list)
    seen: Counter = Counter()
    for conversation_id, strategy, created_at in records:
        seen[conversation_id] += 1
        if strategy == "summarize":
            decided_turns[conversation_id].append(seen[conversation_id])
            decided_at[conversation_id].append(created_at)
    # An automatic job is created by the web process's summary-request thread after the turn's commit:
    # its delay after the latest summarize decision before it shows that thread's backlog.
    request_lag = [(j["created_at"] - max(t for t in decided_at[j["conversation_id"]] if t <= j["created_at"]))
                   .total_seconds() * 1000 for j in jobs if j["trigger"] == "auto"
                   and any(t <= j["created_at"] for t in decided_at[j["conversation_id"]])]
    decided = set(decided_turns)
    with_job = {j["conversation_id"] for j in jobs}
    still_active = sum(1 for j in jobs if j["status"] in ACTIVE)
    done_without = sum(1 for j in jobs if j["status"] == "done" and j["summary_id"] is None)
    never_created = len(decided - with_job)
    state = {j["id"]: j for j in jobs}
    killed_unfinished = sum(1 for j in kill.in_flight if state.get(j, {}).get("status") in ACTIVE)
    claimed = Counter(j["summary_id"] for j in jobs if j["summary_id"] is not None)
    orphans = sum(1 for s in summaries if s["id"] not in claimed)
    shared = sum(n - 1 for n in claimed.values() if n > 1)
    ranges = Counter((s["conversation_id"], s["covers_from_id"], s["covers_through_id"]) for s in summaries)
    same_range = sum(n - 1 for n in ranges.values() if n > 1)
    regressed, reach = 0, {}
    for s in summaries:
        if s["covers_through_id"] <= reach.get(s["conversation_id"], 0):
            regressed += 1
        reach[s["conversation_id"]] = max(reach.get(s["conversation_id"], 0), s["covers_through_id"])
    return {
        "summary_jobs": len(jobs),
        "jobs_by_status": dict(Counter(j["status"] for j in jobs)),
        "jobs_by_trigger": dict(Counter(j["trigger"] for j in jobs)),
        "jobs_reclaimed": sum(1 for j in jobs if j["attempts"] >= 2),
        "auto_job_request_lag_ms": {"p50": round(statistics.median(request_lag)), "max": round(max(request_lag))}
        if request_lag else None,
        "summaries_written": len(summaries),
        "conversations_with_summary": len({s["conversation_id"] for s in summaries}),
        "conversations_deciding_summarize": len(decided),
        "lost_summaries": still_active + done_without + never_created + killed_unfinished,
        "lost_detail": {"still_active": still_active, "done_without_summary": done_without,
                        "decided_without_job": never_created, "killed_unfinished": killed_unfinished},
        # the turns (1 = the first of the run) that chose summarize in conversations that got no job
        "decided_without_job_turns": [decided_turns[c] for c in sorted(decided - with_job)],
        "duplicate_summaries": orphans + shared + same_range + regressed,
        "duplicate_detail": {"unclaimed_summaries": orphans, "summary_of_two_jobs": shared,
                             "same_range_twice": same_range, "regressed_coverage": regressed},
        "killed_jobs_reclaimed": sum(1 for j in kill.running_at_kill if state.get(j, {}).get("attempts", 0) >= 2),
        "killed_jobs_done": sum(1 for j in kill.in_flight if state.get(j, {}).get("status") == "done"),
    }


def trigger_turns(plans: list[UserPlan]) -> dict[str, Any]:
    """Per user, the first turn whose record says the trigger fired (and with which strategy)."""
    from chatapp.chat.models import OptimizationRecord

    plan_of = {p.conversation_id: p for p in plans}
    first: dict[int, tuple[int, str]] = {}
    records = (OptimizationRecord.objects.filter(conversation_id__in=list(plan_of)).order_by("conversation_id", "id")
               .values("conversation_id", "triggered", "strategy", "summary_id"))
    seen: Counter = Counter()
    summary_sent = 0
    for r in records:
        seen[r["conversation_id"]] += 1
        summary_sent += r["summary_id"] is not None
        if r["triggered"] and r["conversation_id"] not in first:
            first[r["conversation_id"]] = (seen[r["conversation_id"]], r["strategy"])
    on_plan = sum(1 for c, (turn, _) in first.items() if turn == plan_of[c].trigger_turn)
    return {"first_trigger_turn": dict(sorted(Counter(t for t, _ in first.values()).items())),
            "first_trigger_strategy": dict(Counter(s for _, s in first.values())),
            "users_triggered": len(first), "triggered_on_planned_turn": on_plan,
            "turns_sending_a_summary": summary_sent}


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


def summarize(args, plans, run: LoadRun, kill: Kill, checks: dict[str, Any], extra: dict[str, Any]) -> dict:
    ttfb = [t.ttfb_ms for t in run.turns if t.ttfb_ms is not None]
    errors = [t for t in run.turns if t.outcome != "done"]
    by_turn = defaultdict(list)
    for t in run.turns:
        if t.ttfb_ms is not None:
            by_turn[t.turn + 1].append(t.ttfb_ms)
    return {
        "users": len(plans), "turns": len(run.turns), "turns_per_user": args.turns, "web_processes": args.web,
        "workers": args.workers, "worker_concurrency": args.concurrency,
        "ttfb_p50_ms": round(statistics.median(ttfb), 1) if ttfb else None,
        "ttfb_p95_ms": round(percentile(ttfb, 0.95), 1) if ttfb else None,
        "ttfb_max_ms": round(max(ttfb), 1) if ttfb else None,
        "ttfb_p50_by_turn_ms": {k: round(statistics.median(v), 1) for k, v in sorted(by_turn.items())},
        "errors": len(errors), "error_kinds": dict(Counter(t.outcome for t in errors)),
        "turns_done": sum(1 for t in run.turns if t.outcome == "done"),
        "lost_messages": checks["lost_messages"], "duplicate_summaries": checks["duplicate_summaries"],
        "lost_summaries": checks["lost_summaries"], "out_of_order_users": checks["out_of_order_users"],
        "worker_killed": kill.happened, "summaries_written": checks["summaries_written"],
        "wall_seconds": round(run.wall_seconds, 1), "ramp_s": args.ramp,
        "kill": {"at_turns": kill.at_turns, "jobs_held_by_killed_worker": kill.in_flight,
                 "running_in_db_at_kill": kill.running_at_kill, "waited_for_jobs_s": round(kill.waited_for_jobs_s, 1),
                 "restart_after_s": args.restart_after, "restart_ready_s": round(kill.restart_ready_s, 1),
                 "error": kill.error},
        "checks": checks,
        "loop_lag_ms": {"p50": round(statistics.median(run.loop_lag_ms), 1),
                        "p99": round(percentile(run.loop_lag_ms, 0.99), 1),
                        "max": round(max(run.loop_lag_ms), 1)} if run.loop_lag_ms else None,
        "bench_cpu_share": round(run.bench_cpu_seconds / run.wall_seconds, 2) if run.wall_seconds else None,
        **extra,
    }


def print_table(r: dict) -> None:
    c = r["checks"]
    print(f"\nload: {r['users']} users x {r['turns_per_user']} turns on {r['web_processes']} uvicorn processes, "
          f"{r['workers']} Celery workers (concurrency {r['worker_concurrency']}), one PostgreSQL "
          f"({r['database']}), one Redis (db {r['redis_db']}: broker + cache); chat model {r['chat_model']}, "
          f"summaries {r['summary_model']}; load average {r['load_average']} on {os.cpu_count()} CPUs")
    rows = [
        ("wall time of the load", f"{r['wall_seconds']} s ({r['turns_done']}/{r['turns']} turns done, "
                                  f"{r['turns'] / r['wall_seconds']:.1f} turns/s; users arrive over {r['ramp_s']} s)"),
        ("TTFB p50 / p95 / max", f"{r['ttfb_p50_ms']} / {r['ttfb_p95_ms']} / {r['ttfb_max_ms']} ms"),
        ("TTFB p50 by turn", ", ".join(f"{k}: {v}" for k, v in r["ttfb_p50_by_turn_ms"].items()) + " ms"),
        ("errors", f"{r['errors']} {r['error_kinds'] or ''}"),
        ("lost messages", f"{r['lost_messages']} (user messages {c['lost_user_messages']}, replies incomplete "
                          f"{c['incomplete_replies']}, left streaming {c['replies_left_streaming']}; duplicated "
                          f"{c['duplicate_messages']})"),
        ("out-of-order users", r["out_of_order_users"]),
        ("worker killed", f"{r['worker_killed']} after {r['kill']['at_turns']} turns, holding jobs "
                          f"{r['kill']['jobs_held_by_killed_worker']} ({len(r['kill']['running_in_db_at_kill'])} "
                          f"running); restarted {r['kill']['restart_after_s']} s later, ready in "
                          f"{r['kill']['restart_ready_s']} s {r['kill']['error']}"),
        ("killed jobs", f"{c['killed_jobs_done']} done, {c['killed_jobs_reclaimed']} of the running ones "
                        "claimed again (attempts >= 2)"),
        ("summary jobs", f"{c['summary_jobs']} {c['jobs_by_status']} by trigger {c['jobs_by_trigger']}; "
                         f"drained {r['drain_seconds']} s after the load; {r['sweep_republished']} published "
                         f"again by the sweep; an automatic job created {c['auto_job_request_lag_ms']} ms after "
                         "the turn that chose summarize"),
        ("web processes stopped", ", ".join(f"{w['seconds']} s" + (" (KILLED)" if w["killed"] else "")
                                            for w in r["web_stops"]) + " after SIGTERM"),
        ("summaries written", f"{r['summaries_written']} in {c['conversations_with_summary']} conversations "
                              f"({c['conversations_deciding_summarize']} chose summarize); turns sending one "
                              f"{r['triggers']['turns_sending_a_summary']}"),
        ("lost summaries", f"{r['lost_summaries']} {c['lost_detail']}"
                           + (f" turns choosing summarize there: {c['decided_without_job_turns']}"
                              if c["decided_without_job_turns"] else "")),
        ("duplicate summaries", f"{r['duplicate_summaries']} {c['duplicate_detail']}"),
        ("first trigger turn", f"{r['triggers']['first_trigger_turn']} {r['triggers']['first_trigger_strategy']} "
                               f"({r['triggers']['triggered_on_planned_turn']}/{r['triggers']['users_triggered']} on "
                               "the planned turn)"),
        ("load generator", f"event loop lag {r['loop_lag_ms']} ms, CPU {r['bench_cpu_share']} of a core"),
        ("CPU seconds", ", ".join(f"{k} {v}" for k, v in r["cpu_seconds"].items())),
    ]
    for name, value in rows:
        print(f"  {name:<22} {value}")
    if r.get("stuck"):
        print(f"  stuck jobs: {json.dumps(r['stuck'], indent=1)}")
    if r.get("logs"):
        print(f"  logs kept in {r['logs']}")
    print(f"\n{'PASS' if r['passed'] else 'FAIL'}: " + "; ".join(r["failures"] or ["every check is 0"]))


def failures_of(r: dict) -> list[str]:
    failed = [f"{k} = {r[k]}" for k in ("errors", "lost_messages", "duplicate_summaries", "lost_summaries",
                                        "out_of_order_users") if r[k]]
    if not r["worker_killed"]:
        failed.append("no worker was killed")
    elif not r["kill"]["jobs_held_by_killed_worker"]:
        failed.append("the killed worker held no summary job")
    if r["checks"]["duplicate_messages"]:
        failed.append(f"duplicate messages = {r['checks']['duplicate_messages']}")
    return failed


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
    kept = BENCH / "out" / f"load-{os.getpid()}"
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
