"""The calls: `llm_stream` (a chat reply), `llm_complete` (a summary, whole), `llm_test_connection`;
and `llm_target_for`, the target a config (or the offline demo) resolves to.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import openai
import orjson
from django.conf import settings
from openai.types.chat import ChatCompletion

import optimizer
from chatapp.providers.crypto import SecretDecryptError, secret_decrypt
from chatapp.providers.llm.errors import (
    _CALL_ERRORS,
    _COMPLETE_ERRORS,
    _answered_error,
    _endpoint_name,
    _key_unreadable_error,
    _llm_error,
    _no_answer_error,
    _not_chat_completions_error,
    _nothing_sent_error,
    _stream_cut_error,
    base_url_bare,
)
from chatapp.providers.llm.key_check import key_refused
from chatapp.providers.llm.offline import _offline_stream, offline_reply, offline_target
from chatapp.providers.llm.quirks import _QuirkAttempts, _request_params
from chatapp.providers.llm.sse import DONE, sse_events
from chatapp.providers.llm.transport import _async_client, _sync_client
from chatapp.providers.llm.types import Completion, Delta, Finish, LLMError, LLMEvent, LLMTarget, Reasoning, Usage
from chatapp.providers.llm.usage import _field, _usage_from
from chatapp.providers.thinking import ThinkSplitter, content_answer, content_parts, reasoning_of, think_split

if TYPE_CHECKING:
    from chatapp.providers.models import LLMConfig

logger = logging.getLogger(__name__)


_CONNECTION_TEST_TIMEOUT = 20.0


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
        sees_images=config.sees_images,
    )


# What chat.completions.create() passes besides the body: without it no Authorization header is sent.
_REQUEST_OPTIONS: openai.RequestOptions = {"security": {"bearer_auth": True}}


def _payload(params: dict[str, Any]) -> dict[str, Any]:
    """The request's JSON as the SDK writes it (compact UTF-8), by orjson: a long chat's context is
    some 50 KB of JSON, about 2% of a turn's CPU by the standard library. The SDK sends `content` as
    given; what orjson refuses (a lone surrogate) goes to the SDK's own encoder as `body`, as before."""
    try:
        return {"content": orjson.dumps(params)}
    except TypeError:
        return {"body": params}


async def llm_stream(
    *, target: LLMTarget, messages: list[dict], context_note: str | None = None
) -> AsyncIterator[LLMEvent]:
    """Stream a reply as Delta (and Reasoning) events, then a Finish event with the model's finish_reason
    when it gave one after some answer, then one Usage event when the endpoint reports usage.

    `context_note` is read only by the offline model (a sentence from the caller on what the
    optimizer did, e.g. that older messages were left out); real endpoints never see it.
    Raises LLMError; a stream that ends without a finish_reason or `[DONE]` raises kind "stream_cut".
    """
    if target.offline:
        async for event in _offline_stream(target=target, messages=messages, context_note=context_note):
            yield event
        return
    if target.key_unreadable:
        raise _key_unreadable_error(target)

    timeout = float(settings.LLM_TIMEOUT_SECONDS)
    stream = await _stream_open(target, messages, timeout=timeout)
    reading = _StreamReading()
    try:
        try:
            # To the body's end: the connection is kept (sse); keep-alives alone hold it open for so long.
            async for chunk in sse_events(stream.response, timeout=timeout):
                for event in reading.take(chunk):
                    yield event
        except _CALL_ERRORS as exc:
            reading.error = _llm_error(exc, target, started=reading.started, timeout=timeout)
    finally:
        # Also runs when the consumer stops early (Stop button, client gone): frees the connection.
        await stream.close()
    if reading.error is not None:
        raise reading.error
    if not reading.finished:
        raise reading.unfinished_error(target, stream.response.headers.get("content-type", ""))
    if not reading.chunks:  # [DONE] alone
        raise _nothing_sent_error()
    for event in reading.ended():
        yield event
    unanswered = _no_answer_error(reading.finish_reason, reading.tool, target, answered=reading.answered,
                                  thought=reading.started)
    if unanswered is not None:  # after the usage: those tokens were spent
        raise unanswered


@dataclass
class _StreamReading:
    """What a streamed reply has shown so far: text started, finish_reason seen, usage, chunks."""

    started: bool = False
    answered: bool = False  # some of the answer itself came (not only thinking)
    finished: bool = False
    finish_reason: str = ""
    tool: str = ""  # the first tool the model asked to call (none is ever offered)
    chunks: int = 0
    usage: Usage | None = None
    error: LLMError | None = None
    splitter: ThinkSplitter = field(default_factory=ThinkSplitter)

    def take(self, chunk: Any) -> list[Delta | Reasoning]:
        """The chunk's pieces of answer and of thinking (a chunk as parsed JSON); notes its usage and
        finish_reason.

        Read as plain JSON, defensively: building the SDK's typed chunk cost ~0.25 ms of CPU per
        chunk (about half of a short reply's server time), and an endpoint may send odd shapes."""
        if chunk is DONE:
            self.finished = True
            return []
        self.chunks += 1
        if not isinstance(chunk, dict):
            return []
        usage = chunk.get("usage")
        if not isinstance(usage, dict):  # Groq gives the usage under its own key
            groq = chunk.get("x_groq")
            usage = groq.get("usage") if isinstance(groq, dict) else None
        if isinstance(usage, dict):
            self.usage = _usage_from(usage)
        events: list[Delta | Reasoning] = []
        choices = chunk.get("choices")
        for choice in choices if isinstance(choices, list) else ():
            # Choice 0 only: other indexes are other replies, whose deltas would interleave with it.
            if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                # A string, or blocks (Mistral's Magistral) with its thinking in blocks of its own.
                block_thought, text = content_parts(delta.get("content"))
                thought = reasoning_of(delta) + block_thought
                if thought:
                    self.started = True
                    events.append(Reasoning(thought))
                if text:
                    self.started = True
                    self._add(*self.splitter.feed(text), events)
                refusal = delta.get("refusal")  # OpenAI's refusal comes in a field of its own, content null
                if isinstance(refusal, str) and refusal:
                    self.started = self.answered = True
                    events.append(Delta(refusal))
                self._note_tool(delta.get("tool_calls"))
            if choice.get("finish_reason"):
                self.finished = True
                self.finish_reason = str(choice["finish_reason"])
        return events

    def _note_tool(self, calls: Any) -> None:
        if self.tool or not isinstance(calls, list):
            return
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            if isinstance(name, str) and name:
                self.tool = name
                return

    def unfinished_error(self, target: LLMTarget, content_type: str) -> LLMError:
        """A body that ended with neither a finish_reason nor [DONE]: cut, or never a stream at all."""
        if self.chunks == 0 and "event-stream" not in content_type:
            return _not_chat_completions_error(target, content_type)
        return _stream_cut_error()

    def ended(self) -> list[LLMEvent]:
        """The events of a stream's end: what the splitter still held back (a few characters at most),
        the model's finish_reason when it gave one after some answer, and the usage."""
        events: list[Delta | Reasoning] = []
        self._add(*self.splitter.end(), events)
        tail: list[LLMEvent] = [*events]
        if self.answered and self.finish_reason:
            tail.append(Finish(self.finish_reason))
        if self.usage is not None:
            tail.append(self.usage)
        return tail

    def _add(self, thinking: str, answer: str, events: list[Delta | Reasoning]) -> None:
        if thinking:
            events.append(Reasoning(thinking))
        if answer:
            self.answered = True
            events.append(Delta(answer))


async def _stream_open(target: LLMTarget, messages: list[dict], *, timeout: float) -> openai.AsyncStream[Any]:
    """Start the streamed request, retrying with each endpoint quirk it reveals (see _QuirkAttempts)."""
    client = _async_client(target, timeout=timeout)
    attempts = _QuirkAttempts(target, timeout=timeout)
    for quirks in attempts:
        try:
            # The low-level post, not chat.completions.create(): create() runs the SDK's typed
            # request-body transform over every message, which cost ~127 ms CPU per call for a
            # 180-message context against ~17 ms this way, on the event loop every chat shares. Our
            # params are already plain JSON; the response side (streaming, error types) is the same.
            return await client.post(
                "/chat/completions",
                **_payload(_request_params(target, messages, stream=True, max_tokens=None, quirks=quirks)),
                options=_REQUEST_OPTIONS,
                # Chunks as parsed JSON (see _StreamReading.take).
                cast_to=object,
                stream=True,
                stream_cls=openai.AsyncStream[Any],
            )
        except _CALL_ERRORS as exc:
            attempts.failed(exc)
    attempts.raise_failure()
    raise LLMError("server", "The model call failed unexpectedly. Retry in a moment.")  # no attempt was made


def llm_complete(
    *, target: LLMTarget, messages: list[dict], max_tokens: int | None = None, max_retries: int = 0,
    timeout: float | None = None,
) -> Completion:
    """A whole reply at once (summary workers). `max_retries` lets a worker use the SDK's backoff;
    `timeout` (seconds, default settings.LLM_TIMEOUT_SECONDS) bounds each call."""
    if target.offline:
        text = offline_reply(messages=messages, model=target.model)
        return Completion(text=text, prompt_tokens=optimizer.count_messages(messages, model=target.model),
                          completion_tokens=optimizer.count_text(text, model=target.model), cached_tokens=0,
                          model=target.model, finish_reason="stop")
    if target.key_unreadable:
        raise _key_unreadable_error(target)
    seconds = float(settings.LLM_TIMEOUT_SECONDS if timeout is None else timeout)
    client = _sync_client(target, timeout=seconds, max_retries=max_retries)
    return _complete_with(_raw_create(client), target, messages, max_tokens=max_tokens, timeout=seconds)


def _raw_create(client: openai.OpenAI) -> Callable[..., Any]:
    """A non-streaming create() without the SDK's request-body transform (see llm_stream): summary
    prompts are whole spans of a conversation, so the transform's CPU cost grows with them."""

    def create(**params: Any) -> Any:
        return client.post("/chat/completions", **_payload(params), options=_REQUEST_OPTIONS, cast_to=ChatCompletion)

    return create


def _complete_with(create: Callable[..., Any], target: LLMTarget, messages: list[dict], *, max_tokens: int | None,
                   timeout: float) -> Completion:
    """`create` is a client made with `timeout` (seconds); the figure is passed for error messages."""
    response: Any = None
    attempts = _QuirkAttempts(target, timeout=timeout)
    for quirks in attempts:
        try:
            response = create(**_request_params(target, messages, stream=False, max_tokens=max_tokens, quirks=quirks))
            break
        except _COMPLETE_ERRORS as exc:
            attempts.failed(exc)
    attempts.raise_failure()
    if not hasattr(response, "choices"):  # the SDK hands back raw text when the body is not JSON
        raise _not_chat_completions_error(target, "text/html or other non-JSON")
    if getattr(response, "error", None):
        raise _answered_error(response.error, target)
    # Read as the stream is, defensively: an odd shape (a message null or not an object) is no answer, not a crash.
    choice = response.choices[0] if isinstance(response.choices, list) and response.choices else None
    usage = _usage_from(response.usage) if response.usage is not None else Usage(0, 0, 0)
    # A reasoning model's inline thinking is not part of a summary or a title (structured thinking
    # is a field of its own, not read).
    _, text = think_split(content_answer(_field(_field(choice, "message"), "content")))
    return Completion(
        text=text,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cached_tokens=usage.cached_tokens or 0,
        model=Completion.answered_model(response.model, asked=target.model),
        finish_reason=_field(choice, "finish_reason"),
    )


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
        # Only text ids name models: an entry without one (a server naming them under `name`) is passed over.
        model_ids = [m.id for m in client.models.list() if isinstance(getattr(m, "id", None), str)]
    except openai.APIStatusError as exc:
        # No model list: 404, 405, or 501 (a server with no GET at all, e.g. one on Python's http.server).
        if exc.status_code in {404, 405, 501}:
            return _one_token_test(client, target, prefix=f"Connected to {endpoint} (it has no model list). ",
                                   timeout=timeout)
        # A key denied the list may still chat (OpenAI's restricted keys without the api.model.read scope):
        # the request the chat makes says whether it may use the model.
        if exc.status_code == 403:
            return _one_token_test(client, target, prefix=f"Connected to {endpoint} (this key may not list its "
                                   "models). ", timeout=timeout)
        error = _llm_error(exc, target, started=False, timeout=timeout)
    except _CALL_ERRORS as exc:
        error = _llm_error(exc, target, started=False, timeout=timeout)
    except (AttributeError, TypeError, ValueError):
        # The SDK fails this way when the body is not a model list at all (e.g. an HTML page).
        error = _not_chat_completions_error(target, "not an OpenAI-compatible model list")
    if error is not None:
        return False, error.user_message
    # A server of one model (vLLM, llama.cpp's server, an Ollama with one model pulled) is said so, not
    # as "1 models".
    only = model_ids[0] if len(model_ids) == 1 else None
    # Other spellings of the same model, each served by its name: Gemini's OpenAI-compatible endpoint
    # lists "models/gemini-2.5-flash", Ollama "llama3.1:latest" for the model pulled as "llama3.1".
    if {target.model, f"models/{target.model}", f"{target.model}:latest"} & set(model_ids):
        listed_it = f"1 model, “{only}”" if only is not None else f"{len(model_ids)} models, including “{target.model}”"
        refused = key_refused(client, target, timeout=timeout)
        if refused is not None:
            return False, f"Connected to {endpoint}. It lists {listed_it}, to anyone. {refused}"
        return True, f"Connected to {endpoint}. It lists {listed_it}."
    ok, message = _one_token_test(client, target, prefix="", timeout=timeout)
    if ok:
        elsewhere = ("is not listed (its model list is empty)" if not model_ids
                     else f"is not the model it lists ({only})" if only is not None
                     else f"is not among the {len(model_ids)} models it lists")
        return True, (f"Connected to {endpoint}. “{target.model}” {elsewhere}, but it answered a one-token test "
                      "request.")
    shown = ", ".join(model_ids[:8]) + (f" and {len(model_ids) - 8} more" if len(model_ids) > 8 else "")
    listed = f" It lists: {shown}." if model_ids else " It lists no models."
    return False, f"Connected to {endpoint}, but the test request failed: {message}{listed}"


def _one_token_test(client: openai.OpenAI, target: LLMTarget, *, prefix: str, timeout: float) -> tuple[bool, str]:
    try:
        _complete_with(_raw_create(client), target, [{"role": "user", "content": "Reply with OK."}],
                       max_tokens=1, timeout=timeout)
    except LLMError as exc:
        # A 404 at a server's root: the list's 404 was the same miss, not a server without a model list.
        missed = exc.status == 404 and base_url_bare(target)
        return False, (exc.user_message if missed else prefix + exc.user_message)
    return True, prefix + f"“{target.model}” answered a one-token test request."
