"""Helpers for summary jobs: conversations to summarize, and a REAL Celery worker subprocess.

The worker runs `celery -A chatapp worker` in its own process group against the same test database
as the test process (PostgreSQL test_<name>, or an SQLite file: an in-memory test database cannot
be shared, so the SQLite test database is a file: see tests/conftest.py) and either the
embedded filesystem broker (a private folder per test) or the real Redis when REDIS_URL is set (a
private queue per test, so nothing else on that Redis takes our messages).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

from chatapp.celery import app as celery_app
from chatapp.chat.models import Conversation, Message, SummaryJob
from chatapp.fs_broker import TRANSPORT as FS_TRANSPORT

ROOT = Path(__file__).resolve().parents[2]


def _spawn_logged(command: list[str], *, log_path: Path, **popen: Any) -> subprocess.Popen:
    """`command` in a process group of its own (a kill reaches its children), stdout and stderr to
    `log_path`: the file a failing test quotes."""
    with log_path.open("wb") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **popen)


BROKERS = ["filesystem"] + (["redis"] if os.environ.get("REDIS_URL") else [])


# A redis-server of the test's own, for tests that stop and restart the broker (never the shared one).
PRIVATE_REDIS = pytest.param(
    "private-redis", marks=pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server")
)


def wait_for(
    predicate: Callable[[], object], *, timeout: float = 30.0, interval: float = 0.1, what: str = ""
) -> object:
    """Poll until `predicate()` is truthy (returns it) or fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what or predicate}")
        time.sleep(interval)


_SUMMARY_TASK = "optimizer.tasks.summarize_conversation"
_SWEEP_TASK = "optimizer.tasks.sweep_pending_summary_jobs"
# What the summary task logs once per delivery it runs (tasks.summarize_conversation).
_SUMMARY_OUTCOME = re.compile(r"summary job \d+(: | crashed)")


def sweeps_done(worker: Worker) -> int:
    """Sweeps (the beat's, in the worker) that have finished so far, from the worker's log."""
    return sum(1 for line in worker.log().splitlines() if f"Task {_SWEEP_TASK}[" in line and " succeeded " in line)


def worker_settled(worker: Worker, *, sweeps_before: int) -> bool:
    """Whether nothing more can reach a finished job: a sweep finished after `sweeps_before` (so
    whatever it re-published is queued), the queue is empty, and every summary delivery the worker
    received has run to its logged outcome. What a test asserts after this includes every late
    duplicate (redelivery, sweep) — a condition instead of a sleep."""
    lines = worker.log().splitlines()
    received = sum(1 for line in lines if f"Task {_SUMMARY_TASK}[" in line and line.rstrip().endswith(" received"))
    answered = sum(1 for line in lines if _SUMMARY_OUTCOME.search(line))
    return sweeps_done(worker) > sweeps_before and received == answered and broker_queue_empty(worker.broker)


def broker_queue_empty(broker: Broker) -> bool:
    if broker.kind == "redis":
        import redis

        client = redis.Redis.from_url(broker.url)
        try:
            return client.llen(broker.queue) == 0
        finally:
            client.close()
    return not any(Path(broker.options["data_folder_in"]).iterdir())


def broker_queue_lose(broker: Broker) -> None:
    """Drop every message waiting in the test's queue, as a broker restarted without its data does."""
    if broker.kind == "redis":
        import redis

        client = redis.Redis.from_url(broker.url)
        try:
            client.delete(broker.queue)
        finally:
            client.close()
        return
    for message in Path(broker.options["data_folder_in"]).iterdir():
        message.unlink()


def job_state(job_id: int) -> SummaryJob:
    return SummaryJob.objects.select_related("summary").get(pk=job_id)


def job_finished(job_id: int) -> SummaryJob | None:
    job = job_state(job_id)
    finished = (SummaryJob.Status.DONE, SummaryJob.Status.FAILED, SummaryJob.Status.CANCELLED)
    return job if job.status in finished else None


def summaries_of(conversation: Conversation) -> list[Message]:
    return list(Message.objects.filter(conversation=conversation, kind=Message.Kind.SUMMARY).order_by("id"))


def _database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = quote(db.get("USER") or "", safe="")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"], safe="")
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{auth}@{host}:{port}/{db['NAME']}"


def celery_use_broker(*, url: str, options: dict) -> None:
    """Point the test process's Celery app (the web side) at another broker."""
    if celery_app._pool is not None:
        celery_app._pool.force_close_all()
    celery_app.conf.broker_url = url
    # As settings do: the embedded broker's own transport for a filesystem URL, the URL's for the rest.
    celery_app.conf.broker_transport = FS_TRANSPORT if url.startswith("filesystem:") else None
    celery_app.conf.broker_transport_options = options
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


class PrivateRedis:
    """`redis-server` on a free port in its own process group, without persistence, which a test may
    stop and start again on the same port. Fault tests stop this one, never the machine's Redis."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> PrivateRedis:
        self.starts += 1
        self.proc = _spawn_logged(
            [
                "redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--daemonize", "no", "--dir", str(self.folder),
            ],
            log_path=self.folder / f"redis-{self.starts}.log",
        )
        wait_for(self._answers, timeout=15, what=f"redis-server on port {self.port}")
        return self

    def _answers(self) -> bool:
        import redis

        if self.proc is not None and self.proc.poll() is not None:
            pytest.fail(f"redis-server exited with {self.proc.returncode}")
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False
        finally:
            client.close()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


class Broker:
    def __init__(self, kind: str, tmp: Path, *, private_redis: PrivateRedis | None = None) -> None:
        self.kind = "redis" if kind == "private-redis" else kind
        self.private_redis = private_redis
        self.queue = f"summaries-test-{uuid.uuid4().hex[:10]}"
        if self.kind == "redis":
            self.url = private_redis.url if private_redis is not None else os.environ["REDIS_URL"]
            # Short visibility timeout: a message whose worker was killed comes back within seconds.
            self.options = {
                "visibility_timeout": 3,
                "unacked_restore_interval": 1,
                "unacked_restore_throttle": 1,
                "socket_connect_timeout": 2,
            }
        else:
            self.url = "filesystem://"
            folder = tmp / "broker"
            for sub in ("out", "processed", "control"):
                (folder / sub).mkdir(parents=True, exist_ok=True)
            self.options = {
                "data_folder_in": str(folder / "out"),
                "data_folder_out": str(folder / "out"),
                "processed_folder": str(folder / "processed"),
                "control_folder": str(folder / "control"),
                "store_processed": False,
                "polling_interval": 0.1,
            }
        self.var_dir = tmp / "var"
        self.var_dir.mkdir(exist_ok=True)
        if self.kind == "filesystem":
            # The worker's settings derive the broker folder from its var dir.
            (self.var_dir / "celery-broker").symlink_to(tmp / "broker")

    def worker_env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL"}}
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "chatapp.settings",
                "DATABASE_URL": _database_url(),
                "CHATAPP_VAR_DIR": str(self.var_dir),
                "SECRET_KEY": settings.SECRET_KEY,
                "FIELD_ENCRYPTION_KEY": ",".join(settings.FIELD_ENCRYPTION_KEYS),
                "ALLOW_PRIVATE_LLM_URLS": "1",
                "CELERY_SUMMARY_QUEUE": self.queue,
                "SUMMARY_MAX_RETRIES": "2",
                "SUMMARY_RETRY_BACKOFF_MS": "200",
                "SUMMARY_RETRY_BACKOFF_MAX_MS": "1000",
                "SUMMARY_JOB_LEASE_SECONDS": "4",
                "SUMMARY_SWEEP_INTERVAL_SECONDS": "2",
                "CELERY_VISIBILITY_TIMEOUT": "3",
                "CELERY_UNACKED_RESTORE_INTERVAL": "1",
                "CELERY_UNACKED_RESTORE_THROTTLE": "1",
                "CELERY_POLLING_INTERVAL_MS": "100",
                "PYTHONUNBUFFERED": "1",
            }
        )
        if self.kind == "redis":
            env["REDIS_URL"] = self.url
        env.update(extra)
        return env


class Worker:
    """`celery -A chatapp worker -B` in its own process group (kill -9 takes the pool children too)."""

    def __init__(self, broker: Broker, log_dir: Path, **env: str) -> None:
        self.broker = broker
        self.env = broker.worker_env(**env)
        self.log_dir = log_dir
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        # In the log's name: two workers of one test (one killed, its successor) keep their own logs.
        self.tag = uuid.uuid4().hex[:8]

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"worker-{self.tag}-{self.starts}.log"

    def start(self) -> Worker:
        self.starts += 1
        self.proc = _spawn_logged(
            [
                sys.executable, "-m", "celery", "-A", "chatapp", "worker", "-B",
                "-s", str(self.broker.var_dir / "celerybeat-schedule"),
                "-Q", self.broker.queue, "--concurrency", "1", "--loglevel", "INFO",
                "-n", f"test-{uuid.uuid4().hex[:8]}@%h", "--without-gossip", "--without-mingle",
            ],
            log_path=self.log_path,
            cwd=ROOT,
            env=self.env,
        )
        wait_for(self._ready, timeout=60, what=f"the worker to start (log: {self.log_path})")
        return self

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            pytest.fail(f"worker exited with {self.proc.returncode}:\n{self.log()}")
        return " ready." in self.log()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def kill9(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        """End the worker at the end of a test (its results are already asserted): no graceful wait."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


def redis_forget_queue(broker: Broker) -> None:
    """Leave nothing of a test's private queue on the shared Redis."""
    import redis

    client = redis.Redis.from_url(broker.url)
    try:
        client.delete(broker.queue, f"_kombu.binding.{broker.queue}", f"_kombu.binding_permanent.{broker.queue}")
        client.zrem("_kombu.binding_deadlines", broker.queue)
    finally:
        client.close()
