"""A machine's clock against the database's: measured on the real database, and said (a system check,
a worker's log) when it is off by more than the tolerance."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from chatapp.chat import tasks
from chatapp.chat.checks import clock_skew_check
from chatapp.chat.dbclock import SKEW_TOLERANCE_SECONDS, ClockSkew, clock_skew_measure, clock_skew_problem

pytestmark = pytest.mark.django_db


def _clock_off(monkeypatch, seconds: float) -> None:
    """This process's clock `seconds` off the true time (the database's clock is left alone)."""
    real = timezone.now
    monkeypatch.setattr("chatapp.chat.dbclock.timezone.now", lambda: real() + timedelta(seconds=seconds))


def test_a_machine_agrees_with_its_own_database():
    skew = clock_skew_measure()
    assert abs(skew.seconds) < 0.5 + skew.uncertainty
    assert clock_skew_problem(skew) is None
    assert clock_skew_check(None, databases=["default"]) == []


@pytest.mark.parametrize(("seconds", "way"), [(90, "ahead of"), (-75, "behind")])
def test_a_clock_off_the_databases_is_measured_and_named(monkeypatch, seconds, way):
    _clock_off(monkeypatch, seconds)
    skew = clock_skew_measure()
    assert skew.seconds == pytest.approx(seconds, abs=0.5 + skew.uncertainty)
    [warning] = clock_skew_check(None, databases=["default"])
    assert warning.id == "chat.W002"
    assert f"{abs(seconds)}." in warning.msg and way in warning.msg
    assert "NTP" in warning.hint


def test_no_database_named_no_query(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert clock_skew_check(None) == []


def test_the_round_trip_widens_the_tolerance():
    # The database read its clock somewhere within the round trip: only what lies beyond it counts.
    over = SKEW_TOLERANCE_SECONDS + 0.5
    assert clock_skew_problem(ClockSkew(seconds=over, uncertainty=0.6)) is None
    assert clock_skew_problem(ClockSkew(seconds=-over, uncertainty=0.6)) is None
    assert "ahead of" in clock_skew_problem(ClockSkew(seconds=over, uncertainty=0.1))
    assert "behind" in clock_skew_problem(ClockSkew(seconds=-over, uncertainty=0.1))


def test_a_worker_coming_up_logs_its_clock_off(monkeypatch, caplog):
    _clock_off(monkeypatch, 120)
    with caplog.at_level(logging.WARNING, logger="chatapp.chat.tasks"):
        tasks._clock_skew_warn()
    [record] = [r for r in caplog.records if r.name == "chatapp.chat.tasks"]
    assert record.levelno == logging.WARNING and "120." in record.getMessage() and "NTP" in record.getMessage()


def test_a_worker_starts_even_if_the_clock_cannot_be_read(monkeypatch, caplog):
    def unreachable(**kwargs):
        raise OSError("database unreachable")

    monkeypatch.setattr(tasks, "clock_skew_measure", unreachable)
    with caplog.at_level(logging.WARNING, logger="chatapp.chat.tasks"):
        tasks._clock_skew_warn()  # does not raise
    assert any("clock" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)
