"""bench/scale.py's fill: a million messages in 1,000 conversations, inserted in bulk with the search
index rows and recall statistics the services would write for them."""

from __future__ import annotations

import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

# --- the fill ------------------------------------------------------------------------------------------

def _vocabulary(rng: random.Random, size: int) -> list[str]:
    """Made-up words (so no term is a stop word), drawn Zipf-like: a few common, a long rare tail."""
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    words: set[str] = set()
    while len(words) < size:
        n = rng.randint(2, 4)
        words.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(n)))
    return sorted(words)


def conversation_sizes(*, total: int, count: int, rng: random.Random) -> list[int]:
    """`count` sizes summing to `total`, heavy-tailed (Pareto): most chats are short, a few are long."""
    raw = [rng.paretovariate(1.1) for _ in range(count)]
    scale = total / sum(raw)
    sizes = [max(2, int(r * scale)) for r in raw]
    sizes[0] += total - sum(sizes)
    return sizes


def insert_rows(*, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
    """Rows straight into a table: COPY on PostgreSQL, executemany on SQLite (the ORM's bulk_create
    spends more time building SQL than the database spends storing a million rows)."""
    from django.db import connection

    if not rows:
        return
    names = ", ".join(columns)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            marks = ", ".join("%s" for _ in columns)
            cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})", rows)  # noqa: S608


_MESSAGE_COLUMNS = ("id", "conversation_id", "role", "kind", "content", "token_count", "char_count", "pinned",
                    "status", "superseded", "model", "error", "extractive", "discarded", "edited", "client_key",
                    "created_at", "updated_at")


# A conversation's texts are made in builder processes, CHUNK messages a task (the largest conversation
# of the heavy tail is half the fill), while this process inserts: the made-up text and its analysis
# (search_services.index_terms) took as long as the inserts.
CHUNK = 20_000
SEED = 20261124
_VOCABULARY: tuple[list[str], list[float]] = ([], [])


def _builder_start(words: list[str], cum_weights: list[float]) -> None:
    global _VOCABULARY
    _VOCABULARY = (words, cum_weights)


def _chunk_build(task: tuple[int, int, int, int]) -> tuple[int, list[tuple[str, str, str, int]], Counter]:
    """In a builder: messages `first` to `end` of conversation `index` as (role, content, index terms,
    term count), and in how many of them each term is (its own random stream: the same text whatever
    the number of builders)."""
    from chatapp.chat.search_services import index_terms

    seed, index, first, end = task
    words, cum = _VOCABULARY
    rng = random.Random(f"{seed}/{index}/{first}")
    rows, df = [], Counter()
    for i in range(first, end):
        role = "user" if i % 2 == 0 else "assistant"
        n = rng.randint(6, 25) if role == "user" else rng.randint(20, 90)
        content = " ".join(rng.choices(words, cum_weights=cum, k=n)) + f" (#{index}.{i})"
        terms, length = index_terms(content=content)
        df.update(set(terms.split()))
        rows.append((role, content, terms, length))
    return index, rows, df


class Filler:
    """Conversations of made-up text, inserted with the search index rows and recall statistics the
    services would write for them (search_services.index_terms / index_scope)."""

    def __init__(self, *, owner: Any, config: Any, rng: random.Random) -> None:
        from itertools import accumulate

        from chatapp.chat.models import Message

        self.owner, self.config, self.rng = owner, config, rng
        self.words = _vocabulary(rng, 20_000)
        self.cum_weights = list(accumulate(1 / (rank + 10) for rank in range(len(self.words))))
        self.next_id = (Message.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1

    def conversations(self, *, sizes: list[int], seed: int, progress: Callable[[int], None]) -> None:
        """Every conversation of `sizes`, texts made by builder processes (forked: they inherit the
        vocabulary and the set-up Django, and touch no database), inserted here in order."""
        import multiprocessing
        import os

        tasks = ((seed, index, first, min(size, first + CHUNK))
                 for index, size in enumerate(sizes) for first in range(0, size, CHUNK))
        builders = max(1, (os.cpu_count() or 1) - 1)
        context = multiprocessing.get_context("fork")
        parts: list[tuple[str, str, str, int]] = []
        df: Counter = Counter()
        with context.Pool(builders, initializer=_builder_start, initargs=(self.words, self.cum_weights)) as pool:
            for index, rows, counts in pool.imap(_chunk_build, tasks):
                parts.extend(rows)
                df.update(counts)
                if len(parts) == sizes[index]:
                    self.conversation(index=index, rows=parts, df=df)
                    parts, df = [], Counter()
                    progress(index)

    def conversation(self, *, index: int, rows: list[tuple[str, str, str, int]], df: Counter) -> int:
        from datetime import UTC, datetime, timedelta

        from django.db import transaction

        from chatapp.chat.models import Conversation
        from chatapp.chat.search_services import index_scope

        title = f"Chat {index}: " + " ".join(self.rng.choices(self.words, cum_weights=self.cum_weights, k=3))
        conversation = Conversation.objects.create(owner=self.owner, llm_config=self.config, title=title)
        scope = index_scope(conversation_id=conversation.pk, owner_id=self.owner.pk)
        start = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(hours=index)
        messages, search = [], []
        chars = tokens = length_sum = 0
        for i, (role, content, terms, length) in enumerate(rows):
            at = start + timedelta(minutes=i)
            pk = self.next_id
            self.next_id += 1
            token_count = len(content) // 4 + 4
            messages.append((pk, conversation.pk, role, "chat", content, token_count, len(content), False,
                             "complete", False, "", "", False, False, False, "", at, at))
            search.append((pk, conversation.pk, scope, terms, length, True))
            chars, tokens, length_sum = chars + len(content), tokens + token_count, length_sum + length
        # One transaction per conversation: in autocommit, SQLite's executemany commits every row (a WAL
        # commit each: most of the fill's time went to them).
        with transaction.atomic():
            insert_rows(table="chat_message", columns=_MESSAGE_COLUMNS, rows=messages)
            insert_rows(table="chat_messagesearch", columns=("message_id", "conversation_id", "scope", "terms",
                                                             "length", "recallable"), rows=search)
            insert_rows(table="chat_recallterm", columns=("conversation_id", "term", "df"),
                        rows=[(conversation.pk, t, d) for t, d in df.items()])
            insert_rows(table="chat_recallcorpus", columns=("conversation_id", "docs", "length"),
                        rows=[(conversation.pk, len(rows), length_sum)])
            Conversation.objects.filter(pk=conversation.pk).update(
                live_message_count=len(rows), live_char_count=chars, live_token_count=tokens)
        return conversation.pk

    def finish(self) -> None:
        """Ids were given here: the sequence must continue after them (PostgreSQL; SQLite follows max(id))."""
        from django.db import connection

        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT setval(pg_get_serial_sequence('chat_message', 'id'), %s)", [self.next_id])


def fill(*, owner: Any, config: Any, total: int, big: int, conversations: int) -> tuple[Any, list[str], float]:
    """The big conversation (seeded with records) and the rest; returns it, the vocabulary, seconds."""
    from django.db import connection

    from chatapp.chat.management.commands.seed_long_conversation import conversation_seed_long
    from chatapp.chat.models import Conversation

    started = time.perf_counter()
    large = conversation_seed_long(owner=owner, messages=big)
    Conversation.objects.filter(pk=large.pk).update(llm_config=config)
    large.refresh_from_db()
    rng = random.Random(SEED)
    filler = Filler(owner=owner, config=config, rng=rng)
    sizes = conversation_sizes(total=total - big, count=conversations - 1, rng=rng)

    def progress(index: int) -> None:
        if index % 100 == 99:
            print(f"  {index + 1} conversations, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)

    filler.conversations(sizes=sizes, seed=SEED, progress=progress)
    filler.finish()
    with connection.cursor() as cursor:
        # PostgreSQL: VACUUM as well, the state autovacuum keeps a table in after a bulk load (it is on
        # by default and vacuums a table after inserts of 20 % of its size). The PostgreSQL this bench
        # runs on here has autovacuum off; without it, every first read of a freshly loaded page sets
        # its rows' hint bits and writes the page back, the visibility map is empty (no index-only
        # scans), and the figures describe a database no server keeps.
        # SQLite: the statistics the product leaves (chatapp/sqlite3: PRAGMA optimize a minute into
        # a process's requests, sampling ANALYSIS_LIMIT rows an index), not a full ANALYZE, which
        # nothing in the product runs.
        if connection.vendor == "postgresql":
            cursor.execute("VACUUM ANALYZE")
        else:
            from chatapp.sqlite3.base import ANALYSIS_LIMIT

            cursor.execute(f"PRAGMA analysis_limit = {ANALYSIS_LIMIT}")
            cursor.execute("ANALYZE")
    return large, filler.words, time.perf_counter() - started
