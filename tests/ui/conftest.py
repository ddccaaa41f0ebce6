"""UI fixtures: users, logged-in clients; a real uvicorn server and headless Chromium (tests/support)."""

from __future__ import annotations

import pytest

from tests.support.accounts import no_rate_limit, other_user, user
from tests.support.asgi_server import asgi_server
from tests.support.browser import browser, screenshot_dir

__all__ = ["asgi_server", "browser", "no_rate_limit", "other_user", "screenshot_dir", "user"]


@pytest.fixture(autouse=True)
def _fresh_rate_limit(no_rate_limit):
    """Every UI test sends freely (see no_rate_limit)."""


@pytest.fixture
def page(client, user):
    """A browser-like test client, logged in as `user`."""
    client.force_login(user)
    return client
