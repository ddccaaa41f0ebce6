"""The full-text index's terms are folded now (`optimizer.lexical.fold`: "Straße" is indexed as
"strass", "café" as "cafe"), and queries are folded the same way: a message stored with accented or
otherwise non-ASCII text is indexed again, with its conversation's BM25 statistics moved by the
difference. ASCII text folds to what it was indexed as, so only messages holding another character
are read (PostgreSQL matches them in the database; SQLite through Django's REGEXP function).

Written against this migration's models, not the app's services: `search_services.index_terms` is a
pure function of the text, the rest is plain queryset writes. SQLite's FTS5 tables follow the
changed rows through their update triggers; PostgreSQL's tsvector columns are generated.
"""

from collections import Counter, defaultdict
from itertools import islice

from django.db import migrations
from django.db.models import F

from chatapp.chat.search_services import index_terms

NON_ASCII = r"[^\x01-\x7f]"


BATCH = 1000


def refold(apps, schema_editor):
    Message = apps.get_model("chat", "Message")
    MessageSearch = apps.get_model("chat", "MessageSearch")
    df: defaultdict[int, Counter] = defaultdict(Counter)
    length_delta: Counter = Counter()
    rows = (
        Message.objects.filter(kind="chat", content__regex=NON_ASCII)
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
    _stats_move(apps, df=df, length_delta=length_delta)


def _stats_move(apps, *, df: dict[int, Counter], length_delta: Counter) -> None:
    RecallTerm = apps.get_model("chat", "RecallTerm")
    RecallCorpus = apps.get_model("chat", "RecallCorpus")
    for conversation_id, counts in sorted(df.items()):
        for term, change in sorted(counts.items()):
            if change:
                stat, _ = RecallTerm.objects.get_or_create(conversation_id=conversation_id, term=term)
                RecallTerm.objects.filter(pk=stat.pk).update(df=F("df") + change)
        RecallTerm.objects.filter(conversation_id=conversation_id, df__lte=0).delete()
        RecallCorpus.objects.filter(conversation_id=conversation_id).update(
            length=F("length") + length_delta[conversation_id]
        )


class Migration(migrations.Migration):
    dependencies = [("chat", "0007_summaryjob_quota_idx")]

    # Backwards the folded terms stay: the older code finds ASCII words as before, and accented
    # words through a search typed without the accent.
    operations = [migrations.RunPython(refold, migrations.RunPython.noop)]
