"""chat.0013: a summary stored by the release before lists every message pinned now at or below the last
one it covers (it did not record which pins it passed over: listing too many costs tokens for a while,
listing too few could lose a message no summary read)."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from chatapp.chat.models import Message
from tests.support.migrations import migrated_back

BEFORE = ("chat", "0012_stopped_replies_live")
AFTER = ("chat", "0013_summary_skipped_pins")


@pytest.mark.django_db(transaction=True)
def test_a_stored_summary_lists_the_pins_at_or_below_its_end(user):
    with migrated_back(BEFORE) as old:
        Conversation, OldMessage = old.get_model("chat", "Conversation"), old.get_model("chat", "Message")

        def message(conversation, role, *, pinned=False, **fields):
            return OldMessage.objects.create(conversation=conversation, role=role, content=f"{role} text",
                                             token_count=5, char_count=9, pinned=pinned, **fields).pk

        pins = Conversation.objects.create(owner_id=user.pk, title="pins")
        first = message(pins, "user", pinned=True)
        message(pins, "assistant")
        middle = message(pins, "assistant", pinned=True)
        message(pins, "system", pinned=True)  # system messages are sent whatever: never listed
        end = message(pins, "user")
        after = message(pins, "user", pinned=True)  # past the summaries' end
        older = message(pins, "system", kind="summary", covers_from_id=first, covers_through_id=first)
        newest = message(pins, "system", kind="summary", covers_from_id=first, covers_through_id=end)
        unpinned = Conversation.objects.create(owner_id=user.pk, title="no pins")
        plain = message(unpinned, "user")
        no_pins = message(unpinned, "system", kind="summary", covers_from_id=plain, covers_through_id=plain)

        call_command("migrate", *AFTER, verbosity=0)

    listed = dict(Message.objects.filter(pk__in=[older, newest, no_pins]).values_list("id", "skipped_pin_ids"))
    assert listed == {older: [first], newest: [first, middle], no_pins: None}
    assert Message.objects.get(pk=after).skipped_pin_ids is None
