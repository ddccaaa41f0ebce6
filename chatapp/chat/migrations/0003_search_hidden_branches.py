"""Messages off the path shown (other branches) leave the owner's message search: their index rows
carry the owner's other scope token, `_h<owner>` instead of `_u<owner>` (search_services.index_scope),
so a message search never ranks a message it cannot show, while the chat list's filter still finds a
chat by text on any branch. New writes do this themselves; this brings the rows already stored in
step (SQLite's FTS5 table follows through its update trigger, PostgreSQL's tsvector is generated).
"""

from django.db import migrations

HIDDEN = "message_id IN (SELECT id FROM chat_message WHERE superseded)"

OWNER = "(SELECT owner_id FROM chat_conversation c WHERE c.id = chat_messagesearch.conversation_id)"
FORWARD = f"UPDATE chat_messagesearch SET scope = '_c' || conversation_id || ' _h' || {OWNER} WHERE {HIDDEN}"  # noqa: S608
BACKWARD = f"UPDATE chat_messagesearch SET scope = '_c' || conversation_id || ' _u' || {OWNER} WHERE {HIDDEN}"  # noqa: S608


class Migration(migrations.Migration):
    dependencies = [("chat", "0002_recall_scoped_fts")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
