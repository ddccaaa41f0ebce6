"""Runs of scripts written without spaces between words (Chinese, Japanese, Thai, Lao, Khmer,
Burmese) and of Korean are indexed as overlapping pairs of characters now (`optimizer.lexical`):
before, a whole run was one term, so a word inside it was never found ("東京" in "私は東京に行きました").
Every non-ASCII message is indexed again, with its conversation's BM25 statistics moved by the
difference (`search_reindex`, as 0008 and 0009).

Also, from the same release: the partial index of the replaced versions (regenerated replies, edited
questions) that the dashboard's message numbering skips (`msg_conv_superseded_idx`).
"""

from django.db import migrations, models

from chatapp.chat.search_reindex import non_ascii_messages_reindex


def pairs_index(apps, schema_editor):
    non_ascii_messages_reindex(apps)


class Migration(migrations.Migration):
    dependencies = [("chat", "0009_search_marked_words")]

    # Backwards the pairs stay: the older code finds a run typed whole only where it stands alone
    # (a one-pair run), as before, and every other term as before.
    operations = [
        migrations.RunPython(pairs_index, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("kind", "chat"), ("superseded", True)),
                fields=["conversation", "id"],
                name="msg_conv_superseded_idx",
            ),
        ),
    ]
