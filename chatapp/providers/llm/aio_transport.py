"""An httpx transport that moves the bytes with aiohttp, for the async (streaming) model client.

Why: a streamed reply arrives as one HTTP chunk per token or so, and the event loop every chat shares
reads each one. Through httpx's own transport that is httpcore and h11, in Python: 2.6 ms of the
loop's CPU for a 53-chunk reply, against 1.35 ms through aiohttp's C parser (the same fake model,
the same SDK request and SSE reading, alternated three times in one process). Everything above the
wire stays as it was: the SDK builds the request, retries and raises its error types; the httpx
client owns redirects (never followed) and timeouts; a compressed body is inflated here, in bounded
pieces (`BodyReader`, which the sync client's transport uses too), and a body that is not an event
stream is bounded whole; the guard (`addresses.py`) gives aiohttp the only addresses it may connect to.

aiohttp's exceptions are turned into the httpx ones httpx's transport raises in the same situation,
since the SDK (timeout or connection error) and `errors.py` (a reply cut mid-stream) tell them apart.
"""

from __future__ import annotations

import contextlib
import functools
import ssl
import zlib
from collections.abc import AsyncIterator, Iterator

import aiohttp
import httpx
from aiohttp.abc import AbstractResolver


@contextlib.contextmanager
def _httpx_errors(request: httpx.Request, *, reading: bool) -> Iterator[None]:
    """aiohttp's (and asyncio's) transport errors as httpx's, for `request`; `reading`: in the body."""
    try:
        yield
    except aiohttp.ConnectionTimeoutError as exc:
        raise httpx.ConnectTimeout(str(exc) or "connect timed out", request=request) from exc
    except (TimeoutError, aiohttp.SocketTimeoutError, aiohttp.ServerTimeoutError) as exc:
        raise httpx.ReadTimeout(str(exc) or "read timed out", request=request) from exc
    except (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError) as exc:
        raise httpx.UnsupportedProtocol(str(exc), request=request) from exc
    except aiohttp.ClientConnectorError as exc:
        raise httpx.ConnectError(str(exc), request=request) from exc
    except (aiohttp.ClientOSError, aiohttp.ClientConnectionResetError) as exc:
        # Connected, then reset before the answer came (a crashed server): httpcore's ReadError, not a
        # failure to connect (errors.py tells the user which).
        raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientResponseError) as exc:
        # The peer closed or broke the message (before its head, or mid-body): what h11 reports as a
        # protocol error.
        raise httpx.RemoteProtocolError(str(exc) or "server disconnected", request=request) from exc
    except (aiohttp.ClientError, OSError) as exc:
        error = httpx.ReadError if reading else httpx.ConnectError
        raise error(str(exc) or type(exc).__name__, request=request) from exc


# The most bytes kept of a body that is not an event stream (a whole answer, an error page), and of one
# line or event of a stream: a server sending an endless body (a file, a broken proxy) would otherwise
# fill this process's memory. Far above any reply: MAX_REPLY_CHARS of answer and as much thinking,
# even written as JSON escapes. A stream's whole body has no bound (a long reply is long); its text is
# capped where it is kept (reply_stream).
BODY_MAX_BYTES = 64 * 1024 * 1024


class BodyTooLarge(httpx.HTTPError):
    """A response body, or one line or event of a stream, past BODY_MAX_BYTES."""


class BodyEncodingRefused(httpx.HTTPError):
    """A body compressed in a way that was not asked for (ACCEPT_ENCODING): its words are the encoding."""


# What the clients ask bodies to be compressed with, and all they read compressed: undone here in
# pieces of a megabyte at most (Inflater), not by httpx, whose decoders make all a body stands for in
# one call: 300 KB of gzip made 1.3 GB of an error page in memory.
ACCEPT_ENCODING = "gzip, deflate"
_INFLATED = frozenset({"gzip", "x-gzip", "deflate"})
_PIECE_BYTES = 2**20


def body_capped(content_type: str) -> bool:
    """Whether a body of this type is bounded whole (anything but an event stream, bounded by line)."""
    return "event-stream" not in content_type.lower()


class Inflater:
    """gzip or deflate undone a piece at a time."""

    def __init__(self, encoding: str) -> None:
        self.deflate = encoding == "deflate"
        self.undo = zlib.decompressobj(zlib.MAX_WBITS if self.deflate else zlib.MAX_WBITS | 16)
        self.begun = False

    def pieces(self, data: bytes) -> Iterator[bytes]:
        while True:
            try:
                piece = self.undo.decompress(data, _PIECE_BYTES)
            except zlib.error as exc:
                if self.deflate and not self.begun:  # deflate without zlib's header, as httpx reads it too
                    self.undo, self.begun = zlib.decompressobj(-zlib.MAX_WBITS), True
                    continue
                raise httpx.DecodingError(str(exc)) from exc
            self.begun = True
            data = self.undo.unconsumed_tail
            if piece:
                yield piece
            if not data and len(piece) < _PIECE_BYTES:  # a whole piece may have more behind it
                return


class BodyReader:
    """A body's bytes as kept: inflated here (httpx is handed them plain), and bounded whole unless
    it is an event stream; one compressed otherwise than asked is refused. None (`for_headers`) for
    a plain event stream, whose chunks pass as they are."""

    def __init__(self, *, capped: bool, encoding: str) -> None:
        self.room = BODY_MAX_BYTES if capped else None
        names = [name for name in (part.strip().lower() for part in encoding.split(","))
                 if name not in ("", "identity")]
        self.refused = ", ".join(names) if len(names) > 1 or (names and names[0] not in _INFLATED) else ""
        self.inflater = Inflater(names[0]) if names and not self.refused else None

    @classmethod
    def for_headers(cls, content_type: str, encoding: str) -> BodyReader | None:
        capped = body_capped(content_type)
        return cls(capped=capped, encoding=encoding) if capped or encoding.strip() else None

    def take(self, data: bytes) -> Iterator[bytes]:
        if self.refused:
            raise BodyEncodingRefused(self.refused)
        for piece in self.inflater.pieces(data) if self.inflater is not None else (data,):
            if self.room is not None:
                self.room -= len(piece)
                if self.room < 0:
                    raise BodyTooLarge(f"a response body past {BODY_MAX_BYTES:,} bytes")
            yield piece


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default trust store and TLS settings (certificates verify as through httpx's own
    transport), made once per process: loading the CA bundle took 20 ms of CPU, for every model
    client made. A context is safe to share between connections and threads."""
    return httpx.create_ssl_context()


class _Body(httpx.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request, transport: AiohttpTransport) -> None:
        self.response, self.request, self.transport = response, request, transport
        self.closed = False
        self.reader = BodyReader.for_headers(response.headers.get("content-type", ""),
                                             response.headers.get("content-encoding", ""))

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            with _httpx_errors(self.request, reading=True):
                # What the socket has, as it comes: a token must not wait for the next to fill a buffer.
                async for data in self.response.content.iter_any():
                    if self.reader is None:
                        yield data
                        continue
                    for piece in self.reader.take(data):
                        yield piece
        except Exception:
            # Closed here: an error page's read is the SDK's, which closes no response whose read failed.
            await self.aclose()
            raise

    async def aclose(self) -> None:
        # A body read to its end gives its connection back to the pool; one left unread closes it.
        self.response.release()
        if not self.closed:
            self.closed = True
            await self.transport._request_ended()


class AiohttpTransport(httpx.AsyncBaseTransport):
    """One aiohttp session per transport, opened on first use (it belongs to the running loop)."""

    def __init__(self, *, limits: httpx.Limits, resolver: type[AbstractResolver] | None = None) -> None:
        self.limits = limits
        self.resolver = resolver  # made per session: a resolver, like the session, belongs to one loop
        self.ssl = tls_context()
        self.session: aiohttp.ClientSession | None = None
        self.connector: aiohttp.TCPConnector | None = None
        self.requests = 0  # sent and not yet ended (their body not closed)
        self.retired = False  # closed while requests ran: the session closes when the last one ends

    def _session(self) -> aiohttp.ClientSession:
        if self.session is None or self.session.closed:
            self.connector = connector = aiohttp.TCPConnector(
                limit=self.limits.max_connections or 0,
                keepalive_timeout=self.limits.keepalive_expiry or 5.0,
                ssl=self.ssl,
                resolver=self.resolver() if self.resolver is not None else None,
            )
            # Cookies are never kept between calls to an endpoint (httpx's client would keep them,
            # but the SDK sends none and no endpoint needs them).
            self.session = aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(),
                                                 auto_decompress=False)
        return self.session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeout = request.extensions.get("timeout", {})
        body = await request.aread()
        self.requests += 1
        try:
            with _httpx_errors(request, reading=False):
                response = await self._session().request(
                    request.method,
                    str(request.url),
                    headers=list(request.headers.multi_items()),
                    data=body or None,
                    allow_redirects=False,
                    compress=None,
                    timeout=aiohttp.ClientTimeout(
                        total=None, connect=timeout.get("pool"), sock_connect=timeout.get("connect"),
                        sock_read=timeout.get("read"),
                    ),
                )
        except BaseException:
            await self._request_ended()
            raise
        return httpx.Response(
            status_code=response.status,
            # The body is inflated here (BodyReader), never by httpx.
            headers=[(name, value) for name, value in response.raw_headers if name.lower() != b"content-encoding"],
            stream=_Body(response, request, self),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": (response.reason or "").encode("latin-1")},
        )

    async def _request_ended(self) -> None:
        self.requests -= 1
        if self.retired and not self.requests:
            await self._session_close()

    async def aclose(self) -> None:
        """Close the session, or once its requests have ended: a client dropped from the cache
        (transport.py) may still be streaming a reply, which closing its connection now would leave
        waiting for chunks that never come."""
        self.retired = True
        if not self.requests:
            await self._session_close()

    async def _session_close(self) -> None:
        if self.session is not None:
            await self.session.close()

    def loop_closed(self) -> None:
        """Let go of the session of a loop that has closed. Its connections ended with the loop and
        nothing can be awaited there any more; left alone, the session and its connector would be
        reported unclosed (an error in the log) whenever they are collected."""
        session, self.session = self.session, None
        if session is None or session.closed or self.connector is None:
            return
        session.detach()
        # The connector stays referenced as long as this transport (its pooled sockets with it, as
        # httpx's pool kept them). Its close() marks it closed before it first waits, and on a closed
        # loop it has nothing else to do: it is run here, without a loop, up to that first wait.
        closing = self.connector.close()
        try:
            closing.send(None)
        except StopIteration:
            return
        closing.close()  # what it would wait for needs the closed loop: nothing more can be done there
