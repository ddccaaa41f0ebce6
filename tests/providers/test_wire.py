"""llm_stream against byte-exact answers of real endpoints' wire shapes (tests/support/wire.py): what
the chat gets from each, in plain words."""

from __future__ import annotations

from chatapp.providers import llm
from tests.support.llm import make_target, run_stream
from tests.support.wire import chunk, chunked, head, sse, wire_server

MESSAGES = [{"role": "user", "content": "Hi"}]
USAGE = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}


def _stream(body: bytes, *, model: str = "m") -> tuple[list, llm.LLMError | None]:
    with wire_server(([head(), chunked(body)], False)) as server:
        return run_stream(make_target(server.base_url, model), MESSAGES)


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


def test_a_refusal_is_the_reply_text():
    """OpenAI streams a refusal in `delta.refusal`, `content` staying null: the chat shows it rather than
    an empty reply stored as complete."""
    events, error = _stream(sse(chunk({"role": "assistant", "content": None, "refusal": ""}),
                                chunk({"refusal": "I'm sorry, "}), chunk({"refusal": "I can't help with that."}),
                                chunk({}, "stop"), "[DONE]"))

    assert error is None
    assert _text(events) == "I'm sorry, I can't help with that."
