"""`manage.py changepassword` revokes the user's API token with the new password, as the settings
page and the admin do; a refused change keeps both."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from chatapp.chat.management.commands.changepassword import Command
from chatapp.chat.token_models import ApiToken
from chatapp.chat.token_selectors import api_token_with_user
from chatapp.chat.token_services import api_token_create

OLD = "an old password of the test"
NEW = "a brand new password for the test"


@pytest.fixture
def person(db):
    return get_user_model().objects.create_user(username="operator-reset", password=OLD)


def _typed(monkeypatch, *answers: str) -> None:
    # The command reads each password twice from the terminal; these are what is typed, in order.
    typed = iter(answers)
    monkeypatch.setattr(Command, "_get_pass", lambda self, prompt="Password: ": next(typed))


def test_the_new_password_revokes_the_api_token(person, monkeypatch):
    api_token_create(user=person, name="script", made_in="settings")
    _typed(monkeypatch, NEW, NEW)
    said = call_command("changepassword", person.username)
    person.refresh_from_db()
    assert person.check_password(NEW)
    assert not ApiToken.objects.filter(user=person).exists()
    assert "Their API token was revoked" in said


def test_the_new_password_revokes_every_api_token_and_counts_them(person, monkeypatch):
    keys = [api_token_create(user=person, name=f"script {n}", made_in="settings").key for n in range(3)]
    _typed(monkeypatch, NEW, NEW)
    said = call_command("changepassword", person.username)
    assert not ApiToken.objects.filter(user=person).exists()
    assert all(api_token_with_user(key=key) is None for key in keys)
    assert "Their 3 API tokens were revoked" in said


def test_a_user_without_a_token_just_gets_the_password(person, monkeypatch):
    _typed(monkeypatch, NEW, NEW)
    said = call_command("changepassword", person.username)
    person.refresh_from_db()
    assert person.check_password(NEW)
    assert "API token" not in said


def test_a_refused_change_keeps_the_password_and_the_token(person, monkeypatch):
    token = api_token_create(user=person, name="script", made_in="settings").token
    _typed(monkeypatch, NEW, "typed otherwise 1", NEW, "typed otherwise 2", NEW, "typed otherwise 3")
    with pytest.raises(CommandError):
        call_command("changepassword", person.username)
    person.refresh_from_db()
    assert person.check_password(OLD)
    assert ApiToken.objects.filter(pk=token.pk).exists()
