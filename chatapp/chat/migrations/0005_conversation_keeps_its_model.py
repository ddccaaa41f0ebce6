"""A conversation keeps its model: chats that followed the owner's default config are fixed to it.

Before, a chat without its own config followed the default at each request, so a chat begun with
the offline demo model moved to the first real model the user added. Existing chats keep what they
would use today: the owner's default config, or the offline model for owners with no config.
"""

from django.db import migrations, models


def fix_models(apps, schema_editor):
    Conversation = apps.get_model("chat", "Conversation")
    LLMConfig = apps.get_model("chat", "LLMConfig")
    for owner_id, config_id in LLMConfig.objects.filter(is_default=True).values_list("owner_id", "pk"):
        Conversation.objects.filter(owner_id=owner_id, llm_config__isnull=True).update(llm_config_id=config_id)
    owners_with_configs = LLMConfig.objects.values("owner_id")
    Conversation.objects.filter(llm_config__isnull=True).exclude(owner_id__in=owners_with_configs).update(
        offline=True
    )


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0004_recall_lexemes"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="offline",
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(fix_models, migrations.RunPython.noop),
    ]
