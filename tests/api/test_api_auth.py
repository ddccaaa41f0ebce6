"""Authentication: token and session (with CSRF)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from chatapp.chat.models import Conversation
from tests.support.accounts import PASSWORD, api_key_for

pytestmark = pytest.mark.django_db


def test_token_obtain_and_use(user):
    client = APIClient()
    response = client.post(
        "/api/auth/token/", {"username": user.username, "password": PASSWORD}, format="json"
    )
    assert response.status_code == 200
    token = response.json()["token"]

    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    response = client.post("/api/conversations/", {"title": "via token"}, format="json")
    assert response.status_code == 201
    assert Conversation.objects.get(pk=response.json()["id"]).owner == user


def test_token_obtain_wrong_password(user):
    response = APIClient().post("/api/auth/token/", {"username": user.username, "password": "nope"}, format="json")
    assert response.status_code == 400
    assert "token" not in response.json()


def test_bad_token_rejected(user):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token 0123456789abcdef0123456789abcdef01234567")
    response = client.get("/api/conversations/")
    # DRF answers with the first authenticator's scheme: session has no WWW-Authenticate, so 403.
    assert response.status_code in (401, 403)
    assert response.json()["detail"] == "Invalid token."


@pytest.mark.parametrize(
    "url", ["/api/conversations/", "/api/configs/", "/api/settings/", "/api/configs/model-info/?model=gpt-4o"]
)
def test_anonymous_refused(url):
    assert APIClient().get(url).status_code in (401, 403)


def test_session_auth_enforces_csrf(user):
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username=user.username, password=PASSWORD)

    # Reads need no token.
    assert client.get("/api/conversations/").status_code == 200

    refused = client.post("/api/conversations/", {"title": "no token"}, format="json")
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
    assert not Conversation.objects.filter(title="no token").exists()

    # A page load (or any GET with get_token) gives the browser its csrftoken cookie.
    from django.middleware.csrf import _get_new_csrf_string

    secret = _get_new_csrf_string()
    client.cookies["csrftoken"] = secret
    accepted = client.post("/api/conversations/", {"title": "with token"}, format="json", HTTP_X_CSRFTOKEN=secret)
    assert accepted.status_code == 201


def test_session_csrf_also_guards_patch_and_delete(user, make_conversation):
    conversation = make_conversation(user)
    client = APIClient(enforce_csrf_checks=True)
    client.login(username=user.username, password=PASSWORD)
    assert client.patch(f"/api/conversations/{conversation.pk}/", {"title": "x"}, format="json").status_code == 403
    assert client.delete(f"/api/conversations/{conversation.pk}/").status_code == 403
    assert client.patch("/api/settings/", {"preference": "fast"}, format="json").status_code == 403
    conversation.refresh_from_db()
    assert conversation.title == "Chat"


def test_an_inactive_users_token_is_refused(user):

    token = api_key_for(user)
    user.is_active = False
    user.save(update_fields=["is_active"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    response = client.get("/api/conversations/")
    assert response.status_code in (401, 403)
    assert response.json()["detail"] == "User inactive or deleted."


def test_the_key_is_taken_under_the_bearer_scheme_too(user):
    """`Authorization: Bearer <key>`, what OpenAI-style clients and most HTTP tools send, was answered
    "Authentication credentials were not provided." though the key was right there."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_for(user)}")
    assert client.get("/api/conversations/").status_code == 200

    client.credentials(HTTP_AUTHORIZATION="Bearer 0123456789abcdef0123456789abcdef01234567")
    refused = client.get("/api/conversations/")
    assert refused.status_code == 401 and refused.json()["detail"] == "Invalid token."


def test_a_token_is_issued_for_the_username_in_any_case(user):
    response = APIClient().post("/api/auth/token/", {"username": user.username.upper(), "password": PASSWORD},
                                format="json")
    assert response.status_code == 200 and response.json()["token"]


def test_a_username_utf8_cannot_encode_is_refused_not_a_500(user, settings, tmp_path):
    # The failed sign-in counts are cache keys: Redis (and the file cache used here, in any test run)
    # writes a key as UTF-8 bytes, which JSON's "\ud800" (an unpaired surrogate) cannot be.
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                                   "LOCATION": str(tmp_path / "cache")}}
    client = APIClient(raise_request_exception=False)
    body = '{"username": "ad\\ud800a", "password": "nope"}'
    response = client.post("/api/auth/token/", body, content_type="application/json")
    assert response.status_code == 400
    assert "token" not in response.json()
    # The right password still signs in afterwards: the counts' cache is unharmed.
    signed_in = client.post("/api/auth/token/", {"username": user.username, "password": PASSWORD}, format="json")
    assert signed_in.status_code == 200
