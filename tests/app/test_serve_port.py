"""`manage.py serve` on a port something else already listens on (an earlier `serve`, or vLLM, whose
default is 8000 too) says so and how to choose another, before it starts or announces anything."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_serve_on_a_port_in_use_names_it_and_starts_nothing(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        environ = {**os.environ, "CHATAPP_VAR_DIR": str(tmp_path)}
        environ.pop("DATABASE_URL", None)
        done = subprocess.run(
            [sys.executable, "manage.py", "serve", "--no-worker", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60, check=False,
        )
    # It printed "Chat is running at …" (the other server's address), then uvicorn's bind error, then
    # "CommandError: a process exited with code 3".
    assert done.returncode != 0
    assert f"port {port} on 127.0.0.1 is already in use" in done.stderr and "--port" in done.stderr
    assert "Chat is running" not in done.stdout and "exited with code" not in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "chatapp.sqlite3").exists()  # nothing started


def test_serve_on_every_interface_says_other_addresses_need_allowed_hosts(tmp_path):
    """`serve --host 0.0.0.0` (to open it from a phone, or in a container) answered "Bad Request (400)"
    at its machine's address, with the reason only in the server's log."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    environ = {**os.environ, "CHATAPP_VAR_DIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    for name in ("DATABASE_URL", "ALLOWED_HOSTS"):
        environ.pop(name, None)
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--no-worker", "--host", "0.0.0.0", "--port", str(port)],  # noqa: S104
        cwd=ROOT, env=environ, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
    )
    try:
        assert serve.stdout is not None
        banner = []
        for line in serve.stdout:  # the banner ends with this line
            banner.append(line)
            if "Ctrl-C stops everything" in line:
                break
    finally:
        serve.terminate()  # as a supervisor stops it, just as it has started
        serve.wait(timeout=60)
        # Stopped so soon, its uvicorn was left running, orphaned: SIGTERM was still fatal to serve then.
        try:
            os.killpg(serve.pid, signal.SIGTERM)  # its session's processes: none once it has stopped them
            left_behind = True
        except ProcessLookupError:
            left_behind = False
    text = "".join(banner)
    assert "Chat is running at http://localhost:" in text
    assert "ALLOWED_HOSTS" in text and "localhost,127.0.0.1,[::1]" in text
    assert not left_behind, "serve stopped by SIGTERM left its web server running"


def _serve_start(tmp_path, *args: str) -> subprocess.Popen:
    environ = {**os.environ, "CHATAPP_VAR_DIR": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    environ.pop("DATABASE_URL", None)
    environ.pop("REDIS_URL", None)
    return subprocess.Popen(
        [sys.executable, "manage.py", "serve", *args], cwd=ROOT, env=environ, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )


def _free_port(family: socket.AddressFamily, host: str) -> int:
    with socket.socket(family, socket.SOCK_STREAM) as free:
        free.bind((host, 0))
        return free.getsockname()[1]


def _lines_until(serve: subprocess.Popen, words: str) -> str:
    assert serve.stdout is not None
    seen = []
    for line in serve.stdout:
        seen.append(line)
        if words in line:
            break
    return "".join(seen)


def test_serve_on_ipv6_loopback_prints_a_url_that_opens(tmp_path):
    """The banner said http://::1:PORT/, which no browser opens."""
    try:
        port = _free_port(socket.AF_INET6, "::1")
    except OSError:  # a machine or container without IPv6 loopback (the README's test command runs anywhere)
        pytest.skip("no IPv6 loopback on this machine")
    serve = _serve_start(tmp_path, "--no-worker", "--host", "::1", "--port", str(port))
    try:
        banner = _lines_until(serve, "Ctrl-C stops everything")
    finally:
        serve.terminate()
        serve.wait(timeout=60)
    assert f"Chat is running at http://[::1]:{port}/" in banner


def test_serve_stopped_twice_while_stopping_stops_everything_without_a_traceback(tmp_path):
    """A second Ctrl-C (or a supervisor's second SIGTERM) while the worker shut down ended serve with a
    KeyboardInterrupt traceback, no longer watching its web server and worker, still stopping."""
    serve = _serve_start(tmp_path, "--port", str(_free_port(socket.AF_INET, "127.0.0.1")), "--concurrency", "1")
    try:
        _lines_until(serve, " ready.")  # the worker's
        serve.terminate()
        _lines_until(serve, "Warm shutdown")  # serve is waiting for the worker to stop
        serve.terminate()
        assert serve.stdout is not None
        rest = serve.stdout.read()
        serve.wait(timeout=60)
        # Its session's processes; a zombie (a worker's child it had not reaped, reaped by init) has ended.
        listed = subprocess.run(["ps", "-o", "stat=,args=", "-g", str(serve.pid)], capture_output=True, text=True,
                                check=False).stdout.splitlines()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(serve.pid, signal.SIGKILL)
    assert "Traceback" not in rest
    assert [line for line in listed if not line.lstrip().startswith("Z")] == []
