"""Dashboard benchmark: server time for a conversation of 10,000 messages and 5,000 records (or more).

Seeds the conversation into a throw-away test database (SQLite in memory by default; set
DATABASE_URL for PostgreSQL), then times the page and every API call the page makes with Django's
test Client (full request/response cycle, middleware and templates included; no network).
Prints the median and p95 of each, and the response sizes. Target: the page plus the five API calls
its script makes <= 300 ms (medians summed), at 100,000 messages / 50,000 records too.

    .venv/bin/python bench/dashboard_bench.py [--messages 10000] [--repeat 15] [--sqlite-file /tmp/b.sqlite3]
        [--no-export]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")


# The API calls the conversation page's script makes when it opens (the headline is server-rendered).
PAGE_LOADS = {
    "api       series", "api       message map (RLE)", "api       records page",
    "api       what the model saw", "api       summaries page",
}


def _streamed_size(response) -> int:
    """Bytes of a streamed answer, whether its content is a sync or (under ASGI) an async iterator."""
    content = response.streaming_content
    if hasattr(content, "__aiter__"):
        async def drain() -> int:
            return sum([len(chunk) async for chunk in content])

        return asyncio.run(drain())
    return sum(len(chunk) for chunk in content)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--sqlite-file", default="", help="SQLite: bench a database file (like the embedded mode) "
                        "instead of the in-memory test database")
    parser.add_argument("--no-export", action="store_true", help="skip timing the CSV / JSON downloads")
    args = parser.parse_args()

    import django

    from chatapp.instance import instance_prepare

    instance_prepare()
    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import setup_test_environment

    from chatapp.chat.management.commands.seed_long_conversation import conversation_seed_long
    from chatapp.chat.models import Message, OptimizationRecord

    setup_test_environment()
    if args.sqlite_file and connection.vendor == "sqlite":
        connection.settings_dict["TEST"]["NAME"] = args.sqlite_file
    settings.ALLOWED_HOSTS = ["testserver", *settings.ALLOWED_HOSTS]
    db_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        from django.test import Client

        user = get_user_model().objects.create_user(username="bench")
        t0 = time.perf_counter()
        conversation = conversation_seed_long(owner=user, messages=args.messages)
        seed_s = time.perf_counter() - t0
        n_messages = Message.objects.filter(conversation=conversation).count()
        n_records = OptimizationRecord.objects.filter(conversation=conversation).count()
        records = OptimizationRecord.objects.filter(conversation=conversation)
        latest = records.order_by("-id").values_list("id", flat=True)[0]
        load = os.getloadavg()[0]
        print(f"database: {connection.vendor} ({db_name}); load average {load:.1f} on {os.cpu_count()} CPUs")
        print(f"seeded {n_messages:,} messages and {n_records:,} records in {seed_s:.1f} s")

        client = Client()
        client.force_login(user)
        pk = conversation.pk
        targets = [
            ("page      /c/<pk>/dashboard/", f"/c/{pk}/dashboard/"),
            ("api       headline", f"/api/dashboard/conversations/{pk}/"),
            ("api       series", f"/api/dashboard/conversations/{pk}/series/"),
            ("api       message map (RLE)", f"/api/dashboard/conversations/{pk}/map/"),
            ("api       records page", f"/api/dashboard/conversations/{pk}/records/?limit=15&offset={n_records - 15}"),
            ("api       what the model saw", f"/api/dashboard/conversations/{pk}/records/{latest}/"),
            ("api       summaries page", f"/api/dashboard/conversations/{pk}/summaries/?limit=5"),
            ("page      /dashboard/ overview", "/dashboard/"),
            ("api       overview", "/api/dashboard/overview/"),
        ]
        print(f"{'endpoint':40} {'median ms':>10} {'p95 ms':>8} {'bytes':>10}")
        page_plus_api = 0.0
        for label, url in targets:
            client.get(url)  # warm-up
            times = []
            size = 0
            for _ in range(args.repeat):
                t = time.perf_counter()
                response = client.get(url)
                body = response.content
                times.append((time.perf_counter() - t) * 1000)
                assert response.status_code == 200, (url, response.status_code)
                size = len(body)
            times.sort()
            med = statistics.median(times)
            p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
            if label.startswith("page      /c/") or label in PAGE_LOADS:
                page_plus_api += med
            print(f"{label:40} {med:10.1f} {p95:8.1f} {size:10,}")
        print(f"{'sum: page + the 5 API calls it makes':40} {page_plus_api:10.1f}")
        for fmt in () if args.no_export else ("csv", "json"):
            t = time.perf_counter()
            response = client.get(f"/c/{pk}/dashboard/export.{fmt}")
            size = _streamed_size(response)
            print(f"export.{fmt:<33} {(time.perf_counter() - t) * 1000:10.1f} {'':>8} {size:10,}")
    finally:
        connection.creation.destroy_test_db(db_name, verbosity=0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
