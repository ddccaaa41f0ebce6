"""chatapp.sqlite3: SQLite connections that requests close are kept for the next ones, and nothing
a request did to one reaches the next (these wrappers use a file of their own, on any test database)."""

import os
import sqlite3
import time

import pytest
from django.db import OperationalError, connections, transaction


@pytest.fixture
def open_wrapper(tmp_path, django_db_blocker):
    made = []

    def make(*, pool_size: int = 2, name: str = "pooled.sqlite3", **options):
        alias = f"pool_test_{len(made)}"
        own = {"ENGINE": "chatapp.sqlite3", "NAME": str(tmp_path / name),
               "OPTIONS": {"pool_size": pool_size, **options}}
        connections.settings[alias] = connections.configure_settings(
            {"default": connections.settings["default"], alias: own})[alias]
        made.append(alias)
        return connections[alias]

    with django_db_blocker.unblock():
        yield make
        for alias in made:
            connections[alias].close()
            del connections[alias]
            del connections.settings[alias]


def _closed(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return True
    return False


def test_a_closed_connection_serves_the_next_request(open_wrapper):
    db = open_wrapper()
    with db.cursor() as cursor:
        cursor.execute("CREATE TABLE t (x INTEGER)")
        cursor.execute("INSERT INTO t VALUES (1)")
    first = db.connection
    db.close()
    assert db.connection is None and not _closed(first)
    with db.cursor() as cursor:
        cursor.execute("SELECT x FROM t")
        assert cursor.fetchall() == [(1,)]
    assert db.connection is first


def test_the_pool_keeps_at_most_pool_size_idle_connections(open_wrapper):
    wrappers = [open_wrapper(pool_size=2) for _ in range(3)]
    conns = []
    for w in wrappers:
        w.ensure_connection()
        conns.append(w.connection)
    for w in wrappers:
        w.close()
    assert [_closed(c) for c in conns] == [False, False, True]


def test_pool_size_zero_keeps_none(open_wrapper):
    db = open_wrapper(pool_size=0)
    db.ensure_connection()
    first = db.connection
    db.close()
    assert _closed(first)
    db.ensure_connection()
    assert db.connection is not first


def test_an_open_transaction_is_rolled_back_before_the_connection_is_kept(open_wrapper):
    db = open_wrapper()
    with db.cursor() as cursor:
        cursor.execute("CREATE TABLE t (x INTEGER)")
    db.connection.execute("BEGIN")
    db.connection.execute("INSERT INTO t VALUES (1)")
    first = db.connection
    db.close()
    with db.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM t")
        assert cursor.fetchone() == (0,)
    assert db.connection is first and not first.in_transaction


def test_foreign_keys_are_switched_back_on(open_wrapper):
    db = open_wrapper()
    with db.cursor() as cursor:
        cursor.execute("PRAGMA foreign_keys = OFF")
    db.close()
    with db.cursor() as cursor:
        cursor.execute("PRAGMA foreign_keys")
        assert cursor.fetchone() == (1,)


def test_a_kept_connection_runs_its_prepared_statements_without_preparing_them_again(open_wrapper):
    # Setting a flag PRAGMA expires every prepared statement of the connection: the next request
    # parsed each statement it ran a second time. SQLite's sqlite_stmt table (the statements the
    # connection holds prepared, Python's statement cache among them) counts those re-preparations.
    db = open_wrapper()
    db.ensure_connection()
    db.close()  # the file's first statistics refresh, which prepares everything again once, done
    query = "SELECT x FROM t WHERE x = %s"
    with db.cursor() as cursor:
        cursor.execute("CREATE TABLE t (x INTEGER)")
        cursor.execute(query, [1])
    db.close()
    with db.cursor() as cursor:
        cursor.execute(query, [2])
        try:
            cursor.execute("SELECT reprep FROM sqlite_stmt WHERE sql = 'SELECT x FROM t WHERE x = ?'")
        except OperationalError:  # a SQLite built without SQLITE_ENABLE_STMTVTAB
            pytest.skip("this SQLite has no sqlite_stmt table")
        assert cursor.fetchall() == [(0,)]


def test_a_connection_closed_inside_an_atomic_block_is_not_kept(open_wrapper):
    db = open_wrapper()
    with db.cursor() as cursor:
        cursor.execute("CREATE TABLE t (x INTEGER)")
    with transaction.atomic(using=db.alias):
        with db.cursor() as cursor:
            cursor.execute("INSERT INTO t VALUES (1)")
        inside = db.connection
        db.close()
    assert _closed(inside)
    with db.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM t")
        assert cursor.fetchone() == (0,)
    assert db.connection is not inside


def test_a_database_file_made_again_is_not_read_through_an_old_connection(open_wrapper, tmp_path):
    db = open_wrapper()
    with db.cursor() as cursor:
        cursor.execute("CREATE TABLE old (x INTEGER)")
    first = db.connection
    db.close()
    for suffix in ("", "-wal", "-shm"):
        path = tmp_path / f"pooled.sqlite3{suffix}"
        if path.exists():
            path.unlink()
    fresh = sqlite3.connect(tmp_path / "pooled.sqlite3")
    fresh.execute("CREATE TABLE new (x INTEGER)")
    fresh.commit()
    fresh.close()
    with db.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        assert cursor.fetchall() == [("new",)]
    assert db.connection is not first and _closed(first)


def test_connections_do_not_cross_a_fork(open_wrapper, monkeypatch):
    db = open_wrapper()
    db.ensure_connection()
    parent = db.connection
    parent_pid = os.getpid()
    # The child: a connection opened before the fork is closed, not kept, and none is taken from
    # the parent's idle ones.
    monkeypatch.setattr(os, "getpid", lambda: parent_pid + 1)
    db.close()
    assert _closed(parent)
    other = open_wrapper()
    other.ensure_connection()
    kept = other.connection
    monkeypatch.setattr(os, "getpid", lambda: parent_pid)
    other.close()  # opened by the "child": closed in the parent
    assert _closed(kept)


def test_the_product_uses_it_on_sqlite(settings):
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL has psycopg's pool")
    assert settings.DATABASES["default"]["ENGINE"] == "chatapp.sqlite3"
    assert connection.settings_dict["OPTIONS"]["pool_size"] >= 1


def test_statements_are_rewritten_as_django_rewrites_them(open_wrapper):
    from django.db.backends.sqlite3.base import SQLiteCursorWrapper as DjangoCursor

    from chatapp.sqlite3.base import SQLiteCursorWrapper

    raw = sqlite3.connect(":memory:")
    ours, django = raw.cursor(factory=SQLiteCursorWrapper), raw.cursor(factory=DjangoCursor)
    for query in ("SELECT %s", "SELECT %s, '%%s' LIKE %s", "SELECT '100%%'", "SELECT 1"):
        for _ in range(2):  # the second time from the cache
            assert ours.convert_query(query) == django.convert_query(query)
    named = "SELECT %(a)s, %(b)s"
    assert ours.convert_query(named, param_names=["a", "b"]) == django.convert_query(named, param_names=["a", "b"])
    # and the wrapper's connections use it, with the values bound where the placeholders were
    with open_wrapper().cursor() as cursor:
        assert isinstance(cursor.cursor, SQLiteCursorWrapper)
        cursor.execute("SELECT %s || '%%', %s", ["a", 2])
        assert cursor.fetchone() == ("a%", 2)
    raw.close()


# The shape of chat_message's request-path indexes: the active path's partial index, and the pins'
# partial index on the same columns (context._context_rows_query reads the static layer's pins).
_PINS = "SELECT id FROM m WHERE kind = 'chat' AND NOT superseded AND conv = %s AND id < %s AND pinned"


def _messages_table(db, *, rows: int) -> None:
    with db.cursor() as cursor:
        cursor.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, conv INTEGER, kind TEXT, superseded BOOL, "
                       "pinned BOOL)")
        # In the product's order (migrations made the pins' index first): with nothing to tell the two
        # apart, SQLite takes the newer one.
        cursor.execute("CREATE INDEX m_pinned ON m (conv, id) WHERE pinned")
        cursor.execute("CREATE INDEX m_path ON m (conv, id) WHERE kind = 'chat' AND NOT superseded")
        cursor.executemany("INSERT INTO m (conv, kind, superseded, pinned) VALUES (%s, 'chat', 0, %s)",
                           [(1 + i % 3, i % 500 == 0) for i in range(rows)])


def _plan(db, sql: str, params: list) -> str:
    with db.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return " | ".join(row[-1] for row in cursor.fetchall())


def _statistics(db) -> list[str]:
    with db.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE name = 'sqlite_stat1'")
        if not cursor.fetchall():
            return []
        cursor.execute("SELECT idx FROM sqlite_stat1 WHERE tbl = 'm' AND idx IS NOT NULL ORDER BY idx")
        return [idx for idx, in cursor.fetchall()]


def test_a_connection_given_back_leaves_the_planner_statistics(open_wrapper):
    db = open_wrapper()
    _messages_table(db, rows=3000)
    # Without statistics SQLite reads the pins through the active path's index: every row below `id`.
    assert "m_path" in _plan(db, _PINS, [1, 2500])
    assert _statistics(db) == []
    db.close()
    assert _statistics(db) == ["m_path", "m_pinned"]
    assert "USING INDEX m_pinned" in _plan(db, _PINS, [1, 2500])


def test_statistics_are_refreshed_at_most_once_an_interval(open_wrapper, monkeypatch):
    from chatapp.sqlite3 import base

    now = [1_000.0]
    monkeypatch.setattr(base.time, "monotonic", lambda: now[0])
    db = open_wrapper(pool_size=0)  # each request opens the file again, and so reads its statistics again
    _messages_table(db, rows=1000)
    _plan(db, _PINS, [1, 900])
    db.close()
    assert _statistics(db) == ["m_path", "m_pinned"]
    with db.cursor() as cursor:
        cursor.execute("DELETE FROM sqlite_stat1")
    db.close()

    def request_ends() -> list[str]:
        _plan(db, _PINS, [1, 900])
        db.close()
        return _statistics(db)

    now[0] += base.OPTIMIZE_EVERY - 1
    assert request_ends() == []
    now[0] += 2
    assert request_ends() == ["m_path", "m_pinned"]


def test_a_locked_database_does_not_fail_the_request_that_ends(open_wrapper, tmp_path):
    # The product's journal and wait for a writer (settings: WAL, 20 s).
    db = open_wrapper(name="locked.sqlite3", timeout=20, init_command="PRAGMA journal_mode=WAL")
    _messages_table(db, rows=500)
    _plan(db, _PINS, [1, 400])
    writer = sqlite3.connect(tmp_path / "locked.sqlite3", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        db.close()  # its ANALYZE cannot write: skipped at once, tried again next interval
        waited = time.monotonic() - started
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert _statistics(db) == []
    assert waited < 5, "waited for the writer as long as a statement would"


def test_a_child_process_leaves_a_connection_from_before_the_fork_alone(open_wrapper, monkeypatch):
    db = open_wrapper()
    _messages_table(db, rows=500)
    _plan(db, _PINS, [1, 400])
    parent_pid = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: parent_pid + 1)
    db.close()  # in the "child": no statistics written through the parent's connection
    monkeypatch.setattr(os, "getpid", lambda: parent_pid)
    assert _statistics(db) == []
