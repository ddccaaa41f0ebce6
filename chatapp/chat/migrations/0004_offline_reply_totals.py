"""The offline demo model's replies counted apart in each conversation's live totals, so that a request
to a real model (which never sends them) sees the history it packs. The totals of conversations that
already hold such replies are filled from their messages (the same rule as context.offline_reply_q
and live_chat_q); going back drops the columns.
"""

from django.db import migrations, models
from django.db.models import Count, Sum

OFFLINE_MODEL = "offline-demo"  # chatapp.providers.llm.OFFLINE_MODEL, as it was when this was written


def offline_totals_fill(apps, schema_editor):
    Conversation = apps.get_model("chat", "Conversation")
    Message = apps.get_model("chat", "Message")
    rows = (
        Message.objects.filter(role="assistant", model=OFFLINE_MODEL, kind="chat", status="complete", superseded=False)
        .values("conversation_id")
        .annotate(n=Count("id"), chars=Sum("char_count"), tokens=Sum("token_count"))
        .order_by()
    )
    for row in rows.iterator():
        Conversation.objects.filter(pk=row["conversation_id"]).update(
            offline_reply_count=row["n"], offline_reply_chars=row["chars"] or 0, offline_reply_tokens=row["tokens"] or 0
        )


class Migration(migrations.Migration):
    dependencies = [("chat", "0003_search_hidden_branches")]

    operations = [
        migrations.AddField(
            model_name="conversation", name="offline_reply_count", field=models.PositiveIntegerField(default=0)
        ),
        migrations.AddField(
            model_name="conversation", name="offline_reply_chars", field=models.PositiveBigIntegerField(default=0)
        ),
        migrations.AddField(
            model_name="conversation", name="offline_reply_tokens", field=models.PositiveBigIntegerField(default=0)
        ),
        migrations.RunPython(offline_totals_fill, migrations.RunPython.noop),
    ]
