"""How far this machine's clock is from the database's.

Leases, heartbeats and turn claims are stamped with the clock of the machine that writes them and
judged by the clock of another: a summary job's lease (SUMMARY_JOB_LEASE_SECONDS) by the sweep on
any worker, a streaming reply's heartbeat (STREAM_ORPHAN_SECONDS) by the orphan sweep and by a Retry
on any web process, a conversation's turn claim by the next send. A machine whose clock runs a minute
ahead takes a live reply for dead. The database is the one clock every process reaches, so each
machine is measured against it (checks.clock_skew_check, and a worker when it starts).
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass

from django.db import connections
from django.utils import timezone

# Well below the margins the clocks are compared with (by default 60 s for a streaming reply's heartbeat,
# 300 s for a summary job's lease), and far above what NTP leaves between two machines (milliseconds).
SKEW_TOLERANCE_SECONDS = 2.0

CLOCK_SYNC_HINT = "Keep every machine's clock in sync (NTP, chrony)."

_NOW_SQL = {
    # statement_timestamp(): now() would be the transaction's start.
    "postgresql": "SELECT statement_timestamp()",
    "sqlite": "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')",
}


@dataclass(frozen=True, slots=True)
class ClockSkew:
    seconds: float  # this machine's clock minus the database's (positive: this machine is ahead)
    uncertainty: float  # half the round trip: the database read its clock somewhere within it


def clock_skew_measure(*, using: str = "default") -> ClockSkew:
    """This machine's clock against the database's, read at the middle of one round trip."""
    connection = connections[using]
    with connection.cursor() as cursor:
        before, started = timezone.now(), time.perf_counter()
        cursor.execute(_NOW_SQL[connection.vendor])
        (value,) = cursor.fetchone()
        trip = time.perf_counter() - started
    if isinstance(value, str):  # SQLite's text, in UTC
        value = dt.datetime.fromisoformat(value).replace(tzinfo=dt.UTC)
    middle = before + dt.timedelta(seconds=trip / 2)
    return ClockSkew(seconds=(middle - value).total_seconds(), uncertainty=trip / 2)


def clock_skew_problem(skew: ClockSkew, *, tolerance: float = SKEW_TOLERANCE_SECONDS) -> str | None:
    """What is wrong with `skew`, in words, or None when it is within `tolerance`."""
    if abs(skew.seconds) <= tolerance + skew.uncertainty:
        return None
    way = "ahead of" if skew.seconds > 0 else "behind"
    return (
        f"This machine's clock is {abs(skew.seconds):.1f} s {way} the database's. Other machines judge the "
        "leases, heartbeats and turn claims this one writes by their own clocks, so a live reply or summary "
        "job can be taken for dead, or a dead one waited for."
    )
