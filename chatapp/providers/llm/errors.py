"""SDK and transport failures as `LLMError`s with plain words and no secret in them: provider messages
are scrubbed of the API key and anything key-like.
"""

from __future__ import annotations

import html
import json
import re
import ssl
from urllib.parse import urlsplit

import httpx
import openai

from chatapp.chat.textsafe import text_storable
from chatapp.providers.llm.addresses import EndpointAddressRefused, EndpointUnresolvable
from chatapp.providers.llm.aio_transport import ACCEPT_ENCODING, BODY_MAX_BYTES, BodyEncodingRefused, BodyTooLarge
from chatapp.providers.llm.transport import connect_seconds
from chatapp.providers.llm.types import LLMError, LLMTarget
from chatapp.providers.llm.upstream import moderation_flagged, upstream_words
from chatapp.providers.llm.waits import _retry_after, _wait_in_words, _wait_words


class KeepAlivesOnly(httpx.ReadTimeout):
    """A stream that sent nothing but keep-alives for `seconds` (sse.KEEPALIVES_MAX_SECONDS)."""

    def __init__(self, seconds: float, *, request: httpx.Request) -> None:
        super().__init__(f"keep-alives alone for {seconds:g} seconds", request=request)
        self.seconds = seconds


def _key_unreadable_error(target: LLMTarget) -> LLMError:
    return LLMError(
        "auth",
        f"The API key stored for “{target.label}” can no longer be read (the server's encryption key "
        "changed). Enter the key again in Settings.",
        retryable=False,
    )


_KEY_LIKE = re.compile(r"\b(sk|pk|rk|key|gsk|xai)-[A-Za-z0-9_\-]{6,}")


def secret_scrub(text: str, api_key: str) -> str:
    """`text` without the API key, anything key-like or a bearer token, and storable."""
    if api_key and len(api_key) >= 4:
        text = text.replace(api_key, "[redacted]")
    text = _KEY_LIKE.sub(lambda m: f"{m.group(1)}-[redacted]", text)
    # The provider's words end up in a reply's or a summary job's row: a NUL or a lone surrogate in
    # them would make that write fail, and the reply stay "streaming" with its chat locked.
    return text_storable(re.sub(r"(?i)(bearer\s+)\S+", r"\1[redacted]", text))


def _provider_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, list) and body:  # Google's compatible endpoint wraps its error in a list
        body = body[0]
    if isinstance(body, dict):
        body = body.get("error", body)
    if isinstance(body, str) and body.strip():
        # `{"error": "<words>"}` (the SDK hands on the inner value), Ollama's own API shape; or a page's text.
        return _page_text(body.strip())
    if isinstance(body, dict) and isinstance(body.get("message"), str) and body["message"]:
        return body["message"] + upstream_words(body.get("metadata"))
    return _page_text(getattr(exc, "message", None) or str(exc))


_TITLE = re.compile(r"(?is)<title[^>]*>(.*?)</title>")
_TAG = re.compile(r"(?s)<[^>]*>")


def _page_text(text: str) -> str:
    """A proxy's HTML error page (nginx, a load balancer, a CDN) as words: its title, else its text."""
    if not re.search(r"(?i)<(html|!doctype|body|head)\b", text):
        return text
    title = _TITLE.search(text)
    return " ".join(html.unescape(_TAG.sub(" ", title.group(1) if title else text)).split())


def _endpoint_name(target: LLMTarget) -> str:
    parts = urlsplit(target.base_url)
    host = parts.hostname or target.base_url
    if ":" in host:  # an IPv6 address: bracketed, or its port reads as one more group ("::1:8000")
        host = f"[{host}]"
    return f"{host}:{parts.port}" if parts.port else host


def _connect_failure(exc: BaseException, target: LLMTarget, endpoint: str) -> LLMError | None:
    """The error for a host name that does not resolve or a failed TLS handshake among the causes of `exc`
    (aiohttp keeps them as `os_error`), else None: "check that the server is running" would send the
    user the wrong way (the name is the fault, or the server was reached)."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return None
        cause = seen if isinstance(seen, ssl.SSLError | EndpointUnresolvable) else getattr(seen, "os_error", None)
        if isinstance(cause, EndpointUnresolvable):
            # Retryable: a service not up yet resolves once it is.
            return LLMError("connection", f"The host “{urlsplit(target.base_url).hostname}” does not resolve: is "
                            "the service up yet, and the name spelled right? Check the base URL in Settings.")
        if isinstance(cause, ssl.SSLCertVerificationError):
            # aiohttp's error of that class keeps the ssl module's own as `certificate_error`.
            why = getattr(getattr(cause, "certificate_error", cause), "verify_message", None) or "verification failed"
            return LLMError("connection", f"The model endpoint at {endpoint} has a certificate this server does "
                            f"not trust ({why}). Use its trusted address, or http:// on a network you trust.",
                            retryable=False)
        if isinstance(cause, ssl.SSLError):
            return LLMError("connection", f"The model endpoint at {endpoint} answered, but not over HTTPS (the TLS "
                            "handshake failed). A local server (Ollama, LM Studio, vLLM) is usually plain HTTP: start "
                            "the base URL with http://.", retryable=False)
        seen = seen.__cause__ or seen.__context__
    return None


def _llm_error(exc: BaseException, target: LLMTarget, *, started: bool, timeout: float) -> LLMError:
    """Map an SDK/transport exception to an LLMError with plain words and no secret in it.

    `timeout` is the seconds the failed call was given: calls differ (a summary, a connection test),
    and a message naming another figure sends the user to change the wrong setting."""
    if isinstance(exc, LLMError):
        return exc
    if isinstance(exc, openai.APITimeoutError | httpx.TimeoutException):
        return _timed_out(exc, target, started=started, timeout=timeout)
    if isinstance(exc, openai.APIStatusError):
        return _status_error(exc, target)
    if isinstance(exc, openai.APIResponseValidationError):
        content_type = exc.response.headers.get("content-type", "") if exc.response is not None else ""
        return _not_chat_completions_error(target, content_type)
    endpoint = _endpoint_name(target)
    refused = _body_refused(exc if isinstance(exc, httpx.HTTPError) else exc.__cause__, endpoint)  # (sync: wrapped)
    if refused is not None:
        return refused
    if isinstance(exc, json.JSONDecodeError | RecursionError):
        return LLMError("server", f"The model endpoint at {endpoint} answered with a body labelled JSON that is not "
                        "valid JSON (a gateway's own words, or an answer garbled on the way). Retry in a moment; if it "
                        "keeps happening, check the base URL in Settings.")
    if isinstance(exc, openai.APIConnectionError):
        return _connection_error(exc, target, endpoint)
    if isinstance(exc, openai.APIError):  # an error event inside an otherwise good stream
        return _in_band_error(exc, target, started=started)
    if isinstance(exc, httpx.TransportError):
        if started:
            return _stream_cut_error()
        return LLMError("connection", f"The connection to the model endpoint at {endpoint} failed. Retry in a moment.")
    return LLMError("server", "The model call failed unexpectedly. Retry in a moment.")


def _timed_out(exc: Exception, target: LLMTarget, *, started: bool, timeout: float) -> LLMError:
    if isinstance(exc, KeepAlivesOnly):
        return _timeout_error(started=started, seconds=exc.seconds)
    if isinstance(exc, httpx.ConnectTimeout) or isinstance(exc.__cause__, httpx.ConnectTimeout):
        return LLMError("connection", f"Could not connect to the model endpoint at {_endpoint_name(target)} within "
                        f"{_seconds(connect_seconds(timeout))}. Check the base URL in Settings, and that the server is "
                        "reachable from this one (not behind a firewall, nor listening only on its own localhost).")
    return _timeout_error(started=started, seconds=timeout)


def _body_refused(exc: BaseException | None, endpoint: str) -> LLMError | None:
    if isinstance(exc, BodyTooLarge):
        return LLMError("server", f"The model endpoint at {endpoint} sent more than {BODY_MAX_BYTES // 2**20} MB in "
                        "one piece (a whole answer, an error page, or one event of a stream), which no reply needs: "
                        "check that the base URL in Settings is an OpenAI-compatible API.", retryable=False)
    if isinstance(exc, BodyEncodingRefused):
        return LLMError("server", f"The model endpoint at {endpoint} compressed its answer as “{str(exc)[:40]}”, "
                        f"which was not asked for (only {ACCEPT_ENCODING} is read): check the base URL in Settings, "
                        "or the proxy in between.", retryable=False)
    return None


def _connection_error(exc: openai.APIConnectionError, target: LLMTarget, endpoint: str) -> LLMError:
    if isinstance(exc.__cause__, EndpointAddressRefused):
        return LLMError("connection", f"The model endpoint's address was refused: {exc.__cause__} "
                        "Check the base URL in Settings.", retryable=False)
    failure = _connect_failure(exc, target, endpoint)
    if failure is not None:
        return failure
    cause = exc.__cause__
    if isinstance(cause, httpx.RemoteProtocolError) and "disconnected" not in str(cause).lower():
        # Bytes that are no HTTP response (aiohttp's and h11's words for a closed connection say "disconnected").
        return LLMError("connection", f"The model endpoint at {endpoint} answered, but not with an HTTP response this "
                        "server reads: the base URL's port may be another service's. Check the base URL in Settings.",
                        retryable=False)
    if isinstance(cause, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        # Connected, and the connection closed or reset before any answer: the address is right.
        return LLMError("connection", f"The model endpoint at {endpoint} closed the connection without answering "
                        "(a server that stopped or restarted, perhaps loading the model, or a proxy that dropped "
                        "the request). Retry in a moment.")
    return LLMError("connection", f"Could not connect to the model endpoint at {endpoint}. Check the base URL "
                    "in Settings and that the server is running.")


def _in_band_error(exc: openai.APIError, target: LLMTarget, *, started: bool) -> LLMError:
    detail = secret_scrub(_provider_message(exc), target.api_key)[:300]
    if not started and _CONTEXT_WORDS.search(detail):
        # A refusal sent in the stream (llama.cpp): "retry in a moment" would only be refused again.
        return LLMError("bad_request", _context_hint(f"The model endpoint rejected the request: {detail}", target),
                        retryable=False, detail=detail)
    # OpenRouter passes an upstream failure on this way, often before any text.
    return LLMError("server", f"The model endpoint reported an error {'mid-reply' if started else 'before replying'}: "
                    f"{_sentence(detail)} Retry in a moment.", detail=detail)


def _sentence(words: str) -> str:
    """A provider's words ended as a sentence, so that ours after them read apart."""
    return words if words.endswith((".", "!", "?")) else f"{words}."


def _seconds(seconds: float) -> str:
    # Whole seconds as integers (a large setting must not read "1e+06"), fractions as given.
    amount = f"{int(seconds):,}" if float(seconds).is_integer() else f"{seconds:g}"
    return "1 second" if seconds == 1 else f"{amount} seconds"


def _timeout_error(*, started: bool, seconds: float) -> LLMError:
    timeout = _seconds(seconds)
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
    detail = secret_scrub(_provider_message(exc), target.api_key)[:300]
    if status == 429:
        return _rate_limit_error(exc, detail)
    words = {
        401: ("auth", "The model endpoint rejected the API key (401). Check the key in Settings.") if target.api_key
        # No key stored (never entered, or cleared when the base URL moved to another server): none to check.
        else ("auth", f"The model endpoint wants an API key (401), and none is set for “{target.label}”: enter it "
              "in Settings."),
        403: ("bad_request", f"The provider's moderation refused this message (403): {_sentence(detail)} Rephrase "
              "the message.") if moderation_flagged(exc.body)
        else ("auth", f"The model endpoint refused access to “{target.model}” (403). "
              "Check that the API key may use this model."),
        404: _not_found_words(target),
        408: ("timeout", "The model endpoint gave up on the request (408). Retry."),
    }.get(status)
    if words is None and status >= 500:
        # The server's own words when it gave some (Ollama says why it cannot load a model): no retry cures that.
        said = f": {_sentence(detail)}" if detail and not detail.startswith("Error code:") else "."
        # A 503's Retry-After (a server loading a model, a gateway draining) is the wait a summary's retry keeps.
        wait = _retry_after(exc)
        when = _wait_words(wait) if wait else "Retry in a moment."
        return LLMError("server", f"The model endpoint had an internal error ({status}){said} {when}",
                        status=status, detail=detail, retry_after=float(wait) if wait else None)
    if words is None:
        words = ("bad_request", f"The model endpoint rejected the request ({status}): {detail}")
        if status == 400 and (_CONTEXT_WORDS.search(detail) or "context_length" in str(getattr(exc, "code", ""))):
            words = (words[0], _context_hint(words[1], target))
    return LLMError(words[0], words[1], status=status, detail=detail)


def _context_hint(words: str, target: LLMTarget) -> str:
    """`words` of a context-length refusal, and the setting to change. Requests that long come from the
    config's window (typed, or the default for a model the registry does not know): the endpoint's words
    alone do not say which setting to change."""
    return (f"{_sentence(words)} The context window set for “{target.label}” ({target.context_window:,} tokens) "
            "is more than the endpoint takes: lower it in Settings.")


def base_url_bare(target: LLMTarget) -> bool:
    """Whether the base URL is a server's root, with no path: where Ollama, vLLM and OpenAI answer 404
    to everything (their OpenAI-compatible API is under /v1; Open WebUI addresses Ollama at its root)."""
    return urlsplit(target.base_url).path.strip("/") == ""


def _not_found_words(target: LLMTarget) -> tuple[str, str]:
    if base_url_bare(target):
        # Not "does not know the model": the request missed the API, and the user would pull the model again.
        root = target.base_url.rstrip("/")
        return ("not_found", f"The model endpoint answered 404 (not found) for “{target.model}” at {root}, which "
                f"has no path: OpenAI-compatible servers usually take requests under /v1. In Settings, try {root}/v1 "
                "as the base URL, and check the model name.")
    return ("not_found", f"The model endpoint does not know the model “{target.model}” (404). "
            "Check the model name and the base URL in Settings.")


# llama.cpp's own words: "the request exceeds the available context size, try increasing it".
_CONTEXT_WORDS = re.compile(r"(?i)context[ _]length|context window|context size|maximum context|prompt is too long")


_CREDIT_WORDS = re.compile(r"(?i)quota|billing|credit")


def _rate_limit_error(exc: openai.APIStatusError, detail: str) -> LLMError:
    code = str(getattr(exc, "code", None) or "")
    wait = _retry_after(exc) or _wait_in_words(detail)
    # Out of credit only when nothing says when to come back: Google's per-minute limits of a free tier
    # read "You exceeded your current quota, please check your plan and billing details ... Please retry
    # in 42s", and taking them for an empty account stopped the summaries' retries for good.
    if "insufficient_quota" in code or (wait is None and _CREDIT_WORDS.search(detail)):
        return LLMError("rate_limit", "The account behind this API key has run out of credit or quota (429). "
                        "Check billing with your provider.", status=429, retryable=False, detail=detail)
    when = _wait_words(wait) if wait else "Wait a moment and retry."
    return LLMError("rate_limit", f"The model endpoint is rate-limiting requests (429). {when}",
                    status=429, detail=detail, retry_after=float(wait) if wait else None)


def _redirect_error(exc: openai.APIStatusError, target: LLMTarget) -> LLMError:
    response = exc.response
    location = response.headers.get("location", "").strip() if response is not None else ""
    try:
        where = str(response.url.join(location)) if location else ""
    except (httpx.InvalidURL, ValueError):
        where = location
    where = secret_scrub(where, target.api_key)[:300] or "another address (no Location given)"
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


def _no_answer_error(finish_reason: str, tool: str, target: LLMTarget, *, answered: bool,
                     thought: bool = False) -> LLMError | None:
    """Why a reply that ended cleanly has no answer, by its finish_reason, or (`answered`) why the answer
    it has is not whole; None when the reason says nothing (an empty "stop" with no thinking either is
    the model's own choice, "length" after some answer is marked by the chat). Retryable: another try
    may well answer."""
    if finish_reason == "error":
        # OpenRouter's normalized reason for a generation that failed: the text so far, if any, is kept.
        return LLMError("server", "The model endpoint ended this reply with an error (finish_reason “error”)"
                        f"{': the text before it is kept' if answered else ' before any text'}. Retry in a moment.")
    named = f" (“{text_storable(tool)[:100]}”)" if tool else ""
    if answered:
        # Azure's filter may end a reply mid-answer, and a model write a line before the tool call it ends
        # on ("Let me look that up."): the text so far is kept, its missing end said.
        if finish_reason == "content_filter":
            words = ("The provider's content filter stopped this reply part-way (finish_reason “content_filter”): the "
                     "text before it is kept. Rephrase the message, or retry.")
        elif finish_reason in ("tool_calls", "function_call") and tool:
            words = (f"After this text the model asked to call a tool{named}, and this chat offers no tools: the reply "
                     "ends there. Retry, or ask it to answer in text.")
        else:
            return None
    elif finish_reason == "content_filter":
        words = ("The provider's content filter stopped this reply before it had any text (finish_reason "
                 "“content_filter”). Rephrase the message, or retry.")
    elif finish_reason in ("tool_calls", "function_call"):
        words = (f"The model asked to call a tool{named} instead of answering, and this chat offers no tools. "
                 "Retry, or ask it to answer in text.")
    elif finish_reason == "length":
        words = (f"The model reached its output limit ({target.max_output_tokens:,} tokens) before writing any "
                 "answer. Raise “Max output tokens” in Settings, or retry.")
    elif thought:  # a `<think>` never closed, or a reasoning field and no content
        words = ("The model ended its reply while still thinking, before any answer (its thinking is kept). Retry, "
                 "or ask again.")
    else:
        return None
    return LLMError("bad_request", words, retryable=True)


def _answered_error(error: object, target: LLMTarget) -> LLMError:
    """An error object answered with 200 in place of a completion (OpenRouter does so)."""
    message = error.get("message") if isinstance(error, dict) else error
    detail = secret_scrub(str(message or "no message"), target.api_key)[:300]
    return LLMError("server", f"The model endpoint reported an error: {_sentence(detail)} Retry in a moment.",
                    detail=detail)


def _nothing_sent_error() -> LLMError:
    """A stream that ended cleanly with no chunk at all: no model's choice, a request dropped on the way."""
    return LLMError("server", "The model endpoint ended the stream without sending any reply (nothing came before "
                    "its end, [DONE]). Retry in a moment.")


def _stream_cut_error() -> LLMError:
    return LLMError("stream_cut", "The reply was cut off before it finished: the connection to the model endpoint "
                    "closed mid-stream. Retry to get a full reply.")


_CALL_ERRORS = (openai.OpenAIError, httpx.HTTPError)


# A whole (not streamed) answer is parsed by the SDK, which lets a body labelled JSON that does not parse
# out as the standard library's error: taken for a crash, it skipped a summary's retries and fallback.
_COMPLETE_ERRORS = (*_CALL_ERRORS, json.JSONDecodeError, RecursionError)  # RecursionError: JSON nested too deep
