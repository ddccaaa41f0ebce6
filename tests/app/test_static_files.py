"""Static files under ASGI: WhiteNoise's files, headers and conditional and partial answers, sent as one
body (no synchronous iterator for Django to read in a thread, and no warning about it)."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path

import pytest
from django.core.handlers.asgi import ASGIHandler

ROOT = Path(__file__).resolve().parents[2]
PATH = "/static/js/chat/summaries.js"


def _get(path: str, headers: list[tuple[bytes, bytes]] = (), method: str = "GET") -> tuple[int, dict, bytes, list]:
    """(status, headers, body, warnings) of one request through Django's ASGI handler and the middleware."""
    sent: list[dict] = []
    requests = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict:
        if requests:
            return requests.pop()
        await asyncio.Event().wait()  # the client stays: Django stops listening when it has answered
        raise AssertionError("unreachable")

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"host", b"testserver"), *headers], "client": ("127.0.0.1", 50000), "server": ("testserver", 80),
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(ASGIHandler()(scope, receive, send))
    start = sent[0]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return start["status"], {k.decode().lower(): v.decode() for k, v in start["headers"]}, body, caught


@pytest.mark.django_db
def test_a_static_file_is_sent_whole_with_whitenoises_headers():
    status, headers, body, caught = _get(PATH)
    assert status == 200 and body == (ROOT / "static/js/chat/summaries.js").read_bytes()
    assert headers["content-length"] == str(len(body)) and headers["etag"]
    assert "javascript" in headers["content-type"]
    assert not [w for w in caught if "synchronous iterators" in str(w.message)]


@pytest.mark.django_db
def test_conditional_partial_and_head_requests_keep_their_answers():
    _, headers, whole, _ = _get(PATH)
    status, _, body, _ = _get(PATH, [(b"if-none-match", headers["etag"].encode())])
    assert (status, body) == (304, b"")
    status, partial, body, _ = _get(PATH, [(b"range", b"bytes=0-9")])
    assert (status, body, partial["content-range"]) == (206, whole[:10], f"bytes 0-9/{len(whole)}")
    status, head, body, _ = _get(PATH, method="HEAD")
    assert (status, body, head["content-length"]) == (200, b"", str(len(whole)))
