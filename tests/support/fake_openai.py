"""A real local HTTP server speaking the OpenAI Chat Completions protocol, for tests and benchmarks.

The app's model path (the `openai` SDK over httpx) is exercised end to end against it: JSON and SSE
responses, `stream_options.include_usage`, and each failure a real endpoint produces.

Behaviour is chosen by the request's model name (anything not listed behaves like `fake-echo`, so a
config can use a registry name such as `gpt-4o-mini` and still get answers):

- `fake-echo`            a deterministic reply describing what was received.
- `fake-title`           names a chat as a chatty local model does: some thinking, then `Title: "…"` with the
                         first three words after "User:" in the last message (title_services' prompt).
- `fail-400`             400 context_length_exceeded (a bad request).
- `fail-401`             401 invalid_api_key; the message echoes the received key verbatim (as a careless
                         proxy would) so tests can prove the app never passes it on.
- `fail-403`             403 permission denied.
- `fail-404`             404 model_not_found.
- `fail-429`             429 rate_limit_exceeded with `Retry-After: 2`.
- `fail-429-wait-<s>`    the same with `Retry-After: <s>`: a wait long enough to see what is held during it.
- `fail-quota`           429 insufficient_quota: the account is out of credit (OpenAI's words, no Retry-After).
- `fail-quota-minute`    429 of a free tier's per-minute quota as Google's compatible endpoint answers it: the
                         same words about quota and billing, then "Please retry in 41.6s.", in a list body.
- `fail-500`             500 server_error.
- `fail-odd-400`         400 whose message holds a NUL and a lone surrogate (JSON allows both).
- `fail-timeout`         accepts the request and answers nothing until HANG_SECONDS (or server stop).
- `cut-stream`           streams a few chunks, then drops the connection mid-body (no finish_reason).
- `early-end`            streams a few chunks, then ends the body cleanly without finish_reason or [DONE].
- `stream-error`         streams a few chunks, then an in-band `data: {"error": ...}` event.
- `note-key`             like fake-echo, after a `data:` event that is not JSON and echoes the received key (a
                         careless proxy's plain-text notice), which the app passes over.
- `flaky-500-then-200`   odd-numbered requests (1st, 3rd, ...) since the last reset() get a 500, the others succeed.
- `reasoning-<name>`     like fake-echo, but (as OpenAI's reasoning models do) answers 400 to `max_tokens`
                         (wants `max_completion_tokens`) and to a temperature other than 1.
- `slow-<ms>`            like fake-echo with <ms> milliseconds before each chunk (and before a JSON reply).
- `drip-<ms>`            unstreamed: fake-echo's JSON reply after <ms> milliseconds of keep-alive whitespace, a space
                         every DRIP_EVERY seconds (as gateways keep a slow request's connection open): no read waits
                         long enough to time out. Streamed: like fake-echo.
- `verbatim-<ms>`        the last user message word for word (its lines, fences and all), in word-sized chunks
                         <ms> milliseconds apart: a reply of the Markdown a test chooses.
- `odd-bytes`            like fake-echo, then NUL, a surrogate pair split across two chunks and a lone surrogate;
                         its finish_reason is "stop" followed by a NUL and a lone surrogate.
- `think-fields[-<ms>]`  a reasoning model with a reasoning parser (DeepSeek, vLLM): thinking (`thinking_text`) in
                         `reasoning_content` deltas (in the message's `reasoning_content` unstreamed), then
                         fake-echo's reply; <ms> milliseconds before each chunk.
- `think-inline[-<ms>]`  a reasoning model served without one (Qwen3, R1 under Ollama or llama.cpp): the same
                         thinking inline, `<think>…</think>` before fake-echo's reply, in chunks that cut
                         both tags. Told `/no_think` (Qwen3's switch), both think white space only.
- `think-unopened[-<ms>]` the same thinking as a model whose chat template opened the block in the prompt
                         (DeepSeek-R1 under vLLM without a reasoning parser): its content holds `</think>` only.
                         Any of the three ending in `-cut` drops the connection as `cut-stream` does, while it thinks.
- `strict-<name>`        like fake-echo, but refuses (400) what strict chat templates of local models refuse
                         (Llama, Mistral... under vLLM or llama.cpp): a system message anywhere but first,
                         roles not alternating user/assistant, or a first or last turn that is not the user's.

An API key starting with `bad-` is refused with 401 on every endpoint. The server's root as base URL (`root_url`, no
`/v1`) answers `404 page not found` in plain text to every request, as Ollama does. A base URL whose path contains
`/public-models/` lists its models to any key, or none, and answers GET /key (the key's own details) 401 to a `bad-`
key or none, as OpenRouter does. A base URL whose path contains
`/no-models/` answers 404 to GET /models (some OpenAI-compatible servers have no models endpoint); one
containing `/html/` answers everything with a 200 HTML page (a base URL pointing at a website).

Token figures in `usage` use `optimizer.count_messages` when the optimizer is importable (so they
match what the app counted), else a words-based estimate. `cached_tokens` imitates a provider prompt
cache: the tokens of the longest run of leading messages shared with an earlier request since reset().
"""

from __future__ import annotations

import contextlib
import json
import re
import select
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HANG_SECONDS = 30.0
DRIP_EVERY = 0.1
CUT_AFTER_CHUNKS = 3
# What GET /models lists; other names still work (they behave like fake-echo or as named above).
FAKE_MODELS = ("fake-echo", "gpt-4o-mini", "flaky-500-then-200")
_WAIT_429 = re.compile(r"fail-429-wait-(\d{1,3})")
_SLOW = re.compile(r"^slow-(\d{1,6})$")
_DRIP = re.compile(r"^drip-(\d{1,6})$")
_VERBATIM = re.compile(r"^verbatim-(\d{1,6})$")
_THINK = re.compile(r"^think-(fields|inline|unopened)(?:-(\d{1,6}))?$")


def strict_template_problem(messages: list[dict[str, Any]]) -> str | None:
    """What a strict chat template says of these messages (as a vLLM server answers), or None."""
    roles = [m.get("role") for m in messages]
    if "system" in roles[1:]:
        return "System role only supported at the beginning of the conversation."
    talk = roles[1:] if roles and roles[0] == "system" else roles
    expected = ["user" if k % 2 == 0 else "assistant" for k in range(len(talk))]
    if not talk or talk != expected or talk[-1] != "user":
        return "Conversation roles must alternate user/assistant/user/assistant/..."
    return None


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON body, or None
    client_port: int = 0  # the connection it came on: requests on one kept-alive connection share it

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def messages(self) -> list[dict]:
        return list(self.body.get("messages") or []) if isinstance(self.body, dict) else []

    @property
    def stream(self) -> bool:
        return bool(isinstance(self.body, dict) and self.body.get("stream"))

    @property
    def api_key(self) -> str:
        auth = self.headers.get("authorization", "")
        return auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _count_prompt(messages: list[dict], model: str) -> list[int]:
    """Per-message token counts (the last entry is the 3-token reply priming)."""
    try:
        import optimizer

        counts = [optimizer.count_message(m, model=model) for m in messages]
    except Exception:  # optimizer missing or model unknown to it: a deterministic estimate is enough here
        counts = [3 + 1 + len(_message_text(m.get("content")).split()) for m in messages]
    return [*counts, 3]


def _count_text(text: str, model: str) -> int:
    try:
        import optimizer

        return optimizer.count_text(text, model=model)
    except Exception:
        return len(text.split())


def echo_reply(messages: list[dict]) -> str:
    """The deterministic reply of `fake-echo`: what was received, in words."""
    roles: dict[str, int] = {}
    for m in messages:
        roles[str(m.get("role"))] = roles.get(str(m.get("role")), 0) + 1
    role_text = ", ".join(f"{n} {r}" for r, n in roles.items())
    last_user = next((_message_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    summary = any(
        m.get("role") == "system" and _message_text(m.get("content")).startswith("[Conversation summary")
        for m in messages
    )
    snippet = " ".join(last_user.split()[:40])
    return (
        f"Echo: received {len(messages)} messages ({role_text}); "
        f"summary {'present' if summary else 'absent'}. Last user message: {snippet}"
    )


def _chunks(text: str) -> list[str]:
    """Split into word-sized pieces that concatenate back to `text` exactly."""
    return re.findall(r"\S+\s*|\s+", text) or [""]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # small SSE writes must leave at once, not wait for a delayed ACK
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # tests read requests, not access logs
        pass

    # -- plumbing -----------------------------------------------------------------------------
    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return {"_raw": raw.decode("utf-8", "replace")}

    def _record(self, body: Any) -> int:
        headers = {k.lower(): v for k, v in self.headers.items()}
        return self.server.fake.record(RecordedRequest(self.command, self.path, headers, body, self.client_address[1]))

    def _send_json(self, status: int, payload: dict | list, headers: dict[str, str] | None = None) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), content_type="application/json", headers=headers)

    def _send_bytes(
        self, status: int, data: bytes, *, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _send_completion(self, model: str, payload: dict) -> None:
        """An unstreamed reply: at once, or `drip-<ms>`'s after its whitespace."""
        if (drip := _DRIP.match(model)) is None:
            self._send_json(200, payload)
            return
        self._send_dripping(json.dumps(payload).encode(), seconds=int(drip.group(1)) / 1000)

    def _send_dripping(self, data: bytes, *, seconds: float) -> None:
        """`data` as a 200 JSON body, after `seconds` of whitespace sent a space at a time (chunked)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline and not self.server.fake.stopping.wait(DRIP_EVERY):
                self.wfile.write(b"1\r\n \r\n")
                self.wfile.flush()
            self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n0\r\n\r\n")
        except OSError:  # the client gave up
            self.close_connection = True

    def _send_error(self, status: int, message: str, type_: str, code: str | None, **headers: str) -> None:
        body: dict | list = {"error": {"message": message, "type": type_, "param": None, "code": code}}
        if type_ == "RESOURCE_EXHAUSTED":  # Google's shape: a list, a status where OpenAI has a type
            body = [{"error": {"code": status, "message": message, "status": type_}}]
        self._send_json(status, body, headers)

    def _start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _sse(self, payload: dict | str) -> None:
        line = payload if isinstance(payload, str) else json.dumps(payload)
        data = f"data: {line}\n\n".encode()
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drop_connection(self) -> None:
        self.wfile.flush()
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _hang(self) -> None:
        """Answer nothing until the client gives up (closes), the server stops, or HANG_SECONDS pass."""
        deadline = time.monotonic() + HANG_SECONDS
        while time.monotonic() < deadline and not self.server.fake.stopping.is_set():
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                break
        self._drop_connection()

    def _api_key_refused(self) -> bool:
        auth = self.headers.get("Authorization", "")
        key = auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""
        if key.startswith("bad-"):
            self._send_error(401, f"Incorrect API key provided: {key}.", "invalid_request_error", "invalid_api_key")
            return True
        return False

    # -- endpoints ------------------------------------------------------------------------------
    def _html_page(self) -> bool:
        if "/html/" not in self.path:
            return False
        self._send_bytes(200, b"<!doctype html><title>Welcome</title><p>This is a website, not an API.</p>",
                         content_type="text/html; charset=utf-8")
        return True

    def _at_root(self) -> bool:
        """A request made under the server's root, not under /v1: answered as Ollama, vLLM and OpenAI do."""
        if self.path.split("?", 1)[0].rstrip("/") not in ("/models", "/chat/completions"):
            return False
        self._send_bytes(404, b"404 page not found", content_type="text/plain")
        return True

    def _public_models(self) -> bool:
        """OpenRouter's: a model list for anyone, and GET /key, which wants the key."""
        if "/public-models/" not in self.path:
            return False
        if self.path.rstrip("/").endswith("/models"):
            data = [{"id": m, "object": "model", "created": 1700000000, "owned_by": "fake"} for m in FAKE_MODELS]
            self._send_json(200, {"object": "list", "data": data})
            return True
        if not self.path.rstrip("/").endswith("/key"):
            return False
        auth = self.headers.get("Authorization", "")
        key = auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""
        if key.startswith("bad-") or key in ("", "no-key"):
            self._send_json(401, {"error": {"message": "User not found.", "code": 401}})
        else:
            self._send_json(200, {"data": {"label": "sk-or-v1-…", "usage": 0, "limit": None}})
        return True

    def do_GET(self) -> None:
        self._record(None)
        if self._html_page() or self._at_root() or self._public_models() or self._api_key_refused():
            return
        if self.path.rstrip("/").endswith("/models") and "/no-models/" not in self.path:
            data = [{"id": m, "object": "model", "created": 1700000000, "owned_by": "fake"} for m in FAKE_MODELS]
            self._send_json(200, {"object": "list", "data": data})
            return
        self._send_error(404, f"Unknown path {self.path}", "invalid_request_error", "unknown_url")

    def do_POST(self) -> None:
        body = self._read_body()
        number = self._record(body)
        if self._html_page() or self._at_root() or self._api_key_refused():
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_error(404, f"Unknown path {self.path}", "invalid_request_error", "unknown_url")
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body.get("model"):
            self._send_error(400, "'messages' and 'model' are required.", "invalid_request_error", None)
            return
        self._complete(body, number)

    def _complete(self, body: dict, number: int) -> None:
        model = str(body["model"])
        fake = self.server.fake
        misbehaviour = model if model in {"cut-stream", "early-end", "stream-error"} else None
        if model.endswith("-cut") and _THINK.match(model.removesuffix("-cut")):
            model, misbehaviour = model.removesuffix("-cut"), "cut-stream"
        if model == "fail-timeout":
            self._hang()
            return
        refusal = _refusal(body, model, key=self.headers.get("Authorization", "").removeprefix("Bearer "), fake=fake)
        if refusal is not None:
            status, message, type_, code, headers = refusal
            self._send_error(status, message, type_, code, **headers)
            return
        delay = _delay_of(model)
        messages = body["messages"]
        pieces, finish = _reply_pieces(body, model)
        reply = "".join(pieces)
        thought, pieces = _thinking_of(model, messages, pieces)
        usage = fake.usage_for(messages, model=model, reply=reply)
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = int(time.time())
        if not body.get("stream"):
            if delay:
                fake.stopping.wait(delay)
            message = {"role": "assistant", "content": "".join(pieces)}
            if thought:
                message["reasoning_content"] = thought
            choice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
            self._send_completion(model, {"id": completion_id, "object": "chat.completion", "created": created,
                                          "model": model, "choices": [choice], "usage": usage})
            return

        def chunk(delta: dict, finish_reason: str | None = None) -> dict:
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
            }

        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        self._start_sse()
        self._notice(model)
        self._sse(chunk({"role": "assistant", "content": ""}))
        thinking = [{"content": None, "reasoning_content": piece} for piece in _chunks(thought)] if thought else []
        for i, delta in enumerate([*thinking, *({"content": piece} for piece in pieces)]):
            if misbehaviour and i == CUT_AFTER_CHUNKS:
                self._misbehave(misbehaviour)
                return
            if delay and fake.stopping.wait(delay):
                self._drop_connection()
                return
            self._sse(chunk(delta))
        self._sse(chunk({}, finish))
        if include_usage:
            self._sse({**chunk({}), "choices": [], "usage": usage})
        self._sse("[DONE]")
        self._end_chunked()

    def _notice(self, model: str) -> None:
        """`note-key`'s event that is not JSON, before the reply."""
        if model == "note-key":
            self._sse(f"proxy note: forwarded with {self.headers.get('Authorization', '')}")

    def _misbehave(self, model: str) -> None:
        """How `cut-stream`, `early-end` and `stream-error` end a stream part-way."""
        if model == "cut-stream":
            self._drop_connection()
            return
        if model == "stream-error":
            self._sse({"error": {"message": "The server had an error while streaming.", "type": "server_error",
                                 "param": None, "code": None}})
        self._end_chunked()


# (status, message, error type, error code, extra headers) of each model that always fails
_FIXED_FAILURES: dict[str, tuple[int, str, str, str | None, dict[str, str]]] = {
    "fail-400": (400, "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 "
                 "tokens.", "invalid_request_error", "context_length_exceeded", {}),
    "fail-403": (403, "You are not allowed to use this model.", "invalid_request_error", "model_forbidden", {}),
    "fail-404": (404, "The model `fail-404` does not exist or you do not have access to it.", "invalid_request_error",
                 "model_not_found", {}),
    "fail-429": (429, "Rate limit reached for requests. Please try again in 2s.", "requests", "rate_limit_exceeded",
                 {"Retry-After": "2"}),
    "fail-quota": (429, "You exceeded your current quota, please check your plan and billing details.",
                   "insufficient_quota", "insufficient_quota", {}),
    "fail-quota-minute": (429, "You exceeded your current quota, please check your plan and billing details. Quota "
                          "exceeded for metric: generate_content_free_tier_requests, limit: 10. Please retry in "
                          "41.6s.", "RESOURCE_EXHAUSTED", None, {}),
    "fail-500": (500, "The server had an error while processing your request.", "server_error", None, {}),
    "fail-odd-400": (400, "Invalid byte \x00 at position 3; lone \ud800 here.", "invalid_request_error", None, {}),
}


def _refusal(body: dict, model: str, *, key: str, fake: FakeOpenAI
             ) -> tuple[int, str, str, str | None, dict[str, str]] | None:
    """The error a request to `model` gets instead of a reply, or None."""
    if model in _FIXED_FAILURES:
        return _FIXED_FAILURES[model]
    if found := _WAIT_429.fullmatch(model):
        return (429, f"Rate limit reached for requests. Please try again in {found[1]}s.", "requests",
                "rate_limit_exceeded", {"Retry-After": found[1]})
    if model == "fail-401":
        return 401, f"Incorrect API key provided: {key}.", "invalid_request_error", "invalid_api_key", {}
    if model == "flaky-500-then-200" and fake.flaky_count(model) % 2 == 1:
        return _FIXED_FAILURES["fail-500"]
    if model.startswith("reasoning-"):
        if "max_tokens" in body:
            return (400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                    "Use 'max_completion_tokens' instead.", "invalid_request_error", "unsupported_parameter", {})
        if body.get("temperature", 1) != 1:
            return (400, f"Unsupported value: 'temperature' does not support {body['temperature']} with this model. "
                    "Only the default (1) value is supported.", "invalid_request_error", "unsupported_value", {})
    if model.startswith("strict-") and (problem := strict_template_problem(body["messages"])):
        return 400, problem, "invalid_request_error", None, {}
    return None


def _delay_of(model: str) -> float:
    """Seconds before each chunk: `slow-<ms>`, `verbatim-<ms>`, `think-…-<ms>`."""
    if found := _SLOW.match(model) or _VERBATIM.match(model) or _THINK.match(model):
        return int(found.groups()[-1] or 0) / 1000
    return 0.0


def _thinking_of(model: str, messages: list[dict], pieces: list[str]) -> tuple[str, list[str]]:
    """A `think-*` model's (thinking for `reasoning_content`, the content's pieces): `think-inline` puts it
    before the reply in `<think>` tags, in pieces that cut both tags as a tokenizer may cut them."""
    found = _THINK.match(model)
    if found is None:
        return "", pieces
    thought = thinking_text(messages)
    if messages and "/no_think" in _message_text(messages[-1].get("content")):
        thought = "\n\n"  # Qwen3's soft switch: the block is still written, empty
    if found.group(1) == "fields":
        return thought, pieces
    if found.group(1) == "unopened":
        return "", [*_chunks(thought), "\n</think>\n\n", *pieces]
    inline = f"<think>{thought}</think>\n\n"
    return "", [inline[:4], inline[4:9], *_chunks(inline[9:-7]), inline[-7:-3], inline[-3:], *pieces]


def thinking_text(messages: list[dict]) -> str:
    """What the `think-*` models think before they answer: it names the last message's first words."""
    last = _message_text(messages[-1].get("content")) if messages else ""
    return f"Thinking it over: the user wrote {' '.join(last.split()[:4])!r}. I should describe what I received."


def _title_reply(messages: list[dict]) -> str:
    last = _message_text(messages[-1].get("content")) if messages else ""
    words = last.split("User:", 1)[-1].split()[:3]
    return f"<think>A short name for it.</think>\nTitle: \"{' '.join(words).capitalize()}\"."


def _reply_pieces(body: dict, model: str) -> tuple[list[str], str]:
    """The reply's streamed pieces and its finish_reason (`length` when max tokens cut it)."""
    if model == "fake-title":
        reply = _title_reply(body["messages"])
    elif _VERBATIM.match(model):
        users = [m for m in body["messages"] if m.get("role") == "user"]
        reply = _message_text(users[-1].get("content")) if users else ""
    else:
        reply = echo_reply(body["messages"])
    pieces = _chunks(reply)
    if model == "odd-bytes":
        # what JSON allows and storage does not: NUL, a surrogate pair split across two chunks, a lone one
        pieces += [" NUL\x00 here,", " pair \ud83d", "\ude00, lone \udc00 end."]
        return pieces, "stop\x00\ud800"
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    if isinstance(max_tokens, int) and 0 < max_tokens < len(pieces):
        return pieces[:max_tokens], "length"
    return pieces, "stop"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeOpenAI


class _BaseUrl:
    """A base URL of the running server: each behaviour variant is only a path prefix the handler
    dispatches on (see the module docstring), so one descriptor serves them all."""

    def __init__(self, prefix: str, doc: str) -> None:
        self.prefix = prefix
        self.__doc__ = doc

    def __get__(self, fake: FakeOpenAI | None, owner: type | None = None) -> Any:
        if fake is None:  # looked up on the class (help(), introspection): the descriptor itself
            return self
        return f"{fake.root_url}{self.prefix}/v1"


@dataclass
class FakeOpenAI:
    """The server plus what it has received. Use as a context manager or call start()/stop()."""

    host: str = "127.0.0.1"
    _requests: list[RecordedRequest] = field(default_factory=list)
    _flaky: dict[str, int] = field(default_factory=dict)
    _prompts: list[list[str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    _server: _Server | None = None
    _thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> FakeOpenAI:
        self._server = _Server((self.host, 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # wakes hanging and slow handlers so they finish at once
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def root_url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://{self.host}:{self._server.server_address[1]}"

    base_url = _BaseUrl("", "The OpenAI-compatible API.")
    base_url_html = _BaseUrl("/html", "Answers everything with a 200 HTML page (a website, not an API).")
    base_url_public_models = _BaseUrl(
        "/public-models", "Lists its models to any key; its GET /key checks the key (OpenRouter's).")
    base_url_without_models = _BaseUrl("/no-models", "GET /models answers 404 (chat completions still work).")

    # -- what was received --------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def completions(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == "POST" and r.path.endswith("/chat/completions")]

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()
            self._flaky.clear()
            self._prompts.clear()

    def wait_for_requests(self, count: int, *, timeout: float = 10.0) -> list[RecordedRequest]:
        """Block until at least `count` requests arrived (for requests made by another process)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            requests = self.requests
            if len(requests) >= count:
                return requests
            time.sleep(0.02)
        raise AssertionError(f"expected {count} requests, got {len(self.requests)}")

    def record(self, request: RecordedRequest) -> int:
        with self._lock:
            self._requests.append(request)
            return len(self._requests)

    def flaky_count(self, model: str) -> int:
        with self._lock:
            self._flaky[model] = self._flaky.get(model, 0) + 1
            return self._flaky[model]

    def usage_for(self, messages: list[dict], *, model: str, reply: str) -> dict:
        counts = _count_prompt(messages, model)
        prompt_tokens = sum(counts)
        keys = [json.dumps(m, sort_keys=True) for m in messages]
        with self._lock:
            shared = max((_common_prefix(keys, earlier) for earlier in self._prompts), default=0)
            self._prompts.append(keys)
        cached = sum(counts[:shared])
        completion_tokens = _count_text(reply, model)
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        }


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def closed_port_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


if __name__ == "__main__":  # manual runs and benchmarks: python tests/support/fake_openai.py
    with FakeOpenAI() as server:
        print(f"Fake OpenAI endpoint at {server.base_url} (Ctrl+C to stop)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()
