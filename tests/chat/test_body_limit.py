"""A request body past the largest an endpoint takes is refused as it arrives (chatapp.chat.body_limit),
through the ASGI handler the server runs: Django alone reads the whole body first, to disk, whoever
sends it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket

import httpx
import pytest
from django.conf import settings

from chatapp.chat.admission import SyncStackASGIHandler
from chatapp.chat.body_limit import MULTIPART_SLACK, BodyGuard, BodyTooLarge
from chatapp.chat.image_models import MessageImage
from chatapp.chat.models import Conversation
from tests.support.accounts import api_key_for
from tests.support.chat import make_config
from tests.support.images import b64, png_bytes

pytestmark = pytest.mark.django_db(transaction=True)

CHUNK = 16 * 1024


def _post(path: str, *, total: int, announce: bool, content_type: bytes = b"application/json",
          extra: tuple[tuple[bytes, bytes], ...] = ()) -> dict:
    """POST `total` bytes of body to `path`, CHUNK at a time, with `extra` headers. Returns the status,
    the body answered, its content type and how many body bytes the application had taken when it answered."""
    headers = [(b"host", b"testserver"), (b"content-type", content_type), *extra]
    if announce:
        headers.append((b"content-length", str(total).encode()))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "client": ("127.0.0.1", 50000), "server": ("testserver", 80), "headers": headers}
    out: dict = {"taken": 0, "body": b""}

    async def call() -> None:
        answered = asyncio.Event()

        async def receive() -> dict:
            if out["taken"] >= total:
                await answered.wait()
                return {"type": "http.disconnect"}
            size = min(CHUNK, total - out["taken"])
            out["taken"] += size
            return {"type": "http.request", "body": b" " * size, "more_body": out["taken"] < total}

        async def send(message: dict) -> None:
            if message["type"] == "http.response.start":
                out["status"], out["taken_at_answer"] = message["status"], out["taken"]
                out["type"] = dict(message["headers"]).get(b"content-type", b"")
            elif message["type"] == "http.response.body":
                out["body"] += message.get("body", b"")
                if not message.get("more_body"):
                    answered.set()

        await SyncStackASGIHandler()(scope, receive, send)

    asyncio.run(call())
    return out


@pytest.fixture
def limits(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024
    settings.IMPORT_MAX_BYTES = 256 * 1024
    return settings


def test_an_announced_length_past_the_limit_is_refused_unread(limits):
    answer = _post("/api/auth/token/", total=4 * 1024 * 1024, announce=True)
    assert answer["status"] == 413
    assert answer["taken_at_answer"] == 0
    assert json.loads(answer["body"]) == {"detail": "The request body is larger than 65,536 bytes.", "limit": 65536}


def test_a_body_without_a_length_is_refused_once_it_passes_the_limit(limits):
    answer = _post("/api/auth/token/", total=4 * 1024 * 1024, announce=False)
    assert answer["status"] == 413
    assert answer["taken_at_answer"] <= 64 * 1024 + CHUNK
    assert json.loads(answer["body"])["detail"] == "The request body is larger than 65,536 bytes."


MULTIPART = b"multipart/form-data; boundary=x"


def test_the_import_endpoint_takes_its_own_larger_limit_from_a_signed_in_sender(limits, user):
    token = ((b"authorization", f"Token {api_key_for(user)}".encode()),)
    # Over the ordinary limit, under the import's: read whole, then the view answers (no file part in it).
    within = _post("/api/imports/", total=200 * 1024, announce=True, content_type=MULTIPART, extra=token)
    assert within["status"] == 400
    assert within["taken_at_answer"] == 200 * 1024
    # Past the import's limit and its multipart framing: refused unread, in the import's words.
    past = _post("/api/imports/", total=2 * 1024 * 1024, announce=True, content_type=MULTIPART, extra=token)
    assert past["status"] == 413 and past["taken_at_answer"] == 0
    assert json.loads(past["body"]) == {"detail": "The file is 2.1 MB; the largest import is 0.3 MB.", "limit": 262144}


def test_a_key_sent_as_bearer_takes_the_import_limit_too(limits, user):
    bearer = ((b"authorization", f"Bearer {api_key_for(user)}".encode()),)
    within = _post("/api/imports/", total=200 * 1024, announce=True, content_type=MULTIPART, extra=bearer)
    assert within["status"] == 400 and within["taken_at_answer"] == 200 * 1024


def test_a_signed_in_session_takes_the_import_limit_too(limits, user, client):
    client.force_login(user)
    name = settings.SESSION_COOKIE_NAME
    cookie = ((b"cookie", f"{name}={client.cookies[name].value}".encode()),)
    answer = _post("/api/imports/", total=200 * 1024, announce=False, content_type=MULTIPART, extra=cookie)
    assert answer["status"] == 403  # read whole; the view wants the session's CSRF token
    assert answer["taken_at_answer"] == 200 * 1024


def test_a_prompts_file_past_the_ordinary_limit_reaches_settings_prompts_import(limits, user, client):
    # Settings → Prompts' export of a few long prompts (each up to a message's 200,000 characters) is
    # past the ordinary body limit: importing it back answered a bare "The request body is larger than
    # 1,265,536 bytes." page, the prompts file refused before the view could read it.
    client.force_login(user)
    name = settings.SESSION_COOKIE_NAME
    cookie = ((b"cookie", f"{name}={client.cookies[name].value}".encode()),)
    signed_in = _post("/settings/prompts/import/", total=200 * 1024, announce=True, content_type=MULTIPART,
                      extra=cookie)
    assert signed_in["status"] == 403  # read whole; the view wants the session's CSRF token
    assert signed_in["taken_at_answer"] == 200 * 1024
    # Without a sign-in it is refused unread, as the conversations' import is.
    anyone = _post("/settings/prompts/import/", total=200 * 1024, announce=True, content_type=MULTIPART)
    assert (anyone["status"], anyone["taken_at_answer"], anyone["body"]) == (401, 0, b"Sign in to import a file.")


def test_a_prompts_file_past_its_own_limit_is_refused_unread(limits, user, client):
    # The prompts' import reads its file whole in the request (a conversations' import streams it to a
    # worker): up to the conversations' 200 MB, a signed-in sender had the server hold and parse that.
    limits.PROMPTS_FILE_MAX_BYTES = 100 * 1024
    client.force_login(user)
    name = settings.SESSION_COOKIE_NAME
    cookie = ((b"cookie", f"{name}={client.cookies[name].value}".encode()),)

    past = _post("/settings/prompts/import/", total=200 * 1024 + MULTIPART_SLACK, announce=True,
                 content_type=MULTIPART, extra=cookie)

    assert past["status"] == 413 and past["taken_at_answer"] == 0
    assert past["body"] == b"The file is 0.3 MB; the largest import is 0.1 MB."


@pytest.mark.parametrize("extra", [
    (),
    ((b"authorization", b"Token not-a-key"),),
    ((b"cookie", b"sessionid=not-a-session"),),
    ((b"cookie", b"\x00;;=="),),
], ids=["nothing", "wrong token", "unknown session", "garbled cookie"])
@pytest.mark.parametrize("announce", [True, False])
def test_an_upload_past_the_ordinary_limit_without_a_sign_in_is_refused_unread(limits, extra, announce):
    # Anyone could otherwise have the server write IMPORT_MAX_BYTES (200 MB) to disk per request
    # before the view said 401.
    answer = _post("/api/imports/", total=200 * 1024, announce=announce, content_type=MULTIPART, extra=extra)
    assert answer["status"] == 401
    assert answer["taken_at_answer"] <= (0 if announce else 64 * 1024 + CHUNK)
    assert json.loads(answer["body"]) == {"detail": "Authentication credentials were not provided."}


def test_a_length_of_thousands_of_digits_is_refused_not_a_500(limits):
    scope_headers = [(b"content-length", b"9" * 5_000)]
    guard = BodyGuard({"path": "/api/auth/token/", "headers": scope_headers})
    with pytest.raises(BodyTooLarge):
        guard.announced({"headers": scope_headers})


def test_a_page_is_refused_in_plain_text(limits):
    answer = _post("/accounts/login/", total=1024 * 1024, announce=False,
                   content_type=b"application/x-www-form-urlencoded")
    assert answer["status"] == 413
    assert answer["type"].startswith(b"text/plain")
    assert answer["body"] == b"The request body is larger than 65,536 bytes."


def test_a_body_within_the_limit_reaches_the_view(limits):
    answer = _post("/api/auth/token/", total=60 * 1024, announce=True)
    assert answer["status"] == 400  # read whole and parsed: spaces are not JSON
    assert answer["taken_at_answer"] == 60 * 1024
    assert json.loads(answer["body"])["detail"] == "The request body is not valid JSON."


def _raw_post(url: str, path: str, *, headers: str, body_chunks: int, chunk: bytes) -> bytes:
    """Send a POST over a socket, body chunks while the server lets us; what it answered."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\n{headers}\r\n".encode())
        with contextlib.suppress(OSError):  # the server may close while we still send: that is the point
            for _ in range(body_chunks):
                sock.sendall(chunk)
        answer = b""
        with contextlib.suppress(OSError):
            while data := sock.recv(65536):
                answer += data
        return answer


def test_a_real_server_refuses_and_stays_up(limits, asgi_server):
    announced = _raw_post(asgi_server.url, "/api/auth/token/", body_chunks=0, chunk=b"",
                          headers="Content-Type: application/json\r\nContent-Length: 1000000000\r\n")
    assert announced.startswith(b"HTTP/1.1 413 ")
    assert b'"detail":"The request body is larger than 65,536 bytes."' in announced
    piece = b" " * CHUNK
    chunked = _raw_post(asgi_server.url, "/api/auth/token/", body_chunks=400,
                        chunk=f"{len(piece):x}\r\n".encode() + piece + b"\r\n",
                        headers="Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n")
    assert chunked.startswith(b"HTTP/1.1 413 ")
    assert httpx.get(f"{asgi_server.url}/api/schema/", timeout=10).status_code == 200


def test_a_send_with_images_takes_the_send_limit_from_a_signed_in_sender_only(limits, user):
    limits.SEND_MAX_BODY_BYTES = 256 * 1024
    token = ((b"authorization", f"Token {api_key_for(user)}".encode()),)
    path = "/api/conversations/987654/messages/"
    # Over the ordinary limit, under a send's: read whole, then the view answers (no such chat).
    within = _post(path, total=200 * 1024, announce=True, extra=token)
    assert within["taken_at_answer"] == 200 * 1024 and within["status"] in (400, 404)
    past = _post(path, total=2 * 1024 * 1024, announce=True, extra=token)
    assert past["status"] == 413 and past["taken_at_answer"] == 0
    # Not signed in: the ordinary limit, unread.
    anyone = _post(path, total=200 * 1024, announce=True)
    assert anyone["status"] == 413 and anyone["taken_at_answer"] == 0
    assert json.loads(anyone["body"])["limit"] == 64 * 1024


def test_a_real_server_takes_a_send_whose_images_pass_the_ordinary_limit(limits, asgi_server, user, fake_openai):
    limits.SEND_MAX_BODY_BYTES = 1024 * 1024
    conversation = Conversation.objects.create(owner=user, llm_config=make_config(user, fake_openai.base_url))
    image = png_bytes(8, 8) + b"\0" * 200_000  # a PNG by its header, past the ordinary 64 KiB in base64
    response = httpx.post(
        f"{asgi_server.url}/api/conversations/{conversation.pk}/messages/",
        json={"content": "What is this?", "images": [{"data": b64(image)}]},
        headers={"Authorization": f"Token {api_key_for(user)}"}, timeout=30,
    )
    assert response.status_code == 200, response.text[:300]
    assert "event: done" in response.text
    assert MessageImage.objects.get().byte_count == len(image)
