"""`manage.py serve`: migrate, collect static files, then run the ASGI web server and a Celery worker
together until Ctrl-C. One command for a single-machine install; in production run the two
processes under your supervisor of choice (the README shows both command lines).
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import BaseCommand, CommandError, call_command

from chatapp.env import env_str


def _raise_keyboard_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _port_valid(*, raw: str, name: str) -> int:
    try:
        port = int(raw)
    except ValueError:
        port = 0
    if not 1 <= port <= 65_535:
        raise CommandError(f"{name} must be a port number (1-65535), got {raw!r}")
    return port


def _env_port() -> int:
    return _port_valid(raw=env_str("PORT", "8000"), name="PORT")


def _port_check(*, host: str, port: int) -> None:
    """Refuse a port another server already listens on, before anything starts: uvicorn would fail
    to bind only after the banner announced the chat there (the other server's address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # as uvicorn picks it
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no clash
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CommandError(
                    f"port {port} on {host} is already in use (an earlier `serve`, or another server such as "
                    "a model server, listens there): stop it, or choose another port with --port or PORT"
                ) from None
            raise CommandError(f"cannot listen on {host} port {port}: {exc.strerror}") from None


def _hosts_note(*, host: str) -> str:
    """Listening beyond this machine, a page opened by its address or name (from a phone, a container's
    host) is refused with "Bad Request (400)" unless ALLOWED_HOSTS holds it: say so where it is read."""
    if host.strip("[]") in {"127.0.0.1", "localhost", "::1"} or "*" in settings.ALLOWED_HOSTS:
        return ""
    allowed = ",".join(settings.ALLOWED_HOSTS)
    return (f"  To open it by this machine's address or another name, add that to ALLOWED_HOSTS (now {allowed});\n"
            "  any other gets \"Bad Request (400)\".\n")


def _children_stop(children: list[subprocess.Popen]) -> None:
    """SIGTERM each, and wait for it. A second Ctrl-C (or SIGTERM) while they stop is passed on as SIGINT
    (uvicorn stops waiting for open replies, Celery stops its running tasks): it ended serve with a
    traceback, leaving them to stop unwatched."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    for child in children:
        # The grace twice (open pages' replies, then those whose page left), and some more.
        deadline = time.monotonic() + 2 * settings.SHUTDOWN_GRACE_SECONDS + 15
        while child.returncode is None:
            try:
                child.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            except KeyboardInterrupt:
                for other in children:
                    if other.poll() is None:
                        other.send_signal(signal.SIGINT)


def worker_queues() -> str:
    """Every queue this app publishes to: summaries, imports (both configurable), Celery's default."""
    return ",".join(dict.fromkeys([settings.CELERY_SUMMARY_QUEUE, settings.CELERY_IMPORT_QUEUE, "celery"]))


class Command(BaseCommand):
    help = "Migrate, then run the web server (uvicorn, ASGI) and a Celery worker together."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default=env_str("HOST", "127.0.0.1"),
                            help="address to listen on (default: HOST, else 127.0.0.1: this machine only)")
        parser.add_argument("--port", type=int, default=None, help="default: PORT, else 8000")
        parser.add_argument("--no-worker", action="store_true", help="run the web server only")
        parser.add_argument(
            "--concurrency", type=int, default=settings.CELERY_WORKER_CONCURRENCY,
            help="worker processes (default: CELERY_CONCURRENCY, else 2)",
        )

    def handle(self, *args, host: str, port: int | None, no_worker: bool, concurrency: int, **options) -> None:
        # checked before anything starts: past 65535 the socket's bind raised a traceback
        port = _env_port() if port is None else _port_valid(raw=str(port), name="--port")
        _port_check(host=host, port=port)
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        python = sys.executable
        env = os.environ.copy()
        children: list[subprocess.Popen] = []
        web = [
            python, "-m", "uvicorn", "chatapp.asgi:application",
            "--host", host, "--port", str(port), "--lifespan", "on",
            # SIGTERM: replies still streaming get settings.SHUTDOWN_GRACE_SECONDS to end, then are
            # stored as interrupted with their text so far (chatapp.chat.lifespan), and their chats
            # take sends at once when the server is back.
            "--timeout-graceful-shutdown", str(settings.SHUTDOWN_GRACE_SECONDS),
        ]  # fmt: skip
        worker = [
            python, "-m", "celery", "-A", "chatapp", "worker",
            "-Q", worker_queues(),
            "--concurrency", str(concurrency),
            # Embedded beat runs the periodic sweep that enqueues jobs recorded while the broker was down.
            "--beat", "--schedule", str(settings.VAR_DIR / "celerybeat-schedule"),
            "--loglevel", "INFO",
        ]  # fmt: skip
        shown_host = "localhost" if host in {"127.0.0.1", "0.0.0.0"} else host  # noqa: S104
        if ":" in shown_host and not shown_host.startswith("["):  # an IPv6 address: a URL brackets it
            shown_host = f"[{shown_host}]"
        broker = "Redis" if settings.REDIS_URL else "embedded filesystem broker"
        database = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        # A supervisor (or `timeout`) stops us with SIGTERM: treat it like Ctrl-C so the children
        # are stopped too instead of being orphaned; from before the first starts (set after the
        # banner, a SIGTERM just after it still killed serve alone, its uvicorn left running).
        signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        try:
            children.append(subprocess.Popen(web, env=env))
            if not no_worker:
                children.append(subprocess.Popen(worker, env=env))
            self.stdout.write(
                self.style.SUCCESS(f"\n  Chat is running at http://{shown_host}:{port}/\n")
                + f"  Create the first account at http://{shown_host}:{port}/accounts/signup/\n"
                + f"  Database: {database}; summaries: {'off' if no_worker else f'Celery worker on {broker}'}\n"
                + _hosts_note(host=host)
                + "  Ctrl-C stops everything.\n"
            )
            while all(child.poll() is None for child in children):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            _children_stop(children)
        failed = [c for c in children if c.returncode not in (0, -signal.SIGTERM, -signal.SIGINT, None)]
        if failed:
            raise CommandError(f"a process exited with code {failed[0].returncode}")
