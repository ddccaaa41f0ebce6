"""chatapp.env: typed environment reads that name the variable when its value cannot work."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from chatapp.env import comma_list, env_bool, env_int, env_list, env_rate, env_str


@pytest.mark.parametrize(("raw", "expected"), [
    ("1", True), ("true", True), (" YES ", True), ("on", True),
    ("0", False), ("False", False), ("no", False), ("off", False),
])
def test_a_boolean_reads_the_usual_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("SOME_FLAG", raw)
    assert env_bool("SOME_FLAG", not expected) is expected


@pytest.mark.parametrize(("reader", "default"), [
    (lambda: env_bool("SOME_VAR", True), True),
    (lambda: env_int("SOME_VAR", 7), 7),
    (lambda: env_rate("SOME_VAR", "10/min"), "10/min"),  # it refused start-up
    (lambda: env_str("SOME_VAR", "INFO"), "INFO"),
    (lambda: env_list("SOME_VAR", "localhost,[::1]"), ["localhost", "[::1]"]),  # ALLOWED_HOSTS: every request a 400
])
@pytest.mark.parametrize("blank", ["", "  "])
def test_unset_or_set_but_blank_is_the_default(monkeypatch, reader, default, blank):
    monkeypatch.delenv("SOME_VAR", raising=False)
    assert reader() == default
    monkeypatch.setenv("SOME_VAR", blank)
    assert reader() == default


def test_a_list_that_names_nothing_is_refused(monkeypatch):
    monkeypatch.setenv("ALLOWED_HOSTS", " , ")
    with pytest.raises(ImproperlyConfigured, match="ALLOWED_HOSTS must list at least one item"):
        env_list("ALLOWED_HOSTS", "localhost")


@pytest.mark.parametrize(("reader", "raw", "words"), [
    (lambda: env_bool("SOME_VAR", True), "maybe", "SOME_VAR must be a boolean"),
    (lambda: env_int("SOME_VAR", 7), "7.5", "SOME_VAR must be an integer, got '7.5'"),
    (lambda: env_int("SOME_VAR", 7, minimum=5), "4", "SOME_VAR must be >= 5, got 4"),
    (lambda: env_rate("SOME_VAR", "10/min"), "10 per minute", "SOME_VAR must look like 10/min"),
    (lambda: env_rate("SOME_VAR", "10/min"), "0/min", "SOME_VAR must look like 10/min"),
])
def test_a_value_that_cannot_work_is_refused_naming_the_variable(monkeypatch, reader, raw, words):
    monkeypatch.setenv("SOME_VAR", raw)
    with pytest.raises(ImproperlyConfigured, match=words):
        reader()


def test_an_integer_at_its_minimum_and_a_rate_are_read(monkeypatch):
    monkeypatch.setenv("SOME_INT", "5")
    monkeypatch.setenv("SOME_RATE", " 30/hour ")
    assert env_int("SOME_INT", 7, minimum=5) == 5
    assert env_rate("SOME_RATE", "10/min") == "30/hour"
    monkeypatch.delenv("SOME_RATE")
    assert env_rate("SOME_RATE", "10/min") == "10/min"


def test_a_comma_list_drops_blanks_and_space():
    assert comma_list(" a.example , ,b.example,") == ["a.example", "b.example"]
    assert comma_list("") == []
