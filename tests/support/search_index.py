"""A conversation indexed as an older analyzer did, for the tests of search_reindex (what a data
migration runs after the analyzer changed)."""

from __future__ import annotations

from django.apps import apps


def conversation_indexed_as(*, owner_id: int, title: str, messages: list[tuple[str, str, str]]) -> int:
    """A conversation whose (role, content, terms) messages are indexed with the terms given (as an
    older analyzer gave them), its recall statistics to match; returns its id."""
    # The models through the registry (get_model), as a data migration reads them.
    conversation = apps.get_model("chat", "Conversation").objects.create(owner_id=owner_id, title=title)
    Message, Search = apps.get_model("chat", "Message"), apps.get_model("chat", "MessageSearch")
    df: dict[str, int] = {}
    for role, content, terms in messages:
        message = Message.objects.create(conversation=conversation, role=role, content=content, token_count=9,
                                         char_count=len(content))
        Search.objects.create(message_id=message.pk, conversation_id=conversation.pk,
                              scope=f"_c{conversation.pk} _u{owner_id}", terms=terms, length=len(terms.split()),
                              recallable=True)
        for term in set(terms.split()):
            df[term] = df.get(term, 0) + 1
    Term = apps.get_model("chat", "RecallTerm")
    Term.objects.bulk_create([Term(conversation_id=conversation.pk, term=t, df=n) for t, n in df.items()])
    apps.get_model("chat", "RecallCorpus").objects.create(
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


def reindexed(
    *, owner_id: int, messages: list[tuple[str, str, str]], pattern: str | None = None
) -> tuple[int, tuple[dict, dict, tuple]]:
    """A conversation indexed as an older analyzer did (each message with the terms it gave), then
    indexed again by search_reindex as a data migration would (the messages `pattern` matches, by
    default the non-ASCII ones): (its id, its index as `search_index_state` reads it), which must be
    exactly what indexing it from scratch gives."""
    from chatapp.chat.models import Conversation
    from chatapp.chat.search_reindex import non_ascii_messages_reindex
    from chatapp.chat.search_services import conversation_index_rebuild

    chat = conversation_indexed_as(owner_id=owner_id, title="indexed before", messages=messages)
    non_ascii_messages_reindex(apps, **({"pattern": pattern} if pattern else {}))
    reindexed_state = search_index_state(chat)
    conversation_index_rebuild(conversation=Conversation.objects.get(pk=chat))
    assert search_index_state(chat) == reindexed_state
    return chat, reindexed_state
