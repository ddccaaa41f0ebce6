"""chat.0008: a database indexed before terms were folded gets its accented messages indexed again,
with the BM25 statistics moved by the difference, to what indexing them from scratch gives."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from chatapp.chat.models import Conversation, MessageSearch, RecallCorpus, RecallTerm
from chatapp.chat.search_selectors import message_search
from chatapp.chat.search_services import conversation_index_rebuild
from tests.support.migrations import migrated_back

BEFORE = ("chat", "0007_summaryjob_quota_idx")
AFTER = ("chat", "0008_search_folded_terms")

# Each message with the terms the analyzer gave before folding (lower-cased, accents kept).
MESSAGES = [
    ("user", "Meeting at the Königstraße café", "meet königstraß café"),
    ("assistant", "Meeting notes are on the wiki", "meet note wiki"),
    ("user", "The café was closed", "café close"),
]


def _index(conversation_id: int) -> tuple[dict, dict, tuple]:
    rows = {m: (t, n) for m, t, n in MessageSearch.objects.filter(conversation_id=conversation_id)
            .values_list("message_id", "terms", "length")}
    df = dict(RecallTerm.objects.filter(conversation_id=conversation_id).values_list("term", "df"))
    corpus = RecallCorpus.objects.filter(conversation_id=conversation_id).values_list("docs", "length").get()
    return rows, df, corpus


@pytest.mark.django_db(transaction=True)
def test_accented_messages_are_indexed_again_and_the_statistics_follow():
    owner = get_user_model().objects.create_user(username="from-0007", password="a long test password 2")
    with migrated_back(BEFORE) as old:
        OldConversation, OldMessage = old.get_model("chat", "Conversation"), old.get_model("chat", "Message")
        OldSearch, OldTerm = old.get_model("chat", "MessageSearch"), old.get_model("chat", "RecallTerm")
        chat = OldConversation.objects.create(owner_id=owner.pk, title="before folding")
        df: dict[str, int] = {}
        for role, content, terms in MESSAGES:
            message = OldMessage.objects.create(conversation=chat, role=role, content=content, token_count=9,
                                                char_count=len(content))
            OldSearch.objects.create(message_id=message.pk, conversation_id=chat.pk, scope=f"_c{chat.pk} _u{owner.pk}",
                                     terms=terms, length=len(terms.split()), recallable=True)
            for term in set(terms.split()):
                df[term] = df.get(term, 0) + 1
        OldTerm.objects.bulk_create([OldTerm(conversation_id=chat.pk, term=t, df=n) for t, n in df.items()])
        old.get_model("chat", "RecallCorpus").objects.create(conversation_id=chat.pk, docs=3, length=8)
        call_command("migrate", *AFTER, verbosity=0)

    migrated = _index(chat.pk)
    rows, df_after, corpus = migrated
    assert sorted(t for t, _ in rows.values()) == ["cafe close", "meet konigstrass cafe", "meet note wiki"]
    assert (df_after["cafe"], df_after["meet"]) == (2, 2)
    assert "café" not in df_after and "königstraß" not in df_after
    assert corpus == (3, 8)
    assert [h.message_id for h in message_search(owner=owner, query="konigstrasse").hits] == [min(rows)]
    # Exactly what indexing the conversation from scratch gives.
    conversation_index_rebuild(conversation=Conversation.objects.get(pk=chat.pk))
    assert _index(chat.pk) == migrated
