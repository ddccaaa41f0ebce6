"""The largest request body the server reads, enforced while it is received (SyncStackASGIHandler).

Django's ASGI handler reads a request's whole body (into a temporary file past 2.5 MB) before any
middleware or view runs, so its own limits (DATA_UPLOAD_MAX_MEMORY_SIZE, the import's upload
handler) refuse a body only once all of it is on disk: anyone, signed in or not, could have the
server write gigabytes. Here a body is refused with a 413 as soon as its announced length, or the
bytes received, pass the largest any endpoint takes: the import's file (settings.IMPORT_MAX_BYTES and
its multipart framing) on the import endpoints (conversations' in the API; Settings → Prompts' file, whose
export of a few long prompts is past the ordinary limit, up to PROMPTS_FILE_MAX_BYTES: it is read whole in
the request), DATA_UPLOAD_MAX_MEMORY_SIZE everywhere else (what
Django refuses there anyway, only later). The import's larger limit is only for a sender who is signed
in (a valid API token or session, `sender_signed_in`, looked up before the body is read): anyone else
is answered 401 unread, where the view would have answered it once the whole file was on disk.
A send (`/api/conversations/<id>/messages/`) with an announced length past the ordinary limit (its
images, base64) takes settings.SEND_MAX_BODY_BYTES from a signed-in sender the same way; anyone else,
or a send that announces no length, meets the ordinary 413.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable
from http.cookies import CookieError, SimpleCookie
from importlib import import_module
from types import SimpleNamespace
from typing import Any

import orjson
from django.conf import settings
from django.contrib.auth import get_user
from django.urls import Resolver404, resolve, reverse

# Room for the multipart framing around an import's file (boundaries, part headers, a filename).
MULTIPART_SLACK = 64 * 1024
# The import endpoints, by URL name, each with the setting of its file's limit.
IMPORT_LIMITS = {"api-imports": "IMPORT_MAX_BYTES", "prompt-import": "PROMPTS_FILE_MAX_BYTES"}
# Endpoints that take more than the ordinary limit from a signed-in sender: the imports, and a send (its
# images). A send's sender is looked up only when its announced length is past the ordinary limit: a
# send without images pays for no lookup.
WIDER_LIMITS = {**IMPORT_LIMITS, "api-messages": "SEND_MAX_BODY_BYTES"}
_SEND_PATH = re.compile(r"/api/conversations/[0-9]+/messages/")

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class BodyTooLarge(Exception):
    def __init__(self, *, limit: int, size: int | None) -> None:
        super().__init__(f"request body over {limit} bytes")
        self.limit = limit
        self.size = size


def body_too_large_words(limit: int) -> str:
    """What a client reads when its request body is over `limit` (errors.py says it too)."""
    return f"The request body is larger than {limit:,} bytes."


def import_too_large_words(*, limit: int, size: int | None) -> str:
    found = f"The file is {size / 1e6:,.1f} MB; " if size else "The file is too large: "
    return f"{found}the largest import is {limit / 1e6:,.1f} MB."


class BodyGuard:
    """One request's body limit. The import endpoint's larger one is looked up (a URL resolve) only
    for a body past the ordinary limit, so an ordinary request pays for a comparison, no more."""

    def __init__(self, scope: dict[str, Any]) -> None:
        self.path: str = scope["path"]
        self.limit: int | None = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        self.is_import = False
        self.file_limit = 0  # an import's file limit, once the path is known to be an import's
        # Whether the import's sender is signed in: set (sender_signed_in) before its body is read.
        self.signed_in = False
        self._widened = False
        self.received = 0

    def check(self, size: int) -> None:
        """Raise BodyTooLarge when a body of `size` bytes (announced or received so far) is over the limit."""
        if self.limit is None or size <= self.limit:
            return
        if not self._widened:
            self._widened = True
            name = _import_name(self.path)
            if name is not None:
                self.is_import = name in IMPORT_LIMITS
                self.file_limit = getattr(settings, WIDER_LIMITS[name])
                if self.signed_in:
                    self.limit = self.file_limit + MULTIPART_SLACK
                if size <= self.limit:
                    return
        raise BodyTooLarge(limit=self.limit, size=size)

    def may_import(self, scope: dict[str, Any]) -> bool:
        """Whether this request is an import's upload, or a send past the ordinary limit (its images),
        whose sender is then looked up first."""
        # A string comparison: every send is a POST, and a URL resolve would be paid on each.
        if scope.get("method") != "POST":
            return False
        if self.path in _import_paths():
            return True
        return _SEND_PATH.fullmatch(self.path) is not None and self._announced_size(scope) > (self.limit or 0)

    @staticmethod
    def _announced_size(scope: dict[str, Any]) -> int:
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit():
                # Past 18 digits it is past every limit (and int() refuses 4,300 digits).
                return int(value) if len(value) <= 18 else 10**18
        return -1

    def announced(self, scope: dict[str, Any]) -> None:
        size = self._announced_size(scope)
        if size >= 0:
            self.check(size)

    def receiving(self, receive: Receive) -> Receive:
        """`receive`, counting the body's bytes as they come and refusing past the limit."""

        async def counted() -> dict[str, Any]:
            message = await receive()
            if message.get("type") == "http.request":
                self.received += len(message.get("body", b""))
                self.check(self.received)
            return message

        return counted

    def refusal(self, exc: BodyTooLarge) -> tuple[int, bytes, bytes]:
        """(status, content type, body) of the 413 (the 401 of an import whose sender is not signed in):
        JSON under /api/, plain text for a page."""
        if self.is_import and not self.signed_in:
            if not self.path.startswith("/api/"):  # Settings → Prompts' import, a page
                return 401, b"text/plain; charset=utf-8", b"Sign in to import a file."
            return 401, b"application/json", orjson.dumps({"detail": NOT_SIGNED_IN_WORDS})
        if self.is_import:
            limit = self.file_limit  # the file's limit, as the import view says it
            words = import_too_large_words(limit=limit, size=exc.size)
        else:
            limit = exc.limit
            words = body_too_large_words(limit)
        if self.path.startswith("/api/"):
            return 413, b"application/json", orjson.dumps({"detail": words, "limit": limit})
        return 413, b"text/plain; charset=utf-8", words.encode()


# DRF's words for a request without credentials (what the import view answers such a request).
NOT_SIGNED_IN_WORDS = "Authentication credentials were not provided."


def sender_signed_in(scope: dict[str, Any]) -> bool:
    """Whether the request carries a valid API token, or a session of an active user (the two ways the
    API takes a user). Reads the database: called off the event loop."""
    from rest_framework.exceptions import AuthenticationFailed

    from chatapp.chat.api.auth import ExpiringTokenAuthentication  # the API's own check (its module needs the apps)

    headers = {name.lower(): value.decode("latin-1") for name, value in scope.get("headers", ())}
    scheme, _, key = headers.get(b"authorization", "").strip().partition(" ")
    if scheme.lower() in ("token", "bearer") and key.strip():  # the schemes the API reads (api.auth)
        try:
            ExpiringTokenAuthentication().authenticate_credentials(key.strip())
        except AuthenticationFailed:  # a wrong or expired token, or an inactive user's
            return False
        return True
    try:
        morsel = SimpleCookie(headers.get(b"cookie", "")).get(settings.SESSION_COOKIE_NAME)
    except CookieError:
        return False
    if morsel is None or not morsel.value:
        return False
    session = import_module(settings.SESSION_ENGINE).SessionStore(morsel.value)
    return bool(get_user(SimpleNamespace(session=session)).is_authenticated)  # type: ignore[arg-type]


@functools.cache
def _import_paths() -> frozenset[str]:
    return frozenset(reverse(name) for name in IMPORT_LIMITS)


def _import_name(path: str) -> str | None:
    """The URL name of the import (or send) endpoint at `path`, None for any other path."""
    try:
        name = resolve(path).url_name
    except Resolver404:
        return None
    return name if name in WIDER_LIMITS else None


async def body_refuse(send: Send, answer: tuple[int, bytes, bytes]) -> None:
    status, kind, body = answer
    headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
