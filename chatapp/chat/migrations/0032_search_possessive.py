# The analyzer takes a possessive's "'s" off before the apostrophes (optimizer.lexical._unquoted): taken
# out first, they left the "s" to the stemmer, which keeps it after an "s" or a "u", so "Paris's" was the
# term "pariss" and neither search nor recall found it for "Paris". Messages with an apostrophe before an
# "s" are analyzed again; a row whose terms change moves its conversation's BM25 statistics by the
# difference (search_reindex), which is what indexing it from scratch gives.

from django.db import migrations

from chatapp.chat.search_reindex import POSSESSIVE, non_ascii_messages_reindex


def possessives_reindex(apps, schema_editor):
    non_ascii_messages_reindex(apps, pattern=POSSESSIVE)


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0031_share_list_seek_idx'),
    ]

    operations = [
        migrations.RunPython(possessives_reindex, migrations.RunPython.noop),
    ]
