"""CPU of a turn's one-row statements: the ORM's QuerySet against chatapp.chat.rowsql, side by side.

The same statements a chat turn runs every turn (the dashboard totals' increments, a turn block's
maxima, the reply's update, a locked read of the totals row; and the two lookups every send makes,
its API token with its user and its conversation with its model config, as the ORM builds them
against rowsql.CompiledQuery.instances), each run 300 times in one transaction
both ways; the figure is this process's CPU per statement (time.process_time), so it counts what
the web process spends building, sending and reading a statement, not the database's own work.

    .venv/bin/python bench/row_sql.py [--repeat 300]

SQLite in a temporary directory by default; DATABASE_URL for PostgreSQL (the bench deletes its user).
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from web_ttfb import bench_environment, django_setup, seed_conversation, seed_user


def cpu_ms(fn: Callable[[], object], repeat: int) -> float:
    from django.db import transaction

    with transaction.atomic():
        fn()  # warm: the first run builds caches either way
        started = time.process_time()
        for _ in range(repeat):
            fn()
        spent = time.process_time() - started
        transaction.set_rollback(True)
    return spent * 1000 / repeat


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="row-sql-") as tmpdir:
        django_setup(bench_environment(Path(tmpdir)))
        from django.db import connection
        from django.db.models import F, Value
        from django.db.models.functions import Coalesce, Greatest, Least
        from django.utils import timezone

        from chatapp.chat.models import Conversation, Message
        from chatapp.chat.rowsql import row_read, row_update
        from chatapp.chat.selectors import conversation_get_for_send
        from chatapp.chat.token_models import ApiToken, key_digest
        from chatapp.chat.token_selectors import api_token_with_user
        from chatapp.dashboard.models import DashboardTotals, DashboardTurnBlock

        user, key, config = seed_user(username=f"bench-rowsql-{secrets.token_hex(4)}", base_url="http://127.0.0.1:9/v1",
                                    model="gpt-4o-mini")
        try:
            conversation = seed_conversation(owner=user, config=config, messages=2)
            cid = conversation.pk
            DashboardTotals.objects.create(conversation_id=cid)
            DashboardTurnBlock.objects.create(conversation_id=cid, number=0, first_record_id=1, last_record_id=1)
            reply = Message.objects.filter(conversation_id=cid).last()
            adds = {name: 3 for name in ("turns", "tokens_full", "tokens_sent", "optimized_turns", "triggered_turns",
                                         "recall_turns", "recall_tokens", "dropped_tokens", "dropped_measured",
                                         "provider_turns", "provider_ours", "provider_theirs", "cache_cached_tokens",
                                         "cache_reported_turns")}
            adds["cache_sent_usd"] = 0.25
            last = {"last_record_id": 7, "last_model": "gpt-4o-mini", "last_summary_id": None, "last_tokens_sent": 900}
            highs = {"tokens_full_max": 5000, "tokens_sent_max": 4000, "strategy_max": 1, "recall_max": 10}
            values = {"status": "complete", "content": "an answer", "token_count": 3, "char_count": 9,
                      "latency_ms": 12, "model": "gpt-4o-mini", "prompt_tokens": 900, "completion_tokens": 3,
                      "error": "", "updated_at": timezone.now()}
            pairs = {
                "totals increments (14 adds, 4 sets)": (
                    lambda: DashboardTotals.objects.filter(conversation_id=cid).update(
                        **{n: F(n) + v for n, v in adds.items()}, **last),
                    lambda: row_update(DashboardTotals, where={"conversation_id": cid}, add=adds, assign=last),
                ),
                "turn block (maxima, minimum, sums)": (
                    lambda: DashboardTurnBlock.objects.filter(conversation_id=cid, number=0).update(
                        turns=F("turns") + 1, tokens_full_sum=F("tokens_full_sum") + 5000,
                        tokens_sent_min=Least(F("tokens_sent_min"), Value(4000)),
                        provider_max=Greatest(Coalesce("provider_max", Value(900)), Value(900)),
                        **{n: Greatest(F(n), Value(v)) for n, v in highs.items()}),
                    lambda: row_update(DashboardTurnBlock, where={"conversation_id": cid, "number": 0},
                                       add={"turns": 1, "tokens_full_sum": 5000}, low={"tokens_sent_min": 4000},
                                       high={**highs, "provider_max": 900}),
                ),
                "reply stored (10 columns, 3 conditions)": (
                    lambda: Message.objects.filter(pk=reply.pk, status="complete", superseded=False).update(**values),
                    lambda: row_update(Message, where={"id": reply.pk, "status": "complete", "superseded": False},
                                       assign=values),
                ),
                "totals row read under its lock (6 columns)": (
                    lambda: DashboardTotals.objects.select_for_update().filter(conversation_id=cid).values_list(
                        *last, "turns", "first_optimized_turn").first(),
                    lambda: row_read(DashboardTotals, where={"conversation_id": cid},
                                     fields=(*last, "turns", "first_optimized_turn"), lock=True),
                ),
                "API token with its user (a join)": (
                    lambda: ApiToken.objects.select_related("user").get(digest=key_digest(key)),
                    lambda: api_token_with_user(key=key),
                ),
                "conversation with its model config (a join)": (
                    lambda: Conversation.objects.select_related("llm_config", "owner").get(pk=cid, owner=user),
                    lambda: conversation_get_for_send(owner=user, pk=cid),
                ),
            }
            print(f"CPU per statement, {args.repeat} runs each, {connection.vendor}:")
            print(f"{'statement':<44} {'ORM ms':>8} {'rowsql ms':>10} {'ratio':>7}")
            for name, (orm, plain) in pairs.items():
                a, b = cpu_ms(orm, args.repeat), cpu_ms(plain, args.repeat)
                print(f"{name:<44} {a:>8.3f} {b:>10.3f} {a / b:>6.1f}x")
        finally:
            user.delete()
    return 0


if __name__ == "__main__":
    sys.exit(main())
