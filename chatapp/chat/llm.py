"""The only place that talks to models: any OpenAI-compatible endpoint, or the built-in offline model.

Every failure leaves this module as an `LLMError` whose `user_message` is plain words for the chat
and whose text can never contain the API key: provider messages are scrubbed, and errors are raised
outside the handler of the SDK exception so no traceback chains back to a raw provider message.

The chat path uses `max_retries=0`: a failed reply is shown with a Retry button and the user decides.

Redirects are never followed (a public URL answering 307 to 169.254.169.254 would otherwise be an
SSRF way around the base-URL check): a redirect is reported as a failure naming where it pointed.
When private addresses are not allowed, the endpoint's host is checked again before each connection
(cached a few seconds per host), which narrows DNS rebinding after the save-time check.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import openai
from django.conf import settings
from django.core.exceptions import ValidationError
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import optimizer

from .crypto import SecretDecryptError, secret_decrypt
from .netguard import base_url_validate

if TYPE_CHECKING:
    from .models import LLMConfig

logger = logging.getLogger(__name__)

OFFLINE_MODEL = "offline-demo"
OFFLINE_LABEL = "Offline demo model"
OFFLINE_CONTEXT_WINDOW = 16384
OFFLINE_MAX_OUTPUT = 1024
SUMMARY_PREFIX = "[Conversation summary"
# A placeholder keeps the SDK from falling back to the server's OPENAI_API_KEY environment variable
# (which must never be sent to a user-supplied URL); keyless local servers ignore it.
NO_KEY = "no-key"
_CLIENT_CACHE_SIZE = 32
_CONNECTION_TEST_TIMEOUT = 20.0
# How long a host's connect-time address check is trusted: short, so a DNS record switched to a
# private address after the check is caught soon, yet a chat's requests do not each resolve again.
_ADDRESS_CHECK_TTL = 10.0
_ADDRESS_CHECK_CACHE_SIZE = 256
# Endpoint quirks are at most three (see _quirk_for), so one more attempt than that always ends.
_QUIRK_ATTEMPTS = 4


# --- public types ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LLMTarget:
    base_url: str
    model: str
    api_key: str = field(repr=False)
    temperature: float
    max_output_tokens: int
    context_window: int
    offline: bool
    label: str
    # The stored key could not be decrypted (the server's encryption key changed): nothing is sent.
    key_unreadable: bool = False


@dataclass(frozen=True, slots=True)
class Delta:
    text: str


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    # Prompt tokens served from the provider's prompt cache; None when the endpoint does not say.
    cached_tokens: int | None = 0


LLMEvent = Delta | Usage


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    model: str
    finish_reason: str | None = None


ERROR_KINDS = frozenset(
    {"auth", "not_found", "rate_limit", "server", "timeout", "connection", "bad_request", "stream_cut"}
)
_RETRYABLE = {"rate_limit", "server", "timeout", "connection", "stream_cut"}


class LLMError(Exception):
    """A model call failed. `str(error)` is the plain-words `user_message`; `detail` is the scrubbed
    provider text for logs."""

    def __init__(
        self,
        kind: str,
        user_message: str,
        *,
        status: int | None = None,
        retryable: bool | None = None,
        detail: str = "",
    ) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown LLMError kind {kind!r}")
        super().__init__(user_message)
        self.kind = kind
        self.user_message = user_message
        self.status = status
        self.retryable = kind in _RETRYABLE if retryable is None else retryable
        self.detail = detail

    def __repr__(self) -> str:
        return f"LLMError(kind={self.kind!r}, status={self.status!r}, user_message={self.user_message!r})"


# --- targets -----------------------------------------------------------------------------------


def offline_target() -> LLMTarget:
    return LLMTarget(
        base_url="",
        model=OFFLINE_MODEL,
        api_key="",
        temperature=0.0,
        max_output_tokens=OFFLINE_MAX_OUTPUT,
        context_window=OFFLINE_CONTEXT_WINDOW,
        offline=True,
        label=OFFLINE_LABEL,
    )


def llm_target_for(*, config: LLMConfig | None) -> LLMTarget:
    """What a request should call: the config's endpoint, or the built-in offline model for None."""
    if config is None:
        return offline_target()
    unreadable = False
    try:
        api_key = secret_decrypt(config.api_key_encrypted)
    except SecretDecryptError:
        # Encrypted with a key no longer configured: no request goes out (with no key, or a
        # placeholder, the endpoint would only answer 401); the user re-enters the key.
        logger.warning("LLM config %s: stored API key cannot be decrypted with the configured keys", config.pk)
        api_key, unreadable = "", True
    return LLMTarget(
        base_url=config.base_url,
        model=config.model,
        api_key=api_key,
        temperature=config.temperature,
        max_output_tokens=config.max_output_tokens,
        context_window=config.context_window,
        offline=False,
        label=config.name,
        key_unreadable=unreadable,
    )


def _key_unreadable_error(target: LLMTarget) -> LLMError:
    return LLMError(
        "auth",
        f"The API key stored for “{target.label}” can no longer be read (the server's encryption key "
        "changed). Enter the key again in Settings.",
        retryable=False,
    )


# --- clients -------------------------------------------------------------------------------------

_sync_clients: OrderedDict[tuple, openai.OpenAI] = OrderedDict()
_sync_lock = threading.Lock()
# httpx async pools belong to the event loop that opened them, so async clients are cached per loop.
_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, OrderedDict[tuple, openai.AsyncOpenAI]] = (
    weakref.WeakKeyDictionary()
)
_closing: set[asyncio.Task] = set()


def _timeout(seconds: float) -> httpx.Timeout:
    # The read timeout applies between chunks, so a long streamed reply is fine while a silent
    # endpoint is not.
    return httpx.Timeout(seconds, connect=min(seconds, 10.0))


def _client_key(target: LLMTarget, timeout: float, max_retries: int) -> tuple:
    # The key is hashed so client caches never hold it as a dict key that could end up in a dump.
    key_hash = hashlib.sha256(target.api_key.encode()).hexdigest()
    return (target.base_url, key_hash, float(timeout), max_retries)


def _client_kwargs(target: LLMTarget, timeout: float, max_retries: int) -> dict[str, Any]:
    return {
        "base_url": target.base_url,
        "api_key": target.api_key or NO_KEY,
        "timeout": _timeout(timeout),
        "max_retries": max_retries,
        # Never forward the server operator's OpenAI organization/project to a user's endpoint.
        "default_headers": {"OpenAI-Organization": openai.Omit(), "OpenAI-Project": openai.Omit()},
    }


# --- connect-time address check ------------------------------------------------------------------


class EndpointAddressRefused(httpx.ConnectError):
    """The endpoint's host resolves to an address this server may not call (checked at connect time)."""


_address_checks: OrderedDict[tuple[str, str, int], tuple[float, str | None]] = OrderedDict()
_address_checks_lock = threading.Lock()


def _address_check_cached(key: tuple[str, str, int]) -> tuple[bool, str | None]:
    """(known, refusal) for a host checked less than _ADDRESS_CHECK_TTL ago."""
    with _address_checks_lock:
        hit = _address_checks.get(key)
        if hit is None or hit[0] < time.monotonic():
            return False, None
        return True, hit[1]


def _address_check_run(key: tuple[str, str, int]) -> str | None:
    """Resolve and judge the host now (netguard's rules); the refusal in plain words, or None."""
    scheme, host, port = key
    shown_host = f"[{host}]" if ":" in host else host
    refusal: str | None = None
    try:
        base_url_validate(f"{scheme}://{shown_host}:{port}/", allow_private=False)
    except ValidationError as exc:
        if exc.code == "private_address":
            refusal = exc.messages[0]
        else:
            # Unresolvable now: not cached, and the connection attempt reports it in its own words.
            return None
    with _address_checks_lock:
        _address_checks[key] = (time.monotonic() + _ADDRESS_CHECK_TTL, refusal)
        _address_checks.move_to_end(key)
        while len(_address_checks) > _ADDRESS_CHECK_CACHE_SIZE:
            _address_checks.popitem(last=False)
    return refusal


def _address_check_key(request: httpx.Request) -> tuple[str, str, int] | None:
    if settings.ALLOW_PRIVATE_LLM_URLS:
        return None
    url = request.url
    return (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))


def _address_refused(request: httpx.Request, refusal: str | None) -> None:
    if refusal is not None:
        raise EndpointAddressRefused(refusal, request=request)


class _GuardedTransport(httpx.HTTPTransport):
    """Checks the host's resolved addresses before each request (see the module docstring)."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        key = _address_check_key(request)
        if key is not None:
            known, refusal = _address_check_cached(key)
            _address_refused(request, refusal if known else _address_check_run(key))
        return super().handle_request(request)


class _AsyncGuardedTransport(httpx.AsyncHTTPTransport):
    """_GuardedTransport for the async client: a resolution, when needed, runs off the event loop."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        key = _address_check_key(request)
        if key is not None:
            known, refusal = _address_check_cached(key)
            if not known:
                refusal = await asyncio.to_thread(_address_check_run, key)
            _address_refused(request, refusal)
        return await super().handle_async_request(request)


def _http_client() -> httpx.Client:
    return openai.DefaultHttpxClient(
        follow_redirects=False, transport=_GuardedTransport(limits=openai.DEFAULT_CONNECTION_LIMITS)
    )


def _async_http_client() -> httpx.AsyncClient:
    return openai.DefaultAsyncHttpxClient(
        follow_redirects=False, transport=_AsyncGuardedTransport(limits=openai.DEFAULT_CONNECTION_LIMITS)
    )


def _sync_client(target: LLMTarget, *, timeout: float | None = None, max_retries: int = 0) -> openai.OpenAI:
    timeout = float(settings.LLM_TIMEOUT_SECONDS if timeout is None else timeout)
    key = _client_key(target, timeout, max_retries)
    with _sync_lock:
        client = _sync_clients.get(key)
        if client is not None:
            _sync_clients.move_to_end(key)
            return client
        client = openai.OpenAI(**_client_kwargs(target, timeout, max_retries), http_client=_http_client())
        _sync_clients[key] = client
        while len(_sync_clients) > _CLIENT_CACHE_SIZE:
            _, old = _sync_clients.popitem(last=False)
            old.close()
        return client


def _async_client(target: LLMTarget) -> openai.AsyncOpenAI:
    timeout = float(settings.LLM_TIMEOUT_SECONDS)
    key = _client_key(target, timeout, 0)
    loop = asyncio.get_running_loop()
    # Clients of a closed loop can never be used again (and may keep it alive through their pools).
    for old_loop in [other for other in list(_async_clients) if other.is_closed()]:
        _async_clients.pop(old_loop, None)
    clients = _async_clients.setdefault(loop, OrderedDict())
    client = clients.get(key)
    if client is not None:
        clients.move_to_end(key)
        return client
    client = openai.AsyncOpenAI(**_client_kwargs(target, timeout, 0), http_client=_async_http_client())
    clients[key] = client
    while len(clients) > _CLIENT_CACHE_SIZE:
        _, old = clients.popitem(last=False)
        task = loop.create_task(old.close())
        _closing.add(task)
        task.add_done_callback(_closing.discard)
    return client


# --- endpoint quirks -------------------------------------------------------------------------------
# Some endpoints reject parameters others require: OpenAI reasoning models want max_completion_tokens
# and no temperature; some proxies reject stream_options. A 400 naming the parameter is answered by
# retrying once without it, and the finding is remembered per (base_url, model).

_quirks: OrderedDict[tuple[str, str], frozenset[str]] = OrderedDict()
_quirks_lock = threading.Lock()


def _known_quirks(target: LLMTarget) -> frozenset[str]:
    with _quirks_lock:
        return _quirks.get((target.base_url, target.model), frozenset())


def _learn_quirk(target: LLMTarget, quirk: str) -> None:
    with _quirks_lock:
        key = (target.base_url, target.model)
        _quirks[key] = _quirks.get(key, frozenset()) | {quirk}
        _quirks.move_to_end(key)
        while len(_quirks) > 256:
            _quirks.popitem(last=False)


def _quirk_for(exc: Exception, quirks: frozenset[str]) -> str | None:
    if not isinstance(exc, openai.BadRequestError):
        return None
    text = _provider_message(exc).lower()
    if "max_completion_tokens" in text and "max_completion_tokens" not in quirks:
        return "max_completion_tokens"
    if "stream_options" in text and "no_stream_options" not in quirks:
        return "no_stream_options"
    unsupported = re.search(r"unsupported|not support|only the default", text)
    if "temperature" in text and "no_temperature" not in quirks and unsupported:
        return "no_temperature"
    return None


class _QuirkAttempts:
    """The attempts of one request, each with the endpoint quirks known so far.

    Iterating yields the quirks to send the next attempt with; `failed(exc)` is called from the SDK
    exception's handler and either learns a quirk (the loop goes on) or keeps the LLMError, which
    `raise_failure()` raises after the loop, outside that handler (see the module docstring).
    """

    def __init__(self, target: LLMTarget) -> None:
        self.target = target
        self.quirks = _known_quirks(target)
        self.error: LLMError | None = None

    def __iter__(self) -> Iterator[frozenset[str]]:
        for _attempt in range(_QUIRK_ATTEMPTS):
            yield self.quirks
            if self.error is not None:
                return

    def failed(self, exc: Exception) -> None:
        quirk = _quirk_for(exc, self.quirks)
        if quirk is None:
            self.error = _llm_error(exc, self.target, started=False)
            return
        self.quirks = self.quirks | {quirk}
        _learn_quirk(self.target, quirk)

    def raise_failure(self) -> None:
        if self.error is not None:
            raise self.error


def _request_params(
    target: LLMTarget, messages: list[dict], *, stream: bool, max_tokens: int | None, quirks: frozenset[str]
) -> dict[str, Any]:
    params: dict[str, Any] = {"model": target.model, "messages": messages}
    if "no_temperature" not in quirks:
        params["temperature"] = target.temperature
    limit = max_tokens if max_tokens is not None else target.max_output_tokens
    params["max_completion_tokens" if "max_completion_tokens" in quirks else "max_tokens"] = limit
    if stream:
        params["stream"] = True
        if "no_stream_options" not in quirks:
            params["stream_options"] = {"include_usage": True}
    return params


# --- errors --------------------------------------------------------------------------------------

_KEY_LIKE = re.compile(r"\b(sk|pk|rk|key|gsk|xai)-[A-Za-z0-9_\-]{6,}")


def _scrub(text: str, api_key: str) -> str:
    if api_key and len(api_key) >= 4:
        text = text.replace(api_key, "[redacted]")
    text = _KEY_LIKE.sub(lambda m: f"{m.group(1)}-[redacted]", text)
    return re.sub(r"(?i)(bearer\s+)\S+", r"\1[redacted]", text)


def _provider_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else None
        if isinstance(message, str) and message:
            return message
    return getattr(exc, "message", None) or str(exc)


def _endpoint_name(target: LLMTarget) -> str:
    parts = urlsplit(target.base_url)
    host = parts.hostname or target.base_url
    return f"{host}:{parts.port}" if parts.port else host


def _retry_after(exc: openai.APIStatusError) -> str | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    if value and value.strip().isdigit():
        return value.strip()
    return None


def _llm_error(exc: BaseException, target: LLMTarget, *, started: bool) -> LLMError:
    """Map an SDK/transport exception to an LLMError with plain words and no secret in it."""
    if isinstance(exc, LLMError):
        return exc
    if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException):
        return _timeout_error(started=started)
    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc, target)
    if isinstance(exc, openai.APIResponseValidationError):
        content_type = exc.response.headers.get("content-type", "") if exc.response is not None else ""
        return _not_chat_completions_error(target, content_type)
    endpoint = _endpoint_name(target)
    if isinstance(exc, openai.APIConnectionError):
        if isinstance(exc.__cause__, EndpointAddressRefused):
            return LLMError("connection", f"The model endpoint's address was refused: {exc.__cause__} "
                            "Check the base URL in Settings.", retryable=False)
        return LLMError("connection", f"Could not connect to the model endpoint at {endpoint}. Check the base URL "
                        "in Settings and that the server is running.")
    if isinstance(exc, openai.APIError):  # an error event inside an otherwise good stream
        detail = _scrub(_provider_message(exc), target.api_key)[:300]
        return LLMError("server", f"The model endpoint reported an error mid-reply: {detail} Retry in a moment.",
                        detail=detail)
    if isinstance(exc, httpx.TransportError):
        if started:
            return _stream_cut_error()
        return LLMError("connection", f"The connection to the model endpoint at {endpoint} failed. Retry in a moment.")
    return LLMError("server", "The model call failed unexpectedly. Retry in a moment.")


def _timeout_error(*, started: bool) -> LLMError:
    seconds = settings.LLM_TIMEOUT_SECONDS
    timeout = f"{seconds} second" if seconds == 1 else f"{seconds} seconds"
    if started:
        return LLMError("timeout", f"The model stopped sending mid-reply and nothing came for {timeout}. "
                        "Retry to get a full reply.")
    return LLMError("timeout", f"The model endpoint did not answer within {timeout}. "
                    "Retry, or check that the endpoint is not overloaded.")


def _status_error(exc: openai.APIStatusError, target: LLMTarget) -> LLMError:
    """An HTTP error answer, by status: what the user can do about it."""
    status = exc.status_code
    if 300 <= status < 400:
        # Never the body: it may be whatever the redirect's target would have answered.
        return _redirect_error(exc, target)
    detail = _scrub(_provider_message(exc), target.api_key)[:300]
    if status == 429:
        return _rate_limit_error(exc, detail)
    words = {
        401: ("auth", "The model endpoint rejected the API key (401). Check the key in Settings."),
        403: ("auth", f"The model endpoint refused access to “{target.model}” (403). "
              "Check that the API key may use this model."),
        404: ("not_found", f"The model endpoint does not know the model “{target.model}” (404). "
              "Check the model name and the base URL in Settings."),
        408: ("timeout", "The model endpoint gave up on the request (408). Retry."),
    }.get(status)
    if words is None and status >= 500:
        words = ("server", f"The model endpoint had an internal error ({status}). Retry in a moment.")
    if words is None:
        words = ("bad_request", f"The model endpoint rejected the request ({status}): {detail}")
    return LLMError(words[0], words[1], status=status, detail=detail)


def _rate_limit_error(exc: openai.APIStatusError, detail: str) -> LLMError:
    code = str(getattr(exc, "code", None) or "")
    if "insufficient_quota" in code or "quota" in detail.lower():
        return LLMError("rate_limit", "The account behind this API key has run out of credit or quota (429). "
                        "Check billing with your provider.", status=429, retryable=False, detail=detail)
    wait = _retry_after(exc)
    when = f"Wait {wait} seconds and retry." if wait else "Wait a moment and retry."
    return LLMError("rate_limit", f"The model endpoint is rate-limiting requests (429). {when}",
                    status=429, detail=detail)


def _redirect_error(exc: openai.APIStatusError, target: LLMTarget) -> LLMError:
    response = exc.response
    location = response.headers.get("location", "").strip() if response is not None else ""
    try:
        where = str(response.url.join(location)) if location else ""
    except (httpx.InvalidURL, ValueError):
        where = location
    where = _scrub(where, target.api_key)[:300] or "another address (no Location given)"
    return LLMError(
        "bad_request",
        f"The model endpoint at {_endpoint_name(target)} redirected the request ({exc.status_code}) to {where}. "
        "Redirects are not followed: use the final URL as the base URL in Settings.",
        status=exc.status_code,
        retryable=False,
    )


def _not_chat_completions_error(target: LLMTarget, content_type: str) -> LLMError:
    shown = content_type.split(";")[0].strip() or "unknown"
    return LLMError(
        "bad_request",
        f"The endpoint at {_endpoint_name(target)} answered, but not with a chat completion (content type {shown}). "
        "Check the base URL: OpenAI-compatible servers usually end in /v1.",
        retryable=False,
    )


def _stream_cut_error() -> LLMError:
    return LLMError("stream_cut", "The reply was cut off before it finished: the connection to the model endpoint "
                    "closed mid-stream. Retry to get a full reply.")


_CALL_ERRORS = (openai.OpenAIError, httpx.HTTPError)
# What chat.completions.create() passes besides the body: without it no Authorization header is sent.
_REQUEST_OPTIONS: openai.RequestOptions = {"security": {"bearer_auth": True}}


# --- streaming -------------------------------------------------------------------------------------


async def llm_stream(
    *, target: LLMTarget, messages: list[dict], context_note: str | None = None
) -> AsyncIterator[LLMEvent]:
    """Stream a reply as Delta events, then one Usage event when the endpoint reports usage.

    `context_note` is read only by the offline model (a sentence from the caller on what the
    optimizer did, e.g. that older messages were left out); real endpoints never see it.
    Raises LLMError; a stream that ends without a finish_reason raises kind "stream_cut".
    """
    if target.offline:
        async for event in _offline_stream(target=target, messages=messages, context_note=context_note):
            yield event
        return
    if target.key_unreadable:
        raise _key_unreadable_error(target)

    stream = await _stream_open(target, messages)
    reading = _StreamReading()
    try:
        try:
            async for chunk in stream:
                for text in reading.take(chunk):
                    yield Delta(text)
        except _CALL_ERRORS as exc:
            reading.error = _llm_error(exc, target, started=reading.started)
    finally:
        # Also runs when the consumer stops early (Stop button, client gone): frees the connection.
        await stream.close()
    if reading.error is not None:
        raise reading.error
    if not reading.finished:
        content_type = stream.response.headers.get("content-type", "")
        if reading.chunks == 0 and "event-stream" not in content_type:
            raise _not_chat_completions_error(target, content_type)
        raise _stream_cut_error()
    if reading.usage is not None:
        yield reading.usage


@dataclass
class _StreamReading:
    """What a streamed reply has shown so far: text started, finish_reason seen, usage, chunks."""

    started: bool = False
    finished: bool = False
    chunks: int = 0
    usage: Usage | None = None
    error: LLMError | None = None

    def take(self, chunk: ChatCompletionChunk) -> list[str]:
        """The chunk's text pieces; notes its usage and finish_reason."""
        self.chunks += 1
        if chunk.usage is not None:
            self.usage = _usage_from(chunk.usage)
        texts = []
        for choice in chunk.choices:
            text = choice.delta.content if choice.delta is not None else None
            if text:
                self.started = True
                texts.append(text)
            if choice.finish_reason:
                self.finished = True
        return texts


async def _stream_open(target: LLMTarget, messages: list[dict]) -> openai.AsyncStream[ChatCompletionChunk]:
    """Start the streamed request, retrying with each endpoint quirk it reveals (see _QuirkAttempts)."""
    client = _async_client(target)
    attempts = _QuirkAttempts(target)
    for quirks in attempts:
        try:
            # The low-level post, not chat.completions.create(): create() runs the SDK's typed
            # request-body transform over every message, which cost ~127 ms CPU per call for a
            # 180-message context against ~17 ms this way, on the event loop every chat shares. Our
            # params are already plain JSON; the response side (streaming, error types) is the same.
            return await client.post(
                "/chat/completions",
                body=_request_params(target, messages, stream=True, max_tokens=None, quirks=quirks),
                options=_REQUEST_OPTIONS,
                cast_to=ChatCompletionChunk,
                stream=True,
                stream_cls=openai.AsyncStream[ChatCompletionChunk],
            )
        except _CALL_ERRORS as exc:
            attempts.failed(exc)
    attempts.raise_failure()
    raise LLMError("server", "The model call failed unexpectedly. Retry in a moment.")  # no attempt was made


def _usage_from(usage: Any) -> Usage:
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) if details is not None else None
    return Usage(
        prompt_tokens=int(usage.prompt_tokens or 0),
        completion_tokens=int(usage.completion_tokens or 0),
        cached_tokens=None if cached is None else int(cached),
    )


# --- one-shot completion (workers) --------------------------------------------------------------


def llm_complete(
    *, target: LLMTarget, messages: list[dict], max_tokens: int | None = None, max_retries: int = 0,
    timeout: float | None = None,
) -> Completion:
    """A whole reply at once (summary workers). `max_retries` lets a worker use the SDK's backoff;
    `timeout` (seconds, default settings.LLM_TIMEOUT_SECONDS) bounds each call."""
    if target.offline:
        text = offline_reply(messages=messages, model=target.model)
        return Completion(
            text=text,
            prompt_tokens=optimizer.count_messages(messages, model=target.model),
            completion_tokens=optimizer.count_text(text, model=target.model),
            cached_tokens=0,
            model=target.model,
            finish_reason="stop",
        )
    if target.key_unreadable:
        raise _key_unreadable_error(target)
    client = _sync_client(target, timeout=timeout, max_retries=max_retries)
    return _complete_with(_raw_create(client), target, messages, max_tokens=max_tokens)


def _raw_create(client: openai.OpenAI) -> Callable[..., Any]:
    """A non-streaming create() without the SDK's request-body transform (see llm_stream): summary
    prompts are whole spans of a conversation, so the transform's CPU cost grows with them."""

    def create(**params: Any) -> Any:
        return client.post("/chat/completions", body=params, options=_REQUEST_OPTIONS, cast_to=ChatCompletion)

    return create


def _complete_with(create: Callable[..., Any], target: LLMTarget, messages: list[dict], *, max_tokens: int | None
                   ) -> Completion:
    response: Any = None
    attempts = _QuirkAttempts(target)
    for quirks in attempts:
        try:
            response = create(**_request_params(target, messages, stream=False, max_tokens=max_tokens, quirks=quirks))
            break
        except _CALL_ERRORS as exc:
            attempts.failed(exc)
    attempts.raise_failure()
    if not hasattr(response, "choices"):  # the SDK hands back raw text when the body is not JSON
        raise _not_chat_completions_error(target, "text/html or other non-JSON")
    choice = response.choices[0] if response.choices else None
    usage = _usage_from(response.usage) if response.usage is not None else Usage(0, 0, 0)
    return Completion(
        text=(choice.message.content or "") if choice is not None else "",
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cached_tokens=usage.cached_tokens or 0,
        model=response.model or target.model,
        finish_reason=choice.finish_reason if choice is not None else None,
    )


# --- connection test -------------------------------------------------------------------------------


def llm_test_connection(*, target: LLMTarget) -> tuple[bool, str]:
    """List the endpoint's models (or, where there is no list, make a one-token request); plain words."""
    if target.offline:
        return True, "The offline demo model is built in: there is nothing to connect to."
    if target.key_unreadable:
        return False, _key_unreadable_error(target).user_message
    endpoint = _endpoint_name(target)
    timeout = min(float(settings.LLM_TIMEOUT_SECONDS), _CONNECTION_TEST_TIMEOUT)
    client = _sync_client(target, timeout=timeout)
    error: LLMError | None = None
    model_ids: list[str] = []
    try:
        model_ids = [m.id for m in client.models.list()]
    except openai.APIStatusError as exc:
        if exc.status_code in {404, 405}:
            return _one_token_test(client, target, prefix=f"Connected to {endpoint} (it has no model list). ")
        error = _llm_error(exc, target, started=False)
    except _CALL_ERRORS as exc:
        error = _llm_error(exc, target, started=False)
    except (AttributeError, TypeError, ValueError):
        # The SDK fails this way when the body is not a model list at all (e.g. an HTML page).
        error = _not_chat_completions_error(target, "not an OpenAI-compatible model list")
    if error is not None:
        return False, error.user_message
    if target.model in model_ids:
        return True, f"Connected to {endpoint}. It lists {len(model_ids)} models, including “{target.model}”."
    ok, message = _one_token_test(client, target, prefix="")
    if ok:
        return True, (f"Connected to {endpoint}. “{target.model}” is not among the {len(model_ids)} models it lists, "
                      "but it answered a one-token test request.")
    shown = ", ".join(model_ids[:8]) + (f" and {len(model_ids) - 8} more" if len(model_ids) > 8 else "")
    listed = f" It lists: {shown}." if model_ids else " It lists no models."
    return False, f"Connected to {endpoint}, but the test request failed: {message}{listed}"


def _one_token_test(client: openai.OpenAI, target: LLMTarget, *, prefix: str) -> tuple[bool, str]:
    try:
        _complete_with(_raw_create(client), target, [{"role": "user", "content": "Reply with OK."}],
                       max_tokens=1)
    except LLMError as exc:
        return False, prefix + exc.user_message
    return True, prefix + f"“{target.model}” answered a one-token test request."


# --- the built-in offline model ----------------------------------------------------------------


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def offline_reply(*, messages: Sequence[dict], model: str = OFFLINE_MODEL, context_note: str | None = None) -> str:
    """The offline model's answer: a description of the context it was sent."""
    roles: dict[str, int] = {}
    for m in messages:
        roles[str(m.get("role"))] = roles.get(str(m.get("role")), 0) + 1
    tokens = optimizer.count_messages(list(messages), model=model)
    estimated = " (estimated with a generic tokenizer)" if optimizer.is_estimated(model) else ""
    # the summary rides in the leading system message (optimizer.shape), after the system prompt
    summary = next(
        (_text_of(m.get("content"))[k:] for m in messages
         if m.get("role") == "system" and (k := _text_of(m.get("content")).find(SUMMARY_PREFIX)) >= 0),
        None,
    )
    last_user = next((_text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    snippet = " ".join(last_user.split()[:24])
    if len(last_user.split()) > 24:
        snippet += " …"

    role_text = ", ".join(f"{n} {role}" for role, n in sorted(roles.items()))
    if summary is not None:
        summary_line = f"- **Summary:** yes — {summary.splitlines()[0].strip()}"
    else:
        summary_line = "- **Summary:** none in this context."
    trim_line = (
        f"- **Optimizer:** {context_note.strip()}"
        if context_note and context_note.strip()
        else "- **Optimizer:** no note from the app; the context gauge shows whether older messages were left out."
    )
    lines = [
        f"**{OFFLINE_LABEL}** — a built-in stand-in that answers without any network call. It describes the "
        "context the optimizer sent it, so you can explore the app before adding a model in Settings.",
        "",
        f"- **Messages received:** {len(messages)} ({role_text or 'none'})",
        f"- **Context size:** {tokens:,} tokens{estimated}",
        summary_line,
        trim_line,
        f"- **Your last message:** {len(last_user):,} characters" + (f", starting “{snippet}”" if snippet else ""),
        "",
        "Add an OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, …) in Settings to get real answers.",
    ]
    return "\n".join(lines)


async def _offline_stream(
    *, target: LLMTarget, messages: list[dict], context_note: str | None
) -> AsyncIterator[LLMEvent]:
    text = offline_reply(messages=messages, model=target.model, context_note=context_note)
    delay = max(0, int(getattr(settings, "OFFLINE_MODEL_DELAY_MS", 12))) / 1000
    for piece in re.findall(r"\S+\s*|\s+", text):
        # Even with no delay, yield control so the stream behaves like a network one (Stop works).
        await asyncio.sleep(delay)
        yield Delta(piece)
    yield Usage(
        prompt_tokens=optimizer.count_messages(messages, model=target.model),
        completion_tokens=optimizer.count_text(text, model=target.model),
        cached_tokens=0,
    )
