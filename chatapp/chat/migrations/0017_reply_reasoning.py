"""A reply keeps a reasoning model's thinking apart from its answer (Message.reasoning).

Nullable with no default: both databases add the column without rewriting chat_message (SQLite would
rebuild the table for a default, and with it the full-text tables' triggers). Replies stored before it
have none; a reply whose content opens with an inline <think> block keeps it in its content. Backwards,
the column goes.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("chat", "0016_api_tokens_and_titles")]

    operations = [
        migrations.AddField(model_name="message", name="reasoning", field=models.TextField(blank=True, null=True)),
    ]
