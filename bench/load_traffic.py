"""bench/load.py's traffic: the users' turns over SSE, the worker killed and restarted mid-run, and
the CPU accounting of the processes."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from load_seed import UserPlan, ask_text
from processes import CeleryWorker
from web_ttfb import (
    seed_user,
)

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
