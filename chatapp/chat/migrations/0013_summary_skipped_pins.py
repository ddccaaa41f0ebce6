"""A summary lists the pinned messages its span passed over (Message.skipped_pin_ids), so that one
unpinned later is still sent as itself until a summary folds it in, instead of being left out of both.

The summaries already stored did not say which pins they passed over: each lists every message pinned
now at or below the last one it covers. A message pinned after such a summary was written is then
listed too, though the summary holds it: unpinned, it is sent as itself until the next summary, which
costs its tokens for a while and loses nothing; leaving it out could lose one the summary never read.
Backwards, the column goes.
"""

from collections import defaultdict

from django.db import migrations, models


def _list_pins(apps, schema_editor) -> None:
    Message = apps.get_model("chat", "Message")
    pins: defaultdict[int, list[int]] = defaultdict(list)
    pinned = (Message.objects.filter(kind="chat", pinned=True).exclude(role="system")
              .order_by("id").values_list("conversation_id", "id"))
    for conversation_id, pk in pinned.iterator(chunk_size=1000):
        pins[conversation_id].append(pk)
    summaries = (Message.objects.filter(kind="summary", conversation_id__in=list(pins), covers_through_id__isnull=False)
                 .values_list("id", "conversation_id", "covers_through_id"))
    for pk, conversation_id, through in summaries.iterator(chunk_size=1000):
        skipped = [p for p in pins[conversation_id] if p <= through]
        if skipped:
            Message.objects.filter(pk=pk).update(skipped_pin_ids=skipped)


class Migration(migrations.Migration):
    dependencies = [("chat", "0012_stopped_replies_live")]

    operations = [
        # Nullable, no default: both databases add the column without rewriting the table (SQLite would
        # rebuild chat_message for a default, and with it the full-text tables' triggers).
        migrations.AddField(model_name="message", name="skipped_pin_ids", field=models.JSONField(blank=True, null=True)),
        migrations.RunPython(_list_pins, migrations.RunPython.noop),
    ]
