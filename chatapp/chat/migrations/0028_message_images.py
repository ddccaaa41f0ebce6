"""Images sent with a user's message (image_models.MessageImage): a new table, and Conversation.has_images
(a column with a constant default: no table rewrite on PostgreSQL 11+ or SQLite; no chat held an image
before it). Backwards, both go (the messages' text stays)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0027_account_deletion"),
    ]

    operations = [
        migrations.CreateModel(
            name="MessageImage",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("mime", models.CharField(max_length=32)),
                ("width", models.PositiveIntegerField()),
                ("height", models.PositiveIntegerField()),
                ("byte_count", models.PositiveIntegerField()),
                ("name", models.CharField(blank=True, default="", max_length=200)),
                ("data", models.BinaryField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "message",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="images", to="chat.message"
                    ),
                ),
            ],
            options={
                "ordering": ["id"],
            },
        ),
        migrations.AddField(
            model_name="conversation",
            name="has_images",
            field=models.BooleanField(default=False),
        ),
    ]
