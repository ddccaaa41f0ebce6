"""A refused sign-up, sign-in or password change opens on what was wrong. The focus went to the form's
first field (Django's autofocus, on the username or the current password) however the form was refused:
a screen reader said that field, valid, and not the error ("The two password fields didn't match",
under the confirmation), which a user met only by going through the form again. A sign-in refused as a
whole ("Please enter a correct username and password") was tied to no field. And a field refused for
two reasons ("too common", "entirely numeric") gave both paragraphs the id its aria-describedby names,
so only the first was said."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from tests.support.accounts import PASSWORD

pytestmark = pytest.mark.django_db


def _inputs(html: str) -> dict[str, str]:
    """The visible inputs' tags, by name."""
    return {re.search(r'name="([^"]+)"', tag).group(1): tag
            for tag in re.findall(r"<input[^>]*>", html) if 'type="hidden"' not in tag}


def _focused(html: str) -> list[str]:
    return [name for name, tag in _inputs(html).items() if re.search(r"\sautofocus[\s>=]", tag)]


def test_a_refused_sign_up_opens_on_the_wrong_field(client):
    html = client.post("/accounts/signup/", {"username": "newbie", "password1": "A-long-enough-pass-42",
                                             "password2": "A-long-enough-pass-43"}).content.decode()
    assert _focused(html) == ["password2"]
    assert "id_password2_error" in _inputs(html)["password2"]
    # Untouched: a page not refused opens on the username.
    assert _focused(client.get("/accounts/signup/").content.decode()) == ["username"]


def test_a_password_refused_for_two_reasons_is_said_whole(client):
    html = client.post("/accounts/signup/", {"username": "newbie", "password1": "12345678",
                                             "password2": "12345678"}).content.decode()
    assert _focused(html) == ["password2"]
    said = re.search(r'id="id_password2_error"[^>]*>(.*?)</div>', html, re.S)
    assert said and "too common" in said.group(1) and "entirely numeric" in said.group(1)
    assert html.count('id="id_password2_error"') == 1


def test_a_refused_sign_in_ties_its_error_to_the_field_focused(client, user):
    html = client.post("/accounts/login/", {"username": user.username, "password": "wrong"}).content.decode()
    assert _focused(html) == ["username"]
    described = re.search(r'aria-describedby="([^"]+)"', _inputs(html)["username"])
    assert described, _inputs(html)["username"]
    for said in described.group(1).split():
        box = re.search(rf'id="{said}"[^>]*>(.*?)</div>', html, re.S)
        assert box, said
    assert any("correct username and password" in re.search(rf'id="{said}"[^>]*>(.*?)</div>', html, re.S).group(1)
               for said in described.group(1).split())


def test_a_refused_password_change_opens_on_the_wrong_field(client, user):
    client.force_login(user)
    html = client.post("/accounts/password/", {"old_password": PASSWORD, "new_password1": "short",
                                               "new_password2": "short"}).content.decode()
    assert _focused(html) == ["new_password2"]
    # The current password wrong: the focus stays on it, said as wrong.
    html = client.post("/accounts/password/", {"old_password": "not it", "new_password1": "A-long-enough-pass-42",
                                               "new_password2": "A-long-enough-pass-42"}).content.decode()
    assert _focused(html) == ["old_password"]
    assert get_user_model().objects.get(pk=user.pk).check_password(PASSWORD)
