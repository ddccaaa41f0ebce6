"""A chat can be pinned to the top of the sidebar (Conversation.pinned_at: when; null, not pinned).

Nullable with no default: neither database rewrites chat_conversation. The partial index holds only the
pinned rows, which the sidebar reads first. Backwards, the index and the column go.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("chat", "0018_reply_finish_reason")]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="pinned_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="conversation",
            index=models.Index(
                condition=models.Q(("pinned_at__isnull", False)),
                fields=["owner", "-pinned_at"],
                name="conv_owner_pinned_idx",
            ),
        ),
    ]
