"""chat.0016: the chats made before are marked as named, so the model does not rename them; and the keys
DRF's token table held are moved over as digests (ApiToken), so every script's key keeps working, its
expiry still counted from when it was made; DRF's app then leaves the database (its table, migration
records, content types and permissions), so no key is left there."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from chatapp.chat.models import Conversation
from chatapp.chat.token_models import ApiToken
from tests.support.migrations import migrated_back

BEFORE = ("chat", "0015_search_fold_stroked_letters")
AFTER = ("chat", "0016_api_tokens_and_titles")
LEGACY = "authtoken_token"  # DRF's table, as its app made it (the app is no longer installed)


def _works(key: str) -> bool:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client.get("/api/conversations/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_drf_tokens_are_moved_as_digests_and_keep_working(user, other_user):
    stamp = "timestamp with time zone" if connection.vendor == "postgresql" else "datetime"
    made = timezone.now() - timedelta(days=10)
    keys = {user.pk: "0a1b2c3d4e5f" + "7" * 28, other_user.pk: "f" * 40}
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE TABLE {LEGACY} ("key" varchar(40) PRIMARY KEY, created {stamp} NOT NULL, '
                       "user_id integer NOT NULL UNIQUE)")
    try:
        with migrated_back(BEFORE):
            token_type = ContentType.objects.create(app_label="authtoken", model="token")
            Permission.objects.create(content_type=token_type, codename="view_token", name="Can view Token")
            with connection.cursor() as cursor:
                cursor.execute("INSERT INTO django_migrations (app, name, applied) VALUES (%s, %s, %s)",
                               ["authtoken", "0001_initial", made])
                for user_id, key in keys.items():
                    cursor.execute(f'INSERT INTO {LEGACY} ("key", created, user_id) VALUES (%s, %s, %s)',  # noqa: S608
                                   [key, made if connection.vendor == "postgresql" else made.replace(tzinfo=None),
                                    user_id])
            call_command("migrate", *AFTER, verbosity=0)

        assert all(_works(key) for key in keys.values())
        moved = ApiToken.objects.get(user=user)
        assert moved.hint == "0a1b2c" and abs(moved.created_at - made) < timedelta(seconds=1)
        assert moved.made_in == ApiToken.MadeIn.SETTINGS  # an API sign-in never replaces it
        assert ApiToken.objects.filter(created_at__lt=timezone.now() - timedelta(days=9)).count() == 2
        assert LEGACY not in connection.introspection.table_names()  # the keys themselves are gone
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM django_migrations WHERE app = %s", ["authtoken"])
            assert cursor.fetchone()[0] == 0  # an older release's migrate makes its table again
            cursor.execute(f"SELECT * FROM {ApiToken._meta.db_table}")  # noqa: S608
            stored = " ".join(str(value) for row in cursor.fetchall() for value in row)
        assert not any(key in stored for key in keys.values())
        assert not ContentType.objects.filter(app_label="authtoken").exists()
        assert not Permission.objects.filter(codename="view_token").exists()
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {LEGACY}")


@pytest.mark.django_db(transaction=True)
def test_a_database_without_drfs_table_migrates_with_no_token(user):
    with migrated_back(BEFORE):
        call_command("migrate", *AFTER, verbosity=0)
    assert not ApiToken.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_chats_made_before_are_not_named_again_by_the_model(user):
    with migrated_back(BEFORE) as old:
        before = old.get_model("chat", "Conversation").objects.create(owner_id=user.pk, title="hello there").pk
        call_command("migrate", *AFTER, verbosity=0)

    assert Conversation.objects.get(pk=before).title_requested is True
    assert Conversation.objects.create(owner=user).title_requested is False
