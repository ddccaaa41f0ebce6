"""SQLite's recall lookups through conversation-scoped tokens, as PostgreSQL's `rtsv` column does.

Recall looks a term up in one conversation. Through chat_message_fts that was `_c<id> AND term`:
FTS5 walks the conversation token's doclist (every message of the conversation) and the term's
(every message of every conversation holding it), so a lookup's cost grew with the conversation and
with the table (bench/fts_lookup.py: 0.54 ms for a rare term in a 100k-message conversation of a
1M-message table, 0.025 ms through a scoped token). chat_message_rfts indexes each recallable
message's terms prefixed with its conversation ("c12_bike": no stored term contains "_", so none can
collide), and a lookup reads only that conversation's postings of the term.

Contentless (content=''): it holds the index alone, the text stays in chat_messagesearch; triggers
keep it in step, telling it a row's old tokens to forget it (FTS5's 'delete'), which the same
expression rebuilds from the old values. Only recallable rows are indexed, as recall reads only them
(PostgreSQL's index on `rtsv` is partial likewise). Nothing on PostgreSQL.
"""

from django.db import migrations


def _scoped(row: str) -> str:
    # "bike red" of conversation 12 -> "c12_bike c12_red"; terms are joined by single spaces
    # (search_services.index_terms), and an empty text gives no token.
    return (
        f"CASE WHEN {row}.terms = '' THEN '' ELSE 'c' || {row}.conversation_id || '_' || "
        f"replace({row}.terms, ' ', ' c' || {row}.conversation_id || '_') END"
    )


FORGET = (
    "INSERT INTO chat_message_rfts (chat_message_rfts, rowid, rterms) "
    f"SELECT 'delete', old.message_id, {_scoped('old')}"
)
ADD = f"INSERT INTO chat_message_rfts (rowid, rterms) SELECT new.message_id, {_scoped('new')}"

CREATE = [
    """CREATE VIRTUAL TABLE chat_message_rfts USING fts5(
        rterms, content='', tokenize="unicode61 remove_diacritics 0 tokenchars '_'", detail=none
    )""",
    f"""INSERT INTO chat_message_rfts (rowid, rterms)
        SELECT s.message_id, {_scoped('s')} FROM chat_messagesearch s WHERE s.recallable""",  # noqa: S608 - no input
    f"""CREATE TRIGGER chat_messagesearch_rfts_ai AFTER INSERT ON chat_messagesearch WHEN new.recallable BEGIN
        {ADD};
    END""",
    f"""CREATE TRIGGER chat_messagesearch_rfts_ad AFTER DELETE ON chat_messagesearch WHEN old.recallable BEGIN
        {FORGET};
    END""",
    f"""CREATE TRIGGER chat_messagesearch_rfts_au
        AFTER UPDATE OF conversation_id, terms, recallable ON chat_messagesearch BEGIN
        {FORGET} WHERE old.recallable;
        {ADD} WHERE new.recallable;
    END""",
]
DROP = [
    "DROP TRIGGER IF EXISTS chat_messagesearch_rfts_au",
    "DROP TRIGGER IF EXISTS chat_messagesearch_rfts_ad",
    "DROP TRIGGER IF EXISTS chat_messagesearch_rfts_ai",
    "DROP TABLE IF EXISTS chat_message_rfts",
]


def _run(schema_editor, statements):
    if schema_editor.connection.vendor == "sqlite":
        for sql in statements:
            schema_editor.execute(sql)


def rfts_create(apps, schema_editor):
    _run(schema_editor, CREATE)


def rfts_drop(apps, schema_editor):
    _run(schema_editor, DROP)


class Migration(migrations.Migration):
    dependencies = [("chat", "0001_squashed_0016")]

    operations = [migrations.RunPython(rfts_create, rfts_drop)]
