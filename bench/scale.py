"""Scale: the turn, search, exports and dashboard with a million messages in the tables.

For each database (SQLite, PostgreSQL) in a process of its own, on a fresh database:

1. fill: one conversation of 100,000 messages with one optimization record per turn (50,000; the
   dashboard's seed) and 999 conversations of mixed sizes (a long tail: most are short, a few are
   tens of thousands) for 1,000,000 messages in all, every message indexed for search and recall,
   all owned by the bench user (owner-scoped search then has the whole million to look through);
   `ANALYZE` (PostgreSQL: `VACUUM ANALYZE`, as autovacuum would leave the tables);
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
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from web_ttfb import (
    PYTHON,
    ROOT,
    bench_environment,
    cpu_seconds,
    seed_user,
    sends_timed,
    timed_send,
    uvicorn_process,
)

KEYS = (
    "ttfb_new_conversation_empty_table", "ttfb_new_conversation_1m_table", "ttfb_100k_conversation",
    "queries_before_first_byte", "queries_before_first_byte_new_conversation", "sequential_scans_on_turn_path",
    "cpu_ms_per_turn", "search_1m",
    "export_first_byte_100k", "export_rss_growth_mib", "dashboard_page_and_api_100k",
    "dashboard_rss_growth_mib_100_loads",
)
TARGETS = {
    "ttfb_new_conversation_1m_table": "<= 1.2 x empty",
    "queries_before_first_byte": "<= 5", "sequential_scans_on_turn_path": "0 (PostgreSQL EXPLAIN, tables > 10k rows)",
    "cpu_ms_per_turn": "<= 15", "search_1m": "<= 50",
    "export_first_byte_100k": "<= 300", "export_rss_growth_mib": "<= 30",
    "dashboard_page_and_api_100k": "<= 300", "dashboard_rss_growth_mib_100_loads": "<= 50",
}


# --- the fill ------------------------------------------------------------------------------------------

def _vocabulary(rng: random.Random, size: int) -> list[str]:
    """Made-up words (so no term is a stop word), drawn Zipf-like: a few common, a long rare tail."""
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    words: set[str] = set()
    while len(words) < size:
        n = rng.randint(2, 4)
        words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(n)))
    return sorted(words)


def conversation_sizes(*, total: int, count: int, rng: random.Random) -> list[int]:
    """`count` sizes summing to `total`, heavy-tailed (Pareto): most chats are short, a few are long."""
    raw = [rng.paretovariate(1.1) for _ in range(count)]
    scale = total / sum(raw)
    sizes = [max(2, int(r * scale)) for r in raw]
    sizes[0] += total - sum(sizes)
    return sizes


def insert_rows(*, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
    """Rows straight into a table: COPY on PostgreSQL, executemany on SQLite (the ORM's bulk_create
    spends more time building SQL than the database spends storing a million rows)."""
    from django.db import connection

    if not rows:
        return
    names = ", ".join(columns)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            marks = ", ".join("%s" for _ in columns)
            cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)  # noqa: S608


_MESSAGE_COLUMNS = ("id", "conversation_id", "role", "kind", "content", "token_count", "char_count", "pinned",
                    "status", "superseded", "model", "error", "extractive", "discarded", "edited", "client_key",
                    "created_at", "updated_at")


class Filler:
    """Conversations of made-up text, inserted with the search index rows and recall statistics the
    services would write for them (search_services.index_terms / index_scope)."""

    def __init__(self, *, owner: Any, config: Any, rng: random.Random) -> None:
        from itertools import accumulate

        from chatapp.chat.models import Message

        self.owner, self.config, self.rng = owner, config, rng
        self.words = _vocabulary(rng, 20_000)
        self.cum_weights = list(accumulate(1 / (rank + 10) for rank in range(len(self.words))))
        self.next_id = (Message.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1

    def conversation(self, *, size: int, index: int) -> int:
        from collections import Counter
        from datetime import UTC, datetime, timedelta

        from chatapp.chat.models import Conversation
        from chatapp.chat.search_services import index_scope, index_terms

        rng, words, cum = self.rng, self.words, self.cum_weights
        title = f"Chat {index}: " + " ".join(rng.choices(words, cum_weights=cum, k=3))
        conversation = Conversation.objects.create(owner=self.owner, llm_config=self.config, title=title)
        scope = index_scope(conversation_id=conversation.pk, owner_id=self.owner.pk)
        start = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(hours=index)
        messages, search, df = [], [], Counter()
        chars = tokens = length_sum = 0
        for i in range(size):
            role = "user" if i % 2 == 0 else "assistant"
            n = rng.randint(6, 25) if role == "user" else rng.randint(20, 90)
            content = " ".join(rng.choices(words, cum_weights=cum, k=n)) + f" (#{index}.{i})"
            at = start + timedelta(minutes=i)
            pk = self.next_id
            self.next_id += 1
            token_count = len(content) // 4 + 4
            messages.append((pk, conversation.pk, role, "chat", content, token_count, len(content), False,
                             "complete", False, "", "", False, False, False, "", at, at))
            terms, length = index_terms(content=content)
            df.update(set(terms.split()))
            search.append((pk, conversation.pk, scope, terms, length, True))
            chars, tokens, length_sum = chars + len(content), tokens + token_count, length_sum + length
        insert_rows(table="chat_message", columns=_MESSAGE_COLUMNS, rows=messages)
        insert_rows(table="chat_messagesearch", columns=("message_id", "conversation_id", "scope", "terms", "length",
                                                         "recallable"), rows=search)
        insert_rows(table="chat_recallterm", columns=("conversation_id", "term", "df"),
                    rows=[(conversation.pk, t, d) for t, d in df.items()])
        insert_rows(table="chat_recallcorpus", columns=("conversation_id", "docs", "length"),
                    rows=[(conversation.pk, size, length_sum)])
        Conversation.objects.filter(pk=conversation.pk).update(
            live_message_count=size, live_char_count=chars, live_token_count=tokens)
        return conversation.pk

    def finish(self) -> None:
        """Ids were given here: the sequence must continue after them (PostgreSQL; SQLite follows max(id))."""
        from django.db import connection

        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT setval(pg_get_serial_sequence('chat_message', 'id'), %s)", [self.next_id])


def fill(*, owner: Any, config: Any, total: int, big: int, conversations: int) -> tuple[Any, list[str], float]:
    """The big conversation (seeded with records) and the rest; returns it, the vocabulary, seconds."""
    from django.db import connection

    from chatapp.chat.management.commands.seed_long_conversation import conversation_seed_long
    from chatapp.chat.models import Conversation

    started = time.perf_counter()
    large = conversation_seed_long(owner=owner, messages=big)
    Conversation.objects.filter(pk=large.pk).update(llm_config=config)
    large.refresh_from_db()
    rng = random.Random(20261124)
    filler = Filler(owner=owner, config=config, rng=rng)
    sizes = conversation_sizes(total=total - big, count=conversations - 1, rng=rng)
    for i, size in enumerate(sizes):
        filler.conversation(size=size, index=i)
        if i % 100 == 99:
            print(f"  {i + 1} conversations, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    filler.finish()
    with connection.cursor() as cursor:
        # PostgreSQL: VACUUM as well, the state autovacuum keeps a table in after a bulk load (it is on
        # by default and vacuums a table after inserts of 20 % of its size). The PostgreSQL this bench
        # runs on here has autovacuum off; without it, every first read of a freshly loaded page sets
        # its rows' hint bits and writes the page back, the visibility map is empty (no index-only
        # scans), and the figures describe a database no server keeps.
        cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")
    return large, filler.words, time.perf_counter() - started


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
    server = dbname = ""
    if full_url:
        import psycopg

        server, full_name = full_url.rsplit("/", 1)
        dbname = f"{full_name}_empty"
        with psycopg.connect(server + "/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{dbname}"')
        ref_env["DATABASE_URL"] = f"{server}/{dbname}"
    else:
        ref_env.pop("DATABASE_URL", None)
    try:
        proc = subprocess.run([PYTHON, str(Path(__file__).resolve()), "--reference-child", base_url], env=ref_env,
                              cwd=ROOT, stdout=subprocess.PIPE, text=True, check=True)
        yield ref_env, proc.stdout.strip().splitlines()[-1]
    finally:
        if dbname:
            import psycopg

            with psycopg.connect(server + "/postgres", autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


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
                              show: bool = False) -> tuple[int, list[str]]:
    """Statements a send runs before the first byte of its body, through the ASGI application; and
    those of the whole send whose plan reads a table without an index (PostgreSQL: EXPLAIN each
    SELECT again after the send)."""
    import asyncio

    with QueryCounter() as counter:
        count = asyncio.run(asgi_send(token=token, conversation_id=conversation_id, text=text, counter=counter))
    if show:
        for i, (sql, _) in enumerate(counter.statements[:count], start=1):
            print(f"  {i:2} {sql}", file=sys.stderr)
    return count, unindexed_reads(counter.statements)


def unindexed_reads(statements: list[tuple[str, Any]], *, min_rows: int = 10_000) -> list[str]:
    """The SELECTs whose PostgreSQL plan scans a table of more than `min_rows` rows sequentially
    (a one-row table is rightly read that way); SQLite: not checked."""
    import re

    from django.db import connection

    if connection.vendor != "postgresql":
        return []
    found = []
    with connection.cursor() as cursor:
        for sql, params in statements:
            if not sql.lstrip().upper().startswith("SELECT"):
                continue
            cursor.execute("EXPLAIN " + sql, params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            for table in set(re.findall(r"Seq Scan on (\w+)", plan)):
                cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [table])
                rows = cursor.fetchone()
                if rows and rows[0] > min_rows:
                    found.append(f"{sql[:200]} -> {plan[:400]}")
    return found


def turn_profiler(pid: int, vendor: str) -> subprocess.Popen | None:
    """With SCALE_PROFILE_DIR set: py-spy (pip install py-spy; not a requirement) sampling the server's
    thread that holds the GIL while the CPU-per-turn turns run, to <dir>/<vendor>-turns.txt (raw
    collapsed stacks). Sampling costs the server CPU: the run's cpu_ms_per_turn is then inflated."""
    folder = os.environ.get("SCALE_PROFILE_DIR")
    if not folder:
        return None
    out = Path(folder) / f"{vendor}-turns.txt"
    proc = subprocess.Popen(["py-spy", "record", "--gil", "--rate", "200", "--format", "raw", "--pid", str(pid),
                             "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached before the first timed turn
    return proc


def timed_turns(client: Any, *, pid: int, conversation_id: int, words: list[str], requests: int,
                vendor: str) -> tuple[float, list[float]]:
    """(the server's CPU ms per turn, each turn's time to first byte) over `requests` sends."""
    profiler = turn_profiler(pid, vendor)
    cpu_before = cpu_seconds(pid)
    samples = sends_timed(client, conversation_id,
                          (f"question {i}: {words[100 + i]} and {words[3000 + i]}?" for i in range(requests)))
    cpu = (cpu_seconds(pid) - cpu_before) * 1000 / requests
    if profiler is not None:
        profiler.send_signal(signal.SIGINT)
        profiler.wait(timeout=60)
    return cpu, samples


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
        new_count, new_scans = queries_before_first_byte(token=token, conversation_id=probe.pk,
                                                         text="a first question")
        big_count, big_scans = queries_before_first_byte(token=token, conversation_id=large.pk,
                                                         text="what did we say about the plan?")
        out["queries_before_first_byte_new_conversation"] = new_count
        out["queries_before_first_byte"] = big_count
        out["sequential_scans_on_turn_path"] = len(new_scans) + len(big_scans)
        for scan in new_scans + big_scans:
            print(f"[{connection.vendor}] sequential scan on the turn path: {scan}", file=sys.stderr)

        with empty_reference(env, tmp / "empty", fake.base_url) as (ref_env, ref_token), \
                uvicorn_process(ref_env, tmp / "empty") as (ref_url, _), \
                httpx.Client(base_url=ref_url, headers={"Authorization": f"Token {ref_token}"}, timeout=120) as ref, \
                uvicorn_process(env, tmp) as (url, _), httpx.Client(base_url=url, headers=auth, timeout=120) as c:
            on_full, on_empty = new_conversation_ttfb_pairs(c, ref, requests)
            out["ttfb_new_conversation_1m_table"] = statistics.median(on_full)
            out["ttfb_new_conversation_empty_table"] = statistics.median(on_empty)

        with uvicorn_process(env, tmp) as (url, pid), httpx.Client(base_url=url, headers=auth, timeout=300) as c:
            for i in range(2):
                timed_send(c, large.pk, f"warm-up {i}")
            out["cpu_ms_per_turn"], samples = timed_turns(c, pid=pid, conversation_id=large.pk, words=words,
                                                          requests=requests, vendor=connection.vendor)
            out["ttfb_100k_conversation"] = statistics.median(samples)

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
    dbname = ""
    if database == "postgres":
        import psycopg

        server = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
        base = server.rsplit("/", 1)[0]
        dbname = f"bench_scale_{os.getpid()}"
        with psycopg.connect(base + "/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{dbname}"')
        env["DATABASE_URL"] = f"{base}/{dbname}"
    else:
        env.pop("DATABASE_URL", None)
    cmd = [PYTHON, str(Path(__file__).resolve()), "--child", "--requests", str(args.requests)]
    if args.quick:
        cmd.append("--quick")
    try:
        # The child's progress goes to stderr (shown as it runs); its last stdout line is the result.
        proc = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=False)
    finally:
        if dbname:
            import psycopg

            with psycopg.connect(base + "/postgres", autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
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
        print(f"{db}: new-conversation TTFB full/empty = {ratio:.2f} (target <= 1.2); fill {r['fill_seconds']} s")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
