"""chat.0026: chat folders add their table and a nullable folder column to the conversations (no row
rewritten: every chat from before is in no folder, as it was); going back drops both."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection

from chatapp.chat.folder_selectors import folder_list
from chatapp.chat.models import Conversation
from chatapp.chat.selectors import conversation_list
from tests.support.migrations import migrated_back

BEFORE = ("chat", "0025_share_token_digests")
AFTER = ("chat", "0026_folders")


def _columns(table: str) -> list[str]:
    with connection.cursor() as cursor:
        return [c.name for c in connection.introspection.get_table_description(cursor, table)]


@pytest.mark.django_db(transaction=True)
def test_the_chats_from_before_are_in_no_folder_and_going_back_drops_folders():
    owner = get_user_model().objects.create_user(username="from-0024", password="a long test password 2")
    with migrated_back(BEFORE) as old:
        old.get_model("chat", "Conversation").objects.create(owner_id=owner.pk, title="from before")
        call_command("migrate", *AFTER, verbosity=0)

    chat = Conversation.objects.get(title="from before")
    assert chat.folder_id is None
    assert [c.title for c in conversation_list(owner=owner, archived=False)] == ["from before"]
    assert list(folder_list(owner=owner)) == []

    call_command("migrate", *BEFORE, verbosity=0)
    try:
        assert "folder_id" not in _columns("chat_conversation")
        assert "chat_folder" not in connection.introspection.table_names()
        assert Conversation.objects.filter(title="from before").values_list("title", flat=True).count() == 1
    finally:
        call_command("migrate", verbosity=0)
