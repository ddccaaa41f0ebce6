"""An import job can be a branch (Branch in new chat past fork_services.MAX_FORK_MESSAGES, written by the
import worker): its kind, and the chat it branches from (null once that chat is deleted).

The import job table holds only the jobs of this instance's uploads (small rows once ended: the payload is
dropped), so a column with a default, which SQLite adds by remaking the table, costs little. Backwards,
both columns go.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0023_optimizationrecord_registry_provider"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="importjob",
            name="kind",
            field=models.CharField(
                choices=[("upload", "Uploaded file"), ("branch", "Branch in new chat")], default="upload", max_length=16
            ),
        ),
        migrations.AddField(
            model_name="importjob",
            name="source_conversation",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="chat.conversation",
            ),
        ),
        migrations.AddConstraint(
            model_name="importjob",
            constraint=models.CheckConstraint(
                condition=models.Q(("kind__in", ["upload", "branch"])), name="importjob_kind_valid"
            ),
        ),
    ]
