"""Messages off the path shown (other branches) leave the owner's search: their index rows lose the
owner's scope token (search_services.index_scope), which every search looks up, so a search never
ranks a message it cannot show. New writes do this themselves; this brings the rows already stored
in step (SQLite's FTS5 table follows through its update trigger, PostgreSQL's tsvector is generated).
"""

from django.db import migrations

HIDDEN = "message_id IN (SELECT id FROM chat_message WHERE superseded)"

FORWARD = f"UPDATE chat_messagesearch SET scope = '_c' || conversation_id WHERE {HIDDEN}"  # noqa: S608 - no input
BACKWARD = (
    "UPDATE chat_messagesearch SET scope = '_c' || conversation_id || ' _u' || "  # noqa: S608 - no input
    f"(SELECT owner_id FROM chat_conversation c WHERE c.id = chat_messagesearch.conversation_id) WHERE {HIDDEN}"
)


class Migration(migrations.Migration):
    dependencies = [("chat", "0002_recall_scoped_fts")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
