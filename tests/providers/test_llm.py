"""The llm package against the fake OpenAI endpoint: the real openai client path, every failure kind."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from chatapp.providers import llm, netguard
from chatapp.providers.llm import addresses as llm_addresses
from chatapp.providers.llm import calls as llm_calls
from chatapp.providers.llm import transport as llm_transport
from chatapp.providers.netguard import _resolve as netguard_real_resolve  # before the hermetic-DNS fixture patches it
from tests.support.fake_openai import echo_reply
from tests.support.llm import SECRET_KEY_VALUE, make_target, run_stream

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is a context window?"},
]


def _text(events) -> str:
    return "".join(e.text for e in events if isinstance(e, llm.Delta))


def test_stream_yields_deltas_then_usage_and_sends_the_expected_request(fake):
    events, error = run_stream(make_target(fake.base_url, "fake-echo"), MESSAGES)

    assert error is None
    assert _text(events) == echo_reply(MESSAGES)
    assert sum(isinstance(e, llm.Delta) for e in events) > 5  # streamed in pieces, not one block
    assert isinstance(events[-1], llm.Usage)
    assert events[-1].prompt_tokens > 0 and events[-1].completion_tokens > 0
    [request] = fake.completions
    assert request.body["messages"] == MESSAGES
    assert request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    assert request.body["temperature"] == 0.7
    assert request.body["max_tokens"] == 256
    assert request.api_key == SECRET_KEY_VALUE


def test_replies_one_after_another_reuse_the_connection(fake):
    """The body is read to its end after [DONE], so the connection goes back to the pool (the SDK's
    own stream closes it unread: a new TCP and TLS handshake for every reply)."""
    target = make_target(fake.base_url, "fake-echo")

    async def three_replies() -> list[str]:
        texts = []
        for _ in range(3):
            texts.append(_text([event async for event in llm.llm_stream(target=target, messages=MESSAGES)]))
        return texts

    assert asyncio.run(three_replies()) == [echo_reply(MESSAGES)] * 3
    assert len({request.client_port for request in fake.completions}) == 1


def test_usage_reports_provider_cached_tokens(fake):
    target = make_target(fake.base_url, "fake-echo")
    run_stream(target, MESSAGES)
    events, _ = run_stream(target, [*MESSAGES, {"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}])

    usage = events[-1]
    assert isinstance(usage, llm.Usage)
    assert 0 < usage.cached_tokens < usage.prompt_tokens


@pytest.mark.parametrize(
    ("model", "kind", "status", "retryable", "words"),
    [
        ("fail-400", "bad_request", 400, False, "maximum context length"),
        ("fail-401", "auth", 401, False, "rejected the API key (401). Check the key in Settings."),
        ("fail-403", "auth", 403, False, "refused access"),
        ("fail-404", "not_found", 404, False, "does not know the model “fail-404” (404)"),
        ("fail-429", "rate_limit", 429, True, "Wait 2 seconds and retry."),
        ("fail-quota", "rate_limit", 429, False, "run out of credit or quota (429). Check billing"),
        # a per-minute quota that says when to come back is a rate limit, whatever its words
        ("fail-quota-minute", "rate_limit", 429, True, "Wait 42 seconds and retry."),
        ("fail-500", "server", 500, True, "internal error (500)"),
    ],
)
def test_http_failures_map_to_kinds_in_plain_words(fake, model, kind, status, retryable, words):
    events, error = run_stream(make_target(fake.base_url, model), MESSAGES)

    assert events == []
    assert error is not None
    assert (error.kind, error.status, error.retryable) == (kind, status, retryable)
    assert words in error.user_message
    assert str(error) == error.user_message
    # No retries on the chat path: the user decides (Retry button).
    assert len(fake.completions) == 1


def test_a_wait_given_in_words_is_kept_for_the_retries(fake):
    # Google's compatible endpoint: a list body, no Retry-After header, the wait in the message.
    _, error = run_stream(make_target(fake.base_url, "fail-quota-minute"), MESSAGES)

    assert error is not None and error.retry_after == 42
    assert error.detail.startswith("You exceeded your current quota")  # the message, not the body's repr


def test_errors_never_carry_the_api_key(fake, caplog):
    # fail-401 echoes the received key in its error body, as a careless proxy would.
    caplog.set_level(logging.DEBUG)
    _, error = run_stream(make_target(fake.base_url, "fail-401"), MESSAGES)
    _, error_complete = None, None
    with pytest.raises(llm.LLMError) as info:
        llm.llm_complete(target=make_target(fake.base_url, "fail-401"), messages=MESSAGES)
    error_complete = info.value

    assert SECRET_KEY_VALUE in fake.completions[0].headers["authorization"]  # the key was really sent
    for err in (error, error_complete):
        assert err.kind == "auth"
        for text in (str(err), repr(err), err.user_message, err.detail):
            assert SECRET_KEY_VALUE not in text
        assert "[redacted]" in err.detail
        # Raised outside the SDK exception's handler: no chained provider exception in tracebacks.
        assert err.__cause__ is None and err.__context__ is None
    assert SECRET_KEY_VALUE not in caplog.text
    assert SECRET_KEY_VALUE not in repr(make_target(fake.base_url, "x"))


def test_flaky_endpoint_fails_then_succeeds_on_retry(fake):
    target = make_target(fake.base_url, "flaky-500-then-200")
    _, first = run_stream(target, MESSAGES)
    events, second = run_stream(target, MESSAGES)

    assert first is not None and first.kind == "server" and first.retryable
    assert second is None and _text(events) == echo_reply(MESSAGES)


@pytest.mark.parametrize(("model", "kind"), [("cut-stream", "stream_cut"), ("early-end", "stream_cut"),
                                             ("stream-error", "server")])
def test_stream_broken_midway_keeps_partial_deltas_and_raises(fake, model, kind):
    events, error = run_stream(make_target(fake.base_url, model), MESSAGES)

    assert error is not None and error.kind == kind and error.retryable
    assert _text(events)  # the partial reply reached the caller before the failure
    assert not any(isinstance(e, llm.Usage) for e in events)


def test_silent_endpoint_times_out(fake, settings):
    settings.LLM_TIMEOUT_SECONDS = 1
    events, error = run_stream(make_target(fake.base_url, "fail-timeout"), MESSAGES)

    assert events == []
    assert error is not None and error.kind == "timeout" and error.retryable
    assert "within 1 second" in error.user_message


# The fake answers slow-3000 three seconds late: each call below gives up well before that.
_SLOW_MODEL = "slow-3000"


def test_chat_reply_timeout_names_the_chat_timeout(fake, settings):
    settings.LLM_TIMEOUT_SECONDS = 0.4
    _, error = run_stream(make_target(fake.base_url, _SLOW_MODEL), MESSAGES)

    assert error is not None and error.kind == "timeout"
    assert "did not answer within 0.4 seconds" in error.user_message


def test_summary_call_timeout_names_its_own_timeout_not_the_chats(fake, settings):
    settings.LLM_TIMEOUT_SECONDS = 30
    with pytest.raises(llm.LLMError) as info:
        llm.llm_complete(target=make_target(fake.base_url, _SLOW_MODEL), messages=MESSAGES, timeout=0.4)

    assert info.value.kind == "timeout"
    assert "did not answer within 0.4 seconds" in info.value.user_message
    assert "30" not in info.value.user_message


@pytest.mark.parametrize(
    ("chat_timeout", "test_timeout", "words"),
    [
        (30, 0.4, "within 0.4 seconds"),  # the connection test's own, shorter bound
        (1, 20.0, "within 1 second."),  # a chat timeout below it bounds the test too
    ],
)
def test_connection_test_timeout_names_the_timeout_it_used(fake, settings, monkeypatch, chat_timeout, test_timeout,
                                                           words):
    settings.LLM_TIMEOUT_SECONDS = chat_timeout
    monkeypatch.setattr(llm_calls, "_CONNECTION_TEST_TIMEOUT", test_timeout)
    # Not in the fake's model list, so the test makes a one-token request, which is slow.
    ok, message = llm.llm_test_connection(target=make_target(fake.base_url, _SLOW_MODEL))

    assert ok is False
    assert "the test request failed: The model endpoint did not answer " + words in message


@contextlib.contextmanager
def _unanswered_connects() -> Iterator[str]:
    """A base URL whose connections are never accepted: the listener's queue is full, and the kernel
    drops further handshakes (as a firewall dropping packets, or an address no machine holds)."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    queued = []
    for _ in range(3):
        waiting = socket.socket()
        waiting.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            waiting.connect(listener.getsockname())
        queued.append(waiting)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        for waiting in queued:
            waiting.close()
        listener.close()


def test_a_connection_never_made_is_said_so_with_the_connect_timeout(settings, monkeypatch):
    """A connection that is never made gives up at the connect timeout (10 seconds at most), and was told as
    the model's silence: "did not answer within 120 seconds … check that the endpoint is not overloaded",
    naming the wrong figure and the wrong cause (a wrong address, a firewall, a server on its own localhost)."""
    settings.LLM_TIMEOUT_SECONDS = 30
    monkeypatch.setattr(llm_transport, "CONNECT_TIMEOUT_SECONDS", 0.5)
    with _unanswered_connects() as base_url:
        events, error = run_stream(make_target(base_url, "m"), MESSAGES)
        endpoint = base_url.split("/")[2]

    assert events == [] and error is not None and (error.kind, error.retryable) == ("connection", True)
    assert error.user_message == (f"Could not connect to the model endpoint at {endpoint} within 0.5 seconds. Check "
                                  "the base URL in Settings, and that the server is reachable from this one (not "
                                  "behind a firewall, nor listening only on its own localhost).")


def test_connection_refused(fake):
    from tests.support.fake_openai import closed_port_url

    _, error = run_stream(make_target(closed_port_url(), "fake-echo"), MESSAGES)

    assert error is not None and error.kind == "connection"
    assert "Could not connect to the model endpoint at 127.0.0.1:" in error.user_message


def test_an_ipv6_endpoint_is_named_with_its_address_in_brackets():
    # Nothing listens on the IPv6 loopback's port 9 (discard): the refusal names the endpoint.
    _, error = run_stream(make_target("http://[::1]:9/v1", "fake-echo"), MESSAGES)

    assert error is not None and error.kind == "connection"
    assert "at [::1]:9" in error.user_message


def test_a_401_to_a_model_with_no_key_asks_for_one(fake):
    """A config with no key (never entered, or cleared when its base URL moved to another server) was told
    the endpoint "rejected the API key" and to check it, when there is none to check."""
    target = make_target(fake.base_url, "fail-401", api_key="")
    _, error = run_stream(target, MESSAGES)

    assert error is not None and (error.kind, error.status, error.retryable) == ("auth", 401, False)
    assert error.user_message == ("The model endpoint wants an API key (401), and none is set for “Test endpoint”: "
                                  "enter it in Settings.")
    ok, message = llm.llm_test_connection(target=target)
    assert ok is False and "none is set for “Test endpoint”" in message


def test_a_context_length_refusal_points_at_the_configs_window(fake):
    """The endpoint's own window is smaller than the config's (a window typed too large, or the 8,192
    assumed for a model the registry does not know): its 400 was passed on alone, with nothing said of
    the setting that sends requests that long."""
    _, error = run_stream(make_target(fake.base_url, "fail-400"), MESSAGES)

    assert error is not None and (error.kind, error.status, error.retryable) == ("bad_request", 400, False)
    assert error.user_message == (
        "The model endpoint rejected the request (400): This model's maximum context length is 8192 tokens. However, "
        "your messages resulted in 9000 tokens. The context window set for “Test endpoint” (8,192 tokens) is more "
        "than the endpoint takes: lower it in Settings."
    )


def test_slow_stream_still_completes(fake):
    events, error = run_stream(make_target(fake.base_url, "slow-5"), MESSAGES)
    assert error is None and _text(events) == echo_reply(MESSAGES)


def test_reasoning_model_quirks_are_learned_and_reused(fake):
    target = make_target(fake.base_url, "reasoning-mini")
    events, error = run_stream(target, MESSAGES)
    assert error is None and _text(events)
    final = fake.completions[-1].body
    assert "max_tokens" not in final and final["max_completion_tokens"] == 256
    assert "temperature" not in final

    fake.reset()
    completion = llm.llm_complete(target=target, messages=MESSAGES)
    assert completion.text and len(fake.completions) == 1  # went straight to the accepted parameters


def test_llm_complete_returns_text_and_usage(fake):
    completion = llm.llm_complete(target=make_target(fake.base_url, "fake-echo"), messages=MESSAGES)

    assert completion.text == echo_reply(MESSAGES)
    assert completion.prompt_tokens > 0 and completion.completion_tokens > 0
    assert completion.model == "fake-echo" and completion.finish_reason == "stop"
    assert fake.completions[0].stream is False


def test_llm_complete_honours_max_tokens(fake):
    completion = llm.llm_complete(target=make_target(fake.base_url, "fake-echo"), messages=MESSAGES, max_tokens=2)
    assert completion.finish_reason == "length"
    assert fake.completions[0].body["max_tokens"] == 2


@pytest.mark.parametrize(
    ("base", "model", "api_key", "ok", "words"),
    [
        ("base", "fake-echo", SECRET_KEY_VALUE, True, "including “fake-echo”"),
        ("base", "my-unlisted-model", SECRET_KEY_VALUE, True, "answered a one-token test request"),
        ("no-models", "fake-echo", SECRET_KEY_VALUE, True, "has no model list"),
        ("base", "fail-404", SECRET_KEY_VALUE, False, "does not know the model “fail-404”"),
        ("base", "fake-echo", "bad-key-0123456789", False, "rejected the API key (401)"),
    ],
)
def test_connection_test_reports_in_plain_words(fake, base, model, api_key, ok, words):
    base_url = fake.base_url if base == "base" else fake.base_url_without_models
    result, message = llm.llm_test_connection(target=make_target(base_url, model, api_key=api_key))

    assert result is ok
    assert words in message
    assert api_key not in message


def test_a_base_url_without_its_path_says_where_the_api_usually_is(fake):
    """The server's root as base URL (http://localhost:11434, as Open WebUI addresses Ollama): Ollama,
    vLLM and OpenAI answer 404 to /models and /chat/completions there, and the chat and the connection
    test said the endpoint "does not know the model", sending the user to pull a model they have."""
    target = make_target(fake.root_url, "llama3.1")

    _, error = run_stream(target, MESSAGES)
    assert error is not None and (error.kind, error.status) == ("not_found", 404)
    assert "does not know the model" not in error.user_message
    assert f"try {fake.root_url}/v1" in error.user_message

    ok, message = llm.llm_test_connection(target=target)
    assert ok is False
    assert "does not know the model" not in message and "has no model list" not in message
    assert f"try {fake.root_url}/v1" in message


@pytest.mark.parametrize(("api_key", "words"), [
    ("bad-key-0123456789", "rejected the API key (401). Check the key in Settings."),
    ("", "wants an API key (401), and none is set"),
])
def test_a_model_list_open_to_any_key_does_not_pass_a_wrong_key(fake, api_key, words):
    """OpenRouter lists its models to any key, or none: a mistyped key (or none) passed the test, "It lists
    … including", and every chat then failed with a 401. Its GET /key (free) says whether the key is good."""
    ok, message = llm.llm_test_connection(target=make_target(fake.base_url_public_models, "fake-echo",
                                                             api_key=api_key))
    assert ok is False
    assert words in message and "including “fake-echo”" in message
    assert fake.completions == []  # no paid request made to find out

    ok, message = llm.llm_test_connection(target=make_target(fake.base_url_public_models, "fake-echo"))
    assert ok is True and "It lists 3 models, including “fake-echo”." in message


def test_connection_test_refused():
    from tests.support.fake_openai import closed_port_url

    ok, message = llm.llm_test_connection(target=make_target(closed_port_url(), "fake-echo"))
    assert ok is False and "Could not connect" in message


def test_a_website_instead_of_an_api_is_explained(fake):
    target = make_target(fake.base_url_html, "fake-echo")
    _, error = run_stream(target, MESSAGES)
    assert error is not None and error.kind == "bad_request" and not error.retryable
    assert "not with a chat completion (content type text/html)" in error.user_message

    with pytest.raises(llm.LLMError) as info:
        llm.llm_complete(target=target, messages=MESSAGES)
    assert info.value.kind == "bad_request" and "not with a chat completion" in info.value.user_message
    ok, message = llm.llm_test_connection(target=target)
    assert ok is False and message


def test_model_calls_skip_the_sdks_request_body_transform(fake, monkeypatch):
    """The request path posts plain JSON: the SDK's typed transform of every message (create())
    costs ~7x the CPU of the rest of the call on long contexts, on the event loop all chats share."""
    from openai.resources.chat.completions import completions as sdk

    def forbidden(*args, **kwargs):
        raise AssertionError("chat.completions.create() transform used")

    monkeypatch.setattr(sdk, "maybe_transform", forbidden)
    monkeypatch.setattr(sdk, "async_maybe_transform", forbidden)
    target = make_target(fake.base_url, "fake-echo")

    events, error = run_stream(target, MESSAGES)
    assert error is None and _text(events) == echo_reply(MESSAGES)
    assert isinstance(events[-1], llm.Usage) and events[-1].prompt_tokens > 0
    completion = llm.llm_complete(target=target, messages=MESSAGES)
    assert completion.text == echo_reply(MESSAGES) and completion.prompt_tokens > 0
    ok, _ = llm.llm_test_connection(target=make_target(fake.base_url_without_models, "fake-echo"))
    assert ok
    # Same wire format as create(): the key in the Authorization header, the body as built.
    assert all(r.api_key == SECRET_KEY_VALUE for r in fake.completions)
    assert fake.completions[0].body["stream_options"] == {"include_usage": True}


def test_usage_without_cache_details_reports_no_cached_figure():
    from types import SimpleNamespace

    bare = llm_calls._usage_from(SimpleNamespace(prompt_tokens=50, completion_tokens=5, prompt_tokens_details=None))
    assert bare.cached_tokens is None  # unknown, not "nothing cached": the dashboard then estimates
    detailed = SimpleNamespace(prompt_tokens=50, completion_tokens=5,
                               prompt_tokens_details=SimpleNamespace(cached_tokens=0))
    assert llm_calls._usage_from(detailed).cached_tokens == 0


# --- SSRF: redirects and the connect-time address check -------------------------------------------

METADATA_BODY = "iam-role-credentials: AKIA-SECRET-FROM-METADATA"


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler], *, tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """`handler` answering on a free local port (over TLS with `tls`), in a thread of its own; yields its
    base URL (…/v1)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"{'http' if tls is None else 'https'}://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def redirecting_endpoint(location: str) -> Iterator[str]:
    """A public-looking endpoint that answers every request with 307 to `location` (and a body that
    must never reach the user); yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def _redirect(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            body = METADATA_BODY.encode()
            self.send_response(307)
            self.send_header("Location", location)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _redirect

        def log_message(self, *args) -> None:
            pass

    with serving(Handler) as url:
        yield url


def test_redirects_are_not_followed_and_are_explained(fake):
    # The redirect points at a server that would answer (the fake endpoint): following it would succeed.
    location = f"{fake.base_url}/chat/completions"
    with redirecting_endpoint(location) as base_url:
        target = make_target(base_url, "fake-echo")
        events, error = run_stream(target, MESSAGES)
        with pytest.raises(llm.LLMError) as complete_error:
            llm.llm_complete(target=target, messages=MESSAGES)
        ok, test_message = llm.llm_test_connection(target=target)

    assert events == []
    for failure in (error, complete_error.value):
        assert failure is not None and failure.kind == "bad_request" and not failure.retryable
        assert failure.status == 307
        assert f"redirected the request (307) to {location}" in failure.user_message
        assert "use the final URL" in failure.user_message
        assert METADATA_BODY not in failure.user_message and METADATA_BODY not in failure.detail
    assert ok is False and "redirected the request (307)" in test_message and METADATA_BODY not in test_message
    assert fake.requests == []  # nothing reached the redirect's target


@pytest.fixture
def private_urls_refused(settings):
    settings.ALLOW_PRIVATE_LLM_URLS = False
    llm_addresses.host_lookups_forget()
    yield
    llm_addresses.host_lookups_forget()


def test_private_address_is_refused_at_connect_time(fake, private_urls_refused):
    # A base URL that reached the database without the save-time check (or before the rule changed).
    target = make_target(fake.base_url, "fake-echo")
    events, error = run_stream(target, MESSAGES)
    with pytest.raises(llm.LLMError) as complete_error:
        llm.llm_complete(target=target, messages=MESSAGES)

    assert events == []
    for failure in (error, complete_error.value):
        assert failure is not None and failure.kind == "connection" and not failure.retryable
        assert "loopback address" in failure.user_message
    assert fake.requests == []


def test_dns_rebinding_after_the_save_time_check_is_refused(fake, private_urls_refused, monkeypatch):
    port = fake.base_url.split(":")[2].split("/")[0]
    base_url = f"http://rebinding.example:{port}/v1"
    answers = {"rebinding.example": ["93.184.215.14"]}
    lookups: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        lookups.append(host)
        return answers[host]

    monkeypatch.setattr(netguard, "_resolve", resolve)
    netguard.base_url_validate(base_url, allow_private=False)  # saved while it pointed somewhere public
    answers["rebinding.example"] = ["127.0.0.1"]  # then the record changed

    target = make_target(base_url, "fake-echo")
    _, error = run_stream(target, MESSAGES)
    with pytest.raises(llm.LLMError) as complete_error:
        llm.llm_complete(target=target, messages=MESSAGES)

    assert error is not None and "rebinding.example (127.0.0.1)" in error.user_message
    assert complete_error.value.kind == "connection"
    assert fake.requests == []
    # The verdict is cached per host for a short while: one lookup at save time, one at connect time.
    assert lookups == ["rebinding.example", "rebinding.example"]


def _answers(monkeypatch, host: str, answer) -> list[str]:
    """`host`'s lookups, anywhere in the process (netguard's and the HTTP stacks' own alike), answered
    by `answer(n)` for the n-th one: an address, or an exception to raise. Returns the lookups made."""
    real_getaddrinfo = socket.getaddrinfo
    lookups: list[str] = []

    def getaddrinfo(name, port, *args, **kwargs):
        if name != host:
            return real_getaddrinfo(name, port, *args, **kwargs)
        lookups.append(name)
        address = answer(len(lookups))
        if isinstance(address, Exception):
            raise address
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, int(port or 0)))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(netguard, "_resolve", netguard_real_resolve)
    return lookups


def test_a_record_switched_between_the_check_and_the_connection_is_never_dialled(
    fake, private_urls_refused, monkeypatch
):
    """The check's lookup answers an allowed address, any later one the fake endpoint's loopback: the
    connection goes where the check looked (nothing listens there), never to a second answer."""
    port = int(fake.base_url.split(":")[2].split("/")[0])
    allowed = "127.0.0.2"  # nothing listens here; the rule below lets it through as if it were public
    real_reason = netguard._refusal_reason
    monkeypatch.setattr(netguard, "_refusal_reason", lambda ip: None if str(ip) == allowed else real_reason(ip))
    lookups = _answers(monkeypatch, "rebind.example", lambda n: allowed if n <= 2 else "127.0.0.1")
    base_url = f"http://rebind.example:{port}/v1"
    netguard.base_url_validate(base_url, allow_private=False)  # saved: lookup 1

    target = make_target(base_url, "fake-echo")
    _, error = run_stream(target, MESSAGES)
    with pytest.raises(llm.LLMError) as complete_error:
        llm.llm_complete(target=target, messages=MESSAGES)
    ok, _ = llm.llm_test_connection(target=target)

    assert error is not None and error.kind == "connection" and complete_error.value.kind == "connection"
    assert ok is False
    assert fake.requests == []
    assert lookups == ["rebind.example", "rebind.example"]  # the save's, and the one the connections used


def test_a_lookup_that_fails_for_the_check_does_not_open_the_way(fake, private_urls_refused, monkeypatch):
    port = int(fake.base_url.split(":")[2].split("/")[0])
    _answers(monkeypatch, "flaky.example",
             lambda n: socket.gaierror(socket.EAI_AGAIN, "Temporary failure") if n == 1 else "127.0.0.1")
    target = make_target(f"http://flaky.example:{port}/v1", "fake-echo")

    _, first = run_stream(target, MESSAGES)  # the lookup failed, so does the connection: it never resolves on its own
    _, second = run_stream(target, MESSAGES)  # it answers loopback now: refused
    with pytest.raises(llm.LLMError) as complete_error:
        llm.llm_complete(target=target, messages=MESSAGES)

    assert first is not None and first.kind == "connection"
    assert second is not None and "flaky.example (127.0.0.1)" in second.user_message
    assert "loopback address" in complete_error.value.user_message
    assert fake.requests == []


def test_a_closed_loops_clients_are_let_go_without_an_unclosed_session_error(fake, caplog):
    """The async client moves bytes with aiohttp, whose sessions belong to one loop. Replies streamed
    in a loop that then closed (a test's or a command's) leave a session that cannot be closed any
    more; the next call, and the process's exit, let it go quietly instead of an error at collection."""
    import gc
    import warnings

    target = make_target(fake.base_url, "fake-echo")

    async def reply() -> str:
        return _text([event async for event in llm.llm_stream(target=target, messages=MESSAGES)])

    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.ERROR, logger="asyncio"):
        warnings.simplefilter("always")
        assert asyncio.run(reply()) == echo_reply(MESSAGES)
        assert asyncio.run(reply()) == echo_reply(MESSAGES)  # the first loop's client is let go here
        llm_transport._async_clients_forget()  # what the process's exit runs
        gc.collect()
    # The loop's own sockets are reported as httpx's were (ResourceWarning "unclosed <socket ...>",
    # hidden by default); what must not appear is aiohttp's session or connector left open, or its
    # close never run.
    kinds = ResourceWarning | DeprecationWarning | RuntimeWarning
    said = [str(w.message) for w in caught if issubclass(w.category, kinds)]
    assert [m for m in said if not m.startswith(("unclosed <socket", "unclosed transport"))] == []
    assert "Unclosed" not in caplog.text


def test_a_reply_streaming_on_a_client_dropped_from_the_cache_still_ends(fake, monkeypatch):
    """Clients are cached per endpoint and key, 32 per loop: with more users than that chatting at once,
    a streaming reply's client is dropped from the cache mid-reply. Closing it then left the reply
    waiting for chunks that never came (no error, no end), and a request starting on a dropped client
    failed to connect; it is closed once its last request ends."""
    monkeypatch.setattr(llm_transport, "_CLIENT_CACHE_SIZE", 2)
    slow = make_target(fake.base_url, "slow-100", api_key="sk-user-A-0123456789")
    others = [make_target(fake.base_url, "fake-echo", api_key=f"sk-user-{n}-0123456789") for n in "BCDEF"]

    async def reply(target: llm.LLMTarget) -> str:
        return _text([event async for event in llm.llm_stream(target=target, messages=MESSAGES)])

    async def chats() -> tuple[str, list[str], bool]:
        streaming = asyncio.create_task(reply(slow))
        while not fake.completions:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # a few chunks in
        (_, transport), = [v for k, v in llm_transport._async_clients[asyncio.get_running_loop()].items()
                           if k[1] == llm_transport._client_key(slow, 0, 0)[1]]
        at_once = await asyncio.gather(*(reply(t) for t in others))  # the slow reply's client is dropped
        text = await asyncio.wait_for(streaming, 30)
        await asyncio.sleep(0.05)  # its closing, once the reply ended, is a task of its own
        return text, at_once, transport.session is not None and transport.session.closed

    text, at_once, closed = asyncio.run(chats())
    assert text == echo_reply(MESSAGES)
    assert at_once == [echo_reply(MESSAGES)] * len(others)
    assert closed  # let go once its reply ended, not left open


def test_https_to_a_plain_http_server_says_to_use_http(fake):
    """"localhost:11434/v1" typed without its scheme is saved as https:// (the form assumes it), and
    Ollama, LM Studio and vLLM answer plain HTTP: the TLS handshake failed, and the message said
    "Could not connect … check that the server is running" of a server that was running."""
    target = make_target(fake.base_url.replace("http://", "https://", 1), "fake-echo")
    _, error = run_stream(target, MESSAGES)
    assert error is not None and error.kind == "connection"
    assert "not over HTTPS" in error.user_message and "http://" in error.user_message
    ok, message = llm.llm_test_connection(target=target)
    assert ok is False and "not over HTTPS" in message and "http://" in message


@pytest.fixture
def self_signed_server(tmp_path) -> Iterator[str]:
    """An HTTPS server on 127.0.0.1 whose certificate nobody signed (a LAN vLLM behind its own TLS)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    (tmp_path / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                         serialization.NoEncryption()))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    with serving(BaseHTTPRequestHandler, tls=context) as url:
        yield url


def test_a_certificate_not_trusted_is_said_so(self_signed_server):
    target = make_target(self_signed_server, "fake-echo")
    _, error = run_stream(target, MESSAGES)
    assert error is not None and "certificate this server does not trust" in error.user_message
    ok, message = llm.llm_test_connection(target=target)
    assert ok is False and "certificate this server does not trust" in message


def test_every_model_client_verifies_with_one_trust_store_loaded_once(self_signed_server):
    """Loading the CA bundle cost 20 ms of CPU per client made: the clients of every endpoint share
    one context (the sync clients' pools too), which still refuses a certificate nobody signed."""

    async def transports() -> list:
        for base_url in ("https://one.example/v1", "https://two.example/v1"):
            llm_transport._async_client(make_target(base_url, "m"), timeout=5)
        return [t for _, t in llm_transport._async_clients[asyncio.get_running_loop()].values()]

    contexts = {id(t.ssl) for t in asyncio.run(transports())}
    assert contexts == {id(llm_transport.tls_context())}
    assert llm_transport.tls_context().verify_mode == ssl.CERT_REQUIRED
    _, error = run_stream(make_target(self_signed_server, "fake-echo"), MESSAGES)
    assert error is not None and "certificate this server does not trust" in error.user_message


def test_a_host_that_does_not_resolve_is_said_so():
    """A base URL whose host does not resolve yet may be saved (a Compose service not up): its requests
    said "Could not connect … check that the server is running", not that the name is unknown."""
    target = make_target("http://ollama-later.invalid:11434/v1", "llama3.1")
    _, error = run_stream(target, MESSAGES)
    assert error is not None and "“ollama-later.invalid” does not resolve" in error.user_message
    ok, message = llm.llm_test_connection(target=target)
    assert ok is False and "“ollama-later.invalid” does not resolve" in message


@contextlib.contextmanager
def endpoint_naming_its_model(model: object) -> Iterator[str]:
    """An endpoint that answers every chat completion with "OK" and `model` as the model that answered
    (a vLLM names the model it serves by the path it was loaded from); yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            body = json.dumps({
                "id": "c1", "object": "chat.completion", "created": 1700000000, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10},
            }).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    with serving(Handler) as url:
        yield url


@pytest.mark.parametrize("answered, kept", [
    ("gpt-4o-mini-2024-07-18", True),
    ("/srv/models/" + "deep/" * 40 + "Llama-3.1-8B-Instruct", False),  # longer than the 200 a model name is stored in
    ("fake\x00echo", False),  # PostgreSQL stores no NUL
    ("", False),
    (12345, False),
])
def test_the_model_an_endpoint_names_is_kept_only_when_it_can_be_stored(answered, kept):
    """The summary job stores the model the endpoint says answered: a name longer than the column, or
    with a NUL, failed the write on PostgreSQL ("Internal error while summarizing (DataError)") after
    the call was paid for, on every attempt."""
    with endpoint_naming_its_model(answered) as base_url:
        completion = llm.llm_complete(target=make_target(base_url, "my-local-llama"), messages=MESSAGES)

    assert completion.text == "OK"
    assert completion.model == (answered if kept else "my-local-llama")
