"""A database taken back to an earlier migration, for the tests of a data migration."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from chatapp.chat.search_match import owner_match_query, search_prefix_stems, search_terms


@contextmanager
def migrated_back(target: tuple[str, str]) -> Iterator[Any]:
    """Migrate to `target` and yield its historical apps (`apps.get_model`) for writing rows as that
    release did; the body then migrates forward to what it tests. The database is brought to the
    latest migration afterwards, also when the body fails, for the tests after."""
    call_command("migrate", *target, verbosity=0)
    try:
        yield MigrationExecutor(connection).loader.project_state(target).apps
    finally:
        call_command("migrate", verbosity=0)


def conversation_indexed_as(old: Any, *, owner_id: int, title: str, messages: list[tuple[str, str, str]]) -> int:
    """A conversation written with `old`'s models (migrated_back), each (role, content, terms) message
    indexed with the terms given (as that release's analyzer gave them) and its recall statistics to
    match; returns its id."""
    conversation = old.get_model("chat", "Conversation").objects.create(owner_id=owner_id, title=title)
    Message, Search = old.get_model("chat", "Message"), old.get_model("chat", "MessageSearch")
    df: dict[str, int] = {}
    for role, content, terms in messages:
        message = Message.objects.create(conversation=conversation, role=role, content=content, token_count=9,
                                         char_count=len(content))
        Search.objects.create(message_id=message.pk, conversation_id=conversation.pk,
                              scope=f"_c{conversation.pk} _u{owner_id}", terms=terms, length=len(terms.split()),
                              recallable=True)
        for term in set(terms.split()):
            df[term] = df.get(term, 0) + 1
    Term = old.get_model("chat", "RecallTerm")
    Term.objects.bulk_create([Term(conversation_id=conversation.pk, term=t, df=n) for t, n in df.items()])
    old.get_model("chat", "RecallCorpus").objects.create(
        conversation_id=conversation.pk, docs=len(messages), length=sum(len(t.split()) for _, _, t in messages)
    )
    return conversation.pk


def search_index_state(conversation_id: int) -> tuple[dict, dict, tuple]:
    """A conversation's index as the app's models read it: {message id: (terms, length)}, {term: df},
    (docs, length)."""
    from chatapp.chat.models import MessageSearch, RecallCorpus, RecallTerm

    rows = {m: (t, n) for m, t, n in MessageSearch.objects.filter(conversation_id=conversation_id)
            .values_list("message_id", "terms", "length")}
    df = dict(RecallTerm.objects.filter(conversation_id=conversation_id).values_list("term", "df"))
    corpus = RecallCorpus.objects.filter(conversation_id=conversation_id).values_list("docs", "length").get()
    return rows, df, corpus


def reindexed_by_migration(
    *, before: tuple[str, str], after: tuple[str, str], owner_id: int, messages: list[tuple[str, str, str]]
) -> tuple[int, tuple[dict, dict, tuple]]:
    """A conversation indexed as the release at `before` did (each message with the terms its analyzer
    gave), then migrated to `after`: (its id, its index as `search_index_state` reads it). The index
    after the migration must be exactly what indexing the conversation from scratch gives."""
    from chatapp.chat.models import Conversation
    from chatapp.chat.search_services import conversation_index_rebuild

    with migrated_back(before) as old:
        chat = conversation_indexed_as(old, owner_id=owner_id, title=f"before {after[1]}", messages=messages)
        call_command("migrate", *after, verbosity=0)
    migrated = search_index_state(chat)
    conversation_index_rebuild(conversation=Conversation.objects.get(pk=chat))
    assert search_index_state(chat) == migrated
    return chat, migrated


def message_ids_found(*, owner_id: int, text: str) -> list[int]:
    """The ids of the owner's messages the full-text index finds for `text` (every content word, the
    last as a prefix), as message search looks them up, read with the columns every release had: today's
    search reads the chat's later columns (archived_at, chat migration 0020) to say more of each hit."""
    terms = search_terms(text=text)
    query = owner_match_query(owner_id=owner_id, terms=terms, prefix_stems=search_prefix_stems(text=text, terms=terms))
    if connection.vendor == "postgresql":
        sql = "SELECT message_id FROM chat_messagesearch WHERE tsv @@ %s::tsquery"
    else:
        sql = ("SELECT s.message_id FROM chat_message_fts f JOIN chat_messagesearch s ON s.message_id = f.rowid "
               "WHERE chat_message_fts MATCH %s")
    with connection.cursor() as cursor:
        cursor.execute(sql, [query])
        return sorted(pk for (pk,) in cursor.fetchall())
