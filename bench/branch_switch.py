"""Switching the version of a message far up a long chat: what the server's writes take.

A switch at the top of a chat takes every later message off the active path and brings the other
version's messages on (branch_services.branch_hide / branch_show), keeping the live totals, the search
index and recall's statistics in step. This bench seeds one chat of `--messages` messages (the
`seed_long_conversation` command's: indexed as the services index them), then times, `--rounds` times each, taking
all but the first message off the path and bringing them back: the two halves of a switch at the top.
Medians in seconds; the index is checked against a rebuild at the end of each run.

    .venv/bin/python bench/branch_switch.py [--messages 12000] [--rounds 3] [--compare REV]

`--compare REV` runs the same in a second process with the code of commit REV (a temporary worktree;
its schema must be this checkout's), printed side by side. SQLite in a temporary directory by
default; DATABASE_URL for PostgreSQL (each run makes and deletes a user of its own there).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, ROOT, load_note, revision_tree
from web_ttfb import bench_environment


def child(*, code: str, messages: int, rounds: int) -> dict[str, Any]:
    if code:  # the other revision's code first on the path, before anything of the app is imported
        sys.path.insert(0, code)
    import django

    from chatapp.instance import instance_prepare

    instance_prepare()
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from chatapp.chat.branch_services import branch_hide, branch_show
    from chatapp.chat.management.commands.seed_long_conversation import conversation_seed_long
    from chatapp.chat.models import Message, MessageSearch
    from chatapp.chat.search_services import conversation_index_rebuild

    call_command("migrate", verbosity=0, interactive=False)
    user = get_user_model().objects.create_user(username=f"bench-branch-{secrets.token_hex(4)}")
    try:
        chat = conversation_seed_long(owner=user, messages=messages)
        second = Message.objects.filter(conversation=chat, kind="chat").order_by("id").values_list("id", flat=True)[1]
        hide, show = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            moved = branch_hide(conversation_id=chat.pk, start_id=second)
            hide.append(time.perf_counter() - started)
            started = time.perf_counter()
            branch_show(conversation_id=chat.pk, start_id=second)
            show.append(time.perf_counter() - started)
        rows = MessageSearch.objects.filter(conversation=chat).values_list("message_id", "scope", "recallable")
        state = sorted(rows)
        conversation_index_rebuild(conversation=chat)
        rebuilt = sorted(rows)
        return {"moved": moved, "hide_s": statistics.median(hide), "show_s": statistics.median(show),
                "index_as_rebuilt": state == rebuilt}
    finally:
        user.delete()


def run(*, code: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="branch-switch-") as tmp:
        env = {**os.environ, **bench_environment(Path(tmp))}
        cmd = [PYTHON, __file__, "--child", "--code", code, "--messages", str(args.messages),
               "--rounds", str(args.rounds)]
        done = subprocess.run(cmd, cwd=ROOT, env=env, check=False, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"the run with {code or 'this checkout'} failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=12_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare", default="", help="the same with the code of this commit, side by side")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--code", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(code=args.code, messages=args.messages, rounds=args.rounds)))
        return 0
    with ExitStack() as stack:
        results = {"this checkout": run(code="", args=args)}
        if args.compare:
            results[args.compare] = run(code=str(stack.enter_context(revision_tree(args.compare))), args=args)
    database = "PostgreSQL" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "SQLite"
    print(f"A version switched at the top of a {args.messages:,}-message chat (seed_long_conversation's), "
          f"{database}, median of {args.rounds} rounds; {load_note()}")
    print(f"{'code':>16} {'messages moved':>15} {'take off (s)':>13} {'bring back (s)':>15} {'index as rebuilt':>17}")
    for name, r in results.items():
        checked = str(r["index_as_rebuilt"])
        print(f"{name:>16} {r['moved']:>15,} {r['hide_s']:>13.2f} {r['show_s']:>15.2f} {checked:>17}")
    return 0 if all(r["index_as_rebuilt"] for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
