"""API tokens expire and can be revoked or replaced from Settings (issue 11, finding 8); a new one is shown
once, a reload neither shows nor renews it."""

from __future__ import annotations

import logging
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

    created = page.post("/settings/api-token/", follow=True).content.decode()
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


def test_a_new_token_is_shown_once_and_a_reload_neither_shows_nor_renews_it(user, caplog):
    caplog.set_level(logging.DEBUG)
    page = Client()
    page.force_login(user)

    created = page.post("/settings/api-token/")
    key = Token.objects.get(user=user).key
    # the POST answers with a redirect, so the browser's reload is a GET, not a second creation
    assert created.status_code == 302 and created["Location"] == "/settings/#api-h"
    assert key not in created["Location"] and key not in created.content.decode()
    assert all(key not in morsel.value for morsel in created.cookies.values())

    shown = page.get("/settings/")
    body = shown.content.decode()
    assert body.count(key) == 1 and "not shown again" in body and 'data-action="copy-api-token"' in body
    assert "no-store" in shown["Cache-Control"]  # nor kept for Back
    assert _with_token(key).get("/api/conversations/").status_code == 200

    reloaded = page.get("/settings/").content.decode()
    assert key not in reloaded and "not shown again" not in reloaded and "expires" in reloaded
    assert Token.objects.get(user=user).key == key  # not renewed: the copied key still works
    assert _with_token(key).get("/api/conversations/").status_code == 200
    assert key not in caplog.text


def test_a_new_token_replaced_or_revoked_before_its_page_loads_is_not_shown(user):
    page = Client()
    page.force_login(user)
    page.post("/settings/api-token/")
    key = Token.objects.get(user=user).key
    page.post("/settings/api-token/revoke/")  # e.g. from another tab

    body = page.get("/settings/").content.decode()
    assert key not in body and "No token." in body
