"""Command line: ``python -m optimizer pack`` (a stable contract; external evaluation depends on it).

    python -m optimizer pack [--input FILE] [--budget N] [--preference fast|balanced|quality]
                             [--model NAME] [--summarizer none|extractive]

Input (``--input`` or standard input, UTF-8, a byte order mark at its start allowed): one JSON
request, or JSON lines (one request per line, blank lines ignored). JSON lines are read and answered
one line at a time, so a long input is never held whole in memory. A request:

    {"id", "budget", "preference", "model", "summarizer", "window_start",
     "messages": [{"id", "role", "content", "pinned", "name", "created_at"}]}

Types: budget a positive integer (at most 2**53); model, preference and summarizer strings;
window_start and a message's id a string or an integer; content a string or a list of part objects;
pinned true or false; name a string; created_at an ISO 8601 date string. null is the same as a field
left out; a value of any other type is refused, never coerced ("pinned": "false" is an error, not a
pin).
Fields present in a request override the flags. Without a budget anywhere, the budget is the model's
context window (litellm's registry; 8,192 if unknown) minus 2,000 reserved for the reply.
Output: one JSON line per request, in order (NEL, U+2028 and U+2029 in strings written as JSON
escapes, so that a reader splitting on every Unicode line boundary reads one line too):

    {"id", "messages": [{"role", "content", "source_ids": [...]}], "stats": {...}}

``--summarizer extractive`` behaves as if the summary workers had caught up: evicted history is
covered by an extractive summary written on the spot. With ``none`` (the default) the summarize
strategy still packs by truncation and reports the span to summarize in ``stats.summary_span``.

Errors: malformed JSON, a request that is not an object, a field of the wrong type (named), a
missing/unknown role, missing content, duplicate message ids, a budget out of range, an unknown
preference/summarizer, or must-keep messages that cannot fit the budget -> one line on standard
error naming the request id (or the input line when the id is unknown) and exit code 2; so does an
input file that cannot be read, or an input line that is not UTF-8. Processing stops at the first
bad request; the results of the requests before it have already been written, and nothing of the
bad one is.
A reader that closes the output early (``| head -1``) ends the run quietly: no message, exit code 1.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from .budget import DEFAULT_CONTEXT_WINDOW, budget_for_model, budget_problem
from .cli_input import BadRequest as BadRequest
from .cli_input import read_requests
from .packing import pack
from .recall import MemorySource, RecallItem
from .registry import model_info
from .selector import PREFERENCES
from .summaries import extractive_summary
from .tokens import content_text
from .types import DEFAULT_CONFIG, ContextTooLargeError, Msg, PackResult

ROLES = ("system", "user", "assistant", "tool")
SUMMARIZERS = ("none", "extractive")
EXIT_BAD_INPUT = 2
EXIT_OUTPUT_CLOSED = 1  # as Python's own documentation has a program do on EPIPE


def request_label(line_no: int, req: Any) -> str:
    rid = req.get("id") if isinstance(req, dict) else None
    return f"request {rid!r} (line {line_no})" if rid is not None else f"line {line_no}"


def _parse_messages(raw: Any, where: str) -> list[Msg]:
    if not isinstance(raw, list) or not raw:
        raise BadRequest(where, "'messages' must be a non-empty list")
    msgs: list[Msg] = []
    seen: set[str] = set()
    for i, m in enumerate(raw):
        msg = _parse_message(m, i, where)
        if msg.id in seen:
            raise BadRequest(where, f"message {msg.id!r}: duplicate id")
        seen.add(msg.id)
        msgs.append(msg)
    return msgs


def _parse_message(m: Any, i: int, where: str) -> Msg:
    """Message `i` of a request. JSON null stands for a field left out; any other value of the wrong
    type is refused, not coerced: bool("false") pinned a message its sender meant to leave unpinned."""
    if not isinstance(m, dict):
        raise BadRequest(where, f"message {i} is not an object")
    raw_id = m.get("id")
    if raw_id is not None and (isinstance(raw_id, bool) or not isinstance(raw_id, (str, int))):
        raise BadRequest(where, f"message {i}: 'id' must be a string or an integer, got {_json_type(raw_id)}")
    mid = str(raw_id) if raw_id is not None else str(i)
    label = f"message {mid!r}"
    role = m.get("role")
    if role not in ROLES:
        raise BadRequest(where, f"{label}: unknown role {role!r} (expected one of {', '.join(ROLES)})")
    content = _content(m.get("content"), label, where)
    pinned = m.get("pinned")
    if pinned is not None and not isinstance(pinned, bool):
        raise BadRequest(where, f"{label}: 'pinned' must be true or false, got {json.dumps(pinned)[:40]}")
    name = m.get("name")
    if name is not None and not isinstance(name, str):
        raise BadRequest(where, f"{label}: 'name' must be a string, got {_json_type(name)}")
    return Msg(id=mid, role=role, content=content, pinned=bool(pinned), name=name or None,
               created_at=_created_at(m.get("created_at"), label, where))


def _content(content: Any, label: str, where: str) -> str | list[dict[str, Any]]:
    if content is None:
        raise BadRequest(where, f"{label}: missing content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise BadRequest(where, f"{label}: 'content' must be a string or a list of parts, got {_json_type(content)}")
    for k, part in enumerate(content):
        if not isinstance(part, dict):
            raise BadRequest(where, f"{label}: 'content' part {k} must be an object, got {_json_type(part)}")
    return content


def _created_at(created: Any, label: str, where: str) -> dt.datetime | None:
    if created is None:
        return None
    if not isinstance(created, str):
        raise BadRequest(where, f"{label}: 'created_at' must be an ISO 8601 date string, got {_json_type(created)}")
    try:
        return dt.datetime.fromisoformat(created)
    except ValueError:
        raise BadRequest(where, f"{label}: created_at {created!r} is not an ISO 8601 date") from None


def _json_type(value: Any) -> str:
    """What a decoded JSON value is, in JSON's words, for an error line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def memory_source(msgs: list[Msg]) -> MemorySource:
    """Recall over the request's own messages (the CLI holds the whole conversation)."""
    return MemorySource([
        RecallItem(id=m.id, role=m.role, content=content_text(m.content), position=k, created_at=m.created_at,
                   name=m.name)
        for k, m in enumerate(msgs)
    ])


@dataclass(frozen=True, slots=True)
class PackRequest:
    """One validated request: flags applied, messages parsed. Shared by `manage.py pack`."""

    id: Any
    model: str
    budget: int
    preference: str
    summarizer: str
    window_start: str | None
    messages: list[Msg]


def parse_request(req: Any, where: str, args: argparse.Namespace) -> PackRequest:
    """Validate one decoded request against the contract; fields present override the flags in `args`.

    Raises BadRequest naming `where` for anything the contract refuses.
    """
    if not isinstance(req, dict):
        raise BadRequest(where, "a request must be a JSON object")
    # A field present overrides its flag; null stands for a field left out. An empty or falsy value
    # ("", 0) is a value given, refused like any other bad one, not taken as the flag's.
    model = _field(req, "model", args.model)
    if not isinstance(model, str) or not model.strip():
        raise BadRequest(where, f"'model' must be a non-empty string, got {json.dumps(model)[:40]}")
    budget = _field(req, "budget", args.budget)
    if budget is None:
        budget = budget_for_model(model)
        if budget <= 0:  # the error below would say "got 0" to a request that gave no budget
            raise BadRequest(where, _no_budget_left(model))
    problem = budget_problem(budget)
    if problem is not None:
        raise BadRequest(where, problem)
    preference = _field(req, "preference", args.preference)
    if not isinstance(preference, str) or preference not in PREFERENCES:
        raise BadRequest(where, f"unknown preference {preference!r} (expected one of {', '.join(PREFERENCES)})")
    summarizer = _field(req, "summarizer", args.summarizer)
    if not isinstance(summarizer, str) or summarizer not in SUMMARIZERS:
        raise BadRequest(where, f"unknown summarizer {summarizer!r} (expected one of {', '.join(SUMMARIZERS)})")
    window_start = req.get("window_start")
    if window_start is not None and (isinstance(window_start, bool) or not isinstance(window_start, (str, int))):
        raise BadRequest(where, "'window_start' must be a message id (a string or an integer)")
    msgs = _parse_messages(req.get("messages"), where)
    return PackRequest(
        id=req.get("id"), model=model, budget=budget, preference=preference, summarizer=summarizer,
        window_start=None if window_start is None else str(window_start), messages=msgs,
    )


def _no_budget_left(model: str) -> str:
    info = model_info(model)
    window = info.context_window if info else DEFAULT_CONTEXT_WINDOW
    return (f"no budget given, and the context window of {model!r} ({window:,} tokens) leaves none after the "
            f"{DEFAULT_CONFIG.reserved_output:,} reserved for the reply: give a budget")


def _field(req: dict[str, Any], name: str, default: Any) -> Any:
    value = req.get(name)
    return default if value is None else value


def result_dict(request_id: Any, result: PackResult) -> dict[str, Any]:
    """The output object for one packed request (ids as `result` carries them)."""
    stats = result.stats  # a fresh copy each read
    span = result.summary_span
    stats["summary_span"] = (
        None if span is None else {"after_id": span.after_id, "through_id": span.through_id,
                                   "messages": len(span.ids), "tokens": span.tokens}
    )
    out_msgs = []
    for p in result.messages:
        item: dict[str, Any] = {"role": p.role, "content": p.content, "source_ids": list(p.source_ids)}
        if p.name:
            item["name"] = p.name
        out_msgs.append(item)
    return {"id": request_id, "messages": out_msgs, "stats": stats}


def _handle(req: Any, where: str, args: argparse.Namespace) -> dict[str, Any]:
    r = parse_request(req, where, args)
    try:
        result = pack(
            r.messages,
            budget=r.budget,
            preference=r.preference,
            model=r.model,
            window_start=r.window_start,
            summarize_now=extractive_summary if r.summarizer == "extractive" else None,
            recall_source=memory_source(r.messages),
        )
    except ContextTooLargeError as exc:
        raise BadRequest(where, f"context too large: {exc}") from None
    return result_dict(r.id, result)


def add_pack_arguments(p: argparse.ArgumentParser) -> None:
    """The pack flags, shared with `manage.py pack` so both commands take the same ones."""
    p.add_argument("--input", default="-", help="input file (default: standard input)")
    p.add_argument("--budget", type=int, default=None, help="prompt budget in tokens")
    p.add_argument("--preference", default="balanced", help="fast | balanced | quality (default balanced)")
    p.add_argument("--model", default="gpt-4o-mini", help="model name, for the tokenizer and the registry")
    p.add_argument("--summarizer", default="none", help="none | extractive (default none)")


def run_pack(
    args: argparse.Namespace,
    handle: Callable[[Any, str], dict[str, Any]],
    *,
    prog: str,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
) -> int:
    """Read requests from `args.input` and answer each with `handle(request, label)` as one JSON line
    on `out` (standard output); on BadRequest write `<prog>: error: ...` on `err` (standard error) and
    return 2; when the reader of `out` has gone, stop and return 1, saying nothing. Shared by
    `python -m optimizer pack` and `manage.py pack`."""
    out = _strict_utf8(sys.stdout) if out is None else out
    err = sys.stderr if err is None else err
    if args.input == "-" and sys.stdin is None:  # started with it closed (`<&-`): there is no stream
        err.write(f"{prog}: error: cannot read standard input: it is closed\n")
        return EXIT_BAD_INPUT
    try:
        stream = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        err.write(f"{prog}: error: cannot read {args.input}: {exc.strerror or exc}\n")
        err.flush()
        return EXIT_BAD_INPUT
    try:
        try:
            _answer_all(stream, handle, out)
        except (BadRequest, UnicodeDecodeError) as exc:
            out.flush()
            problem = f"the input is not UTF-8 text ({exc.reason})" if isinstance(exc, UnicodeDecodeError) else exc
            err.write(f"{prog}: error: {problem}\n")
            err.flush()
            return EXIT_BAD_INPUT
    except BrokenPipeError:
        # the reader stopped reading (`| head -1`): its choice, not an error to report
        _drop_output(out)
        return EXIT_OUTPUT_CLOSED
    finally:
        if stream is not sys.stdin:
            stream.close()
    return 0


def _strict_utf8(out: IO[str]) -> IO[str]:
    """Standard output as strict UTF-8: under surrogateescape (a C or UTF-8 locale) `\\udcff` in the input
    went out as the raw byte 0xff, not UTF-8; strict, the line is written JSON-escaped (`_answer_all`)."""
    if isinstance(out, io.TextIOWrapper):  # not a test's StringIO
        out.reconfigure(encoding="utf-8", errors="strict")
    return out


def _answer_all(stream: IO[str], handle: Callable[[Any, str], dict[str, Any]], out: IO[str]) -> None:
    for line_no, req in read_requests(stream):
        answer = handle(req, request_label(line_no, req))
        try:
            out.write(_one_line(json.dumps(answer, ensure_ascii=False, separators=(",", ":"))) + "\n")
        except UnicodeEncodeError:  # an unpaired surrogate (`\ud800` in the input): written escaped
            out.write(json.dumps(answer, separators=(",", ":")) + "\n")
        out.flush()


def _drop_output(out: IO[str]) -> None:
    """Point `out`'s descriptor at the null device: what is still buffered for a reader that has gone
    would fail again in the interpreter's flush at exit, which prints its own traceback-like message."""
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):  # no descriptor (an in-memory stream): nothing flushes at exit
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _one_line(text: str) -> str:
    """JSON text with the line boundaries `json.dumps` leaves raw in strings (NEL, U+2028, U+2029)
    escaped: a reader splitting on every Unicode line boundary (`str.splitlines`) reads one line."""
    return text.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m optimizer", description="Context optimizer tools.")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="pack chat requests (JSON or JSON lines) into a token budget",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_pack_arguments(p)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m optimizer``; returns the exit code."""
    args = _parser().parse_args(argv)
    return run_pack(args, lambda req, at: _handle(req, at, args), prog="optimizer pack")
