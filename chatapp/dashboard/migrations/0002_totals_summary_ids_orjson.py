import chatapp.chat.jsontext
from django.db import migrations, models


class Migration(migrations.Migration):
    """The totals' `summary_ids` are read and written by orjson (chatapp.chat.jsontext). Only Python's
    side changes: the column does not, and SQLite would otherwise copy the table over."""

    dependencies = [
        ("dashboard", "0001_squashed_0001"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="dashboardtotals",
                    name="summary_ids",
                    field=models.JSONField(
                        decoder=chatapp.chat.jsontext.FastJSONDecoder,
                        default=list,
                        encoder=chatapp.chat.jsontext.FastJSONEncoder,
                    ),
                ),
            ],
        ),
    ]
