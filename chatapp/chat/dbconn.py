"""Giving the database connection back while a request waits on something else.

A reply streams for seconds to minutes, and a connection test may wait for its whole timeout. A
connection held meanwhile is one the pool (settings.DATABASE_POOL_SIZE per process) cannot lend:
with ten replies streaming, every other request of the process waited and failed. Between short
pieces of database work the connection goes back (to the pool; without one, closed), and the
next query takes one again.

SQLite has neither a server nor a pool: a connection is an open file, and closing it only made the
next short piece open the file again and re-run its PRAGMAs (three opens a chat turn, about 1 ms of
its CPU). There the thread keeps its connection until the request ends, when Django closes it
(and chatapp.sqlite3 keeps it open for the next request).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import connection

P = ParamSpec("P")
R = TypeVar("R")


def db_connection_release() -> None:
    """Return this thread's connection now (a no-op inside a transaction, which must keep it, and on
    SQLite, which has nothing to return it to)."""
    if not connection.in_atomic_block and connection.vendor != "sqlite":
        connection.close()


def db_short(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`sync_to_async(fn)` that gives the connection back as soon as `fn` returns."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> R:
        try:
            return fn(*args, **kwargs)
        finally:
            db_connection_release()

    return sync_to_async(run)
