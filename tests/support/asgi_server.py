"""The project's ASGI app under a real uvicorn, for tests that need real HTTP streaming.

Django's live_server is WSGI and cannot stream the async SSE replies. The server runs in a thread of
the test process, so it uses the test database; the fixture asks for transactional_db so that each
side sees what the other committed.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connections

START_TIMEOUT_S = 15


@dataclass
class LiveASGI:
    url: str
    server: Any


@contextmanager
def asgi_server_running() -> Iterator[LiveASGI]:
    """chatapp.asgi.application served by uvicorn on a free 127.0.0.1 port until the block ends."""
    import uvicorn

    from chatapp.asgi import application

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(application, log_level="warning", lifespan="off", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield LiveASGI(url=f"http://127.0.0.1:{port}", server=server)
    finally:
        server.should_exit = True
        thread.join(timeout=START_TIMEOUT_S)
        sock.close()
        # Connections opened for the server's requests must not outlive the test (PostgreSQL would
        # refuse to flush or drop the test database while they are open).
        connections.close_all()


@pytest.fixture
def asgi_server(transactional_db) -> Iterator[LiveASGI]:
    """A real uvicorn serving the project over the test database (`.url`, `.server`)."""
    with asgi_server_running() as live:
        yield live
