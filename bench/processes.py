"""Real processes for the benchmarks that need them: a uvicorn web process, a Celery worker that can be
killed with SIGKILL and started again, a private redis-server that can be stopped, a private PostgreSQL
database, and a wait on a condition (bench/faults.py)."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse, urlunparse

from web_ttfb import PYTHON, ROOT, free_port


def start_uvicorn(env: dict[str, str], tmp: Path) -> tuple[subprocess.Popen, str]:
    import httpx

    port = free_port()
    log = open(tmp / f"uvicorn-{port}.log", "wb")  # noqa: SIM115 - lives as long as the process
    proc = subprocess.Popen(
        [PYTHON, "-m", "uvicorn", "chatapp.asgi:application", "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "warning", "--no-access-log", "--lifespan", "off"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise RuntimeError("uvicorn exited at start")
        try:
            httpx.get(url + "/api/schema/", timeout=2)
            return proc, url
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start in 30 s") from None
            time.sleep(0.1)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


class CeleryWorker:
    """`celery -A chatapp worker` in its own process group, restartable after kill -9, with a log per
    start (wait_ready() reads it for Celery's "ready."). The defaults are bench/faults.py's worker: both
    queues, beat (`-B`), two pool processes, warnings only."""

    def __init__(self, env: dict[str, str], tmp: Path, *, name: str = "", queues: str = "summaries,celery",
                 concurrency: int = 2, beat: bool = True, loglevel: str = "WARNING") -> None:
        self.env, self.tmp, self.proc, self.starts = env, tmp, None, 0
        self.name = name or f"faults-{secrets.token_hex(3)}"
        self.queues, self.concurrency, self.beat, self.loglevel = queues, concurrency, beat, loglevel
        self.hostname = f"{self.name}@{socket.gethostname()}"  # what `celery inspect` answers under
        self.log: Path | None = None

    def start(self) -> None:
        self.starts += 1
        self.log = self.tmp / f"{self.name}-{self.starts}.log"
        command = [PYTHON, "-m", "celery", "-A", "chatapp", "worker", "-Q", self.queues,
                   "--concurrency", str(self.concurrency), "--loglevel", self.loglevel, "-n", self.hostname,
                   "--without-gossip", "--without-mingle"]
        if self.beat:
            command += ["-B", "-s", str(self.tmp / "beat-schedule")]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def wait_ready(self, timeout: float = 120) -> float:
        """Seconds until the worker said it is ready (Celery says so at loglevel INFO); raises when it
        exited or took longer than `timeout`."""
        assert self.proc is not None and self.log is not None, "start() first"
        started = time.monotonic()
        while " ready." not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker {self.name} exited: {self.log.read_text()[-2000:]}")
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"worker {self.name} not ready after {timeout:.0f} s")
            time.sleep(0.1)
        return time.monotonic() - started

    def stop(self) -> None:
        """A warm shutdown (SIGTERM: running jobs finish), kill -9 after 20 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill9()

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


class PrivateRedis:
    def __init__(self, tmp: Path) -> None:
        self.port, self.tmp, self.proc = free_port(), tmp, None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import redis

        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.tmp)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 15
        while True:
            try:
                if redis.Redis(port=self.port, socket_connect_timeout=0.3).ping():
                    return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@contextmanager
def private_postgres(url: str, name: str) -> Iterator[str]:
    """A fresh database `name` on `url`'s server (made and dropped through `url`), its URL yielded: a
    bench never depends on, or writes into, the schema of a shared development database. Dropped
    afterwards whatever happens (WITH FORCE: a child that still holds a connection cannot keep it)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunparse(urlparse(url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return predicate()
