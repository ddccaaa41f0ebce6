"""Every HTML response carries a Content-Security-Policy (issue 11, finding 8): the pages their own,
strict one; the API's HTML (docs, browsable API) and fragments the fallback."""

from __future__ import annotations

import pytest
from django.test import Client

from chatapp.chat.csp import FALLBACK_CSP
from chatapp.chat.views import PAGE_CSP

pytestmark = pytest.mark.django_db


def test_every_html_response_has_a_policy(django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_user(username="csp", password="a long test password 9"))
    pages = {"/": PAGE_CSP, "/settings/": PAGE_CSP}
    other = ["/api/docs/", "/api/conversations/?format=api", "/c/sidebar/", "/no-such-page/"]
    for path, policy in pages.items():
        response = client.get(path, follow=True)
        assert response["Content-Security-Policy"] == policy, path
    for path in other:
        response = client.get(path, HTTP_ACCEPT="text/html")
        assert response["Content-Type"].startswith("text/html"), path
        assert response["Content-Security-Policy"] in (FALLBACK_CSP, PAGE_CSP), path
    json_response = client.get("/api/conversations/")
    assert "Content-Security-Policy" not in json_response
