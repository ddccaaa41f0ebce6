"""Django's SQLite backend, with the connections a request closes kept open for the next one.

Django opens a SQLite connection per request under ASGI (each request's synchronous code runs in a
thread of its own, so persistent connections are not reused) and closes it when the request ends.
Opening one is not free: the file is opened, some forty SQL functions are registered and the
PRAGMAs of settings.DATABASES run, about 0.7 ms of a chat turn's CPU (bench/turn_cpu.py's profile).
PostgreSQL has psycopg's pool for the same reason; this is the smallest pool that serves SQLite:
a closed connection goes back to a list, and the next one opened takes it from there.

What a kept connection could carry over is undone on the way back: an open transaction is rolled
back, foreign keys are switched back on. It is not kept when it was closed inside an atomic block
(Django still holds it), by a process other than the one that opened it (SQLite connections must not
cross a fork), or for an in-memory database. The database file's identity (device, inode) is checked
when a kept connection is taken, so a file deleted and made again (tests do) is never read through
an old connection.

OPTIONS["pool_size"] (settings: DATABASE_POOL_SIZE) is how many idle connections a process keeps;
0 keeps none.

The planner's statistics are kept up to date as SQLite advises: a connection runs `PRAGMA optimize`
when it is closed or given back, at most once per OPTIMIZE_EVERY seconds per process and file, with a
sampling limit (`PRAGMA analysis_limit`) so that analyzing a large table takes milliseconds. SQLite
plans from what ANALYZE stored, and a file nothing analyzed has nothing: the planner then read the
static layer's pins and system messages (context._context_rows_query) through the active path's index,
every message below the window, instead of their own small partial indexes: 9.7 ms of a turn in a
10,000-message conversation instead of 0.45 (bench/turn_cpu.py on a fresh file; PostgreSQL's
autovacuum analyzes by itself). `optimize` analyzes a table only when it has no statistics or has
grown many times since (a no-op reads every table's size, about 1 ms: hence once a minute, not at
every request's end).

Case-insensitive lookups (`icontains` and the like: the sidebar's title search) compare both sides
through Python's `str.casefold`: SQLite's LIKE folds ASCII letters only, so "café" did not find
"CAFÉ" (PostgreSQL's UPPER() is Unicode-aware already).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from functools import lru_cache
from typing import Any

from django.db.backends.sqlite3 import base

_lock = threading.Lock()
# (process id, database file) -> idle connections, each with the file's identity when it was opened.
_idle: dict[tuple[int, str], list[tuple[sqlite3.Connection, tuple[int, int] | None]]] = {}
# (process id, database file) -> time.monotonic() of the last PRAGMA optimize there.
_optimized: dict[tuple[int, str], float] = {}
# SQLite before 3.46 analyzes only the tables the closing connection has read: a process's first
# request may have read none of them (a login), and its next try should not be far.
OPTIMIZE_EVERY = 60.0
# Rows ANALYZE samples per index (SQLite suggests 100 to 1,000); 0 would read whole tables.
ANALYSIS_LIMIT = 400


def _file_identity(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


# Django's SQLite lookups that ignore case, and the SQL function that folds their two sides.
_FOLDED = ("iexact", "icontains", "istartswith", "iendswith")
_FOLD = "casefold"


def _casefold(value: object) -> object:
    return value.casefold() if isinstance(value, str) else value


@lru_cache(maxsize=1024)
def _qmark(query: str) -> str:
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


class SQLiteCursorWrapper(base.SQLiteCursorWrapper):
    """Django's cursor, with each statement's placeholders rewritten once: a turn runs some forty
    statements, most of them the same texts every turn, and the rewrite (a regular expression over
    the whole text) cost more than a cached lookup by far."""

    def convert_query(self, query: str, *, param_names: list[str] | None = None) -> str:
        if param_names is None:
            return _qmark(query)
        return super().convert_query(query, param_names=param_names)


class DatabaseOperations(base.DatabaseOperations):
    def lookup_cast(self, lookup_type: str, internal_type: str | None = None) -> str:
        cast = super().lookup_cast(lookup_type, internal_type)
        return f"{_FOLD}({cast})" if lookup_type in _FOLDED else cast


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
    operators = {
        **base.DatabaseWrapper.operators,
        **{lookup: f"LIKE {_FOLD}(%s) ESCAPE '\\'" for lookup in _FOLDED},
    }
    pattern_ops = {
        **base.DatabaseWrapper.pattern_ops,
        "icontains": f"LIKE '%%' || {_FOLD}({{}}) || '%%' ESCAPE '\\'",
        "istartswith": f"LIKE {_FOLD}({{}}) || '%%' ESCAPE '\\'",
        "iendswith": f"LIKE '%%' || {_FOLD}({{}}) ESCAPE '\\'",
    }
    pool_size = 0
    # Where this wrapper's connection came from: (process id, file identity); None when not poolable.
    _origin: tuple[int, tuple[int, int] | None] | None = None
    # The process that opened or took this wrapper's connection (pooled or not): no other one may use it.
    _opened_by: int | None = None

    def get_connection_params(self) -> dict[str, Any]:
        params = super().get_connection_params()
        self.pool_size = int(params.pop("pool_size", 0))
        return params

    def create_cursor(self, name: str | None = None) -> SQLiteCursorWrapper:
        return self.connection.cursor(factory=SQLiteCursorWrapper)

    def _pool_key(self) -> tuple[int, str] | None:
        name = str(self.settings_dict["NAME"])
        if self.pool_size <= 0 or self.is_in_memory_db() or name.startswith("file:"):
            return None
        return os.getpid(), name

    def get_new_connection(self, conn_params: dict[str, Any]) -> sqlite3.Connection:
        key = self._pool_key()
        self._origin = None
        self._opened_by = os.getpid()
        if key is None:
            return self._opened(conn_params)
        identity = _file_identity(key[1])
        stale = []
        with _lock:
            idle = _idle.get(key, [])
            while idle:
                conn, opened_on = idle.pop()
                if opened_on is not None and opened_on == identity:
                    self._origin = (key[0], identity)
                    break
                stale.append(conn)
            else:
                conn = None
        for old in stale:
            old.close()
        if conn is None:
            conn = self._opened(conn_params)
            self._origin = (key[0], _file_identity(key[1]))
        return conn

    def _opened(self, conn_params: dict[str, Any]) -> sqlite3.Connection:
        conn = super().get_new_connection(conn_params)
        conn.create_function(_FOLD, 1, _casefold, deterministic=True)
        conn.execute(f"PRAGMA analysis_limit = {ANALYSIS_LIMIT}")
        return conn

    def _statistics_refresh(self, conn: sqlite3.Connection) -> None:
        """PRAGMA optimize, when this process has not run it on this file for OPTIMIZE_EVERY seconds.
        Outside a transaction only: it may write the statistics."""
        if conn.in_transaction or self.is_in_memory_db() or self._opened_by != os.getpid():
            return
        key, now = (os.getpid(), str(self.settings_dict["NAME"])), time.monotonic()
        with _lock:
            last = _optimized.get(key)
            if last is not None and now - last < OPTIMIZE_EVERY:
                return
            _optimized[key] = now
        # Locked by a writer, its ANALYZE fails at once (it starts as a read, and SQLite does not wait
        # to make a read a write): the next interval tries again; a request's end must not fail for
        # statistics.
        with contextlib.suppress(sqlite3.OperationalError):
            conn.execute("PRAGMA optimize")

    def _close(self) -> None:
        conn, origin, key = self.connection, self._origin, self._pool_key()
        self._origin = None
        if conn is None or origin is None or key is None or self.in_atomic_block or origin[0] != key[0]:
            if conn is not None and not self.in_atomic_block:
                self._statistics_refresh(conn)
            return super()._close()
        with self.wrap_database_errors:
            if conn.in_transaction:
                conn.rollback()
            # Setting a flag PRAGMA expires every statement the connection has prepared (SQLite adds
            # OP_Expire), so the next request re-parsed each one it ran: read it, and set it only
            # when something switched it off (Django does, around schema changes and fixtures).
            if not conn.execute("PRAGMA foreign_keys").fetchone()[0]:
                conn.execute("PRAGMA foreign_keys = ON")
        self._statistics_refresh(conn)
        with _lock:
            idle = _idle.setdefault(key, [])
            if len(idle) < self.pool_size:
                idle.append((conn, origin[1]))
                return None
        return super()._close()
