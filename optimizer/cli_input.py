"""The CLI's input: one JSON request or JSON lines, UTF-8, read and decoded one line at a time (the
contract is `optimizer.cli`'s docstring; `manage.py pack` reads its input here too)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

BOM = "\ufeff"


class BadRequest(Exception):
    """A request the CLI refuses; `where` names it for the error line."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")


def read_requests(stream: IO[str]) -> Iterator[tuple[int, Any]]:
    """Yield (line number, decoded request). A first line that is not JSON by itself is taken as the
    start of one (pretty-printed) JSON document spanning the whole input. A byte order mark opening
    the input is read past."""
    lines = _utf8_lines(stream)
    first_line_no, first = 0, None
    for no, line in enumerate(lines, 1):
        if no == 1:
            # Windows tools open UTF-8 text with U+FEFF ("UTF-8 with BOM"); JSON does not allow it
            line = line.removeprefix(BOM)
        if line.strip():
            first_line_no, first = no, line
            break
    if first is None:
        return
    where = f"line {first_line_no}"
    try:
        doc = json.loads(first)
    except json.JSONDecodeError:
        doc = _loads(first + "".join(lines), where)
        for item in doc if isinstance(doc, list) else [doc]:
            yield first_line_no, item
        return
    except (ValueError, RecursionError) as exc:
        raise _undecodable(where, exc) from None
    yield first_line_no, doc
    for no, line in enumerate(lines, first_line_no + 1):
        if not line.strip():
            continue
        yield no, _loads(line, f"line {no}")


def _utf8_lines(stream: IO[str]) -> Iterator[str]:
    """`stream`'s lines, each decoded as strict UTF-8 alone: through the stream's decoder a bad byte failed
    its whole block, requests before it unanswered, and standard input lets it through (surrogateescape)."""
    raw = getattr(stream, "buffer", None)
    if raw is None:  # text already (a test's StringIO)
        yield from stream
        return
    for no, line in enumerate(raw, 1):
        try:
            yield line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadRequest(f"line {no}", f"the input is not UTF-8 text ({exc.reason})") from None


def _loads(text: str, where: str) -> Any:
    """`json.loads`, with what it cannot decode as a BadRequest naming `where`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadRequest(where, f"malformed JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        raise _undecodable(where, exc) from None


def _undecodable(where: str, exc: ValueError | RecursionError) -> BadRequest:
    """JSON the decoder gives up on with another error than a syntax error: nesting deeper than the
    interpreter's stack, an integer past Python's digit limit."""
    if isinstance(exc, RecursionError):
        return BadRequest(where, "malformed JSON (nested too deeply)")
    return BadRequest(where, f"malformed JSON ({str(exc).split(';')[0]})")
