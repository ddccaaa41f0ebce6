"""Each run of a script written without spaces is also indexed with its last character alone
(`optimizer.lexical.document_terms`), so that one character typed into search ("猫") finds a run
that ends with it ("黒猫"): every character of a run now opens one of its terms, and the search
asks for the character as a prefix. Every non-ASCII message is indexed again, with its
conversation's BM25 statistics moved by the difference (`search_reindex`, as 0008 and 0010; a
database that ran 0010 with this analyzer already has nothing to change here).
"""

from django.db import migrations

from chatapp.chat.search_reindex import non_ascii_messages_reindex


def last_characters_index(apps, schema_editor):
    non_ascii_messages_reindex(apps)


class Migration(migrations.Migration):
    dependencies = [("chat", "0010_search_character_pairs")]

    # Backwards the extra terms stay: the older code never asks for them, and a pair still finds its runs.
    operations = [migrations.RunPython(last_characters_index, migrations.RunPython.noop)]
