"""Instructions per chat turn of the server, counted by callgrind: a CPU figure that repeats.

`bench/turn_cpu.py` reads the server's CPU time, which moved by a quarter between runs of the same
code on a quiet machine: too much to see a change of a few percent. Here valgrind's callgrind counts
the instructions the uvicorn process runs (every thread) over `--turns` sends into a
10,000-message conversation (as turn_cpu's), after five warm-up sends it does not count; two runs of
the same code agree to a few tenths of a percent, whatever else the machine is doing. Two models:
`fake-echo` sends its whole reply at once (a burst the server reads in a few pieces, as the other
benches' instant model); `slow-30` sends a chunk every 30 ms, as a model streams, so that each of its
~50 chunks is read, parsed and sent on to the browser by itself.

Side by side in one run: uvicorn on asyncio's loop with the h11 parser (pure Python) and on what
requirements.txt installs and uvicorn then picks (uvloop, httptools); with `--compare REV`, the same
again for a git worktree of REV (a temporary one, this checkout's .venv).

    .venv/bin/python bench/turn_instructions.py [--turns 20] [--compare REV]

Needs valgrind (Debian: `apt-get install valgrind`); a configuration takes about half a minute.
Instructions are not time (a cache miss costs more than an add), but a change that removes work
shows here at once, where the CPU clock needs many alternated runs.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
MODELS = ("fake-echo", "slow-30")
SERVERS = (("asyncio", "h11"), ("uvloop", "httptools"))
WARM_UP = 5


def measure(tree: Path, *, model: str, loop: str, http: str, turns: int) -> float:
    """Millions of instructions per turn of `tree`'s server (run in a child process of its own)."""
    sys.path[:0] = [str(tree / "bench"), str(tree)]
    os.chdir(tree)
    import httpx
    from web_ttfb import bench_environment, django_setup, free_port, seed_conversation, seed_user, sends_timed

    from tests.support.fake_openai import FakeOpenAI

    with tempfile.TemporaryDirectory(prefix="turn-instr-") as tmpdir, FakeOpenAI() as fake:
        tmp = Path(tmpdir)
        env = bench_environment(tmp) | {"UVICORN_LOOP": loop, "UVICORN_HTTP": http}
        django_setup(env)
        from chatapp.chat.search_services import conversation_index_rebuild

        user, token, config = seed_user(username=f"bench-instr-{secrets.token_hex(4)}", base_url=fake.base_url,
                                        model=model)
        conversation = seed_conversation(owner=user, config=config, messages=10_000)
        conversation_index_rebuild(conversation=conversation)
        port, out = free_port(), tmp / "callgrind.out"
        server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
             PYTHON, "-m", "uvicorn", "chatapp.asgi:application", "--host", "127.0.0.1", "--port", str(port),
             "--log-level", "warning", "--no-access-log", "--lifespan", "off"],
            cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=open(tmp / "server.log", "wb"),  # noqa: SIM115
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 300
            while True:
                try:
                    httpx.get(url + "/api/schema/", timeout=10)
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise RuntimeError((tmp / "server.log").read_text()[-2000:]) from None
                    time.sleep(0.5)
            with httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}, timeout=600) as client:
                sends_timed(client, conversation.pk, (f"warm-up {i}" for i in range(WARM_UP)))
                control = ["callgrind_control"]
                subprocess.run([*control, "--instr=on", str(server.pid)], check=True, capture_output=True)
                subjects = ("plan", "budget", "garden", "trip", "music", "doctor", "car", "book")
                sends_timed(client, conversation.pk, (
                    f"Question {i}: what did we decide about the {subjects[i % 8]} and the {subjects[(3 * i + 1) % 8]}?"
                    for i in range(turns)
                ))
                subprocess.run([*control, "--instr=off", str(server.pid)], check=True, capture_output=True)
                subprocess.run([*control, "--dump", str(server.pid)], check=True, capture_output=True)
        finally:
            server.terminate()
            server.wait(timeout=120)
            user.delete()
        # Each dump's last line is its total ("totals: N"); the final one at exit counts nothing.
        total = sum(int(line.split()[1]) for dump in tmp.glob("callgrind.out*")
                    for line in dump.read_text().splitlines() if line.startswith("totals:"))
    return total / turns / 1e6


def run(tree: Path, *, model: str, loop: str, http: str, turns: int) -> float:
    proc = subprocess.run(
        [PYTHON, str(Path(__file__).resolve()), "--child", str(tree), model, loop, http, str(turns)],
        cwd=tree, capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{tree} {model} {loop}: {proc.stderr[-2000:]}")
    return float(proc.stdout.split()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--compare", default="", help="a git revision measured the same way, side by side")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        tree, model, loop, http, turns = args.child
        print(f"{measure(Path(tree), model=model, loop=loop, http=http, turns=int(turns)):.2f}")
        return 0
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not installed (Debian: apt-get install valgrind)")

    from _common import revision_tree  # the parent's only: a child measures its own tree's code

    trees = [("this checkout", ROOT)]
    with ExitStack() as stack:
        if args.compare:
            trees.append((args.compare, stack.enter_context(revision_tree(args.compare))))
        rows = [(name, f"{loop}/{http}", [run(tree, model=m, loop=loop, http=http, turns=args.turns)
                                           for m in MODELS])
                for name, tree in trees for loop, http in SERVERS]
    print(f"\nMillions of instructions per chat turn of the uvicorn process (callgrind), {args.turns} turns "
          f"after {WARM_UP} not counted, a 10,000-message conversation:")
    print(f"{'code':24} {'server loop/parser':20}" + "".join(f"{m:>12}" for m in MODELS))
    for name, server, figures in rows:
        print(f"{name:24} {server:20}" + "".join(f"{f:>12.2f}" for f in figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
