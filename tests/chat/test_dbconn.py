"""dbconn: a short piece of database work gives its connection back where there is something to give
it back to (PostgreSQL's pool), and keeps it on SQLite, where closing only reopens the file."""

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from chatapp.chat.dbconn import db_short
from chatapp.chat.models import Conversation

pytestmark = pytest.mark.django_db(transaction=True)


def _count() -> int:
    return Conversation.objects.count()


def _after_a_short_piece() -> object | None:
    """The thread's driver connection after a db_short call has run (thread-sensitive: in this thread)."""
    async_to_sync(db_short(_count))()
    return connection.connection


def test_a_short_piece_returns_its_connection_to_the_pool_on_postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("the pool is PostgreSQL's")
    assert _after_a_short_piece() is None


def test_a_short_piece_keeps_its_sqlite_connection():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    _count()
    opened = connection.connection
    assert opened is not None
    assert _after_a_short_piece() is opened
