"""API tokens expire and can be revoked or replaced from Settings (issue 11, finding 8)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def _with_token(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_an_expired_token_is_refused_and_the_token_endpoint_replaces_it(user, settings):
    password = "a long test password for tokens"
    user.set_password(password)
    user.save()
    issued = APIClient().post("/api/auth/token/", {"username": user.username, "password": password}, format="json")
    assert issued.status_code == 200 and issued.json()["expires_at"]
    key = issued.json()["token"]
    assert _with_token(key).get("/api/conversations/").status_code == 200

    Token.objects.filter(key=key).update(created=Token.objects.get(key=key).created - timedelta(days=31))
    refused = _with_token(key).get("/api/conversations/")
    assert refused.status_code == 401 and "expired" in refused.json()["detail"]

    # the script still sends its expired token: the token endpoint ignores it and renews
    again = _with_token(key).post("/api/auth/token/", {"username": user.username, "password": password},
                                  format="json")
    assert again.status_code == 200
    assert again.json()["token"] != key
    assert _with_token(again.json()["token"]).get("/api/conversations/").status_code == 200


def test_settings_list_replace_and_revoke_the_token(user):
    page = Client()
    page.force_login(user)
    assert "No token." in page.get("/settings/").content.decode()

    created = page.post("/settings/api-token/").content.decode()
    key = Token.objects.get(user=user).key
    assert key in created and "not shown again" in created
    listed = page.get("/settings/").content.decode()
    assert "expires" in listed and key not in listed  # shown once, then only its dates

    page.post("/settings/api-token/")  # replace: the old key stops working
    assert _with_token(key).get("/api/conversations/").status_code == 401
    new_key = Token.objects.get(user=user).key
    assert page.post("/settings/api-token/revoke/").status_code == 302
    assert _with_token(new_key).get("/api/conversations/").status_code == 401
    assert not Token.objects.filter(user=user).exists()
