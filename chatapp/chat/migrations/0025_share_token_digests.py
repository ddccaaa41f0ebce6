"""A share link's token is stored as its digest (ConversationShare.digest, token_models.key_digest), as
an API token's key is: a copy of the database then opens no link.

The links made before keep working: their stored token is replaced by its digest in place, and the
public page looks a token up by its digest. The index that found a snapshot's live link to hand it
out again goes: a link can no longer be shown again, so each share makes a new one. Backwards, the
column is named `token` again and keeps the digests: the links made before no longer open (a digest
cannot be turned back into its token).
"""

from django.db import migrations, models

from chatapp.chat.token_models import key_digest

BATCH = 500


def digest_tokens(apps, schema_editor):
    Share = apps.get_model("chat", "ConversationShare")
    # Every row holds a token here (the column was renamed just before, in the same transaction).
    pending = list(Share.objects.order_by("pk").values_list("pk", "digest"))
    for start in range(0, len(pending), BATCH):
        Share.objects.bulk_update(
            [Share(pk=pk, digest=key_digest(token)) for pk, token in pending[start : start + BATCH]], ["digest"]
        )


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0024_importjob_branch"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="conversationshare", name="share_token_uniq"),
        migrations.RemoveIndex(model_name="conversationshare", name="share_conv_live_idx"),
        migrations.RenameField(model_name="conversationshare", old_name="token", new_name="digest"),
        migrations.RunPython(digest_tokens, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="conversationshare",
            constraint=models.UniqueConstraint(fields=("digest",), name="share_digest_uniq"),
        ),
    ]
