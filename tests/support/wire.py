"""A model endpoint that answers with exactly the bytes a test gives it: for wire shapes the fake
endpoint (fake_openai) does not produce, such as a provider's keep-alive comments, a body ended by
EOF, or writes cut inside a UTF-8 character."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

# A script is what one request gets: the writes (bytes, or a float: seconds to wait), and whether the
# connection closes after them.
Script = tuple[list[bytes | float], bool]


def chunked(*pieces: bytes) -> bytes:
    """`pieces` as HTTP/1.1 chunks, with the terminating chunk."""
    return b"".join(b"%X\r\n%s\r\n" % (len(p), p) for p in pieces if p) + b"0\r\n\r\n"


def sse(*events: dict | str, end: bytes = b"\n") -> bytes:
    """`data:` events (a dict as JSON, a str as given) with `end` as the line end."""
    return b"".join(b"data: " + (e if isinstance(e, str) else json.dumps(e)).encode() + end + end for e in events)


def head(status: str = "200 OK", content_type: str = "text/event-stream", *, extra: str = "",
         chunked_body: bool = True, length: int | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status}", f"Content-Type: {content_type}"]
    if chunked_body:
        lines.append("Transfer-Encoding: chunked")
    elif length is not None:
        lines.append(f"Content-Length: {length}")
    if extra:
        lines.extend(extra.strip().split("\n"))
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunk(delta: dict | None = None, finish: str | None = None, **extra: object) -> dict:
    """One Chat Completions stream chunk with a single choice (index 0)."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": choices, **extra}


@dataclass
class WireServer:
    """Answers request n with `scripts(n)` (n from 0). Counts connections and requests."""

    scripts: Callable[[int], Script]
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    _sock: socket.socket | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def base_url(self) -> str:
        assert self._sock is not None
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"

    def start(self) -> WireServer:
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.05)
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._sock is not None:
            self._sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()  # type: ignore[union-attr]
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _request(self, conn: socket.socket) -> bytes | None:
        data = b""
        while b"\r\n\r\n" not in data:
            more = conn.recv(65536)
            if not more:
                return None
            data += more
        header, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in header.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            more = conn.recv(65536)
            if not more:
                return None
            body += more
        return header + b"\r\n\r\n" + body

    def _serve(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with contextlib.closing(conn):
            while not self._stop.is_set():
                try:
                    request = self._request(conn)
                except OSError:
                    return
                if request is None:
                    return
                self.requests.append(request)
                writes, close = self.scripts(len(self.requests) - 1)
                try:
                    for write in writes:
                        if isinstance(write, float):
                            if self._stop.wait(write):
                                return
                        else:
                            conn.sendall(write)
                except OSError:
                    return
                if close:
                    with contextlib.suppress(OSError):
                        conn.shutdown(socket.SHUT_RDWR)
                    return


@contextlib.contextmanager
def wire_server(scripts: Callable[[int], Script] | Script) -> Iterator[WireServer]:
    server = WireServer(scripts if callable(scripts) else (lambda _n: scripts)).start()
    try:
        yield server
    finally:
        server.stop()
        time.sleep(0.01)
