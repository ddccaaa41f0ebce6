"""Imports recognise a conversation imported before (ImportedConversation: the owner and the fingerprint of
what the file held) and count it apart (ImportJob.duplicates) instead of storing it twice.

Conversations imported before this migration have no fingerprint: a file imported again imports them
once more, and from then on they are recognised.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0013_summary_skipped_pins'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ImportedConversation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('fingerprint', models.CharField(max_length=64)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.AddField(
            model_name='importjob',
            name='duplicates',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddConstraint(
            model_name='importjob',
            constraint=models.CheckConstraint(condition=models.Q(('duplicates__lte', models.F('done'))), name='importjob_duplicates_within_done'),
        ),
        migrations.AddField(
            model_name='importedconversation',
            name='conversation',
            field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='chat.conversation'),
        ),
        migrations.AddField(
            model_name='importedconversation',
            name='owner',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddConstraint(
            model_name='importedconversation',
            constraint=models.UniqueConstraint(fields=('owner', 'fingerprint'), name='importedconv_owner_fp_uniq'),
        ),
    ]
