"""An admin deletes an account (the admin's user page, the product's one way to remove one): everything
of it goes with it — chats with their messages, search index, records and dashboard totals, share
links, API tokens, prompts, model configs, imports and summary jobs — its links and tokens stop at
once, and nothing of another account is touched."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from chatapp.chat.import_models import ImportJob
from chatapp.chat.models import Conversation, SummaryJob
from chatapp.chat.prompt_services import prompt_create
from chatapp.chat.share_services import conversation_share_create
from tests.support.accounts import api_key_for
from tests.support.chat import make_config, send

pytestmark = pytest.mark.django_db(transaction=True)


def _rows() -> dict[str, int]:
    """Rows of every table of the app's models (the search index and totals included)."""
    return {model._meta.label: model.objects.count()
            for app in ("chat", "dashboard", "providers") for model in apps.get_app_config(app).get_models()}


def _account_with_everything(owner, fake_openai) -> tuple[str, str]:
    config = make_config(owner, fake_openai.base_url)
    chat = Conversation.objects.create(owner=owner, title="Trip to Lisbon", llm_config=config)
    assert send(owner, chat, "Which trams go to Belém?").names[-1] == "done"
    SummaryJob.objects.create(conversation=chat, status=SummaryJob.Status.QUEUED)
    ImportJob.objects.create(owner=owner, filename="conversations.json")
    prompt_create(owner=owner, command="review", content="Review this.")
    return conversation_share_create(owner=owner, conversation=chat).token, api_key_for(owner)


def test_an_admin_deleting_an_account_takes_all_of_it_and_nothing_else(user, other_user, fake_openai):
    _account_with_everything(other_user, fake_openai)
    theirs = _rows()
    link, key = _account_with_everything(user, fake_openai)
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser(username="root", password="a long admin password"))

    assert admin.get(f"/admin/auth/user/{user.pk}/delete/").status_code == 200
    deleted = admin.post(f"/admin/auth/user/{user.pk}/delete/", {"post": "yes"})

    assert deleted.status_code == 302 and not get_user_model().objects.filter(pk=user.pk).exists()
    assert _rows() == theirs
    assert Client().get(f"/s/{link}/").status_code == 404
    tokened = APIClient()
    tokened.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert tokened.get("/api/conversations/").status_code == 401
