"""chat.0004: a database from before it gets its conversations' offline-demo reply totals filled from
their messages (only live replies of the offline model count), and going back drops them again."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection

from chatapp.chat.models import Conversation
from tests.support.migrations import migrated_back

BEFORE = ("chat", "0003_search_hidden_branches")
AFTER = ("chat", "0004_offline_reply_totals")


@pytest.mark.django_db(transaction=True)
def test_the_offline_reply_totals_are_filled_from_the_messages():
    owner = get_user_model().objects.create_user(username="from-0003", password="a long test password 2")
    with migrated_back(BEFORE) as old:
        OldConversation, OldMessage = old.get_model("chat", "Conversation"), old.get_model("chat", "Message")
        demo = OldConversation.objects.create(owner_id=owner.pk, title="demo first", live_message_count=5)
        plain = OldConversation.objects.create(owner_id=owner.pk, title="never offline", live_message_count=2)

        def add(conversation, role, model="", **fields):
            return OldMessage.objects.create(conversation=conversation, role=role, model=model, content="x" * 10,
                                             token_count=7, char_count=10, **fields)

        add(demo, "user")
        add(demo, "assistant", "offline-demo")
        add(demo, "assistant", "offline-demo")
        add(demo, "assistant", "offline-demo", superseded=True)  # regenerated: not live
        add(demo, "assistant", "offline-demo", status="error")  # failed: not live
        add(demo, "assistant", "gpt-4o")  # a real model's reply
        add(plain, "user")
        add(plain, "assistant", "gpt-4o")

        call_command("migrate", *AFTER, verbosity=0)

    demo_row = Conversation.objects.get(title="demo first")
    assert (demo_row.offline_reply_count, demo_row.offline_reply_chars, demo_row.offline_reply_tokens) == (2, 20, 14)
    assert demo_row.live_message_count == 5  # the totals themselves are left as they were
    plain_row = Conversation.objects.get(title="never offline")
    assert (plain_row.offline_reply_count, plain_row.offline_reply_chars, plain_row.offline_reply_tokens) == (0, 0, 0)

    call_command("migrate", *BEFORE, verbosity=0)
    try:
        with connection.cursor() as cursor:
            columns = [c.name for c in connection.introspection.get_table_description(cursor, "chat_conversation")]
        assert "offline_reply_count" not in columns and "live_message_count" in columns
    finally:
        call_command("migrate", verbosity=0)
