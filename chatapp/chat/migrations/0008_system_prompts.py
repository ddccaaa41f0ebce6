# Issue 13: the user's custom instructions and a system prompt per conversation.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0007_one_send_at_a_time'),
    ]

    operations = [
        migrations.AddField(
            model_name='usersettings',
            name='custom_instructions',
            field=models.TextField(blank=True, default=''),
        ),
        migrations.AddField(
            model_name='conversation',
            name='system_prompt',
            field=models.TextField(blank=True, default=''),
        ),
    ]
