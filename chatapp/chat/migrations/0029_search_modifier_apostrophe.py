"""The modifier letter apostrophe (U+02BC: Ukrainian's "мʼясо", and what some keyboards and models type
for any apostrophe) is folded into "'" as the typographic one is (`optimizer.lexical.fold`), where its
script extensions made it a run of its own that cut its word ("м", "ʼ", "ясо"): "м'ясо" typed on a
keyboard found nothing, and "пʼята" found "мʼята". The messages holding one are indexed again, with
their conversations' BM25 statistics moved by the difference (`search_reindex`, as 0015).
"""

from django.db import migrations

from chatapp.chat.search_reindex import non_ascii_messages_reindex


def modifier_apostrophe_fold(apps, schema_editor):
    non_ascii_messages_reindex(apps, pattern="\u02bc")


class Migration(migrations.Migration):
    dependencies = [("chat", "0028_message_images")]

    # Backwards the terms stay folded: older code analyzes its queries the old way, and misses those words.
    operations = [migrations.RunPython(modifier_apostrophe_fold, migrations.RunPython.noop)]
