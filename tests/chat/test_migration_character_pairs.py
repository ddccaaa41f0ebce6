"""chat.0010: runs of scripts written without spaces (and Korean) become pairs of characters. A
database indexed before it gets those messages indexed again, with BM25 statistics moved to what
indexing from scratch gives, and a word inside a run is found; the English rows are untouched."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from chatapp.chat.models import Conversation
from chatapp.chat.search_selectors import message_search
from chatapp.chat.search_services import conversation_index_rebuild
from tests.support.migrations import conversation_indexed_as, migrated_back, search_index_state

BEFORE, AFTER = ("chat", "0009_search_marked_words"), ("chat", "0010_search_character_pairs")

# Each message with the terms the analyzer gave before: one term per run.
MESSAGES = [
    ("user", "私は東京に行きました", "私は東京に行きました"),
    ("assistant", "서울에서 만나요", "서울에서 만나요"),
    ("user", "The Lisbon trip is booked", "lisbon trip book"),
]


@pytest.mark.django_db(transaction=True)
def test_runs_without_spaces_are_indexed_again_as_pairs():
    owner = get_user_model().objects.create_user(username="from-0009", password="a long test password 2")
    with migrated_back(BEFORE) as old:
        chat = conversation_indexed_as(old, owner_id=owner.pk, title="before pairs", messages=MESSAGES)
        japanese, korean, english = sorted(search_index_state(chat)[0])
        assert message_search(owner=owner, query="東京").hits == []
        call_command("migrate", *AFTER, verbosity=0)

        migrated = search_index_state(chat)
        rows, df_after, corpus = migrated
        assert rows[japanese] == ("私は は東 東京 京に に行 行き きま まし した", 9)
        assert rows[korean] == ("서울 울에 에서 만나 나요", 5)
        assert rows[english] == ("lisbon trip book", 3)
        assert "私は東京に行きました" not in df_after and df_after["東京"] == 1
        assert corpus == (3, 17)
        assert [h.message_id for h in message_search(owner=owner, query="東京").hits] == [japanese]
        assert [h.message_id for h in message_search(owner=owner, query="서울").hits] == [korean]
        # Exactly what indexing the conversation from scratch gives.
        conversation_index_rebuild(conversation=Conversation.objects.get(pk=chat))
        assert search_index_state(chat) == migrated
