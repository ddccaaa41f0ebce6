"""A reply keeps why the model ended it (Message.finish_reason): a reply cut at the output limit
("length") is marked in the chat and can be continued.

Nullable with no default, as 0017: neither database rewrites chat_message. Replies stored before it
have none (the chat cannot tell which of them were cut). Backwards, the column goes.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("chat", "0017_reply_reasoning")]

    operations = [
        migrations.AddField(
            model_name="message", name="finish_reason", field=models.CharField(blank=True, max_length=32, null=True)
        ),
    ]
