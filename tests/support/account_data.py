"""An account holding one of everything the app stores for a user, and the rows of every table, for the
tests of deleting an account (an admin's, tests/chat/test_account_removal.py; the user's own,
tests/chat/test_account_delete.py)."""

from __future__ import annotations

from django.apps import apps

from chatapp.chat.import_models import ImportJob
from chatapp.chat.models import Conversation, SummaryJob
from chatapp.chat.prompt_services import prompt_create
from chatapp.chat.share_services import conversation_share_create
from tests.support.accounts import api_key_for
from tests.support.chat import make_config, send


def table_rows() -> dict[str, int]:
    """Rows of every table of the app's models (the search index and totals included)."""
    return {
        model._meta.label: model.objects.count()
        for app in ("chat", "dashboard", "providers")
        for model in apps.get_app_config(app).get_models()
    }


def account_with_everything(owner, fake_openai) -> tuple[str, str]:
    """A chat with an exchange (its search index, record and totals), a queued summary job, an import,
    a prompt, a model config, a share link and an API token of `owner`'s: (the link's token, the key)."""
    config = make_config(owner, fake_openai.base_url)
    chat = Conversation.objects.create(owner=owner, title="Trip to Lisbon", llm_config=config)
    assert send(owner, chat, "Which trams go to Belém?").names[-1] == "done"
    SummaryJob.objects.create(conversation=chat, status=SummaryJob.Status.QUEUED)
    ImportJob.objects.create(owner=owner, filename="conversations.json")
    prompt_create(owner=owner, command="review", content="Review this.")
    return conversation_share_create(owner=owner, conversation=chat).token, api_key_for(owner)


def account_rows(user_id: int, conversation_ids: list[int]) -> dict[str, int]:
    """Rows of `user_id`'s in every table of the app's models, each counted by its key to the user (owner,
    user) or to one of `conversation_ids` (the search index and totals hang from the chat), and the user
    row itself. Only the tables that have rows are listed: an account deleted whole gives {}."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    rows = {"auth.User": get_user_model().objects.filter(pk=user_id).count()}
    for app in ("chat", "dashboard", "providers"):
        for model in apps.get_app_config(app).get_models():
            fields = {f.name for f in model._meta.get_fields() if f.concrete and f.is_relation}
            for key, ids in (("owner", [user_id]), ("user", [user_id]), ("conversation", conversation_ids)):
                if key in fields:
                    rows[f"{model._meta.label}.{key}"] = model.objects.filter(**{f"{key}_id__in": ids}).count()
    if connection.vendor == "sqlite":
        # The FTS5 tables the search rows' triggers keep: an entry whose row is gone stays found by nothing.
        with connection.cursor() as cursor:
            for fts, kept in (("chat_message_fts", ""), ("chat_message_rfts", " WHERE recallable")):
                cursor.execute(f"SELECT (SELECT count(*) FROM {fts}_docsize)"  # noqa: S608 - names above
                               f" - (SELECT count(*) FROM chat_messagesearch{kept})")
                rows[f"{fts} orphans"] = cursor.fetchone()[0]
    return {label: count for label, count in rows.items() if count}
