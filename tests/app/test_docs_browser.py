"""The API docs page (drf-spectacular's Swagger UI) runs under the fallback Content-Security-Policy:
it draws the operations, and the browser refuses nothing."""

from __future__ import annotations

import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from tests.support.browser import browser, console_errors  # noqa: F401  (fixture)


def test_api_docs_render_under_the_policy(live_server, transactional_db, browser):  # noqa: F811
    user = get_user_model().objects.create_user(username="docs-reader")
    client = Client()
    client.force_login(user)
    browser.get(live_server.url + "/accounts/login/")
    browser.add_cookie({"name": settings.SESSION_COOKIE_NAME,
                        "value": client.cookies[settings.SESSION_COOKIE_NAME].value, "path": "/"})
    browser.get(live_server.url + "/api/docs/")
    deadline = time.monotonic() + 20
    while not browser.find_elements("css selector", ".opblock"):
        assert time.monotonic() < deadline, "Swagger UI drew no operation"
        time.sleep(0.1)
    assert console_errors(browser) == []
