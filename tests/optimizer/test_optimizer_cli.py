"""`python -m optimizer pack`: the stable CLI contract, through `main()` in-process, and through a real
process where its standard streams matter (line-by-line streaming, what UTF-8 output cannot hold)."""

import contextlib
import io
import json
import os
import select
import subprocess
import sys
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optimizer.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def run(args, stdin=""):
    """`python -m optimizer pack ARGS` with `stdin`, in this process."""
    out, err, saved = io.StringIO(), io.StringIO(), sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(["pack", *args])
            except SystemExit as exc:  # argparse refusing the arguments
                code = exc.code
    finally:
        sys.stdin = saved
    return Ran(code, out.getvalue(), err.getvalue())


def request(rid="r1", rounds=30, **extra):
    msgs = [{"id": "sys", "role": "system", "content": "You are helpful.", "pinned": False}]
    for r in range(rounds):
        msgs.append({"id": f"u{r}", "role": "user", "content": f"Question {r}: " + "words " * 30, "pinned": r == 3})
        msgs.append({"id": f"a{r}", "role": "assistant", "content": f"Answer {r}: " + "text " * 60})
    msgs.append({"id": "q", "role": "user", "content": "What now?"})
    return {"id": rid, "budget": 1500, "preference": "fast", "messages": msgs, **extra}


def test_json_lines_one_result_per_request_in_order():
    # b's newest message is about nothing to recall, so its summary is written before any quote
    # (a question about the history would fill the room with quotes first: test_optimizer_recall)
    b_req = request("b", preference="quality", summarizer="extractive")
    b_req["messages"][-1]["content"] = "Thanks!"
    reqs = [request("a"), b_req, request("c", rounds=2)]
    proc = run([], "".join(json.dumps(r) + "\n" for r in reqs))
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [o["id"] for o in out] == ["a", "b", "c"]
    a, b, c = out
    assert a["stats"]["strategy_chosen"] == "truncate" and a["stats"]["tokens_after"] <= 1500
    assert a["messages"][0] == {"role": "system", "content": "You are helpful.", "source_ids": ["sys"]}
    assert ["u3"] in [m["source_ids"] for m in a["messages"]]  # pinned
    assert a["messages"][-1]["source_ids"] == ["q"]
    summary = [m for m in b["messages"] if len(m["source_ids"]) > 1]
    assert summary and summary[0]["content"].startswith("[Conversation summary")
    assert b["stats"]["summary_generated"] is True
    assert c["stats"]["optimization_applied"] is False and len(c["messages"]) == 6


def test_flags_apply_and_request_fields_override(tmp_path):
    req = request("x")
    del req["budget"], req["preference"]
    path = tmp_path / "in.json"
    path.write_text(json.dumps(req, indent=2))  # one pretty-printed JSON document
    proc = run(["--input", str(path), "--budget", "1200", "--preference", "quality", "--summarizer", "none"])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["stats"]["budget"] == 1200 and out["stats"]["strategy_chosen"] == "summarize"
    assert out["stats"]["summary_span"]["messages"] > 0
    req["budget"] = 2000
    path.write_text(json.dumps(req))
    assert json.loads(run(["--input", str(path), "--budget", "1200"]).stdout)["stats"]["budget"] == 2000


def test_budget_from_model_window_when_none_given():
    req = request("w")
    del req["budget"]
    out = json.loads(run(["--model", "gpt-4o-mini"], json.dumps(req)).stdout)
    assert out["stats"]["budget"] == 128_000 - 2_000


def test_a_model_window_that_leaves_no_budget_says_so():
    """A window no larger than the reply's reserve leaves a budget of 0: the error said "budget must be
    a positive integer, got 0" to a request that gave none."""
    req = request("w")
    del req["budget"]
    proc = run(["--model", "azure_ai/cohere-embed-v3-english"], json.dumps(req))  # a 512-token window
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert "\n" not in err and "'w'" in err and "got 0" not in err
    assert "512" in err and "2,000" in err and "budget" in err


def test_window_start_is_honoured():
    req = request("s", window_start="u25")
    req["budget"] = 100_000
    out = json.loads(run([], json.dumps(req)).stdout)
    assert out["stats"]["window_start"] == "u25"
    assert [m["source_ids"][0] for m in out["messages"]][:4] == ["sys", "u0", "u3", "u25"]


def test_streams_line_by_line():
    """The first result arrives before the input is finished."""
    proc = subprocess.Popen([sys.executable, "-m", "optimizer", "pack"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        proc.stdin.write(json.dumps(request("first")) + "\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 60)  # a CLI that waits for EOF fails, not hangs
        assert ready, "no result before the input was closed"
        line = proc.stdout.readline()
        assert json.loads(line)["id"] == "first"
        proc.stdin.write(json.dumps(request("second")) + "\n")
        proc.stdin.close()
        assert json.loads(proc.stdout.readline())["id"] == "second"
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()


def bad(mutate):
    req = request("bad-1")
    mutate(req)
    return req


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('{"id": "broken", "messages": [', "line 2"),
        (json.dumps(bad(lambda r: r["messages"][5].update(role="robot"))), "unknown role"),
        (json.dumps(bad(lambda r: r["messages"][5].pop("content"))), "missing content"),
        (json.dumps(bad(lambda r: r.update(budget=0))), "budget"),
        (json.dumps(bad(lambda r: r.update(budget=-5))), "budget"),
        (json.dumps(bad(lambda r: r.update(preference="turbo"))), "unknown preference"),
        (json.dumps(bad(lambda r: r.update(summarizer="gpt"))), "unknown summarizer"),
        (json.dumps(bad(lambda r: r.update(messages=[]))), "messages"),
        (json.dumps(bad(lambda r: r["messages"].append(dict(r["messages"][1])))), "duplicate id"),
        ("[1, 2]", "line 2"),
        # fields of the wrong type: named, never coerced ("pinned": "false" pinned the message)
        (json.dumps(bad(lambda r: r["messages"][5].update(content=5))), "'content' must be"),
        (json.dumps(bad(lambda r: r["messages"][5].update(content=["text"]))), "'content' part 0"),
        (json.dumps(bad(lambda r: r.update(budget="100"))), "budget must be a positive integer"),
        # past what a float holds: the trigger's arithmetic raised OverflowError, a traceback
        (json.dumps(bad(lambda r: r.update(budget=10**400))), "budget must be a positive integer"),
        (json.dumps(bad(lambda r: r["messages"][5].update(pinned="yes"))), "'pinned' must be true or false"),
        (json.dumps(bad(lambda r: r["messages"][5].update(pinned="false"))), "'pinned' must be true or false"),
        (json.dumps(bad(lambda r: r["messages"][5].update(pinned=1))), "'pinned' must be true or false"),
        (json.dumps(bad(lambda r: r["messages"][5].update(name=5))), "'name' must be a string"),
        (json.dumps(bad(lambda r: r["messages"][5].update(id={"n": 5}))), "'id' must be a string or an integer"),
        (json.dumps(bad(lambda r: r["messages"][5].update(id=True))), "'id' must be a string or an integer"),
        (json.dumps(bad(lambda r: r["messages"][5].update(created_at=5))), "'created_at' must be"),
        (json.dumps(bad(lambda r: r.update(messages={"m": r["messages"]}))), "'messages' must be a non-empty list"),
        (json.dumps(bad(lambda r: r.update(messages="hello"))), "'messages' must be a non-empty list"),
        (json.dumps(bad(lambda r: r.update(model=""))), "'model' must be a non-empty string"),
        (json.dumps(bad(lambda r: r.update(model=5))), "'model' must be a non-empty string"),
        (json.dumps(bad(lambda r: r.update(preference=""))), "unknown preference"),
        (json.dumps(bad(lambda r: r.update(summarizer=0))), "unknown summarizer"),
        (json.dumps(bad(lambda r: r.update(window_start=True))), "'window_start' must be a message id"),
    ],
)
def test_bad_input_exit_2_names_the_request_and_keeps_earlier_results(line, needle):
    good = json.dumps(request("good")) + "\n"
    after = json.dumps(request("after")) + "\n"
    proc = run([], good + line + "\n" + after)
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert "\n" not in err and needle in err
    if "bad-1" in line:
        assert "'bad-1'" in err and "line 2" in err
    out = proc.stdout.splitlines()
    assert [json.loads(x)["id"] for x in out] == ["good"]  # nothing of the bad one, nothing after it


def test_context_too_large_is_reported():
    req = request("big")
    req["messages"] += [{"id": f"p{i}", "role": "user", "content": "note " * 300, "pinned": True} for i in range(8)]
    proc = run([], json.dumps(req))
    assert proc.returncode == 2
    assert "'big'" in proc.stderr and "1,500" in proc.stderr


def test_malformed_single_document():
    proc = run([], '{"id": "x",\n "messages": [}\n')
    assert proc.returncode == 2 and "line 1" in proc.stderr and "malformed JSON" in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize(
    "line",
    [
        "[" * 100_000 + "]" * 100_000,  # nested deeper than the interpreter's stack
        '{"id": "n", "budget": 1' + "0" * 5_000 + "}",  # an integer past Python's digit limit
    ],
)
@pytest.mark.parametrize("first", [True, False])
def test_json_the_decoder_cannot_take_is_bad_input(line, first):
    good = json.dumps(request("good")) + "\n"
    proc = run([], line + "\n" if first else good + line + "\n")
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert "\n" not in err and "malformed JSON" in err and ("line 1" if first else "line 2") in err
    assert [json.loads(x)["id"] for x in proc.stdout.splitlines()] == ([] if first else ["good"])


def test_an_input_file_that_cannot_be_read_is_bad_input(tmp_path):
    for path in (tmp_path / "missing.jsonl", tmp_path):
        proc = run(["--input", str(path)])
        assert proc.returncode == 2 and proc.stdout == ""
        err = proc.stderr.strip()
        assert "\n" not in err and err.startswith("optimizer pack: error: cannot read") and str(path) in err


def test_an_input_file_that_is_not_utf8_is_bad_input(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes((json.dumps(request("good")) + "\n").encode() + '{"id": "caf\xe9"}\n'.encode("latin-1"))
    proc = run(["--input", str(path)])
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert "\n" not in err and "not UTF-8" in err and "line 2" in err
    # the line before it was answered: the input was decoded in blocks, and the bad byte failed the first line too
    assert [json.loads(x)["id"] for x in proc.stdout.splitlines()] == ["good"]


def packed_bytes(data: bytes) -> subprocess.CompletedProcess:
    """`python -m optimizer pack` on standard input as bytes, under the C locale, where Python's standard
    streams let bytes that are not UTF-8 through as lone surrogates (`surrogateescape`)."""
    return subprocess.run([sys.executable, "-m", "optimizer", "pack"], input=data, capture_output=True, cwd=ROOT,
                          timeout=120, check=False, env={**os.environ, "LC_ALL": "C", "PYTHONIOENCODING": ""})


def test_standard_input_that_is_not_utf8_is_bad_input():
    """It was packed, its bytes written back raw (output that is not UTF-8), exit code 0."""
    good = (json.dumps(request("good")) + "\n").encode()
    proc = packed_bytes(good + b'{"id": "caf\xe9", "messages": [{"role": "user", "content": "h\xff"}]}\n')
    assert proc.returncode == 2
    err = proc.stderr.decode().strip()
    assert "\n" not in err and "not UTF-8" in err and "line 2" in err
    assert [json.loads(x)["id"] for x in proc.stdout.decode().splitlines()] == ["good"]


def test_standard_input_closed_is_bad_input():
    """Started with its standard input closed (`<&-`, a daemon's): a traceback (sys.stdin is None)."""
    proc = subprocess.run([sys.executable, "-m", "optimizer", "pack"], capture_output=True, cwd=ROOT, timeout=120,
                          check=False, preexec_fn=lambda: os.close(0))  # in the child, before it runs
    assert proc.returncode == 2 and proc.stdout == b""
    err = proc.stderr.decode().strip()
    assert err == "optimizer pack: error: cannot read standard input: it is closed"


@pytest.mark.parametrize("char", ["\udcff", "\udc80"])
def test_a_lone_low_surrogate_escaped_in_the_input_comes_back_escaped(char):
    """The surrogates Python's `surrogateescape` stands raw bytes for: written as the bytes they stood for,
    the output was not UTF-8, which a strict reader refuses."""
    req = {"id": "s", "messages": [{"id": "q", "role": "user", "content": f"half a pair: {char}"}]}
    proc = packed_bytes((json.dumps(req) + "\n").encode())
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.decode("utf-8"))
    assert out["messages"][0]["content"] == f"half a pair: {char}"


def test_an_unpaired_surrogate_escaped_in_the_input_comes_back_escaped():
    """JSON may escape a lone surrogate (`\\ud800`); no UTF-8 output can hold it as it is."""
    req = {"id": "s", "messages": [{"id": "q", "role": "user", "content": "half a pair: \ud800"}]}
    proc = subprocess.run([sys.executable, "-m", "optimizer", "pack"], input=json.dumps(req) + "\n",
                          capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["messages"][0]["content"] == "half a pair: \ud800" and out["messages"][0]["source_ids"] == ["q"]


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.text(alphabet=st.sampled_from(list("ab \n\r\t\x0b\x0c\x1c\x85\u2028\u2029é🙂")), max_size=30),
                      min_size=1, max_size=3))
def test_every_result_is_one_line_whatever_splits_lines(texts):
    """A reader that splits on every Unicode line boundary (`str.splitlines`, as the benchmark's scorer
    does) still reads one result per request: NEL and the line and paragraph separators inside
    contents are written escaped, as the JSON text of the same strings."""
    reqs = [{"id": f"r{k}", "messages": [{"id": "q", "role": "user", "content": t}]} for k, t in enumerate(texts)]
    proc = run([], "".join(json.dumps(r) + "\n" for r in reqs))
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [o["messages"][0]["content"] for o in out] == texts


def test_a_byte_order_mark_opening_the_input_is_read_past(tmp_path):
    """Windows tools (Notepad's "UTF-8 with BOM", PowerShell's redirection) open the file with U+FEFF;
    it was read as the first character of the JSON and refused as malformed."""
    lines = json.dumps(request("a")) + "\n" + json.dumps(request("b")) + "\n"
    proc = run([], "\ufeff" + lines)
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(x)["id"] for x in proc.stdout.splitlines()] == ["a", "b"]
    path = tmp_path / "bom.json"
    path.write_text(json.dumps(request("doc"), indent=2), encoding="utf-8-sig")  # one pretty-printed document
    proc = run(["--input", str(path)])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["id"] == "doc"
    # only the input's own first character is a byte order mark: inside a line it is still bad JSON
    proc = run([], lines + "\ufeff" + json.dumps(request("c")) + "\n")
    assert proc.returncode == 2 and "line 3" in proc.stderr


class ClosedPipe(io.StringIO):
    """Standard output whose reader has gone (`python -m optimizer pack ... | head -1`)."""

    def __init__(self, lines_taken: int) -> None:
        super().__init__()
        self.left = lines_taken

    def write(self, text: str) -> int:
        if self.left <= 0:
            raise BrokenPipeError(32, "Broken pipe")
        self.left -= text.count("\n")
        return super().write(text)


@pytest.mark.parametrize("lines_taken", [0, 1])
def test_a_reader_that_stops_reading_ends_the_run_quietly(lines_taken):
    pipe, err, saved = ClosedPipe(lines_taken), io.StringIO(), sys.stdin
    sys.stdin = io.StringIO("".join(json.dumps(request(f"r{k}")) + "\n" for k in range(3)))
    try:
        with contextlib.redirect_stdout(pipe), contextlib.redirect_stderr(err):
            code = main(["pack"])
    finally:
        sys.stdin = saved
    assert code == 1 and err.getvalue() == ""  # no traceback, no message: the reader chose to stop
    assert [json.loads(x)["id"] for x in pipe.getvalue().splitlines()] == [f"r{k}" for k in range(lines_taken)]
