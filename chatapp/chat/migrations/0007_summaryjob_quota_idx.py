from django.db import migrations, models


class Migration(migrations.Migration):
    """The daily summary quota's count (summary_selectors.summary_quota_used), asked on every turn,
    read one conversation's jobs since a time through an index: it scanned the whole jobs table on
    SQLite once ANALYZE found most jobs in one conversation."""

    dependencies = [
        ("chat", "0006_record_sent_orjson"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="summaryjob",
            index=models.Index(fields=["conversation", "created_at", "trigger", "status"], name="sumjob_quota_idx"),
        ),
    ]
