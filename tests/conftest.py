"""Shared fixtures. Area-specific fixtures live in each test package's own conftest.py."""

# --- Fake OpenAI-compatible endpoint (APP-A; see tests/support/fake_openai.py) -------------------
import os
import socket
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.cache import cache

from tests.support.fake_openai import FakeOpenAI


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None, tmp_path_factory) -> None:
    """The test database's name, set before it is created (pytest-django's hook for it). On SQLite a
    file, not memory: live servers (uvicorn, Celery workers) use it from other threads and processes,
    and an in-memory database shared between connections fails a write racing a read at once instead
    of waiting. On PostgreSQL a name of this run's own, so a concurrent run on the same server cannot
    drop it under a worker."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    test = db.setdefault("TEST", {})
    if test.get("NAME"):
        return
    if db["ENGINE"].endswith("sqlite3"):
        test["NAME"] = str(tmp_path_factory.mktemp("db") / "test.sqlite3")
    else:
        test["NAME"] = f"test_{db['NAME']}_{os.getpid()}"


# What the SSRF guard's resolver answers in tests (hermetic: CI machines may have no DNS).
TEST_PUBLIC_ADDRESS = "93.184.215.14"


@pytest.fixture(scope="session")
def fake_openai():
    """A real local Chat Completions server for the whole session: `.base_url` (ends in /v1),
    `.requests`, `.completions`, `.reset()`; the model name picks the behaviour (see its module)."""
    server = FakeOpenAI().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Rate limits and throttles count in the cache, which outlives a test's database rollback."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def _allow_private_llm_urls(settings):
    """The fake endpoint listens on 127.0.0.1, which the SSRF guard refuses when DATABASE_URL selects
    the multi-user mode; tests that check the guard set ALLOW_PRIVATE_LLM_URLS = False themselves."""
    settings.ALLOW_PRIVATE_LLM_URLS = True


@pytest.fixture(autouse=True)
def _hermetic_dns(monkeypatch):
    """The base-URL guard resolves host names; tests must not depend on real DNS. "localhost" is
    loopback, names under .invalid do not resolve, every other name is one public address."""

    def resolve(host: str, port: int) -> list[str]:
        name = host.lower().rstrip(".")
        if name == "localhost":
            return ["127.0.0.1"]
        if name.endswith(".invalid"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [TEST_PUBLIC_ADDRESS]

    monkeypatch.setattr("chatapp.providers.netguard._resolve", resolve)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """PBKDF2 at production strength costs about a second per user created on these machines."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def login_rates(settings, monkeypatch):
    """Sets the failed sign-in limits and the sign-up one (login_throttle), on a clock in the middle of
    a day, an hour and a minute that goes on from there: the limits count in calendar windows, and a
    test straddling a window's end would see its failures start again from zero."""
    import time

    from chatapp.chat import login_throttle

    start = time.time()
    middle = start // 86_400 * 86_400 + 43_200 + 1_800 + 30
    monkeypatch.setattr(login_throttle, "time", SimpleNamespace(time=lambda: middle + time.time() - start))

    def set_rates(*, address: str = "20/hour", username: str = "50/hour", signup: str = "10/hour") -> None:
        settings.REST_FRAMEWORK = {
            **settings.REST_FRAMEWORK,
            "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"],
                                       "login_address": address, "login_username": username,
                                       "signup_address": signup},
        }

    return set_rates


class TitleRequests(list):
    """(conversation id, title to replace) of each title request; `publish` is the real publisher."""

    publish: Any = None


@pytest.fixture(autouse=True)
def titles_requested(monkeypatch) -> TitleRequests:
    """Chat titles requested of the workers, recorded instead of published: a worker of another test
    would otherwise call the fake model for them, and tests count its requests. tests/chat/test_titles.py
    puts `publish` back to publish them for real."""
    from chatapp.chat import title_services

    requested = TitleRequests()
    requested.publish = title_services._title_publish
    monkeypatch.setattr(title_services, "_title_publish",
                        lambda *, conversation_id, expected: requested.append((conversation_id, expected)))
    return requested


class PurgeRequests(list):
    """Ids of the accounts whose deletion was handed to the workers; `publish` is the real publisher."""

    publish: Any = None


@pytest.fixture(autouse=True)
def purges_published(monkeypatch) -> PurgeRequests:
    """Ids of the accounts whose deletion was handed to the workers (account_services.account_delete),
    recorded instead of published: a test runs the task itself (tasks.purge_account), and a worker of
    another test must not delete the account meanwhile. tests/worker puts `publish` back."""
    from chatapp.chat import account_purge

    ids = PurgeRequests()
    ids.publish = account_purge._purge_publish
    monkeypatch.setattr(account_purge, "_purge_publish", lambda *, user_id: ids.append(user_id) or True)
    return ids


@pytest.fixture
def published(monkeypatch) -> list[int]:
    """Summary job ids published, recorded instead of sent to a broker (tests/worker runs the real one)."""
    from chatapp.chat import summary_services

    ids: list[int] = []

    def fake_publish(*, job_ids: list[int]) -> list[int]:
        ids.extend(job_ids)
        return list(job_ids)

    monkeypatch.setattr(summary_services, "_publish", fake_publish)
    return ids
