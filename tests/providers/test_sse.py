"""sse_events reads a streamed Chat Completions body by the Server-Sent Events rules, stops at
[DONE] after draining the body, and raises the SDK's error for an in-band error event."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatapp.providers.llm import sse
from chatapp.providers.llm.sse import DONE, sse_events


class _Body(httpx.AsyncByteStream):
    def __init__(self, pieces: list[bytes], *, then_hang: bool = False) -> None:
        self.pieces, self.then_hang, self.read_all = pieces, then_hang, False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece
        if self.then_hang:
            await asyncio.Event().wait()  # a body that never ends
        self.read_all = True


def _events(body: _Body) -> list:
    response = httpx.Response(200, stream=body, request=httpx.Request("POST", "http://model.test/v1/chat/completions"))

    async def read() -> list:
        return [event async for event in sse_events(response)]

    return asyncio.run(read())


def test_events_split_anywhere_with_comments_and_multiline_data():
    wire = (b': keep-alive\n\ndata: {"a": 1}\n\nevent: ignored\ndata: {"b":\ndata: 2}\r\n\r\n'
            b'data:{"c": "\xc3\xa9"}\n\ndata: [DONE]\n\n')
    body = _Body([wire[i:i + 7] for i in range(0, len(wire), 7)])  # cut mid-line and mid-character

    assert _events(body) == [{"a": 1}, {"b": 2}, {"c": "é"}, DONE]
    assert body.read_all  # drained after [DONE]: the connection can be reused


def test_a_body_left_open_after_done_is_given_up(monkeypatch):
    monkeypatch.setattr(sse, "DRAIN_SECONDS", 0.05)
    body = _Body([b'data: {"a": 1}\n\ndata: [DONE]\n\n'], then_hang=True)

    assert _events(body) == [{"a": 1}, DONE]
    assert not body.read_all


def test_an_in_band_error_raises_the_sdks_error():
    body = _Body([b'data: {"a": 1}\n\ndata: {"error": {"message": "overloaded", "type": "server_error"}}\n\n'])

    with pytest.raises(openai.APIError, match="overloaded"):
        _events(body)


def test_a_body_that_ends_without_done_ends_the_events():
    assert _events(_Body([b'data: {"a": 1}\n\ndata: {"b": 2}'])) == [{"a": 1}]  # an unterminated event is dropped


@given(st.lists(st.tuples(st.binary(max_size=12).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
                          st.sampled_from([b"\n", b"\r\n", b"\r"])), max_size=12),
       st.binary(max_size=6).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
       st.lists(st.integers(min_value=1, max_value=9), min_size=1))
def test_lines_are_the_bodys_lines_wherever_its_chunks_break(lines, tail, sizes):
    whole = b"".join(text + end for text, end in lines) + tail
    chunks, at = [], 0
    while at < len(whole):
        size = sizes[len(chunks) % len(sizes)]
        chunks.append(whole[at:at + size])
        at += size

    async def pieces() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    async def read() -> list[bytes]:
        return [line async for line in sse.sse_lines(pieces())]

    assert asyncio.run(read()) == whole.splitlines()


def test_half_a_surrogate_pair_and_nan_still_read():
    # What orjson refuses and the standard library reads (a model may split a pair across chunks).
    body = _Body([b'data: {"t": "\\ud83d"}\n\ndata: {"t": "\\ude00", "x": NaN}\n\ndata: [DONE]\n\n'])
    events = _events(body)
    assert events[0] == {"t": "\ud83d"} and events[1]["t"] == "\ude00" and events[1]["x"] != events[1]["x"]
