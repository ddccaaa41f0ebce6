"""A record keeps the registry provider its endpoint's host named (OptimizationRecord.registry_provider), so
that its model is priced as its window was found.

Nullable with no default: neither database rewrites chat_optimizationrecord (SQLite remakes a table for a
column with a default; the records are the largest table after the messages). Records made before
keep none: priced by the model's name, as they were. Backwards, the column goes.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0022_share_hidden_ids'),
    ]

    operations = [
        migrations.AddField(
            model_name='optimizationrecord',
            name='registry_provider',
            field=models.CharField(blank=True, max_length=32, null=True),
        ),
    ]
