"""/favicon.ico, which a browser asks for on a page without a <link rel=icon> (an image opened in its own tab)."""

from __future__ import annotations

import pytest
from django.templatetags.static import static

pytestmark = pytest.mark.django_db


def test_favicon_ico_leads_to_the_pages_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 302  # not permanent: the icon's hashed name changes with the file
    assert response["Location"] == static("img/favicon.svg")
