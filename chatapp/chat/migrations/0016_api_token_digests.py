"""API tokens are stored as digests (ApiToken), several a user, instead of DRF's Token (the key itself,
one a user). The tokens DRF's table holds are moved over as digests, so every key in use keeps working,
and the keys are deleted from that table. The table itself is left, empty: DRF's app is no longer
installed, and code from before this migration, run again, finds no token there instead of failing.
"""

import datetime as dt

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from chatapp.chat.token_models import HINT_CHARS, key_digest

LEGACY_TABLE = "authtoken_token"


def _aware(value):
    """A `created` read by plain SQL: SQLite gives naive UTC (or text), PostgreSQL an aware datetime."""
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def drf_tokens_move(apps, schema_editor):
    connection = schema_editor.connection
    if LEGACY_TABLE not in connection.introspection.table_names():
        return  # a database made after DRF's tokens were given up
    ApiToken = apps.get_model("chat", "ApiToken")
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT "key", user_id, created FROM {LEGACY_TABLE}')  # noqa: S608 (a fixed name)
        rows = cursor.fetchall()
    moved = [
        ApiToken(user_id=user_id, digest=key_digest(key), hint=key[:HINT_CHARS], name="Created before tokens were hashed")
        for key, user_id, _created in rows
    ]
    ApiToken.objects.bulk_create(moved)
    # created_at is auto_now_add, which bulk_create fills in: the expiry counts from the old token's start.
    for key, _user_id, created in rows:
        ApiToken.objects.filter(digest=key_digest(key)).update(created_at=_aware(created))
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {LEGACY_TABLE}")  # noqa: S608


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0015_search_fold_stroked_letters'),
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
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'indexes': [models.Index(fields=['user', '-created_at'], name='apitoken_user_created_idx')],
                'constraints': [models.UniqueConstraint(fields=('digest',), name='apitoken_digest_uniq')],
            },
        ),
        # Backwards the keys are gone: only their digests were kept.
        migrations.RunPython(drf_tokens_move, migrations.RunPython.noop),
    ]
