"""Peak memory (max RSS) of `python -m optimizer pack`, per child process (GNU time's %M).

  baselines   a bare interpreter; one that imports optimizer; one that also loads the tiktoken encoding
  10k pack    one request with a 10,000-message conversation (~750k tokens) from --input, with
              --summarizer none and extractive
  streaming   JSON lines on stdin: 10, 100, 1,000 requests of 200 messages each; peak RSS should stay
              flat as the request count (and input size) grows, because the CLI streams

Each figure is the median of --repeats runs (max RSS is per process, so each run is a fresh child).
Inputs are written to bench/out/ (gitignored).

  .venv/bin/python bench/cli_memory.py            # ~1 min on 2 cores
  .venv/bin/python bench/cli_memory.py --quick    # 1 run each, streaming up to 100 requests
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from _common import OUT, PYTHON, ROOT, load_note, make_conversation, offline_tiktoken

TIME = shutil.which("time", path="/usr/bin:/bin")


def run_child(args: list[str], *, stdin: Path | None = None, stdout: Path | None = None) -> tuple[int, float, float]:
    """Run a child to completion; return (exit code, max RSS in MiB, wall seconds).

    Linux carries a process's RSS high-water mark across exec, and a child forked from this (large)
    interpreter starts with our pages, so wait4's ru_maxrss would never read below our own size. GNU
    time forks the command from its own tiny process, so its %M is the command's own peak; wait4 is
    the fallback when /usr/bin/time is missing.
    """
    report = OUT / "cli_memory.time"
    cmd = [TIME, "-f", "%M", "-o", str(report), *args] if TIME else args
    fin = open(stdin, "rb") if stdin else subprocess.DEVNULL  # noqa: SIM115 - closed below
    fout = open(stdout, "wb") if stdout else subprocess.DEVNULL  # noqa: SIM115
    err = open(OUT / "cli_memory.stderr", "wb")  # noqa: SIM115
    try:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=fin, stdout=fout, stderr=err, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        for f in (fin, fout, err):
            if hasattr(f, "close"):
                f.close()
    if proc.returncode != 0:
        print((OUT / "cli_memory.stderr").read_text()[-2000:])
    kib = int(report.read_text().split()[-1]) if TIME else usage.ru_maxrss  # ru_maxrss: KiB on Linux
    return proc.returncode, kib / 1024, wall


def measure(args: list[str], repeats: int, **kw: Path) -> tuple[int, float, float]:
    results = [run_child(args, **kw) for _ in range(repeats)]
    code = max(r[0] for r in results)
    return code, statistics.median(r[1] for r in results), statistics.median(r[2] for r in results)


def request(conv: list[dict], *, rid: str, budget: int, model: str) -> dict:
    return {"id": rid, "budget": budget, "preference": "balanced", "model": model, "messages": conv}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=10000)
    ap.add_argument("--budget", type=int, default=16000)
    ap.add_argument("--model", default="gpt-4o-mini")
    ap.add_argument("--stream-counts", default="10,100,1000")
    ap.add_argument("--stream-messages", type=int, default=200, help="messages per streamed request")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.repeats, a.stream_counts = 1, "10,100"
    offline_tiktoken()  # children inherit TIKTOKEN_CACHE_DIR
    OUT.mkdir(parents=True, exist_ok=True)

    print(f"peak RSS (MiB, median of {a.repeats}) of child processes; python {PYTHON}; {load_note()}")
    print(f"{'what':<58} {'MiB':>8} {'wall s':>8}  exit")
    for label, code in [("bare interpreter (python -c pass)", "pass"),
                        ("import optimizer", "import optimizer"),
                        ("import optimizer + load the encoding (count_text)",
                         f"import optimizer; optimizer.count_text('hello', model={a.model!r})")]:
        rc, rss, wall = measure([PYTHON, "-c", code], a.repeats)
        print(f"{label:<58} {rss:>8.1f} {wall:>8.2f}  {rc}")

    big = OUT / f"cli_{a.messages}.json"
    conv = make_conversation(a.messages, seed=0)
    big.write_text(json.dumps(request(conv, rid="big", budget=a.budget, model=a.model)) + "\n")
    chars = sum(len(m["content"]) for m in conv)
    print(f"-- one request: {a.messages:,} messages, {chars / 1e6:.1f} M characters, "
          f"input {big.stat().st_size / 2**20:.1f} MiB, budget {a.budget:,}")
    for summarizer in ("none", "extractive"):
        out = OUT / f"cli_{a.messages}_{summarizer}.out"
        rc, rss, wall = measure([PYTHON, "-m", "optimizer", "pack", "--input", str(big), "--summarizer", summarizer],
                                a.repeats, stdout=out)
        detail = ""
        if rc == 0:
            res = json.loads(out.read_text().splitlines()[0])
            st = res.get("stats", {})
            detail = (f"  -> {len(res.get('messages', []))} msgs, {st.get('tokens_after')} tokens, "
                      f"strategy {st.get('strategy_chosen')}")
        print(f"{'pack --summarizer ' + summarizer:<58} {rss:>8.1f} {wall:>8.2f}  {rc}{detail}")

    print(f"-- streaming JSON lines on stdin, {a.stream_messages} messages per request, --summarizer extractive")
    convs = [make_conversation(a.stream_messages, seed=s) for s in range(10)]
    first_rss = None
    for count in [int(c) for c in a.stream_counts.split(",")]:
        path = OUT / f"cli_stream_{count}.jsonl"
        with open(path, "w", encoding="utf-8") as f:
            for i in range(count):
                f.write(json.dumps(request(convs[i % len(convs)], rid=f"r{i}", budget=4096, model=a.model)) + "\n")
        out = OUT / f"cli_stream_{count}.out"
        rc, rss, wall = measure([PYTHON, "-m", "optimizer", "pack", "--summarizer", "extractive"],
                                a.repeats if count <= 100 else 1, stdin=path, stdout=out)
        lines = out.read_text(encoding="utf-8").count("\n") if rc == 0 else 0
        first_rss = first_rss or rss
        label = f"{count:,} requests (input {path.stat().st_size / 2**20:.1f} MiB)"
        print(f"{label:<58} {rss:>8.1f} {wall:>8.2f}  {rc}  -> {lines} result lines, "
              f"{wall * 1000 / count:.1f} ms/request, RSS {rss - first_rss:+.1f} MiB vs first")


if __name__ == "__main__":
    main()
