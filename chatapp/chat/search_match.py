"""Conversation search's full-text queries: the terms a search box's text looks up, the vendor's
query for an owner's messages holding them (the owner's scope tokens keep everyone else out inside
the index), and the subquery of the conversations that match. Message search (search_selectors)
and the sidebar's title-or-text filter (selectors) read through them."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Q
from django.db.models.expressions import RawSQL

from optimizer.lexical import analyze, content_words, fold, prefix_stems

from .models import Conversation, MessageSearch
from .recall_source import FTS_TABLE, fts_phrase, ts_lexeme
from .search_services import MAX_TERM_CHARS

_SEARCH_TABLE = MessageSearch._meta.db_table

# A search box's text is read up to this many characters: more says nothing a search can use, and a
# title filter of 50,000 bytes is past what SQLite's LIKE takes (a 500 otherwise).
MAX_QUERY_CHARS = 500


NON_ASCII = r"[^\x01-\x7f]"


def title_match(*, owner_id: int, text: str) -> Q:
    """The owner's conversations whose title contains `text`, case and accents folded as message
    search folds them (`lexical.fold`: "cafe" finds "Café", "strasse" "Königstraße"). An ASCII title
    folds to its lower case, which the database compares (`icontains` of the folded text); the owner's
    titles holding another character, usually few, are folded here, in Python."""
    folded = fold(text)
    if not folded:
        # Combining marks alone fold to nothing, which every title "contains": no title is found.
        return Q(pk__in=[])
    accented = Conversation.objects.filter(owner_id=owner_id, title__regex=NON_ASCII).values_list("id", "title")
    return Q(title__icontains=folded) | Q(pk__in=[pk for pk, title in accented if folded in fold(title)])


def search_terms(*, text: str) -> list[str]:
    """The terms a search box's `text` looks up: its content words analyzed as the index stores them
    (stemmed, stop words out), each once, in order; a token too long to be indexed is left out."""
    return [t for t in dict.fromkeys(analyze(text)) if len(t) <= MAX_TERM_CHARS]


def search_prefix_stems(*, text: str, terms: Sequence[str]) -> list[str]:
    """The stems the last content word of a search box's `text` may also be on its way to
    (lexical.prefix_stems: "decora" may become "decorator", stored as "decor"), looked up whole
    beside the prefix; `terms` are the text's `search_terms`."""
    typed = content_words(text)
    # Only for the word the prefix is: a last word that repeats an earlier one (each term is looked up
    # once, where it first stands) or is too long to be indexed is not the prefix.
    if not typed or not terms or analyze(typed[-1]) != terms[-1:] or terms[-1] in terms[:-1]:
        return []
    return [t for t in prefix_stems(typed[-1]) if len(t) <= MAX_TERM_CHARS]


def owner_match_query(
    *, owner_id: int, terms: Sequence[str], last_as_prefix: bool = True, prefix_stems: Sequence[str] = (),
) -> str:
    """The vendor's full-text query for the owner's chat messages on the paths shown containing every
    one of `terms`, the last one as a prefix (search as you type), or one of `prefix_stems` whole,
    unless `last_as_prefix` is false; no terms: all the owner's messages on the paths shown. An FTS5
    MATCH expression on SQLite, a tsquery on PostgreSQL; the owner's scope token makes the index itself
    keep other users and other branches out (search_services.index_scope)."""
    owner = f"_u{owner_id}"
    whole, last = (terms[:-1], terms[-1:]) if last_as_prefix else (terms, [])
    if connection.vendor == "postgresql":
        typed = [" | ".join([ts_lexeme(t) + ":*", *map(ts_lexeme, prefix_stems)]) for t in last]
        return " & ".join([ts_lexeme(owner), *map(ts_lexeme, whole), *(f"({t})" for t in typed)])
    typed = [" OR ".join([fts_phrase(t) + " *", *map(fts_phrase, prefix_stems)]) for t in last]
    return " AND ".join([fts_phrase(owner), *map(fts_phrase, whole), *(f"({t})" for t in typed)])


def conversation_ids_matching(*, owner: User, text: str) -> RawSQL | None:
    """A subquery of the ids of `owner`'s conversations with a chat message on the path shown containing
    every content word of `text` (the last one as a prefix: search as you type), through the full-text
    index.

    None when `text` has no content word (only stop words): there is nothing to look up.
    """
    terms = search_terms(text=text)
    if not terms:
        return None
    # The paths shown only, as message search and recall: a chat found by a version edited or
    # regenerated away would open on text that is not there, with no snippet saying where it is.
    query = owner_match_query(owner_id=owner.pk, terms=terms, prefix_stems=search_prefix_stems(text=text, terms=terms))
    if connection.vendor == "postgresql":
        return RawSQL(  # noqa: S611 (the text is a bound parameter; names are ours)
            f"SELECT conversation_id FROM {_SEARCH_TABLE} WHERE tsv @@ %s::tsquery",  # noqa: S608
            [query],
        )
    return RawSQL(  # noqa: S611 (the text is a bound parameter; names are ours)
        f"SELECT s.conversation_id FROM {FTS_TABLE} f JOIN {_SEARCH_TABLE} s "  # noqa: S608
        f"ON s.message_id = f.rowid WHERE {FTS_TABLE} MATCH %s",
        [query],
    )
