"""Chat folders: the folders' table (a name unique per owner whatever its case) and a chat's folder
(Conversation.folder: null, in none).

The column is nullable with no default, as pinned_at (0019): neither database rewrites chat_conversation,
and every chat from before is in no folder. The partial index holds only the rows in a folder, which
the sidebar reads folder by folder. Backwards, the index, the column and the table go (the chats stay).
"""

import django.db.models.deletion
import django.db.models.functions.text
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0025_share_token_digests"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Folder",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=80)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "owner",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="chat_folders",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
        ),
        migrations.AddField(
            model_name="conversation",
            name="folder",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="conversations",
                to="chat.folder",
            ),
        ),
        migrations.AddIndex(
            model_name="conversation",
            index=models.Index(
                condition=models.Q(("folder__isnull", False)),
                fields=["folder", "-updated_at"],
                name="conv_folder_updated_idx",
            ),
        ),
        migrations.AddConstraint(
            model_name="folder",
            constraint=models.UniqueConstraint(
                models.F("owner"), django.db.models.functions.text.Lower("name"), name="folder_owner_name_ci_uniq"
            ),
        ),
        migrations.AddConstraint(
            model_name="folder",
            constraint=models.CheckConstraint(
                condition=models.Q(("name", ""), _negated=True), name="folder_name_not_blank"
            ),
        ),
    ]
