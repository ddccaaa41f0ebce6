"""Deleting a very large account: what the request holds, and what the worker does after it.

Fills one account with N messages (bench/scale_fill.py's fill: one long conversation with a record
per turn, the rest in a heavy tail of conversations, every message indexed for search and recall),
plus a small bystander account, then in a fresh process (so its RSS is the deletion's alone):

1. `account_services.account_delete(user=…)` as Settings / `DELETE /api/account/` call it: seconds,
   and peak RSS growth of the process over its RSS before (VmHWM, reset through /proc/self/clear_refs;
   resource.getrusage's ru_maxrss where that is not allowed);
2. the Celery tasks it published, if any (the deletion's worker part), run here one after the other as
   a worker would: seconds and peak RSS growth, the same way;
3. checks: no row of the account left in any table of the app (search index included: the FTS5 tables
   on SQLite), the bystander's rows all there.

    .venv/bin/python bench/account_delete.py [--messages 200000] [--rev REV] [--json FILE]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/acctdel_bench .venv/bin/python bench/account_delete.py

`--rev REV` deletes with the code of commit REV (a temporary worktree; the fill and the schema are this
checkout's, so REV must not need another): the figures before a change, e.g. `--rev 26bd8f1`, the
commit before the deletion moved to a worker.

SQLite by default (a temporary file); with DATABASE_URL, PostgreSQL in the database it names, which
the bench drops and makes afresh before the fill and drops at the end: give it one of its own.
Prints one line per phase (seconds, peak RSS growth in MiB) and the checks.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import resource
import secrets
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, ROOT, load_note, revision_tree
from processes import private_postgres
from web_ttfb import bench_environment, seed_user

# --- RSS of this process -------------------------------------------------------------------------------


def _status_kib(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    if not match:
        raise RuntimeError(f"no {field} in /proc/self/status")
    return int(match.group(1))


class PeakRss:
    """Peak RSS growth of this process over one phase, in MiB: VmHWM after it, reset before it (writing
    5 to /proc/self/clear_refs resets the high-water mark), minus VmRSS before it."""

    def __enter__(self) -> PeakRss:
        gc.collect()
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self.reset = True
        except OSError:  # not allowed here: ru_maxrss, which only grows (right for the first phase)
            self.reset = False
        self.start = _status_kib("VmRSS")
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.started
        peak = _status_kib("VmHWM") if self.reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.growth_mib = max(0, peak - self.start) / 1024


# --- the child: the deletion, measured -----------------------------------------------------------------


def _leftovers(*, user_id: int, conversation_ids: list[int]) -> dict[str, int]:
    """Rows of the account still in each table (by the owner's or its conversations' ids), FTS included."""
    from django.apps import apps
    from django.db import connection

    left: dict[str, int] = {}
    for app in ("chat", "dashboard", "providers"):
        for model in apps.get_app_config(app).get_models():
            names = {f.name for f in model._meta.get_fields()}
            for key, ids in (("owner_id", [user_id]), ("user_id", [user_id]), ("conversation_id", conversation_ids)):
                if key.removesuffix("_id") in names:
                    count = model.objects.filter(**{f"{key}__in": ids}).count() if ids else 0
                    left[f"{model._meta.label}.{key}"] = count
    from chatapp.chat.models import Message

    left["chat.Message.conversation_id"] = Message.objects.filter(conversation_id__in=conversation_ids).count()
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            # The FTS5 tables' own rows (their triggers fire on the search rows' DELETE): an index entry
            # whose search row is gone would stay in them, found by nothing and never removed.
            for fts, rows in (("chat_message_fts", ""), ("chat_message_rfts", " WHERE recallable")):
                cursor.execute(
                    f"SELECT (SELECT count(*) FROM {fts}_docsize)"  # noqa: S608 - names above
                    f" - (SELECT count(*) FROM chat_messagesearch{rows})"
                )
                left[f"{fts}_orphans"] = cursor.fetchone()[0]
    return left


def child(*, username: str, code: str) -> dict[str, Any]:
    if code:  # another revision's code (--rev): first on the path, before anything of the app is imported
        sys.path.insert(0, code)
    import django

    from chatapp.instance import instance_prepare

    instance_prepare()
    django.setup()
    from celery.app.task import Task
    from django.contrib.auth import get_user_model

    from chatapp.chat.account_services import account_delete
    from chatapp.chat.models import Conversation

    published: list[tuple[Task, tuple, dict]] = []
    original = Task.apply_async

    def capture(self: Task, args: Any = None, kwargs: Any = None, **options: Any) -> None:
        published.append((self, tuple(args or ()), dict(kwargs or {})))

    Task.apply_async = capture  # type: ignore[method-assign]  # the worker's part runs below, timed apart
    user = get_user_model().objects.get(username=username)
    conversation_ids = list(Conversation.objects.filter(owner=user).values_list("pk", flat=True))
    out: dict[str, Any] = {"conversations": len(conversation_ids), "code": django.apps.apps.get_app_config("chat").path}
    with PeakRss() as request:
        account_delete(user=user)
    out["request_seconds"], out["request_rss_mib"] = round(request.seconds, 2), round(request.growth_mib, 1)
    Task.apply_async = original  # type: ignore[method-assign]
    out["tasks"] = [task.name for task, _, _ in published]
    if published:
        with PeakRss() as worker:
            for task, args, kwargs in published:
                task.apply(args=args, kwargs=kwargs).get()
        out["worker_seconds"], out["worker_rss_mib"] = round(worker.seconds, 2), round(worker.growth_mib, 1)
    out["user_left"] = get_user_model().objects.filter(pk=user.pk).exists()
    out["leftovers"] = {k: v for k, v in _leftovers(user_id=user.pk, conversation_ids=conversation_ids).items() if v}
    return out


# --- the parent: fill, then the child ------------------------------------------------------------------


def _fill(*, messages: int) -> tuple[str, dict[str, int]]:
    """The account (username) and the rows of every table of the bystander's account's size."""
    from django.apps import apps
    from django.db import connections
    from scale_fill import fill

    from tests.support.fake_openai import FakeOpenAI

    with FakeOpenAI() as fake:
        user, _, config = seed_user(
            username=f"bench-delete-{secrets.token_hex(4)}", base_url=fake.base_url, model="fake-echo"
        )
        big = min(100_000, messages // 2)
        started = time.perf_counter()
        print(f"filling {messages:,} messages (one conversation of {big:,})...", file=sys.stderr, flush=True)
        fill(owner=user, config=config, total=messages, big=big, conversations=max(10, messages // 1000))
        print(f"filled in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        bystander, _, other = seed_user(
            username=f"bench-keep-{secrets.token_hex(4)}", base_url=fake.base_url, model="fake-echo"
        )
        fill(owner=bystander, config=other, total=2_000, big=1_000, conversations=10)
    rows = {
        m._meta.label: m.objects.count()
        for app in ("chat", "dashboard", "providers")
        for m in apps.get_app_config(app).get_models()
    }
    connections.close_all()
    return user.username, rows


def run(args: argparse.Namespace) -> dict[str, Any]:
    from scale_fill import conversation_sizes  # noqa: F401 - fails early outside the repository

    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="acctdel-")))
        env = bench_environment(tmp)
        url = os.environ.get("DATABASE_URL", "")
        if url:
            parts = urlparse(url)
            name = parts.path.lstrip("/")
            if not name or name in ("postgres", "test_local"):
                raise SystemExit(f"DATABASE_URL names {name or 'no database'}: give the bench one of its own")
            server = urlunparse(parts._replace(path="/postgres"))
            env["DATABASE_URL"] = stack.enter_context(private_postgres(server, name))
        os.environ.update(env)
        import django

        from chatapp.instance import instance_prepare

        instance_prepare()
        django.setup()
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0, interactive=False)
        vendor = connection.vendor
        username, before = _fill(messages=args.messages)
        cmd = [PYTHON, str(Path(__file__).resolve()), "--child", username]
        if args.rev:
            cmd += ["--code", str(stack.enter_context(revision_tree(args.rev)))]
        proc = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=False)
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            raise SystemExit(f"the deletion's process failed (exit {proc.returncode}): {proc.stdout[-2000:]}")
        out = json.loads(lines[-1])
        from django.apps import apps

        from chatapp.chat.models import Conversation

        bystander = Conversation.objects.exclude(owner__username=username).count()
        after_rows = {
            m._meta.label: m.objects.count()
            for app in ("chat", "dashboard", "providers")
            for m in apps.get_app_config(app).get_models()
        }
        out["bystander_conversations"] = bystander
        out["rows_removed"] = sum(before.values()) - sum(after_rows.values())
        out["database"], out["messages"] = vendor, args.messages
        from django.db import connections

        connections.close_all()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000, help="messages in the account (default 200,000)")
    parser.add_argument("--json", default="", help="write the figures to this file")
    parser.add_argument("--rev", default="", help="delete with the code of this commit (figures before a change)")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--code", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(username=args.child, code=args.code)), flush=True)
        return 0
    out = run(args)
    print(
        f"\nAccount deletion, {out['messages']:,} messages in {out['conversations']:,} conversations, "
        f"{out['database']} ({load_note()})\n  code: {out['code']}"
    )
    print(f"  request (account_delete): {out['request_seconds']:>8.2f} s   peak RSS +{out['request_rss_mib']:.1f} MiB")
    if out["tasks"]:
        print(
            f"  worker ({', '.join(sorted(set(out['tasks'])))}): {out['worker_seconds']:>8.2f} s   "
            f"peak RSS +{out['worker_rss_mib']:.1f} MiB"
        )
    else:
        print("  worker: nothing published (all of it done in the request)")
    print(
        f"  rows removed: {out['rows_removed']:,}; user row left: {out['user_left']}; "
        f"rows of the account left: {out['leftovers'] or 'none'}; "
        f"bystander's conversations: {out['bystander_conversations']}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0 if not out["leftovers"] and not out["user_left"] else 1


if __name__ == "__main__":
    sys.exit(main())
