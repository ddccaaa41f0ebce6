"""A share link keeps out the replies that were unfinished when it was made (ConversationShare.hidden_ids):
an older reply the orphan sweep took for dead, whose stalled stream finishes after the link was made,
is not published whole.

Nullable with no default: neither database rewrites chat_conversationshare, and the links made before
keep none (as they showed). Backwards, the column goes.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("chat", "0021_saved_prompts")]

    operations = [
        migrations.AddField(
            model_name="conversationshare",
            name="hidden_ids",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
