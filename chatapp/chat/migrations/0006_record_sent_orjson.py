import chatapp.chat.jsontext
from django.db import migrations, models


class Migration(migrations.Migration):
    """The record's `sent` list is written by orjson (chatapp.chat.jsontext). Only Python's side
    changes: the column does not, and SQLite would otherwise copy the whole records table over."""

    dependencies = [
        ("chat", "0005_conversation_token_counts_mixed"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="optimizationrecord",
                    name="sent",
                    field=models.JSONField(default=list, encoder=chatapp.chat.jsontext.FastJSONEncoder),
                ),
            ],
        ),
    ]
