"""Indexing stored messages again after the analyzer changed, for the data migration that comes with
such a change (those so far are squashed into chat 0001_squashed_0029, and 0032;
tests/chat/test_search_reindex.py replays each); `stats_move` also serves one that moves messages into
or out of the recall corpus.

Only messages holding a non-ASCII character are read (`optimizer.lexical` keeps a fast path for ASCII
text, which most analyzer changes left alone), so a database of English chats reads its few other
messages; a change that does touch ASCII text reads the messages its `pattern` matches (POSSESSIVE).
Each changed row moves its conversation's BM25 statistics (RecallTerm, RecallCorpus) by the
difference, which is what indexing the conversation from scratch gives.

Written against the migration's historical models (`apps`), not the app's services:
`search_services.index_terms` is a pure function of the text, the rest is plain queryset writes.
SQLite's FTS5 tables follow the changed rows through their update triggers; PostgreSQL's tsvector
columns are generated.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from itertools import islice
from typing import Any

from django.db.models import F

from chatapp.chat.search_match import NON_ASCII
from chatapp.chat.search_services import index_terms

BATCH = 1000
# An apostrophe (any the analyzer folds into "'") before an "s": the messages whose terms changed when a
# possessive's "'s" came off before the apostrophes (chat migration 0032).
POSSESSIVE = "['\u2019\u02bc][sS]"


def non_ascii_messages_reindex(apps: Any, *, pattern: str = NON_ASCII) -> None:
    """Analyze every non-ASCII chat message again (or only those matching `pattern`, a regular
    expression: the characters the analyzer changed for), a thousand at a time (PostgreSQL matches
    them in the database; SQLite through Django's REGEXP function)."""
    Message = apps.get_model("chat", "Message")
    MessageSearch = apps.get_model("chat", "MessageSearch")
    df: defaultdict[int, Counter[str]] = defaultdict(Counter)
    length_delta: Counter[int] = Counter()
    rows = (
        Message.objects.filter(kind="chat", content__regex=pattern)
        .order_by("id")
        .values_list("id", "content")
        .iterator(chunk_size=BATCH)
    )
    while batch := list(islice(rows, BATCH)):
        # A message never indexed (a raw write) has no row: the rebuild indexes it, as before.
        indexed = MessageSearch.objects.in_bulk([pk for pk, _ in batch], field_name="message_id")
        changed = []
        for pk, content in batch:
            row = indexed.get(pk)
            terms, length = index_terms(content=content)
            if row is None or (terms, length) == (row.terms, row.length):
                continue
            if row.recallable:
                counts = df[row.conversation_id]
                counts.subtract(set(row.terms.split()))
                counts.update(set(terms.split()))
                length_delta[row.conversation_id] += length - row.length
            row.terms, row.length = terms, length
            changed.append(row)
        MessageSearch.objects.bulk_update(changed, ["terms", "length"])
    stats_move(apps, df=df, length_delta=length_delta)


def stats_move(
    apps: Any, *, df: dict[int, Counter[str]], length_delta: Counter[int], docs_delta: Counter[int] | None = None
) -> None:
    """Move each conversation's BM25 statistics by these differences: document frequencies by term,
    total length and (when messages join or leave the recall corpus) the number of documents."""
    RecallTerm = apps.get_model("chat", "RecallTerm")
    RecallCorpus = apps.get_model("chat", "RecallCorpus")
    docs_delta = docs_delta or Counter()
    for conversation_id, counts in sorted(df.items()):
        for term, change in sorted(counts.items()):
            if change:
                stat, _ = RecallTerm.objects.get_or_create(conversation_id=conversation_id, term=term)
                RecallTerm.objects.filter(pk=stat.pk).update(df=F("df") + change)
        RecallTerm.objects.filter(conversation_id=conversation_id, df__lte=0).delete()
        if docs_delta[conversation_id]:
            RecallCorpus.objects.get_or_create(conversation_id=conversation_id)
        RecallCorpus.objects.filter(conversation_id=conversation_id).update(
            length=F("length") + length_delta[conversation_id], docs=F("docs") + docs_delta[conversation_id]
        )
