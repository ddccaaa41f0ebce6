"""Writes of the message full-text index: kept in step with every write that changes what recall or
search may find.

One row per chat message in `MessageSearch` (its `optimizer.lexical` terms); the vendor full-text
structure follows those rows by itself (SQLite: triggers into an FTS5 table; PostgreSQL: a generated
tsvector column under a GIN index, and one of conversation-scoped lexemes for recall; see
chat migration 0001_squashed_0029). Next to it, BM25's statistics per
conversation — document frequency per term (`RecallTerm`) and corpus size (`RecallCorpus`) — are
kept at write time, over recallable messages only (live user and assistant chat messages, as
`context.live_chat_q()` defines live), so a query reads a handful of rows instead of counting
postings.

Callers, explicitly (house style: no index writes from signals, so every write path says what it
keeps in step): `message_services.message_append` (`message_index_add`, every new chat message), the
reply creations of a turn (`message_index_add`: an empty reply has nothing to find and is indexed
when it finishes), `reply_store.reply_store` (a reply's text and status arrive), Stop (the status leaves
streaming), Regenerate and Retry (a reply is superseded) through `message_index_sync`; a version
switch (branch_services: messages move on or off the path, their text unchanged) through
`message_index_move`; bulk writes
(the `pack` and `seed_long_conversation` commands, imports) through `conversation_index_rebuild`.
Writes that bypass these (a raw `Message.objects.create`, a queryset update, `loaddata`) are not
indexed until one of them or the rebuild runs. Summaries are not indexed: they are system text,
neither recall candidates nor conversation search hits (an edit makes a new summary row, which
therefore changes nothing here), so summary_services has no index call. Deleting a conversation
removes its rows by cascade; the SQLite FTS5 rows follow through a delete trigger.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from optimizer.lexical import document_terms

from .models import Conversation, Message, MessageSearch, RecallCorpus, RecallTerm
from .rowsql import Statement, row_insert_statement, statements_run

# Longer tokens (a pasted hash or base64 blob) stay out of the index: nobody searches for them, and
# PostgreSQL limits index entries (a B-tree row, a tsvector lexeme).
MAX_TERM_CHARS = 64
_ROLES = (Message.Role.USER, Message.Role.ASSISTANT)


def index_scope(*, conversation_id: int, owner_id: int, on_path: bool = True) -> str:
    """Tokens that scope a full-text lookup to a conversation or an owner; `document_terms` never yields "_".

    A message off the path shown (a version edited or regenerated away, another branch) carries the
    owner's other token (`_h`) instead: searches look up `_u` only (search_match.owner_match_query),
    so message search and the chat list find what the user sees on each chat's path, as recall
    quotes only `recallable` rows."""
    return f"{conversation_scope(conversation_id=conversation_id)} _{'u' if on_path else 'h'}{owner_id}"


def conversation_scope(*, conversation_id: int) -> str:
    """The scope token of a conversation's messages in the full-text index (see `index_scope`)."""
    return f"_c{conversation_id}"


def recall_lexeme(*, conversation_id: int, term: str) -> str:
    """A term scoped by its conversation, as recall's index stores it (`rtsv`; SQLite: chat_message_rfts)."""
    return f"c{conversation_id}_{term}"


def index_terms(*, content: str) -> tuple[str, int]:
    """What the index stores for a message: its terms (long ones left out) and its full term count."""
    terms = document_terms(content)
    return " ".join(t for t in terms if len(t) <= MAX_TERM_CHARS), len(terms)


def is_recallable(*, role: str, kind: str, status: str, superseded: bool) -> bool:
    """`context.live_chat_q()` for user and assistant messages: what recall may quote."""
    return (
        role in _ROLES
        and kind == Message.Kind.CHAT
        and status in Message.LIVE_STATUSES
        and not superseded
    )


@dataclass(slots=True)
class _Delta:
    """Changes to one conversation's BM25 statistics."""

    df: Counter
    docs: int = 0
    length: int = 0

    def add(self, terms: str, length: int, sign: int) -> None:
        for term in set(terms.split()):
            self.df[term] += sign
        self.docs += sign
        self.length += sign * length


def message_index_sync(*, message_ids: Iterable[int]) -> None:
    """Bring the index rows of these messages in step with the messages themselves.

    Idempotent: compares with the stored row and applies only the difference to the statistics, so
    any write path may call it after changing a message's text, status or superseded flag.
    """
    ids = sorted({int(i) for i in message_ids})
    if not ids:
        return
    with transaction.atomic(savepoint=False):
        messages = Message.objects.filter(pk__in=ids).values_list(
            "id", "conversation_id", "conversation__owner_id", "role", "kind", "status", "superseded", "content"
        )
        # Locked (PostgreSQL) so two syncs of one message cannot both apply the same difference.
        old = {row.message_id: row for row in MessageSearch.objects.select_for_update().filter(message_id__in=ids)}
        deltas: dict[int, _Delta] = {}
        rows: list[MessageSearch] = []
        for pk, conversation_id, owner_id, role, kind, status, superseded, content in messages:
            before = old.pop(pk, None)
            if kind != Message.Kind.CHAT:
                if before is not None:
                    _forget(row=before, deltas=deltas)
                continue
            terms, length = index_terms(content=content)
            recallable = is_recallable(role=role, kind=kind, status=status, superseded=superseded)
            scope = index_scope(conversation_id=conversation_id, owner_id=owner_id, on_path=not superseded)
            if before is not None and (before.terms, before.length, before.recallable, before.scope) == (
                terms, length, recallable, scope
            ):
                continue
            delta = deltas.setdefault(conversation_id, _Delta(df=Counter()))
            if before is not None and before.recallable:
                delta.add(before.terms, before.length, -1)
            if recallable:
                delta.add(terms, length, +1)
            rows.append(MessageSearch(message_id=pk, conversation_id=conversation_id, scope=scope, terms=terms,
                                      length=length, recallable=recallable))
        # Written (inserted or updated) in batches, not read and written one by one: a version switched
        # far up a long chat moves thousands of messages (two statements each took seconds).
        MessageSearch.objects.bulk_create(rows, batch_size=500, update_conflicts=True, unique_fields=["message"],
                                          update_fields=["conversation", "scope", "terms", "length", "recallable"])
        for row in old.values():  # rows whose message is gone
            _forget(row=row, deltas=deltas)
        for conversation_id, delta in sorted(deltas.items()):
            _stats_apply(conversation_id=conversation_id, delta=delta)


def message_index_move(*, message_ids: Iterable[int]) -> None:
    """`message_index_sync` for messages whose text has not changed, only their place on or off the
    active path (branch_services): the stored terms are reused, not analysed again, and only the rows'
    scope and recallable flag are written, one statement per pair of values. A version switched far up
    a chat of 6,000 messages of 100 words took 1.6 s to show, 0.6 s of it analysing text that was
    already analysed (the SQLite FTS5 rows and PostgreSQL's tsvectors follow the rows as before).
    A message without an index row (written by a path that bypasses the index) is synced in full."""
    ids = sorted({int(i) for i in message_ids})
    if not ids:
        return
    with transaction.atomic(savepoint=False):
        old = {
            row.message_id: row
            for row in MessageSearch.objects.select_for_update()
            .filter(message_id__in=ids)
            .only("message_id", "conversation_id", "scope", "terms", "length", "recallable")
        }
        messages = Message.objects.filter(pk__in=ids).values_list(
            "id", "conversation_id", "conversation__owner_id", "role", "kind", "status", "superseded"
        )
        full: list[int] = []
        deltas: dict[int, _Delta] = {}
        changed: dict[tuple[str, bool], list[int]] = {}
        for pk, conversation_id, owner_id, role, kind, status, superseded in messages:
            before = old.pop(pk, None)
            if before is None or kind != Message.Kind.CHAT or before.conversation_id != conversation_id:
                full.append(pk)
                continue
            recallable = is_recallable(role=role, kind=kind, status=status, superseded=superseded)
            scope = index_scope(conversation_id=conversation_id, owner_id=owner_id, on_path=not superseded)
            if (before.scope, before.recallable) == (scope, recallable):
                continue
            if before.recallable != recallable:
                delta = deltas.setdefault(conversation_id, _Delta(df=Counter()))
                delta.add(before.terms, before.length, 1 if recallable else -1)
            changed.setdefault((scope, recallable), []).append(pk)
        for (scope, recallable), pks in changed.items():
            MessageSearch.objects.filter(message_id__in=pks).update(scope=scope, recallable=recallable)
        for conversation_id, delta in sorted(deltas.items()):
            _stats_apply(conversation_id=conversation_id, delta=delta)
        message_index_sync(message_ids=[*full, *old])  # and rows whose message is gone: forgotten there


def _forget(*, row: MessageSearch, deltas: dict[int, _Delta]) -> None:
    if row.recallable:
        deltas.setdefault(row.conversation_id, _Delta(df=Counter())).add(row.terms, row.length, -1)
    MessageSearch.objects.filter(message_id=row.message_id).delete()


def _stats_apply(*, conversation_id: int, delta: _Delta) -> None:
    """Add `delta` to the stored statistics (`_stats_statements`), and drop the terms no message
    has any more."""
    statements = _stats_statements(conversation_id=conversation_id, delta=delta)
    if statements:
        statements_run(statements)
    gone = [t for t, d in delta.df.items() if d < 0]
    if gone:
        RecallTerm.objects.filter(conversation_id=conversation_id, term__in=gone, df__lte=0).delete()


def _stats_statements(*, conversation_id: int, delta: _Delta) -> list[Statement]:
    """The upserts that add `delta` to the stored statistics, so concurrent turns add up instead of
    racing.

    Terms go in sorted order: two PostgreSQL transactions then lock rows in the same order and
    cannot deadlock each other.
    """
    changes = sorted((t, d) for t, d in delta.df.items() if d)
    terms_table = RecallTerm._meta.db_table
    corpus_table = RecallCorpus._meta.db_table
    statements: list[Statement] = []
    if changes:
        if connection.vendor == "postgresql":
            source = "SELECT %s, u.t, u.d FROM unnest(%s::text[], %s::int[]) AS u(t, d)"
            params: list[Any] = [conversation_id, [t for t, _ in changes], [d for _, d in changes]]
        else:
            # WHERE true: SQLite's parser needs it before ON CONFLICT after a SELECT.
            source = "SELECT %s, key, value FROM json_each(%s) WHERE true"
            params = [conversation_id, json.dumps(dict(changes))]
        statements.append((
            f"INSERT INTO {terms_table} (conversation_id, term, df) {source} "
            f"ON CONFLICT (conversation_id, term) DO UPDATE SET df = {terms_table}.df + excluded.df",
            params,
        ))
    if delta.docs or delta.length:
        statements.append((
            f"INSERT INTO {corpus_table} (conversation_id, docs, length) VALUES (%s, %s, %s) "  # noqa: S608
            f"ON CONFLICT (conversation_id) DO UPDATE SET docs = {corpus_table}.docs + excluded.docs, "
            f"length = {corpus_table}.length + excluded.length",
            [conversation_id, delta.docs, delta.length],
        ))
    return statements


def conversation_index_rebuild(*, conversation: Conversation, batch_size: int = 2000) -> int:
    """Index every chat message of `conversation` from scratch; returns the number of rows written.

    For writes that bypass the services (bulk imports, the seed command) and for repairs.
    """
    owner_id = conversation.owner_id
    scopes = {on_path: index_scope(conversation_id=conversation.pk, owner_id=owner_id, on_path=on_path)
              for on_path in (True, False)}
    delta = _Delta(df=Counter())
    written = 0
    with transaction.atomic():
        MessageSearch.objects.filter(conversation=conversation).delete()
        RecallTerm.objects.filter(conversation=conversation).delete()
        RecallCorpus.objects.filter(conversation=conversation).delete()
        rows = (
            Message.objects.filter(conversation=conversation, kind=Message.Kind.CHAT)
            .order_by("id")
            .values_list("id", "role", "kind", "status", "superseded", "content")
        )
        batch: list[MessageSearch] = []
        for pk, role, kind, status, superseded, content in rows.iterator(chunk_size=batch_size):
            terms, length = index_terms(content=content)
            recallable = is_recallable(role=role, kind=kind, status=status, superseded=superseded)
            if recallable:
                delta.add(terms, length, +1)
            batch.append(MessageSearch(
                message_id=pk, conversation_id=conversation.pk, scope=scopes[not superseded], terms=terms,
                length=length, recallable=recallable,
            ))
            if len(batch) >= batch_size:
                MessageSearch.objects.bulk_create(batch)
                written += len(batch)
                batch = []
        MessageSearch.objects.bulk_create(batch)
        written += len(batch)
        _stats_apply(conversation_id=conversation.pk, delta=delta)
    return written


def message_index_add(*, message: Message, owner_id: int | None = None) -> None:
    """Index a message just created, from the instance in hand: no row to compare with, nothing to
    re-read. Call it in the transaction that created the message (or that gave a reply created
    empty its text; `owner_id`: its conversation's owner, when the instance has no conversation loaded).

    Not a chat message (a summary) or no text yet (a reply about to stream, an error reply): nothing
    to find, so no row; `message_index_sync` indexes a reply once its text arrives.
    """
    statements = message_index_statements(message=message, owner_id=owner_id)
    if statements:
        with transaction.atomic(savepoint=False):
            statements_run(statements)


def message_index_statements(*, message: Message, owner_id: int | None = None) -> list[Statement]:
    """`message_index_add`'s writes, for a caller that runs them with its own (`statements_run`: in
    one round trip on PostgreSQL, with writes of other tables than the index's and recall's)."""
    if message.kind != Message.Kind.CHAT or not message.content:
        return []
    terms, length = index_terms(content=message.content)
    recallable = is_recallable(
        role=message.role, kind=message.kind, status=message.status, superseded=message.superseded
    )
    # Plain SQL, twice a turn (rowsql); on PostgreSQL the row and the statistics in one statement.
    statements = [row_insert_statement(MessageSearch, values={
        "message_id": message.pk,
        "conversation_id": message.conversation_id,
        "scope": index_scope(
            conversation_id=message.conversation_id,
            owner_id=owner_id if owner_id is not None else message.conversation.owner_id,
            on_path=not message.superseded,
        ),
        "terms": terms,
        "length": length,
        "recallable": recallable,
    })]
    if recallable:
        delta = _Delta(df=Counter())
        delta.add(terms, length, +1)
        statements += _stats_statements(conversation_id=message.conversation_id, delta=delta)
    return statements
