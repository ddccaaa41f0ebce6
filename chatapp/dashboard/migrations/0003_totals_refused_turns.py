"""The totals row counts the requests the endpoint refused (`refused_turns`: both costs stored as zero,
tokens sent), so that a chat none of whose requests was billed shows no money saving known instead
of minus what its summaries cost; rows already there count them from their records (one read of
the zero-cost ones)."""

from collections import Counter

from django.db import migrations, models

import optimizer


def refused_turns_fill(apps, schema_editor):
    """As totals.record_refused counts them: both costs zero, tokens sent, and a full history its
    model's price gives a cost (a free model's turns, or a few tokens on a cheap one, were billed at
    nothing)."""
    Totals = apps.get_model("dashboard", "DashboardTotals")
    Record = apps.get_model("chat", "OptimizationRecord")
    candidates = (
        Record.objects.filter(tokens_sent__gt=0, cost_full_usd=0, cost_sent_usd=0)
        .values_list("conversation_id", "model", "tokens_full").order_by()
    )
    refused: Counter[int] = Counter()
    for conversation_id, model, tokens_full in candidates.iterator(chunk_size=2000):
        listed = optimizer.cost_usd(model, prompt_tokens=tokens_full)
        if listed is not None and round(listed, 6) > 0:
            refused[conversation_id] += 1
    for conversation_id, n in refused.items():
        Totals.objects.filter(conversation_id=conversation_id).update(refused_turns=n)


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0002_totals_last_prompt_hash"),
    ]

    operations = [
        migrations.AddField(
            model_name="dashboardtotals",
            name="refused_turns",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(refused_turns_fill, migrations.RunPython.noop),
    ]
