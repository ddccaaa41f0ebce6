"""A chat can be archived: out of the sidebar, listed in Settings (Conversation.archived_at: when;
null, not archived).

Nullable with no default, as pinned_at (0019): neither database rewrites chat_conversation. The
partial index holds only the archived rows, which Settings lists. Backwards, the index and the column go.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("chat", "0019_conversation_pinned")]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="archived_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="conversation",
            index=models.Index(
                condition=models.Q(("archived_at__isnull", False)),
                fields=["owner", "-archived_at"],
                name="conv_owner_archived_idx",
            ),
        ),
    ]
