"""Server CPU per light request (an API GET, a page) under uvicorn: what a request costs the server
besides its view, such as the thread it runs in and the middleware stack.

A chat turn's CPU (`bench/turn_cpu.py`) moves by more between runs than a request's fixed cost
weighs in it. A request whose view does little shows that cost instead: here `GET
/api/conversations/` (token auth, a short list) and the login page (sessions, CSRF, a template),
`--requests` each per round, `--rounds` rounds, the server's user + system CPU (/proc) per request.
Callgrind (`bench/turn_instructions.py`) would miss most of a thread's start and join, which happen
in the kernel.

With `--compare REV`, the same for a git worktree of REV (a temporary one, this checkout's .venv),
the two alternated round by round so that the machine's drift falls on both:

    .venv/bin/python bench/request_cpu.py [--compare REV] [--requests 1000] [--rounds 4]

SQLite in a temporary directory (DATABASE_URL is ignored: a bench database of its own per tree).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATHS = ("/api/conversations/", "/accounts/login/")


def measure(tree: Path, *, requests: int) -> dict[str, float]:
    """In a child whose working directory is `tree`: ms of server CPU per request, by path."""
    sys.path.insert(0, str(tree / "bench"))
    sys.path.insert(0, str(tree))
    import httpx
    from web_ttfb import bench_environment, cpu_seconds, django_setup, seed_user, uvicorn_process

    os.environ.pop("DATABASE_URL", None)
    with tempfile.TemporaryDirectory(prefix="request-cpu-") as tmpdir:
        tmp = Path(tmpdir)
        env = bench_environment(tmp)
        env.pop("DATABASE_URL", None)
        django_setup(env)
        _, token, _ = seed_user(username="bench-requests", base_url="http://127.0.0.1:9/v1", model="none")
        out = {}
        with uvicorn_process(env, tmp) as (url, pid), httpx.Client(base_url=url) as client:
            for path in PATHS:
                headers = {"Authorization": f"Token {token}"} if path.startswith("/api/") else {}
                for _ in range(max(50, requests // 10)):  # warm: imports, caches, the first threads
                    client.get(path, headers=headers).raise_for_status()
                before = cpu_seconds(pid)
                for _ in range(requests):
                    client.get(path, headers=headers).raise_for_status()
                out[path] = (cpu_seconds(pid) - before) * 1000 / requests
    return out


def run(tree: Path, *, requests: int) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", str(tree), str(requests)],
        cwd=tree, capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{tree}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--compare", default="", help="a git revision measured the same way, alternated")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        tree, requests = args.child
        print(json.dumps(measure(Path(tree), requests=int(requests))))
        return 0

    from _common import revision_tree  # the parent's only: a child measures its own tree's code

    trees = [("this checkout", ROOT)]
    with ExitStack() as stack:
        if args.compare:
            trees.append((args.compare, stack.enter_context(revision_tree(args.compare))))
        rounds: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
        for _ in range(args.rounds):
            for name, tree in trees:
                rounds[name].append(run(tree, requests=args.requests))
    print(f"\nServer CPU per request (ms, user + system), uvicorn on SQLite, {args.requests} requests a round, "
          f"median of {args.rounds} rounds (each round's figure in brackets; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs):")
    print(f"{'code':16}" + "".join(f"{p:>40}" for p in PATHS))
    for name, results in rounds.items():
        cells = []
        for path in PATHS:
            values = [r[path] for r in results]
            cells.append(f"{statistics.median(values):.2f} ({', '.join(f'{v:.2f}' for v in values)})")
        print(f"{name:16}" + "".join(f"{c:>40}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
