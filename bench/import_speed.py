"""Conversation import speed (issue 13): a synthetic ChatGPT conversations.json of N conversations of M
messages (made-up text), imported by the job's own code in this process: `import_job_create` (the
upload: compress, store) and `import_job_run` (the task's body: read the file twice, store each
conversation in its transaction with token counts, live totals and its full-text index).

    .venv/bin/python bench/import_speed.py [--conversations 1000] [--messages 50] [--fork]

`--fork` then times Branch in new chat (fork_services, written as an import is) from the newest message
of the first chat imported: `--conversations 1 --messages 5000 --fork` is the README's figure. Past
fork_services.MAX_FORK_MESSAGES (`--messages 20000`) it times the request, which stores the path as an
import job, and the job's run, which writes the new chat.

The database is a fresh SQLite file in a temporary directory, or, when DATABASE_URL names PostgreSQL, a
fresh database created beside it for the run and dropped afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORDS = [
    "sourdough", "bicycle", "harbour", "lantern", "meadow", "quartz", "violin", "glacier", "orchard", "pepper",
    "canal", "ember", "lattice", "falcon", "cedar", "marble", "tundra", "saffron", "compass", "willow",
]


def synthetic_export(*, conversations: int, messages: int, seed: int = 7) -> bytes:
    rng = random.Random(seed)
    out = []
    for c in range(conversations):
        mapping: dict = {"root": {"id": "root", "message": None, "parent": None, "children": ["m0"]}}
        for n in range(messages):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(15, 90)))
            mapping[f"m{n}"] = {
                "id": f"m{n}", "parent": "root" if n == 0 else f"m{n - 1}",
                "children": [f"m{n + 1}"] if n + 1 < messages else [],
                "message": {
                    "id": f"m{n}", "author": {"role": "user" if n % 2 == 0 else "assistant"},
                    "create_time": 1_700_000_000 + c * 3600 + n * 30,
                    "content": {"content_type": "text", "parts": [text]}, "metadata": {},
                },
            }
        out.append({"title": f"Synthetic chat {c}", "create_time": 1_700_000_000 + c * 3600,
                    "update_time": 1_700_000_000 + c * 3600 + messages * 30, "mapping": mapping,
                    "current_node": f"m{messages - 1}"})
    return json.dumps(out).encode()


def _postgres_private(url: str) -> tuple[str, str] | None:
    parsed = urlparse(url)
    if parsed.scheme not in ("postgres", "postgresql"):
        return None
    name = f"import_bench_{os.getpid()}"
    return urlunparse(parsed._replace(path=f"/{name}")), name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--fork", action="store_true", help="then time Branch in new chat from the first chat's end")
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="import-bench-")
    os.environ["CHATAPP_VAR_DIR"] = tmp
    base_url = os.environ.get("DATABASE_URL", "")
    private = _postgres_private(base_url) if base_url else None
    if private is not None:
        import psycopg

        with psycopg.connect(base_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{private[1]}"')
        os.environ["DATABASE_URL"] = private[0]
    else:
        os.environ["DATABASE_URL"] = f"sqlite:///{tmp}/bench.sqlite3"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")
    from chatapp.instance import instance_prepare

    instance_prepare()
    import django

    django.setup()
    try:
        run(args)
    finally:
        if private is not None:
            from django.db import connections

            connections.close_all()
            import psycopg

            with psycopg.connect(base_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{private[1]}" WITH (FORCE)')


def run(args: argparse.Namespace) -> None:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.core.management import call_command
    from django.db import connection

    from chatapp.chat.import_models import ImportJob
    from chatapp.chat.import_services import import_job_create, import_job_run
    from chatapp.chat.models import Message

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user(username="bench-importer")
    data = synthetic_export(conversations=args.conversations, messages=args.messages)
    settings.IMPORT_MAX_BYTES = max(settings.IMPORT_MAX_BYTES, len(data))
    # The upload's on_commit publish is not wanted here: the job is run below, in this process.
    from chatapp.chat import import_services

    import_services.import_job_enqueue = lambda *, job_id: True  # type: ignore[assignment]
    started = time.perf_counter()
    job = import_job_create(owner=user, upload=SimpleUploadedFile("conversations.json", data))
    uploaded = time.perf_counter()
    outcome = import_job_run(job_id=job.pk)
    finished = time.perf_counter()
    job = ImportJob.objects.get(pk=job.pk)
    stored = Message.objects.filter(conversation__owner=user).count()
    seconds = finished - uploaded
    print(f"database: {connection.vendor}; file: {len(data) / 1e6:.1f} MB, {args.conversations:,} conversations "
          f"x {args.messages} messages")
    print(f"upload (compress + store): {uploaded - started:.2f} s; import: {seconds:.2f} s ({outcome.status}, "
          f"{len(job.conversation_ids):,} conversations, {stored:,} messages)")
    print(f"  {len(job.conversation_ids) / seconds:,.0f} conversations/s, {stored / seconds:,.0f} messages/s")
    if args.fork:
        from chatapp.chat.fork_services import ForkQueued, conversation_fork

        newest = Message.objects.filter(conversation_id=job.conversation_ids[0]).order_by("-id").first()
        started = time.perf_counter()
        fork = conversation_fork(owner=user, message_id=newest.pk)
        asked = time.perf_counter()
        if not isinstance(fork, ForkQueued):
            forked = Message.objects.filter(conversation=fork).count()
            print(f"Branch in new chat from message {forked:,}: {asked - started:.2f} s")
            return
        # Past MAX_FORK_MESSAGES the request stores the path as an import job, which the worker writes.
        outcome = import_job_run(job_id=fork.job.pk)
        ids = ImportJob.objects.get(pk=fork.job.pk).conversation_ids
        forked = Message.objects.filter(conversation_id__in=ids).count()
        print(f"Branch in new chat from message {fork.messages:,}: request (export, compress, store the job) "
              f"{asked - started:.2f} s, {fork.job.size_bytes / 1e6:.1f} MB; worker: "
              f"{time.perf_counter() - asked:.2f} s ({outcome.status}, {forked:,} messages)")


if __name__ == "__main__":
    main()
