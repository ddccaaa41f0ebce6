"""Two changes of one release.

Users choose whether the model names their new chats (UserSettings.generate_titles, title_services),
once each (Conversation.title_requested): the chats made before are marked as named already, so that
their titles are not replaced on their next message.

API tokens are stored as digests (ApiToken), several a user, instead of DRF's Token (the key itself,
one a user). The tokens DRF's table holds are moved over as digests, so every key in use keeps
working, its expiry still counted from when it was made. Then DRF's app is taken out of the database:
its table (the keys themselves), its migration records, content types and permissions. Going back to
a release from before this one, its `migrate` makes that table again, empty: each user creates a new
token.
"""

import datetime as dt

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from chatapp.chat.token_models import HINT_CHARS, key_digest

LEGACY_APP = "authtoken"
LEGACY_TABLE = "authtoken_token"
BATCH = 2000


def _aware(value):
    """A `created` read by plain SQL: SQLite gives naive UTC (or text), PostgreSQL an aware datetime."""
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def drf_tokens_move(apps, schema_editor):
    connection = schema_editor.connection
    if LEGACY_TABLE in connection.introspection.table_names():
        target = apps.get_model("chat", "ApiToken")._meta.db_table
        insert = (
            f"INSERT INTO {target} (user_id, digest, hint, name, made_in, created_at) "  # noqa: S608 (our names)
            "VALUES (%s, %s, %s, %s, %s, %s)"
        )
        with connection.cursor() as reader, connection.cursor() as writer:
            reader.execute(f'SELECT "key", user_id, created FROM {LEGACY_TABLE}')  # noqa: S608
            while rows := reader.fetchmany(BATCH):
                # Made in Settings, for what a token is worth: an API sign-in never replaces these.
                writer.executemany(insert, [
                    (user_id, key_digest(key), key[:HINT_CHARS], "Created before tokens were hashed", "settings",
                     connection.ops.adapt_datetimefield_value(_aware(created)))
                    for key, user_id, created in rows
                ])
        schema_editor.execute(f"DROP TABLE {LEGACY_TABLE}")
    # Recorded as not applied, so that an older release's `migrate` makes the table again.
    schema_editor.execute("DELETE FROM django_migrations WHERE app = %s", [LEGACY_APP])
    # Its permissions (the admin's picker) go with their content type.
    apps.get_model("contenttypes", "ContentType").objects.filter(app_label=LEGACY_APP).delete()


def chats_before_marked_named(apps, schema_editor):
    apps.get_model("chat", "Conversation").objects.update(title_requested=True)


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0015_search_fold_stroked_letters'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('auth', '0012_alter_user_first_name_max_length'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ApiToken',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('digest', models.CharField(max_length=64)),
                ('hint', models.CharField(max_length=8)),
                ('name', models.CharField(max_length=80)),
                ('made_in', models.CharField(choices=[('settings', 'Settings'), ('api', 'API sign-in')], max_length=8)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'indexes': [models.Index(fields=['user', '-created_at'], name='apitoken_user_created_idx')],
                'constraints': [
                    models.UniqueConstraint(fields=('digest',), name='apitoken_digest_uniq'),
                    models.CheckConstraint(condition=models.Q(('made_in__in', ['settings', 'api'])), name='apitoken_made_in_valid'),
                ],
            },
        ),
        # Backwards the keys are gone: only their digests were kept.
        migrations.RunPython(drf_tokens_move, migrations.RunPython.noop),
        migrations.AddField(
            model_name='usersettings',
            name='generate_titles',
            field=models.BooleanField(default=True),
        ),
        migrations.AddField(
            model_name='conversation',
            name='title_requested',
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(chats_before_marked_named, migrations.RunPython.noop),
    ]
