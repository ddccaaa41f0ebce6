"""chat.0008: a database indexed before terms were folded gets its accented messages indexed again,
with the BM25 statistics moved by the difference, to what indexing them from scratch gives."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from chatapp.chat.models import Conversation
from chatapp.chat.search_selectors import message_search
from chatapp.chat.search_services import conversation_index_rebuild
from tests.support.migrations import conversation_indexed_as, migrated_back, search_index_state

BEFORE = ("chat", "0007_summaryjob_quota_idx")
AFTER = ("chat", "0008_search_folded_terms")

# Each message with the terms the analyzer gave before folding (lower-cased, accents kept).
MESSAGES = [
    ("user", "Meeting at the Königstraße café", "meet königstraß café"),
    ("assistant", "Meeting notes are on the wiki", "meet note wiki"),
    ("user", "The café was closed", "café close"),
]


@pytest.mark.django_db(transaction=True)
def test_accented_messages_are_indexed_again_and_the_statistics_follow():
    owner = get_user_model().objects.create_user(username="from-0007", password="a long test password 2")
    with migrated_back(BEFORE) as old:
        chat = conversation_indexed_as(old, owner_id=owner.pk, title="before folding", messages=MESSAGES)
        call_command("migrate", *AFTER, verbosity=0)

    migrated = search_index_state(chat)
    rows, df_after, corpus = migrated
    assert sorted(t for t, _ in rows.values()) == ["cafe close", "meet konigstrass cafe", "meet note wiki"]
    assert (df_after["cafe"], df_after["meet"]) == (2, 2)
    assert "café" not in df_after and "königstraß" not in df_after
    assert corpus == (3, 8)
    assert [h.message_id for h in message_search(owner=owner, query="konigstrasse").hits] == [min(rows)]
    # Exactly what indexing the conversation from scratch gives.
    conversation_index_rebuild(conversation=Conversation.objects.get(pk=chat))
    assert search_index_state(chat) == migrated
