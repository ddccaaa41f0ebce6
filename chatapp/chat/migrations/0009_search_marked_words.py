"""Words of scripts written with combining marks are whole terms now (`optimizer.lexical`: "हिन्दी"
was cut at its vowel signs into single letters, which were dropped), so:

1. SQLite: both FTS5 tables tokenize with `ascii` instead of `unicode61`. The stored terms are
   already words joined by single spaces; `unicode61` cut them again at every combining mark, and a
   term cut in two became a phrase, which `detail=none` refuses. `ascii` cuts at ASCII separators
   only, with `_` a token character as before (the scope tokens "_c12", the scoped "c12_bike"), and
   ASCII terms tokenize exactly as they did. The tables are made again from 0001's and 0002's
   definitions with the tokenizer swapped, and filled from chat_messagesearch.
2. Every non-ASCII message is indexed again, with its BM25 statistics moved (`search_reindex`).

Backwards the tables get their old tokenizer again and the terms stay (the older code splits such
words as before, and finds nothing for them, as before).
"""

import importlib

from django.db import migrations

from chatapp.chat.search_reindex import non_ascii_messages_reindex

OLD_TOKENIZER = "unicode61 remove_diacritics 0 tokenchars '_'"
NEW_TOKENIZER = "ascii tokenchars '_'"

_fts = importlib.import_module("chatapp.chat.migrations.0001_squashed_0016").SEARCH_INDEX_SQL["sqlite"]
_rfts = importlib.import_module("chatapp.chat.migrations.0002_recall_scoped_fts")


def _tables_make(schema_editor, *, tokenizer: str) -> None:
    if schema_editor.connection.vendor != "sqlite":
        return
    fts_create, fts_drop = _fts
    creates = [sql.replace(OLD_TOKENIZER, tokenizer) for sql in [*fts_create, *_rfts.CREATE]]
    assert sum(tokenizer in sql for sql in creates) == 2, "both tables' definitions name their tokenizer"
    for sql in [*fts_drop, *_rfts.DROP, *creates]:
        schema_editor.execute(sql)
    # chat_message_fts reads its text from chat_messagesearch (external content); the contentless
    # chat_message_rfts was filled by its definition's INSERT above.
    schema_editor.execute("INSERT INTO chat_message_fts (chat_message_fts) VALUES ('rebuild')")


def forwards(apps, schema_editor):
    _tables_make(schema_editor, tokenizer=NEW_TOKENIZER)
    non_ascii_messages_reindex(apps)


def backwards(apps, schema_editor):
    _tables_make(schema_editor, tokenizer=OLD_TOKENIZER)


class Migration(migrations.Migration):
    dependencies = [("chat", "0008_search_folded_terms")]

    operations = [migrations.RunPython(forwards, backwards)]
