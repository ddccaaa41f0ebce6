"""PostgreSQL: recall looks terms up by conversation-scoped lexemes ("c12_bike"), one GIN entry each.

Recall's lookups were `tsv @@ '_c12' & 'bike'`: GIN intersects the term's postings with every message
of the conversation, so a lookup's cost grew with the conversation (3-4 ms at 100k messages), and for
the newest postings of a common term the planner walked the primary key instead. A lexeme scoped by
its conversation makes a lookup read only that conversation's postings of that term (0.1 ms at 100k).
Stored terms never contain "_" (optimizer.lexical), so "c<id>_" cannot collide with a term.

The column is generated from the stored terms, so it follows every write as `tsv` does; the index is
partial (recall only reads recallable messages). `tsv` stays for conversation search, scoped by owner.
SQLite's FTS5 lookups are already scoped within the index (0.1-0.7 ms at 100k): nothing changes there.
"""

from django.db import migrations

POSTGRES_FORWARD = [
    r"""ALTER TABLE chat_messagesearch ADD COLUMN rtsv tsvector
        GENERATED ALWAYS AS (array_to_tsvector(string_to_array(btrim(
            regexp_replace(terms, '(\S+)', 'c' || conversation_id::text || '_\1', 'g')), ' '))) STORED""",
    "CREATE INDEX chat_messagesearch_rtsv_idx ON chat_messagesearch USING gin (rtsv) WHERE recallable",
]
POSTGRES_BACKWARD = [
    "DROP INDEX IF EXISTS chat_messagesearch_rtsv_idx",
    "ALTER TABLE chat_messagesearch DROP COLUMN IF EXISTS rtsv",
]


def _run(schema_editor, statements):
    if schema_editor.connection.vendor == "postgresql":
        for sql in statements:
            schema_editor.execute(sql)


def lexemes_create(apps, schema_editor):
    _run(schema_editor, POSTGRES_FORWARD)


def lexemes_drop(apps, schema_editor):
    _run(schema_editor, POSTGRES_BACKWARD)


class Migration(migrations.Migration):

    dependencies = [
        ("chat", "0003_optimizationrecord_recall"),
    ]

    operations = [
        migrations.RunPython(lexemes_create, lexemes_drop),
    ]
