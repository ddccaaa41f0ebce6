"""llm_stream against byte-exact answers of real endpoints' wire shapes (tests/support/wire.py): what
the chat gets from each, in plain words."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import re
import socket
import struct
import threading
import time
import zlib
from collections.abc import Iterator

import pytest

from chatapp.providers import llm
from tests.support.llm import make_target, run_stream
from tests.support.wire import chunk, chunked, head, sse, wire_server

MESSAGES = [{"role": "user", "content": "Hi"}]
USAGE = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}


def _stream(body: bytes, *, model: str = "m") -> tuple[list, llm.LLMError | None]:
    with wire_server(([head(), chunked(body)], False)) as server:
        return run_stream(make_target(server.base_url, model), MESSAGES)


def _stream_writes(writes: list[bytes | float]) -> tuple[list, llm.LLMError | None]:
    with wire_server((writes, True)) as server:
        return run_stream(make_target(server.base_url, "m"), MESSAGES)


def _stream_named(script: tuple[list[bytes | float], bool]) -> tuple[list, llm.LLMError | None, str]:
    """One stream against `script`: its events, its error, and the endpoint as the words name it."""
    with wire_server(script) as server:
        return (*run_stream(make_target(server.base_url, "m"), MESSAGES), server.base_url.split("/")[2])


def _text(events: list) -> str:
    return "".join(e.text for e in events if isinstance(e, llm.Delta))


def _usage(events: list) -> list[llm.Usage]:
    return [e for e in events if isinstance(e, llm.Usage)]


def test_done_without_a_finish_reason_is_a_whole_reply():
    """Servers that never fill finish_reason in a stream (older llama.cpp builds, some proxies) still end
    it with [DONE], which a cut connection cannot send: the reply is whole, not "cut off"."""
    events, error = _stream(sse(chunk({"role": "assistant", "content": ""}), chunk({"content": "Hello"}),
                                chunk(None, usage=USAGE), "[DONE]"))

    assert error is None
    assert _text(events) == "Hello"
    assert _usage(events) == [llm.Usage(10, 3, None)]


def test_a_stream_of_done_alone_is_no_reply_and_says_so():
    """`data: [DONE]` with no chunk before it (a server that dropped the request on its side, a proxy
    that lost the upstream) was stored as a complete, empty reply: a blank answer, nothing said."""
    events, error = _stream(sse("[DONE]"))

    assert events == [] and error is not None and (error.kind, error.retryable) == ("server", True)
    assert error.user_message == ("The model endpoint ended the stream without sending any reply (nothing came "
                                  "before its end, [DONE]). Retry in a moment.")


@pytest.mark.parametrize(("before", "words"), [
    (b"", "The model endpoint did not answer within 1 second."),
    (sse(chunk({"content": "Half"})), "The model stopped sending mid-reply and nothing came for 1 second."),
])
def test_keep_alives_alone_do_not_hold_a_reply_open_forever(settings, monkeypatch, before, words):
    """A stream that sends only keep-alive comments (or `data: ping`) kept the reply open for as long as they
    came, forever behind a broken proxy: the page showed a reply being written, and one whose page had left
    held its chat until a Stop. They hold it for KEEPALIVES_MAX_SECONDS (here 1) at most."""
    from chatapp.providers.llm import sse as llm_sse

    settings.LLM_TIMEOUT_SECONDS = 0.5  # longer than the pings' gaps: each resets the read timeout
    monkeypatch.setattr(llm_sse, "KEEPALIVES_MAX_SECONDS", 1.0)
    pinging: list[bytes | float] = [b"%X\r\n%s\r\n" % (len(ping), ping)
                                    for ping in (b": keep-alive\n\n", b"data: ping\n\n")] + [0.2]
    started = time.monotonic()
    events, error = _stream_writes([head(), *([chunked(before)[:-5]] if before else []), *pinging * 15])

    assert _text(events) == ("Half" if before else "")
    assert error is not None and error.kind == "timeout" and error.user_message.startswith(words)
    assert time.monotonic() - started < 2.5  # not the three seconds the pings went on for


def test_a_refusal_is_the_reply_text():
    """OpenAI streams a refusal in `delta.refusal`, `content` staying null: the chat shows it rather than
    an empty reply stored as complete."""
    events, error = _stream(sse(chunk({"role": "assistant", "content": None, "refusal": ""}),
                                chunk({"refusal": "I'm sorry, "}), chunk({"refusal": "I can't help with that."}),
                                chunk({}, "stop"), "[DONE]"))

    assert error is None
    assert _text(events) == "I'm sorry, I can't help with that."


@pytest.mark.parametrize(
    ("body", "words"),
    [
        # Azure OpenAI: the filter ends the reply before any text.
        (sse(chunk({"role": "assistant", "content": None}), chunk({}, "content_filter"), chunk(None, usage=USAGE),
             "[DONE]"), "content filter stopped this reply"),
        # A model (Ollama, vLLM with a tool parser) that called a tool nobody offered.
        (sse(chunk({"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function", "function": {"name": "web_search", "arguments": ""}}]}),
             chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": "x"}'}}]}), chunk({}, "tool_calls"),
             chunk(None, usage=USAGE), "[DONE]"), "asked to call a tool (“web_search”)"),
        # A reasoning model whose thinking used up the output limit.
        (sse(chunk({"reasoning_content": "Let me think"}), chunk({}, "length"), chunk(None, usage=USAGE), "[DONE]"),
         "reached its output limit (256 tokens) before writing any answer"),
    ],
)
def test_a_reply_that_ends_without_an_answer_says_why_and_is_billed(body, words):
    events, error = _stream(body)

    assert _text(events) == ""
    assert error is not None and error.kind == "bad_request" and error.retryable
    assert words in error.user_message
    assert _usage(events) == [llm.Usage(10, 3, None)]  # the tokens were spent: the record bills them


def test_a_reply_the_content_filter_cut_part_way_keeps_its_text_and_says_so():
    """Azure OpenAI's filter may end a reply mid-answer with finish_reason `content_filter`: the text until
    then was stored as a complete reply, nothing said, its end missing without a word."""
    events, error = _stream(sse(chunk({"content": "Step one: take the"}), chunk({}, "content_filter"),
                                chunk(None, usage=USAGE), "[DONE]"))

    assert _text(events) == "Step one: take the"
    assert _usage(events) == [llm.Usage(10, 3, None)]  # billed: the record counts those tokens
    assert error is not None and error.kind == "bad_request" and error.retryable
    assert error.user_message == ("The provider's content filter stopped this reply part-way (finish_reason "
                                  "“content_filter”): the text before it is kept. Rephrase the message, or retry.")


@pytest.mark.parametrize(("first", "words"), [
    (chunk({"content": "Half a"}), "The model endpoint ended this reply with an error (finish_reason “error”): the "
     "text before it is kept. Retry in a moment."),
    (chunk({"role": "assistant", "content": ""}), "The model endpoint ended this reply with an error (finish_reason "
     "“error”) before any text. Retry in a moment."),
])
def test_a_reply_ended_by_finish_reason_error_says_so(first, words):
    """OpenRouter's normalized finish_reason for a failed generation is "error": the reply was stored
    complete (its text cut, or empty), nothing said."""
    events, error = _stream(sse(first, chunk({}, "error"), "[DONE]"))

    assert _text(events) == first["choices"][0]["delta"]["content"]
    assert error is not None and (error.kind, error.retryable) == ("server", True)
    assert error.user_message == words


def test_a_tool_call_after_some_text_keeps_the_text_and_says_the_reply_ends_there():
    """A model (Ollama, vLLM with a tool parser) that writes a line and then calls a tool nobody offered
    ("Let me look that up.") was stored complete: a reply that stops before its answer, nothing said. A
    finish_reason "tool_calls" with no tool named after a whole answer stays a whole reply."""
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "web_search", "arguments": "{}"}}
    events, error = _stream(sse(chunk({"content": "Let me look that up."}), chunk({"tool_calls": [call]}),
                                chunk({}, "tool_calls"), chunk(None, usage=USAGE), "[DONE]"))

    assert _text(events) == "Let me look that up." and _usage(events) == [llm.Usage(10, 3, None)]
    assert error is not None and (error.kind, error.retryable) == ("bad_request", True)
    assert error.user_message == ("After this text the model asked to call a tool (“web_search”), and this chat "
                                  "offers no tools: the reply ends there. Retry, or ask it to answer in text.")

    events, error = _stream(sse(chunk({"content": "The answer."}), chunk({}, "tool_calls"), "[DONE]"))
    assert error is None and _text(events) == "The answer."


@pytest.mark.parametrize("thinking", [chunk({"reasoning_content": "Let me think about"}),
                                      chunk({"content": "<think>Let me think about"})])
@pytest.mark.parametrize("finish", ["stop", None])
def test_a_reply_that_ends_while_still_thinking_says_so(thinking, finish):
    """A model that ends its reply inside its thinking (a `<think>` never closed, a reasoning parser's field
    and no content) was stored as a complete reply with no answer: an empty bubble under the thinking."""
    events, error = _stream(sse(thinking, chunk({}, finish), chunk(None, usage=USAGE), "[DONE]"))

    assert _text(events) == "" and "".join(e.text for e in events if isinstance(e, llm.Reasoning))
    assert _usage(events) == [llm.Usage(10, 3, None)]
    assert error is not None and (error.kind, error.retryable) == ("bad_request", True)
    assert error.user_message == ("The model ended its reply while still thinking, before any answer (its thinking "
                                  "is kept). Retry, or ask again.")


def test_a_reply_cut_by_the_output_limit_keeps_its_text():
    events, error = _stream(sse(chunk({"content": "Half an ans"}), chunk({}, "length"), "[DONE]"))

    assert error is None and _text(events) == "Half an ans"


def _json_answer(payload: dict) -> tuple[list, llm.LLMError | None]:
    body = json.dumps(payload).encode()
    with wire_server(([head(content_type="application/json", chunked_body=False, length=len(body)), body],
                      False)) as server:
        return run_stream(make_target(server.base_url, "m"), MESSAGES)


def test_a_server_that_ignores_stream_true_still_answers():
    """Some servers and proxies answer a streamed request with the whole completion as JSON."""
    events, error = _json_answer({"id": "x", "object": "chat.completion", "model": "m", "usage": USAGE, "choices": [
        {"index": 0, "finish_reason": "stop",
         "message": {"role": "assistant", "content": "Whole answer", "reasoning_content": "Thought"}}]})

    assert error is None
    assert _text(events) == "Whole answer"
    assert [e.text for e in events if isinstance(e, llm.Reasoning)] == ["Thought"]
    assert _usage(events) == [llm.Usage(10, 3, None)]


def test_an_error_answered_as_json_with_200_says_what_the_provider_said():
    # OpenRouter answers some failures with 200 and an error object.
    events, error = _json_answer({"error": {"message": "No endpoints found for m.", "code": 404}})

    assert events == []
    assert error is not None and "No endpoints found for m." in error.user_message
    assert "not with a chat completion" not in error.user_message


def test_json_that_is_no_completion_is_still_explained():
    events, error = _json_answer({"object": "list", "data": []})

    assert events == [] and error is not None and "not with a chat completion" in error.user_message


def test_data_events_that_are_not_json_are_passed_over(caplog):
    """An empty `data:` (no event at all, by the SSE rules) and a proxy's `data: ping` keep-alive must not
    end the reply with an unexplained failure."""
    events, error = _stream(b"data:\n\ndata: ping\n\n" + sse(chunk({"content": "Hello"}), chunk({}, "stop"), "[DONE]"))

    assert error is None and _text(events) == "Hello"
    assert "not JSON" in caplog.text


def test_only_the_first_choice_is_the_reply():
    """A server that streams several choices (n ignored the other way, or a proxy fanning out) interleaves
    their deltas: the reply is choice 0's text, not a mix."""
    events, error = _stream(sse({"choices": [{"index": 0, "delta": {"content": "A1 "}},
                                             {"index": 1, "delta": {"content": "B1 "}}]},
                                {"choices": [{"index": 1, "delta": {"content": "B2"}, "finish_reason": "stop"}]},
                                {"choices": [{"index": 0, "delta": {"content": "A2"}, "finish_reason": "stop"}]},
                                "[DONE]"))

    assert error is None and _text(events) == "A1 A2"


@pytest.mark.parametrize("odd", [b'{"choices": 5}', b'{"choices": [], "usage": {"completion_tokens": 1e400}}'])
def test_a_chunk_of_an_odd_shape_is_passed_over_not_a_crash(odd):
    """`choices` that is not a list, or a token count too large for an integer, raised out of the stream
    (TypeError, OverflowError): the chat logged a crash and said only "Something went wrong"."""
    events, error = _stream(b"data: " + odd + b"\n\n" + sse(chunk({"content": "ok"}, "stop"), "[DONE]"))

    assert error is None and _text(events) == "ok"
    assert _usage(events) in ([], [llm.Usage(0, 0, None)])


_DEEP = b"[" * 200_000 + b"]" * 200_000


def test_json_nested_past_the_parsers_depth_is_passed_over_not_a_crash():
    """Arrays nested 200,000 deep: orjson refuses them, and the standard library's parser, tried next,
    raised RecursionError out of the stream (the chat logged a crash and said "Something went wrong"),
    and out of a whole answer's read (a summary failed as a crash, its retries skipped)."""
    events, error = _stream(b"data: " + _DEEP + b"\n\n" + sse(chunk({"content": "ok"}, "stop"), "[DONE]"))
    assert error is None and _text(events) == "ok"

    with wire_server(([head(content_type="application/json", chunked_body=False, length=len(_DEEP)), _DEEP],
                      False)) as server, pytest.raises(llm.LLMError) as raised:
        llm.llm_complete(target=make_target(server.base_url, "m"), messages=MESSAGES)
    assert "a body labelled JSON that is not valid JSON" in raised.value.user_message


def test_groq_usage_in_x_groq_is_billed():
    events, error = _stream(sse(chunk({"content": "a"}), chunk({}, "stop", x_groq={"id": "req_1", "usage": USAGE}),
                                "[DONE]"))

    assert error is None and _usage(events) == [llm.Usage(10, 3, None)]


def _refused(status: str, content_type: str, body: bytes, extra: str = "") -> llm.LLMError | None:
    with wire_server(([head(status, content_type, chunked_body=False, length=len(body), extra=extra), body],
                      False)) as server:
        events, error = run_stream(make_target(server.base_url, "m"), MESSAGES)
    assert events == []
    return error


def test_retry_after_as_an_http_date_is_read_as_seconds():
    when = email.utils.formatdate(time.time() + 30, usegmt=True)  # a proxy's form of the header
    error = _refused("429 Too Many Requests", "application/json", b'{"error": {"message": "Slow down"}}',
                     extra=f"Retry-After: {when}")

    assert error is not None and error.kind == "rate_limit"
    assert re.search(r"Wait (29|30|31) seconds and retry\.", error.user_message), error.user_message


@pytest.mark.parametrize("digits", [400, 5_000])
def test_a_retry_after_of_absurd_length_is_a_days_wait_not_a_crash(digits):
    """A broken endpoint's Retry-After of hundreds of digits was an infinite float (thousands: more than
    Python reads as an integer): the error's own making raised, and the chat's reply stayed "streaming"."""
    error = _refused("429 Too Many Requests", "application/json", b'{"error": {"message": "Slow down"}}',
                     extra="Retry-After: " + "9" * digits)

    assert error is not None and error.kind == "rate_limit"
    assert error.retry_after == 86_400
    assert error.user_message.endswith("(429). Wait 86400 seconds and retry."), error.user_message


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("Retry-After: 1", "Rate limit reached."),
        ("Retry-After: 0", "Rate limit reached."),
        # OpenAI's tokens-per-minute limit names a wait in milliseconds, no header.
        ("X-Request-Id: r1", "Rate limit reached for gpt-4o-mini on tokens per min. Please try again in 428ms."),
    ],
)
def test_a_wait_of_a_second_or_less_is_said_as_one_second(extra, message):
    """The most common wait a rate limit names read "Wait 1 seconds and retry." (and a Retry-After of 0,
    "Wait 0 seconds")."""
    body = json.dumps({"error": {"message": message, "type": "requests", "code": "rate_limit_exceeded"}}).encode()
    error = _refused("429 Too Many Requests", "application/json", body, extra=extra)

    assert error is not None and error.kind == "rate_limit"
    assert error.user_message.endswith("(429). Wait 1 second and retry."), error.user_message
    assert error.retry_after == 1


@pytest.mark.parametrize(("wait", "seconds"), [("7m12s", 432), ("1h0m0s", 3600), ("2m", 120), ("1m30.5s", 91)])
def test_a_wait_written_in_minutes_and_hours_is_read(wait, seconds):
    """OpenAI's per-day limits name their wait as "7m12s", with no Retry-After: it was read as no wait
    at all ("Wait a moment and retry.", and the summary worker's retries came back at once)."""
    message = (f"Rate limit reached for gpt-4o in organization org-x on requests per day (RPD): Limit 200, Used 200, "
               f"Requested 1. Please try again in {wait}. Visit https://platform.openai.com/account/rate-limits.")
    body = json.dumps({"error": {"message": message, "type": "requests", "code": "rate_limit_exceeded"}}).encode()
    error = _refused("429 Too Many Requests", "application/json", body, extra="X-Request-Id: r1")

    assert error is not None and error.kind == "rate_limit" and error.retryable
    assert error.user_message.endswith(f"(429). Wait {seconds} seconds and retry."), error.user_message
    assert error.retry_after == seconds


def test_a_proxys_html_error_page_is_told_by_its_title_not_its_markup():
    page = (b"<html><head><title>413 Request Entity Too Large</title></head><body><center><h1>413 Request "
            b"Entity Too Large</h1></center><hr><center>nginx</center></body></html>")
    error = _refused("413 Request Entity Too Large", "text/html", page)

    assert error is not None and error.kind == "bad_request"
    assert error.user_message == "The model endpoint rejected the request (413): 413 Request Entity Too Large"


@pytest.mark.parametrize("body", [
    # llama.cpp's server, older and newer words
    b'{"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", '
    b'"type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 8192}}',
    b'{"error": {"code": 400, "message": "request (9000 tokens) exceeds the available context size (8192 tokens), '
    b'try increasing it", "type": "exceed_context_size_error"}}',
])
def test_llama_cpps_context_size_refusal_points_at_the_configs_window(body):
    """llama.cpp answers a request longer than its `n_ctx` in words of its own ("try increasing it", a server
    flag the chat's user may not hold): the config's window, which makes requests that long, went unnamed."""
    error = _refused("400 Bad Request", "application/json", body)

    assert error is not None and (error.kind, error.retryable) == ("bad_request", False)
    assert error.user_message.endswith("The context window set for “Test endpoint” (8,192 tokens) is more than the "
                                       "endpoint takes: lower it in Settings.")


def test_llama_cpps_streamed_error_field_is_the_error_it_says_not_an_empty_reply():
    """llama.cpp's server (builds before late 2025) answers a streamed request it cannot serve with 200, an
    `error:` field (not `data:`) and `[DONE]`: the error was passed over and the chat stored an empty,
    complete reply, with nothing said. Its context-size refusal is told as the 400 it stands for."""
    events, error = _stream(b'error: {"code": 400, "message": "the request exceeds the available context size, try '
                            b'increasing it", "type": "exceed_context_size_error"}\n\n' + sse("[DONE]"))

    assert events == [] and error is not None and (error.kind, error.retryable) == ("bad_request", False)
    assert "the request exceeds the available context size" in error.user_message
    assert error.user_message.endswith("The context window set for “Test endpoint” (8,192 tokens) is more than the "
                                       "endpoint takes: lower it in Settings.")


def test_an_error_event_before_any_text_is_not_said_to_be_mid_reply():
    """OpenRouter passes an upstream provider's failure on as an error event, often before any text: the
    chat said "an error mid-reply" of a reply that never began, and ran the provider's unpunctuated words
    into its own ("Provider returned error Retry in a moment.")."""
    events, error = _stream(sse(chunk({"role": "assistant", "content": ""}),
                                {"error": {"code": 502, "message": "Provider returned error"}}))

    assert events == [] and error is not None and error.kind == "server" and error.retryable
    assert error.user_message == ("The model endpoint reported an error before replying: Provider returned error. "
                                  "Retry in a moment.")


def test_content_streamed_as_blocks_is_the_reply_and_its_thinking():
    """Mistral's Magistral streams `content` as lists of blocks: its thinking in `thinking` blocks, then the
    answer in `text` blocks. Only a string was read, so every reply ended empty and complete, nothing said."""
    events, error = _stream(sse(
        chunk({"role": "assistant",
               "content": [{"type": "thinking", "thinking": [{"type": "text", "text": "Basic "}]}]}),
        chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "arithmetic."}]}]}),
        chunk({"content": [{"type": "text", "text": "2 + 2 "}]}),
        chunk({"content": [{"type": "text", "text": "= 4"}]}),
        chunk({"content": ""}, "stop"),
        "[DONE]",
    ))

    assert error is None and _text(events) == "2 + 2 = 4"
    assert "".join(e.text for e in events if isinstance(e, llm.Reasoning)) == "Basic arithmetic."
    assert [e for e in events if isinstance(e, llm.Finish)] == [llm.Finish("stop")]


def test_a_server_errors_words_are_passed_on():
    """Ollama answers 500 to a model it cannot load, saying why: the chat said only "an internal error (500).
    Retry in a moment.", which no retry cures, and kept the reason from the user."""
    body = (b'{"error": {"message": "model requires more system memory (8.0 GiB) than is available (4.1 GiB)", '
            b'"type": "api_error", "param": null, "code": null}}')
    error = _refused("500 Internal Server Error", "application/json", body)

    assert error is not None and (error.kind, error.status, error.retryable) == ("server", 500, True)
    assert error.user_message == ("The model endpoint had an internal error (500): model requires more system memory "
                                  "(8.0 GiB) than is available (4.1 GiB). Retry in a moment.")


def test_a_server_error_given_as_a_plain_string_is_passed_on():
    """A server answering `{"error": "<words>"}` (Ollama's own API shape, which servers and proxies before it
    pass on): its words were dropped, and the chat said only "an internal error (500). Retry in a moment.",
    as in a stream's error event, where it said "An error occurred during streaming"."""
    body = b'{"error": "model requires more system memory (8.0 GiB) than is available (4.1 GiB)"}'
    error = _refused("500 Internal Server Error", "application/json", body)

    assert error is not None and (error.kind, error.status) == ("server", 500)
    assert error.user_message == ("The model endpoint had an internal error (500): model requires more system memory "
                                  "(8.0 GiB) than is available (4.1 GiB). Retry in a moment.")

    events, error = _stream(sse(chunk({"content": "Hal"}), {"error": "upstream went away"}))
    assert _text(events) == "Hal" and error is not None
    assert error.user_message == ("The model endpoint reported an error mid-reply: upstream went away. Retry in a "
                                  "moment.")


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        # The upstream provider's refusal, in `metadata.raw` (a JSON text), behind "Provider returned error".
        ("400 Bad Request", {"error": {"code": 400, "message": "Provider returned error", "metadata": {
            "raw": json.dumps({"type": "error", "error": {"type": "invalid_request_error",
                                                          "message": "max_tokens: 99999 > 64000"}}),
            "provider_name": "Anthropic"}}},
         "The model endpoint rejected the request (400): Provider returned error (Anthropic: max_tokens: 99999 > "
         "64000)"),
        ("502 Bad Gateway", {"error": {"code": 502, "message": "Provider returned error", "metadata": {
            "raw": "upstream connect error", "provider_name": "Together"}}},
         "The model endpoint had an internal error (502): Provider returned error (Together: upstream connect "
         "error). Retry in a moment."),
    ],
)
def test_openrouters_upstream_error_says_what_the_provider_behind_it_said(status, body, words):
    """OpenRouter answers an upstream provider's failure as "Provider returned error", the provider's own
    words in `error.metadata.raw`: the chat said only that, which tells the user nothing to do."""
    error = _refused(status, "application/json", json.dumps(body).encode())

    assert error is not None and error.user_message == words


def test_openrouters_moderation_refusal_says_the_message_was_flagged_not_the_key():
    """OpenRouter answers 403 to a message its moderation flags, with the reasons in `error.metadata`: the
    chat said the API key may not use the model, sending the user to Settings for nothing."""
    body = {"error": {"code": 403, "message": "Input was flagged by moderation", "metadata": {
        "reasons": ["violence", "harassment"], "flagged_input": "the words", "provider_name": "OpenAI",
        "model_slug": "openai/gpt-4o"}}}
    error = _refused("403 Forbidden", "application/json", json.dumps(body).encode())

    assert error is not None and error.kind == "bad_request" and not error.retryable
    assert error.user_message == ("The provider's moderation refused this message (403): Input was flagged by "
                                  "moderation (OpenAI: violence, harassment). Rephrase the message.")
    assert "API key" not in error.user_message


@contextlib.contextmanager
def _dropping_server(*, reset: bool) -> Iterator[str]:
    """A base URL whose server reads each request and closes its connection unanswered (`reset`: with an
    RST, as a process that crashed does, rather than a FIN)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                conn.recv(65536)
                if reset:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        listener.close()


@pytest.mark.parametrize("answer", [b"SSH-2.0-OpenSSH_9.6\r\n", b"-ERR unknown command\r\n",
                                    b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 20_000 + b"\r\n\r\n"])
def test_an_answer_that_is_not_http_is_not_said_to_be_a_dropped_request(answer):
    """A base URL whose port is another service's (SSH, Redis) answers in its own protocol: that is no
    request dropped by a crashing server, and no retry helps."""
    events, error, endpoint = _stream_named(([answer], True))

    assert events == [] and error is not None and (error.kind, error.retryable) == ("connection", False)
    assert error.user_message == (f"The model endpoint at {endpoint} answered, but not with an HTTP response this "
                                  "server reads: the base URL's port may be another service's. Check the base URL "
                                  "in Settings.")


_MB = b"x" * 2**20


def _endless(status: str, content_type: str, first: bytes, piece: bytes = _MB) -> list[bytes | float]:
    """A body that does not end where a reply would (80 MB here, past any bound the client keeps)."""
    return [head(status, content_type), *[b"%X\r\n%s\r\n" % (len(p), p) for p in (first, *[piece] * 80) if p]]


@pytest.mark.parametrize(
    "writes",
    [
        _endless("200 OK", "text/event-stream", b"data: "),  # one line that never ends
        _endless("200 OK", "text/event-stream", b"", b"data: " + _MB + b"\n"),  # one event of endless lines
        _endless("200 OK", "application/json", b'{"choices": "'),  # a whole answer that never ends
        _endless("500 Internal Server Error", "text/html", b"<html>"),  # an error page that never ends
    ],
    ids=["line", "event", "json", "error-page"],
)
def test_a_body_that_never_ends_is_given_up_not_kept_in_memory(writes):
    """A server sending an endless body (a URL serving a large file, a broken proxy: one user's base URL,
    on a server others share) was read into memory whole, until the process ran out of it."""
    with wire_server((writes, True)) as server:
        events, error = run_stream(make_target(server.base_url, "m"), MESSAGES)

    assert events == [] and error is not None and (error.kind, error.retryable) == ("server", False)
    assert "sent more than 64 MB in one piece" in error.user_message


def test_a_whole_answer_that_never_ends_is_given_up_by_the_summaries_client_too():
    with wire_server((_endless("200 OK", "application/json", b'{"choices": "'), True)) as server, \
            pytest.raises(llm.LLMError) as raised:
        llm.llm_complete(target=make_target(server.base_url, "m"), messages=MESSAGES)

    assert "sent more than 64 MB in one piece" in raised.value.user_message


def _compressed(data: bytes, encoding: str) -> bytes:
    wbits = {"gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS, "raw-deflate": -zlib.MAX_WBITS}[encoding]
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
def test_a_compressed_stream_is_read(encoding):
    body = _compressed(sse(chunk({"content": "Hello"}), chunk({"content": " there"}, "stop"), "[DONE]"), encoding)
    name = encoding.removeprefix("raw-")
    with wire_server(([head(extra=f"Content-Encoding: {name}"), chunked(body[:7], body[7:])], False)) as server:
        events, error = run_stream(make_target(server.base_url, "m"), MESSAGES)
        asked = server.requests[0].lower()

    assert error is None and _text(events) == "Hello there"
    assert b"accept-encoding: gzip, deflate\r\n" in asked  # only what is inflated in bounded pieces


@pytest.mark.parametrize("content_type", ["text/html", "application/json"])
def test_a_compressed_body_that_inflates_past_the_bound_is_given_up_not_kept_in_memory(content_type):
    """300 KB of gzip stand for 300 MB of error page: httpx inflated each chunk whole and the SDK kept
    the page, 1.3 GB of this process's memory for one request (a gigabyte per megabyte sent)."""
    bomb = _compressed(b"<html>" + b"x" * (80 * 2**20), "gzip")
    writes = [head("500 Internal Server Error", content_type, chunked_body=False, length=len(bomb),
                   extra="Content-Encoding: gzip"), bomb]
    with wire_server((writes, True)) as server:
        events, error = run_stream(make_target(server.base_url, "m"), MESSAGES)

    assert events == [] and error is not None and (error.kind, error.retryable) == ("server", False)
    assert "sent more than 64 MB in one piece" in error.user_message

    with wire_server((writes, True)) as server, pytest.raises(llm.LLMError) as raised:
        llm.llm_complete(target=make_target(server.base_url, "m"), messages=MESSAGES)
    assert "sent more than 64 MB in one piece" in raised.value.user_message


@pytest.mark.parametrize("writes", [
    # an error page past the bound, and one cut mid-body: the SDK reads either outside its own handling
    [head("500 Internal Server Error", "text/html", chunked_body=False, length=80 * 2**20), *[_MB] * 70],
    [head("502 Bad Gateway", "text/html", chunked_body=False, length=10_000), b"<html>" * 100],
], ids=["too-large", "cut"])
def test_a_body_that_fails_as_it_is_read_gives_its_connection_back(writes):
    """An error page whose read failed (too large, or cut) was never closed: the SDK reads it outside the
    code that closes a failed response, so its connection stayed taken and its client counted it as a
    request still running (a client dropped from the cache then never closed its session)."""
    from chatapp.providers.llm import transport as llm_transport

    async def failed_call(base_url: str) -> tuple[llm.LLMError | None, int]:
        error = None
        try:
            async for _ in llm.llm_stream(target=make_target(base_url, "m"), messages=MESSAGES):
                pass
        except llm.LLMError as exc:
            error = exc
        clients = llm_transport._async_clients[asyncio.get_running_loop()].values()
        return error, sum(transport.requests for _, transport in clients)

    with wire_server((writes, True)) as server:
        error, running = asyncio.run(failed_call(server.base_url))

    assert error is not None and error.kind in ("server", "connection")
    assert running == 0


def test_a_body_compressed_as_not_asked_is_refused_in_words():
    """httpx inflates zstd too, in one call whatever it stands for: only what was asked for is read."""
    events, error, endpoint = _stream_named(([head(extra="Content-Encoding: zstd"), chunked(b"(\xb5/\xfd garbage")],
                                             False))

    assert events == [] and error is not None and (error.kind, error.retryable) == ("server", False)
    assert error.user_message == (f"The model endpoint at {endpoint} compressed its answer as "
                                  "“zstd”, which was not asked for (only gzip, deflate is read): check the base URL in "
                                  "Settings, or the proxy in between.")


def test_an_event_of_ten_megabytes_is_still_read():
    events, error = _stream(sse(chunk({"content": "x" * 10_000_000}), chunk({}, "stop"), "[DONE]"))

    assert error is None and len(_text(events)) == 10_000_000


@pytest.mark.parametrize("reset", [False, True])
def test_a_server_that_drops_the_request_unanswered_is_not_said_to_be_unreachable(reset):
    """A server that took the connection and closed it, or reset it, before any answer (a local server
    crashing as it loads the model, a proxy dropping the request) was told as "Could not connect … check
    the base URL and that the server is running": the URL was right and the server had taken the call."""
    with _dropping_server(reset=reset) as base_url:
        events, error = run_stream(make_target(base_url, "m"), MESSAGES)

    assert events == [] and error is not None and (error.kind, error.retryable) == ("connection", True)
    assert error.user_message == (f"The model endpoint at {base_url.split('/')[2]} closed the connection without "
                                  "answering (a server that stopped or restarted, perhaps loading the model, or a "
                                  "proxy that dropped the request). Retry in a moment.")


def test_a_503s_retry_after_is_the_wait_said_and_kept():
    """A server loading a model, or a gateway draining, answers 503 with Retry-After: the wait was read for
    a 429 only, so a summary's retry came back at its own backoff, and the user was told "in a moment"."""
    error = _refused("503 Service Unavailable", "application/json", b'{"error": {"message": "Loading model"}}',
                     extra="Retry-After: 20")

    assert error is not None and (error.kind, error.status, error.retryable) == ("server", 503, True)
    assert error.retry_after == 20
    assert error.user_message == ("The model endpoint had an internal error (503): Loading model. "
                                  "Wait 20 seconds and retry.")


def test_a_200_json_error_fails_a_whole_completion_and_the_connection_test():
    body = b'{"error": {"message": "No endpoints found for m.", "code": 404}}'

    def script(n: int) -> tuple[list[bytes | float], bool]:
        return [head(content_type="application/json", chunked_body=False, length=len(body)), body], False

    with wire_server(script) as server:
        target = make_target(f"{server.base_url}", "m")
        with pytest.raises(llm.LLMError) as info:
            llm.llm_complete(target=target, messages=MESSAGES)
        ok, message = llm.llm_test_connection(target=target)  # /models answers the same error: no list

    assert "No endpoints found for m." in info.value.user_message
    assert ok is False and "No endpoints found for m." in message


def test_a_200_labelled_json_that_does_not_parse_is_a_model_error_not_a_crash():
    """A gateway's plain-text answer labelled JSON, or JSON garbled on the way: the SDK's own parse raised
    a bare JSONDecodeError, which crashed a summary job (no retry, no extractive summary), a title, and
    the connection test of a server without a model list."""
    body = b'{"id": "c1", "choices": ['

    def script(n: int) -> tuple[list[bytes | float], bool]:
        return [head(content_type="application/json", chunked_body=False, length=len(body)), body], False

    with wire_server(script) as server:
        target = make_target(server.base_url, "m")
        with pytest.raises(llm.LLMError) as info:
            llm.llm_complete(target=target, messages=MESSAGES)
    assert info.value.kind == "server" and info.value.retryable
    assert "not valid JSON" in info.value.user_message

    def no_list(n: int) -> tuple[list[bytes | float], bool]:
        if n == 0:
            return [head("404 Not Found", "text/plain", chunked_body=False, length=0)], False
        return [head(content_type="application/json", chunked_body=False, length=len(body)), body], False

    with wire_server(no_list) as server:
        ok, message = llm.llm_test_connection(target=make_target(server.base_url, "m"))
    assert ok is False and "not valid JSON" in message


def _whole_answer(body: bytes) -> llm.Completion:
    answer = [head(content_type="application/json", chunked_body=False, length=len(body)), body]
    with wire_server((answer, False)) as server:
        return llm.llm_complete(target=make_target(server.base_url, "m"), messages=MESSAGES)


@pytest.mark.parametrize("body", [
    b'{"choices": [{"index": 0, "message": null, "finish_reason": "stop"}]}',
    b'{"choices": [{"index": 0, "message": "Hello", "finish_reason": "stop"}]}',
    b'{"choices": "Hello"}',
])
def test_a_whole_answer_of_an_odd_shape_is_an_empty_answer_not_a_crash(body):
    """What a summary or a title reads was taken on trust (`choices[0].message.content`): a message null
    or not an object crashed the summary job (no retry, no extractive summary) and the title task, and
    answered the connection test of a server without a model list with a 500. The stream reads the same
    shapes as no answer."""
    assert _whole_answer(body).text == ""


def test_a_whole_answer_in_content_blocks_is_read_from_its_text_blocks():
    """Mistral's Magistral answers `content` as a list of blocks, its thinking in one of its own: the text
    is the answer, the thinking is left out (as structured thinking is)."""
    body = json.dumps({"model": "m", "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": [
            {"type": "thinking", "thinking": [{"type": "text", "text": "Let me think."}]},
            {"type": "text", "text": "The answer."},
        ]}}]}).encode()
    completion = _whole_answer(body)
    assert completion.text == "The answer." and completion.finish_reason == "stop"


def test_a_reply_cut_at_the_output_limit_says_so_after_its_text():
    """`length` after some answer is a whole reply the model could not finish: its text is kept and
    the reason handed on (the chat marks the reply and offers to continue it); a reply that ends on its
    own says `stop`, and one that gives no reason says nothing."""
    events, error = _stream(sse(chunk({"role": "assistant", "content": "The bikes are in"}), chunk({}, "length"),
                                chunk(None, usage=USAGE), "[DONE]"))
    assert error is None and _text(events) == "The bikes are in"
    assert [e for e in events if isinstance(e, llm.Finish)] == [llm.Finish("length")]
    assert _usage(events) == [llm.Usage(10, 3, None)]

    events, _ = _stream(sse(chunk({"content": "Done."}), chunk({}, "stop"), "[DONE]"))
    assert [e for e in events if isinstance(e, llm.Finish)] == [llm.Finish("stop")]
    events, _ = _stream(sse(chunk({"content": "Done."}), "[DONE]"))
    assert not any(isinstance(e, llm.Finish) for e in events)


_ONE_TOKEN = json.dumps({
    "id": "c1", "object": "chat.completion", "created": 1, "model": "m", "usage": USAGE,
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"}, "finish_reason": "length"}],
}).encode()


def _connection_test_with_models_answer(models: list[bytes]) -> tuple[bool, str, list[bytes]]:
    """llm_test_connection against a server answering GET /models with `models` and the one-token
    request with a completion; (ok, message, each request's method and path)."""

    def script(n: int) -> tuple[list[bytes | float], bool]:
        if n == 0:
            return [*models], False
        return [head(content_type="application/json", chunked_body=False, length=len(_ONE_TOKEN)), _ONE_TOKEN], False

    with wire_server(script) as server:
        ok, message = llm.llm_test_connection(target=make_target(server.base_url, "m"))
        return ok, message, [b" ".join(r.split(b" ", 2)[:2]) for r in server.requests]


@pytest.mark.parametrize("status", ["404 Not Found", "405 Method Not Allowed", "501 Not Implemented"])
def test_a_server_without_a_model_list_is_tested_with_a_one_token_request(status):
    """Servers with no /models route answer it 404, 405 or 501 (a bare http.server, some gateways):
    the test makes a one-token request instead of reporting the missing list as a failure."""
    ok, message, requests = _connection_test_with_models_answer([head(status, "text/plain", chunked_body=False,
                                                                      length=0)])

    assert requests == [b"GET /v1/models", b"POST /v1/chat/completions"]
    assert ok is True, message
    assert "has no model list" in message and "answered a one-token test request" in message


def test_a_key_that_may_not_list_models_is_tested_with_a_one_token_request():
    """OpenAI's restricted keys can be denied /models (403, missing scope api.model.read) and still
    chat: the test said the key may not use the model."""
    body = json.dumps({"error": {"message": "You have insufficient permissions for this operation. Missing scopes: "
                                            "api.model.read.", "type": "invalid_request_error", "code": None}}).encode()
    ok, message, requests = _connection_test_with_models_answer(
        [head("403 Forbidden", "application/json", chunked_body=False, length=len(body)), body])

    assert requests == [b"GET /v1/models", b"POST /v1/chat/completions"]
    assert ok is True, message
    assert "answered a one-token test request" in message


def _model_list(*ids: str) -> list[bytes]:
    body = json.dumps({"object": "list", "data": [{"id": i, "object": "model", "owned_by": "x"} for i in ids]}).encode()
    return [head(content_type="application/json", chunked_body=False, length=len(body)), body]


@pytest.mark.parametrize(
    ("listed", "words"),
    [
        # vLLM, llama.cpp's server and an Ollama with one model pulled list exactly one model.
        (["m"], "It lists 1 model, “m”."),
        (["served-name"], "“m” is not the model it lists (served-name), but it answered a one-token test request."),
        (["m", "other"], "It lists 2 models, including “m”."),
        (["a", "b"], "“m” is not among the 2 models it lists, but it answered a one-token test request."),
        ([], "“m” is not listed (its model list is empty), but it answered a one-token test request."),
    ],
)
def test_a_connection_test_counts_the_listed_models_in_words(listed, words):
    """A server serving one model was said to list "1 models" ("is not among the 1 models it lists"), an
    empty list "the 0 models it lists"."""
    ok, message, _ = _connection_test_with_models_answer(_model_list(*listed))

    assert ok is True
    assert words in message, message


@pytest.mark.parametrize("entries", [[{"name": "llama3", "object": "model"}], [{"id": None}, {"id": 7}]])
def test_a_model_list_without_text_ids_is_no_crash(entries):
    """Entries with no id (a server naming its models under `name`) or an id that is no text made the
    test's report of what the endpoint lists fail with a TypeError (a 500) when the one-token request
    then failed too."""
    models = json.dumps({"object": "list", "data": [*entries, {"id": "served"}]}).encode()
    refusal = json.dumps({"error": {"message": "The model `m` does not exist.", "type": "invalid_request_error",
                                    "code": "model_not_found"}}).encode()

    def script(n: int) -> tuple[list[bytes | float], bool]:
        if n == 0:
            return [head(content_type="application/json", chunked_body=False, length=len(models)), models], False
        return [head("404 Not Found", "application/json", chunked_body=False, length=len(refusal)), refusal], False

    with wire_server(script) as server:
        ok, message = llm.llm_test_connection(target=make_target(server.base_url, "m"))

    assert ok is False
    assert message.endswith("It lists: served."), message


def test_gemini_listing_its_models_as_models_slash_id_lists_the_model():
    """Gemini's OpenAI-compatible endpoint lists `models/gemini-2.5-flash` for the model its chat
    requests name `gemini-2.5-flash`: the test said the model was not among those listed."""
    ok, message, requests = _connection_test_with_models_answer(_model_list("models/m", "models/other"))

    assert ok is True
    assert "It lists 2 models, including “m”." in message, message
    assert b"POST /v1/chat/completions" not in requests  # listed: no one-token request


def test_ollama_listing_a_model_under_its_latest_tag_lists_the_model():
    """Ollama lists `llama3.1:latest` for the model pulled as `llama3.1`, the name the README's table
    gives (Ollama serves it by either): the test said the model was not among those listed."""
    ok, message, requests = _connection_test_with_models_answer(_model_list("m:latest", "qwen3:8b"))

    assert ok is True
    assert "It lists 2 models, including “m”." in message, message
    assert b"POST /v1/chat/completions" not in requests  # listed: no one-token request


_DEEPSEEK_USAGE = {"prompt_tokens": 1200, "completion_tokens": 3, "total_tokens": 1203,
                   "prompt_cache_hit_tokens": 1024, "prompt_cache_miss_tokens": 176}


def test_deepseeks_prompt_cache_hits_are_read_as_cached_tokens():
    """DeepSeek reports its prompt cache's hits as `prompt_cache_hit_tokens`, not OpenAI's
    `prompt_tokens_details.cached_tokens`: they were read as unknown, and its requests billed at the
    full input price on the dashboard (DeepSeek bills cache hits at a fraction of it)."""
    events, error = _stream(sse(chunk({"role": "assistant", "content": "Hi"}), chunk({}, "stop"),
                                chunk(None, usage=_DEEPSEEK_USAGE), "[DONE]"))
    assert error is None
    assert _usage(events) == [llm.Usage(1200, 3, 1024)]

    body = json.dumps({
        "id": "c1", "object": "chat.completion", "created": 1, "model": "m", "usage": _DEEPSEEK_USAGE,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"}, "finish_reason": "stop"}],
    }).encode()
    with wire_server(([head(content_type="application/json", chunked_body=False, length=len(body)), body], False)
                     ) as server:
        completion = llm.llm_complete(target=make_target(server.base_url, "m"), messages=MESSAGES)
    assert completion.cached_tokens == 1024
