"""Latin letters whose stroke or ligature no decomposition takes off are folded as people type them
without it (`optimizer.lexical.fold`: "ø" is "o", "ł" is "l", "æ" is "ae"), so "tromso" finds
"Tromsø". Every non-ASCII message is indexed again, with its conversation's BM25 statistics moved by
the difference (`search_reindex`, as 0008, 0010 and 0011): the terms stored with those letters kept
would no longer meet a query, which is folded the new way.
"""

from django.db import migrations

from chatapp.chat.search_reindex import non_ascii_messages_reindex


def stroked_letters_fold(apps, schema_editor):
    non_ascii_messages_reindex(apps)


class Migration(migrations.Migration):
    dependencies = [("chat", "0014_import_fingerprints")]

    # Backwards the terms stay folded: older code folds its queries the old way, and misses those words.
    operations = [migrations.RunPython(stroked_letters_fold, migrations.RunPython.noop)]
