"""Migration 0012 (issue 13, branches): a database made at 0011 keeps every row, and each existing
conversation becomes a single path; a regenerated reply and its replacement become siblings."""

from __future__ import annotations

import pytest

from tests.support.migrations import migrate_to, migrated_to

BEFORE = [("chat", "0011_dashboard_totals")]
AFTER = [("chat", "0012_message_tree")]


@pytest.mark.django_db(transaction=True)
def test_existing_conversations_migrate_as_one_path_with_nothing_lost():
    with migrated_to(BEFORE) as apps:
        User = apps.get_model("auth", "User")
        Conversation = apps.get_model("chat", "Conversation")
        Message = apps.get_model("chat", "Message")
        owner = User.objects.create(username="legacy")
        c = Conversation.objects.create(owner=owner, title="old chat")
        other = Conversation.objects.create(owner=owner, title="another")

        def add(conversation, role, content, **fields):
            return Message.objects.create(conversation=conversation, role=role, content=content, **fields).pk

        u1 = add(c, "user", "q1")
        a1 = add(c, "assistant", "a1", reply_to_id=u1)
        u2 = add(c, "user", "q2")
        regenerated = add(c, "assistant", "a2 replaced", reply_to_id=u2, superseded=True)
        failed = add(c, "assistant", "a2 failed", reply_to_id=u2, superseded=True, status="error")
        a2 = add(c, "assistant", "a2", reply_to_id=u2)
        summary = add(c, "system", "[Conversation summary]", kind="summary", covers_from_id=u1, covers_through_id=a2)
        u3 = add(c, "user", "q3")
        stopped = add(c, "assistant", "a3 stopped", reply_to_id=u3, status="stopped")
        u4 = add(c, "user", "q4")
        o1 = add(other, "user", "elsewhere")
        o2 = add(other, "assistant", "answer", reply_to_id=o1)
        before = sorted(Message.objects.values_list("id", "conversation_id", "role", "kind", "content", "status",
                                                    "superseded"))

        apps = migrate_to(AFTER)
        Message = apps.get_model("chat", "Message")
        after = sorted(Message.objects.values_list("id", "conversation_id", "role", "kind", "content", "status",
                                                   "superseded"))
        assert after == before  # every row kept, unchanged
        parents = dict(Message.objects.values_list("id", "parent_id"))
        assert parents == {
            u1: None, a1: u1, u2: a1, regenerated: u2, failed: u2, a2: u2, summary: None,
            u3: a2, stopped: u3, u4: stopped, o1: None, o2: o1,
        }
        off_path = dict(Message.objects.filter(off_path_by__isnull=False).values_list("id", "off_path_by"))
        assert off_path == {regenerated: regenerated, failed: failed}  # each a branch of its own
