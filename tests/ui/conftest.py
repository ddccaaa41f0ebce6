"""UI fixtures: users, logged-in clients, a real uvicorn server over the test database, headless Chromium."""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connections

SCREENSHOT_DIR = Path(django_settings.BASE_DIR) / "var" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture(autouse=True)
def _fresh_rate_limit(settings):
    # The send rate limiter counts in the cache, which outlives a test.
    cache.clear()
    settings.SEND_RATE_LIMIT_PER_MINUTE = 1000
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    # The default hasher is deliberately slow; these tests create many users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def user(db):
    return get_user_model().objects.create_user(username="ada", password="a long test password 1")


@pytest.fixture
def other_user(db):
    return get_user_model().objects.create_user(username="eve", password="a long test password 2")


@pytest.fixture
def page(client, user):
    """A browser-like test client, logged in as `user`."""
    client.force_login(user)
    return client


# --- a real ASGI server ----------------------------------------------------------------------------


@dataclass
class LiveASGI:
    url: str
    server: Any


@pytest.fixture
def asgi_server(transactional_db) -> Iterator[LiveASGI]:
    """The project's ASGI app under a real uvicorn on a free port. It runs in a thread of this process,
    so it uses the test database; transactional_db makes each side see what the other committed.
    (Django's live_server is WSGI and cannot stream the async SSE replies.)"""
    import uvicorn
    from django.core.handlers.asgi import ASGIHandler

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(ASGIHandler(), log_level="warning", lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield LiveASGI(url=f"http://127.0.0.1:{port}", server=server)
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
        # Connections opened by the server's threads must not outlive the test (PostgreSQL would
        # refuse to flush or drop the test database while they are open).
        connections.close_all()


# --- headless Chromium ------------------------------------------------------------------------------


def _chromium_available() -> bool:
    return Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()


@pytest.fixture
def browser():
    if not _chromium_available():
        pytest.fail("Chromium is missing: apt-get install -y chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="ui-chromium-")
    options = webdriver.ChromeOptions()
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
        f"--user-data-dir={profile}", "--window-size=1366,900",
    ):
        options.add_argument(flag)
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def screenshot_dir() -> Path:
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    return SCREENSHOT_DIR
