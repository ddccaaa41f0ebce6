"""The totals row keeps the newest counted record's prompts' fingerprint (`last_prompt_hash`), so a
turn's end compares with it instead of reading the two newest records; rows already there take it
from that record's stats."""

from django.db import migrations, models

BATCH = 500


def last_prompt_hash_fill(apps, schema_editor):
    Totals = apps.get_model("dashboard", "DashboardTotals")
    Record = apps.get_model("chat", "OptimizationRecord")
    rows = Totals.objects.filter(last_record_id__isnull=False).only("pk", "last_record_id").order_by("pk")
    batch: list = []
    for totals in rows.iterator(chunk_size=BATCH):
        batch.append(totals)
        if len(batch) == BATCH:
            _fill(Totals, Record, batch)
            batch = []
    _fill(Totals, Record, batch)


def _fill(Totals, Record, batch: list) -> None:
    stats = dict(Record.objects.filter(pk__in=[t.last_record_id for t in batch]).values_list("pk", "stats"))
    changed = []
    for totals in batch:
        fingerprint = (stats.get(totals.last_record_id) or {}).get("system_prompt_hash") or ""
        if fingerprint:
            totals.last_prompt_hash = fingerprint
            changed.append(totals)
    Totals.objects.bulk_update(changed, ["last_prompt_hash"])


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0001_squashed_0001"),
        ("chat", "0012_stopped_replies_live"),
    ]

    operations = [
        migrations.AddField(
            model_name="dashboardtotals",
            name="last_prompt_hash",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.RunPython(last_prompt_hash_fill, migrations.RunPython.noop),
    ]
