"""Real processes for the benchmarks that need them: a uvicorn web process, a Celery worker that can be
killed with SIGKILL and started again, a private redis-server that can be stopped, and a wait on a
condition (bench/faults.py)."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from pathlib import Path

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
    """`celery -A chatapp worker -B` in its own process group, restartable after kill -9."""

    def __init__(self, env: dict[str, str], tmp: Path) -> None:
        self.env, self.tmp, self.proc, self.starts = env, tmp, None, 0

    def start(self) -> None:
        self.starts += 1
        log = (self.tmp / f"worker-{self.starts}.log").open("wb")
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "celery", "-A", "chatapp", "worker", "-B", "-s", str(self.tmp / "beat-schedule"),
             "-Q", "summaries,celery", "--concurrency", "2", "--loglevel", "WARNING",
             "-n", f"faults-{secrets.token_hex(3)}@%h", "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()

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


def wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return predicate()
