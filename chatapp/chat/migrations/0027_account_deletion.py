"""Accounts being deleted (AccountDeletion): a user's deletion turns the account off in the request
and a worker deletes its data in steps (account_purge); this row says one is under way until the user
row goes with it. A new table only: nothing existing is rewritten."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0026_folders"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="AccountDeletion",
            fields=[
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                ("requested_at", models.DateTimeField(auto_now_add=True)),
                ("touched_at", models.DateTimeField()),
            ],
        ),
    ]
