# Issue 13: read-only share links (ConversationShare), revocable snapshots of a conversation.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0008_system_prompts'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ConversationShare',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('token', models.CharField(max_length=64)),
                ('title', models.CharField(max_length=200)),
                ('through_message_id', models.BigIntegerField()),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('revoked_at', models.DateTimeField(blank=True, null=True)),
                ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='shares', to='chat.conversation')),
                ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'indexes': [models.Index(condition=models.Q(('revoked_at__isnull', True)), fields=['owner', '-created_at'], name='share_owner_live_idx'), models.Index(condition=models.Q(('revoked_at__isnull', True)), fields=['conversation', 'through_message_id'], name='share_conv_live_idx')],
                'constraints': [models.UniqueConstraint(fields=('token',), name='share_token_uniq')],
            },
        ),
    ]
