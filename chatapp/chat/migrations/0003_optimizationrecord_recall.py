# Recall in the optimization record: the block's tokens and how many old messages it quoted
# (the block's details live in its `sent` entry).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("chat", "0002_message_search"),
    ]

    operations = [
        migrations.AddField(
            model_name="optimizationrecord",
            name="recall_tokens",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="optimizationrecord",
            name="recall_message_count",
            field=models.PositiveIntegerField(default=0),
        ),
    ]
