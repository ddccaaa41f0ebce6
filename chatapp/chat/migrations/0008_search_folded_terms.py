"""The full-text index's terms are folded now (`optimizer.lexical.fold`: "Straße" is indexed as
"strass", "café" as "cafe"), and queries are folded the same way: a message stored with accented or
otherwise non-ASCII text is indexed again, with its conversation's BM25 statistics moved by the
difference (`search_reindex`, shared with 0009).
"""

from django.db import migrations

from chatapp.chat.search_reindex import non_ascii_messages_reindex


def refold(apps, schema_editor):
    non_ascii_messages_reindex(apps)


class Migration(migrations.Migration):
    dependencies = [("chat", "0007_summaryjob_quota_idx")]

    # Backwards the folded terms stay: the older code finds ASCII words as before, and accented
    # words through a search typed without the accent.
    operations = [migrations.RunPython(refold, migrations.RunPython.noop)]
