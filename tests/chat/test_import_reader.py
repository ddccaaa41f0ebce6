"""The import's JSON reader (chatapp/chat/imports/reader.py) decodes the file a window at a time: a
character cut by a window's end, and bytes that are no UTF-8 at all, whatever their length."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatapp.chat.imports import ImportFileError, document_open
from chatapp.chat.imports.reader import JsonItems


def _items_within(data: bytes, *, window_bytes: int) -> list | Exception:
    """The items read, or the error raised; the test fails if reading does not end (it looped)."""
    return _within(lambda: list(JsonItems(data, window_bytes=window_bytes)))


def _within(read: Callable[[], Any], seconds: float = 30) -> Any:
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(read())
        except Exception as exc:  # handed to the test
            outcome.append(exc)

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    reader.join(seconds)
    assert not reader.is_alive(), "the reader never ends"
    return outcome[0]


@pytest.mark.parametrize("window", [16, 17, 64])
@pytest.mark.parametrize(
    ("data", "byte"),
    [
        (b"[" + b"\x80" * 200 + b"]", 1),  # a run of continuation bytes longer than the window
        (b"\x80" * 200, 0),  # from the file's first byte (it ran off the front: IndexError)
        (b'["ok", "' + b"\xbf" * 50 + b'"]', 8),
    ],
)
def test_bytes_that_are_no_utf8_fail_with_where_they_are(data, byte, window):
    outcome = _items_within(data, window_bytes=window)
    assert isinstance(outcome, ImportFileError), outcome
    assert f"not UTF-8 text (byte {byte}," in str(outcome)


def test_a_long_hostile_run_fails_at_the_real_window_size_too():
    outcome = _within(lambda: document_open(b"[" + b"\x80" * (5 << 20) + b"]", max_bytes=10 << 20).count())
    assert isinstance(outcome, ImportFileError) and "not UTF-8" in str(outcome), outcome


@given(st.lists(st.text(min_size=0, max_size=12), min_size=1, max_size=8), st.integers(min_value=4, max_value=40))
def test_characters_cut_by_the_window_are_read_whole(texts, window):
    """Any text (four-byte emoji, surrogate-free) in any window of at least four bytes reads back as written."""
    items = [{"text": t} for t in texts]
    data = json.dumps(items, ensure_ascii=False).encode("utf-8", "surrogatepass")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:  # hypothesis's lone surrogates are no UTF-8 text: not this test's case
        return
    assert _items_within(data, window_bytes=window) == items
