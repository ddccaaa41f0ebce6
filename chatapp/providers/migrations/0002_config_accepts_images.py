"""A config's word on images (LLMConfig.accepts_images): nullable with no default, so no table is
rewritten, and every config from before follows the model registry's word (null)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("providers", "0001_squashed_0001"),
    ]

    operations = [
        migrations.AddField(
            model_name="llmconfig",
            name="accepts_images",
            field=models.BooleanField(blank=True, null=True),
        ),
    ]
