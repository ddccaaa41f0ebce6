"""chat.0009: words of scripts written with combining marks become whole terms. A database indexed
before it gets those messages indexed again (BM25 statistics moved, to what indexing from scratch
gives), and on SQLite both FTS5 tables tokenize with `ascii`, so such a term is looked up whole;
backwards, the tables get their old tokenizer again."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection

from chatapp.chat.models import Conversation
from chatapp.chat.search_services import conversation_index_rebuild
from tests.support.migrations import conversation_indexed_as, message_ids_found, migrated_back, search_index_state

BEFORE, AFTER = ("chat", "0008_search_folded_terms"), ("chat", "0009_search_marked_words")

# Each message with the terms the analyzer gave before: Hindi words cut at their marks into
# fragments, single letters dropped.
MESSAGES = [
    ("user", "मेरी बहन रश्मि लिस्बन जा रही है।", "बहन रश बन रह"),
    ("assistant", "लिस्बन बहुत सुंदर शहर है।", "बन बह दर शहर"),
    ("user", "The Lisbon trip is booked", "lisbon trip book"),
]


def _tokenizers() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE name IN ('chat_message_fts', 'chat_message_rfts')")
        return {"ascii" if "tokenize=\"ascii" in sql else "unicode61" for (sql,) in cursor.fetchall()}


@pytest.mark.django_db(transaction=True)
def test_words_with_marks_are_indexed_again_and_looked_up_whole():
    owner = get_user_model().objects.create_user(username="from-0008", password="a long test password 2")
    with migrated_back(BEFORE) as old:
        chat = conversation_indexed_as(old, owner_id=owner.pk, title="before marks", messages=MESSAGES)
        if connection.vendor == "sqlite":
            assert _tokenizers() == {"unicode61"}
        call_command("migrate", *AFTER, verbosity=0)

        migrated = search_index_state(chat)
        rows, df_after, corpus = migrated
        assert sorted(t for t, _ in rows.values()) == [
            "lisbon trip book", "मेरी बहन रश्मि लिस्बन जा रही है", "लिस्बन बहुत सुंदर शहर है",
        ]
        assert (df_after["लिस्बन"], df_after["lisbon"], df_after["है"]) == (2, 1, 2)
        assert "रश" not in df_after and "बन" not in df_after
        assert corpus == (3, 15)
        first = min(rows)
        assert message_ids_found(owner_id=owner.pk, text="रश्मि लिस्बन") == [first]
        if connection.vendor == "sqlite":
            assert _tokenizers() == {"ascii"}
        # Exactly what indexing the conversation from scratch gives.
        # Today's model reads only what this state has: later migrations add columns (chat 0016's).
        conversation_index_rebuild(conversation=Conversation.objects.only("id", "owner_id").get(pk=chat))
        assert search_index_state(chat) == migrated

        call_command("migrate", *BEFORE, verbosity=0)
        if connection.vendor == "sqlite":
            assert _tokenizers() == {"unicode61"}
        # The tables were filled again from the rows: the ASCII terms are found as before.
        assert message_ids_found(owner_id=owner.pk, text="lisbon trip") == [max(rows)]
