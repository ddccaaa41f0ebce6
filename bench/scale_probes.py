"""bench/scale.py's measurements: the server's RSS, new-conversation sends against an empty
reference database, exports, the dashboard, the statements a send runs before its first byte (through
the ASGI application), and the timed turns."""

from __future__ import annotations

import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from processes import private_postgres
from web_ttfb import (
    PYTHON,
    ROOT,
    bench_environment,
    cpu_seconds,
    seed_user,
    sends_timed,
    timed_send,
)

# --- measurements ---------------------------------------------------------------------------------------

def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


class RssPeak:
    """Samples a process's RSS every 10 ms while in use; `.growth` is the peak over the start."""

    def __init__(self, pid: int) -> None:
        self.pid, self.start, self.peak = pid, rss_mib(pid), 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mib(self.pid))
            time.sleep(0.01)

    def __enter__(self) -> RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mib(self.pid))

    @property
    def growth(self) -> float:
        return self.peak - self.start


def new_conversation_ttfbs(client: Any, requests: int, *, warm_ups: int = 2) -> list[float]:
    samples = []
    for i in range(requests + warm_ups):
        response = client.post("/api/conversations/", json={"title": f"new {i}"})
        response.raise_for_status()
        ttfb, body = timed_send(client, response.json()["id"], f"first question {i} about the plan")
        if "event: done" not in body:
            raise RuntimeError(f"reply did not complete: {body[-300:]}")
        if i >= warm_ups:
            samples.append(ttfb)
    return samples


def new_conversation_ttfb_pairs(full: Any, empty: Any, requests: int) -> tuple[list[float], list[float]]:
    """First sends of new conversations on the full tables and on empty ones, alternated request by
    request (and which goes first, turn by turn), so both medians see the same machine: measured one
    after the other, minutes apart, this machine's drift alone moved the ratio between 0.7 and 1.3."""
    on_full: list[float] = []
    on_empty: list[float] = []
    for i in range(requests + 2):
        pair = [(full, on_full), (empty, on_empty)]
        for client, samples in pair if i % 2 == 0 else pair[::-1]:
            one = new_conversation_ttfbs(client, 1, warm_ups=0)
            if i >= 2:
                samples.extend(one)
    return on_full, on_empty


@contextmanager
def empty_reference(env: dict[str, str], tmp: Path, base_url: str) -> Iterator[tuple[dict[str, str], str]]:
    """A second, empty database of the same kind with the bench user seeded (a child process of its
    own: this one's Django is bound to the full database); yields its environment and the API token.
    PostgreSQL: a database beside the full one, dropped afterwards; SQLite: a file in its own folder."""
    tmp.mkdir(parents=True, exist_ok=True)
    ref_env = bench_environment(tmp)
    full_url = env.get("DATABASE_URL", "")
    with ExitStack() as stack:
        if full_url:
            server, full_name = full_url.rsplit("/", 1)
            ref_env["DATABASE_URL"] = stack.enter_context(private_postgres(f"{server}/postgres", f"{full_name}_empty"))
        else:
            ref_env.pop("DATABASE_URL", None)
        # the set-up is scale.py's --reference-child
        proc = subprocess.run([PYTHON, str(Path(__file__).with_name("scale.py")), "--reference-child", base_url],
                              env=ref_env, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=True)
        yield ref_env, proc.stdout.strip().splitlines()[-1]


def reference_child(base_url: str) -> int:
    """The empty database's set-up (run by empty_reference): migrate, seed the user, print its token."""
    import django

    from chatapp.instance import instance_prepare

    instance_prepare()
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    _, token, _ = seed_user(username=f"bench-scale-{secrets.token_hex(4)}", base_url=base_url, model="fake-echo")
    print(token, flush=True)
    return 0


def get_timed(client: Any, url: str) -> tuple[float, int]:
    started = time.perf_counter()
    response = client.get(url)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"GET {url}: HTTP {response.status_code}: {response.text[:300]}")
    return elapsed, len(response.content)


def export_first_byte(client: Any, url: str, pid: int) -> tuple[float, float, int] | None:
    """(ms to the first body byte, the server's RSS growth in MiB while streaming, bytes)."""
    with RssPeak(pid) as rss:
        started = time.perf_counter()
        with client.stream("GET", url) as response:
            if response.status_code == 404:  # no export API on this checkout
                return None
            if response.status_code != 200:
                raise RuntimeError(f"GET {url}: HTTP {response.status_code}")
            chunks = response.iter_raw()
            first = next(chunks)
            ttfb = (time.perf_counter() - started) * 1000
            size = len(first) + sum(len(c) for c in chunks)
    return ttfb, rss.growth, size


def dashboard_urls(conversation: Any) -> list[str]:
    from chatapp.chat.models import OptimizationRecord

    records = OptimizationRecord.objects.filter(conversation=conversation)
    count = records.count()
    latest = records.order_by("-id").values_list("id", flat=True).first()
    pk = conversation.pk
    return [
        f"/c/{pk}/dashboard/",
        f"/api/dashboard/conversations/{pk}/series/",
        f"/api/dashboard/conversations/{pk}/map/",
        f"/api/dashboard/conversations/{pk}/records/?limit=15&offset={max(0, count - 15)}",
        f"/api/dashboard/conversations/{pk}/records/{latest}/",
        f"/api/dashboard/conversations/{pk}/summaries/?limit=5",
    ]


def session_cookie(user: Any) -> dict[str, str]:
    """A logged-in session for the HTML pages, made the way django.contrib.auth.login stores one."""
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    store = SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.create()
    return {settings.SESSION_COOKIE_NAME: store.session_key}


class QueryCounter:
    """Counts every statement executed through Django's cursor wrapper, in any thread (the ASGI
    handler runs sync code in worker threads)."""

    def __init__(self) -> None:
        from django.db.backends import utils

        self.count = 0
        self.statements: list[tuple[str, Any]] = []
        self._utils = utils
        self._originals = (utils.CursorWrapper.execute, utils.CursorWrapper.executemany)

    def __enter__(self) -> QueryCounter:
        execute, executemany = self._originals
        counter = self

        def counted_execute(wrapper: Any, sql: str, params: Any = None, *args: Any, **kwargs: Any) -> Any:
            counter.count += 1
            counter.statements.append((sql, params))
            return execute(wrapper, sql, params, *args, **kwargs)

        def counted_executemany(wrapper: Any, sql: str, *args: Any, **kwargs: Any) -> Any:
            counter.count += 1
            counter.statements.append((sql, None))
            return executemany(wrapper, sql, *args, **kwargs)

        self._utils.CursorWrapper.execute = counted_execute
        self._utils.CursorWrapper.executemany = counted_executemany
        return self

    def __exit__(self, *exc: object) -> None:
        self._utils.CursorWrapper.execute, self._utils.CursorWrapper.executemany = self._originals


async def asgi_send(*, token: str, conversation_id: int, text: str, counter: QueryCounter) -> int:
    """One send through the ASGI application, read to its end; returns `counter.count` at its first
    body byte."""
    import asyncio

    from chatapp.asgi import application

    body = json.dumps({"content": text}).encode()
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": f"/api/conversations/{conversation_id}/messages/", "raw_path": b"", "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80),
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                    (b"authorization", f"Token {token}".encode()),
                    (b"content-length", str(len(body)).encode())],
    }
    done = asyncio.Event()
    sent = False
    at_first_byte: list[int] = []
    status: list[int] = []

    async def receive() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        if message["type"] == "http.response.body" and status[0] != 200:
            raise RuntimeError(f"send answered HTTP {status[0]}: {message.get('body', b'')[:300]!r}")
        if message["type"] == "http.response.body":
            if message.get("body") and not at_first_byte:
                at_first_byte.append(counter.count)
            if not message.get("more_body"):
                done.set()

    await application(scope, receive, send)
    return at_first_byte[0]


def queries_before_first_byte(*, token: str, conversation_id: int, text: str,
                              show: bool = False) -> tuple[int, list[str], int]:
    """Statements a send runs before the first byte of its body, through the ASGI application; those
    of the whole send that read more rows than a turn should (`wide_reads`); and how many the whole
    send ran (its reply stored and its record finished included)."""
    import asyncio

    with QueryCounter() as counter:
        count = asyncio.run(asgi_send(token=token, conversation_id=conversation_id, text=text, counter=counter))
    if show:
        for i, (sql, _) in enumerate(counter.statements[:count], start=1):
            print(f"  {i:2} {sql}", file=sys.stderr)
    return count, wide_reads(counter.statements), len(counter.statements)


def wide_reads(statements: list[tuple[str, Any]], *, min_rows: int = 10_000) -> list[str]:
    """The SELECTs of which one plan node reads more than `min_rows` rows, or that scan a table of more
    than `min_rows` rows sequentially (a one-row table is rightly read that way). PostgreSQL only:
    each SELECT is run again under EXPLAIN ANALYZE, and a node's rows are those it returned plus those
    its filter or recheck removed, over its loops. An index does not make a read narrow: a bitmap over
    a whole 100,000-message conversation, filtered down to its window's 40 messages, uses one."""
    import re

    from django.db import connection

    if connection.vendor != "postgresql":
        return []
    found = []
    with connection.cursor() as cursor:
        for sql, params in statements:
            if not sql.lstrip().lstrip("(").upper().startswith("SELECT"):
                continue
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
            raw = cursor.fetchone()[0]
            plan = json.loads(raw) if isinstance(raw, str) else raw
            nodes, wide = [plan[0]["Plan"]], []
            while nodes:
                node = nodes.pop()
                nodes += node.get("Plans", [])
                read = (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
                        + node.get("Rows Removed by Index Recheck", 0)) * max(node.get("Actual Loops", 1), 1)
                if node["Node Type"] == "Seq Scan":
                    cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [node["Relation Name"]])
                    rows = cursor.fetchone()
                    read = max(read, rows[0] if rows else 0)
                if read > min_rows:
                    wide.append(f"{node['Node Type']} {node.get('Relation Name', '')}: {read:,.0f} rows")
            if wide:
                flat = re.sub(r"\s+", " ", sql)[:200]
                found.append(f"{flat} -> {'; '.join(wide)}")
    return found


def turn_profiler(pid: int, vendor: str) -> subprocess.Popen | None:
    """With SCALE_PROFILE_DIR set: py-spy (pip install py-spy; not a requirement) sampling the server's
    threads that are on the CPU (every thread, not only the GIL's holder: SQL runs without the GIL) while
    the CPU-per-turn turns run, to <dir>/<vendor>-turns.txt (raw collapsed stacks). Sampling costs the
    server CPU: the run's cpu_ms_per_turn is then inflated."""
    folder = os.environ.get("SCALE_PROFILE_DIR")
    if not folder:
        return None
    out = Path(folder) / f"{vendor}-turns.txt"
    proc = subprocess.Popen(["py-spy", "record", "--nonblocking", "--rate", "1000", "--format", "raw",
                             "--pid", str(pid), "--output", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached before the first timed turn
    return proc


def recall_tokens_median(*, conversation_id: int, turns: int) -> float:
    """The median recall block (tokens) of the conversation's newest `turns` requests: a round's."""
    from chatapp.chat.models import OptimizationRecord

    newest = OptimizationRecord.objects.filter(conversation_id=conversation_id).order_by("-id")
    return statistics.median(newest.values_list("recall_tokens", flat=True)[:turns])


def timed_turns(client: Any, *, pid: int, conversation_id: int, words: list[str], requests: int,
                vendor: str, first: int = 0, profile: bool = True) -> tuple[float, list[float]]:
    """(the server's CPU ms per turn, each turn's time to first byte) over `requests` sends, the
    questions numbered from `first`; profiled (turn_profiler) when `profile`."""
    profiler = turn_profiler(pid, vendor) if profile else None
    cpu_before = cpu_seconds(pid)
    questions = (f"question {i}: {words[100 + i]} and {words[3000 + i]}?" for i in range(first, first + requests))
    samples = sends_timed(client, conversation_id, questions)
    cpu = (cpu_seconds(pid) - cpu_before) * 1000 / requests
    if profiler is not None:
        profiler.send_signal(signal.SIGINT)
        profiler.wait(timeout=60)
    return cpu, samples
