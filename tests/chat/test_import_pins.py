"""Export → import of a chat whose summary passed over a pin that was unpinned since."""

import json

import pytest
from django.contrib.auth import get_user_model

from chatapp.chat.branch_services import conversation_path_thread
from chatapp.chat.context import context_load
from chatapp.chat.models import Conversation, Message
from tests.chat.importkit import export_document, import_now

pytestmark = pytest.mark.django_db


def test_a_pin_the_summary_passed_over_and_then_unpinned_is_still_sent_after_a_round_trip():
    owner = get_user_model().objects.create_user(username="pins", password="a long test password 9")
    source = Conversation.objects.create(owner=owner, title="Pins")

    def msg(**fields):
        return Message.objects.create(conversation=source, **fields)

    u1 = msg(role="user", content="Hello there")
    msg(role="assistant", content="Hi")
    u2 = msg(role="user", content="My locker code is 4417, keep it in mind")  # pinned when summarized
    msg(role="assistant", content="Noted")
    msg(role="user", content="Tell me about tides")
    a3 = msg(role="assistant", content="Tides follow the moon")
    # The summary covers u1..a3 and passed u2 over because it was pinned then (what summary_writing
    # stores); the user unpinned u2 afterwards: the app keeps sending it until the next summary.
    msg(role="system", kind="summary", content="[Summary] greetings, tides.", covers_from_id=u1.pk,
        covers_through_id=a3.pk, skipped_pin_ids=[u2.pk])
    u4 = msg(role="user", content="And what about waves?")
    msg(role="assistant", content="Waves come from wind")
    Conversation.objects.filter(pk=source.pk).update(window_start_id=u4.pk)
    conversation_path_thread(conversation_id=source.pk)
    source.refresh_from_db()

    sent_before = [m.content for m in context_load(conversation=source).msgs]
    assert u2.content in sent_before  # the app sends it

    job = import_now(owner, json.dumps(export_document(source)).encode())
    assert (job.status, job.skipped) == ("done", [])
    copy = Conversation.objects.get(pk=job.conversation_ids[0])
    sent_after = [m.content for m in context_load(conversation=copy).msgs]
    assert sent_after == sent_before, "after the round trip the model no longer receives the locker code"


def test_skipped_pin_ids_that_are_not_a_list_of_ids_skip_their_conversation():
    owner = get_user_model().objects.create_user(username="pins-bad", password="a long test password 9")
    source = Conversation.objects.create(owner=owner, title="Pins")
    first = Message.objects.create(conversation=source, role="user", content="Hello")
    Message.objects.create(conversation=source, role="system", kind="summary", content="[Summary] hello",
                           covers_from_id=first.pk, covers_through_id=first.pk, skipped_pin_ids=[first.pk])
    document = export_document(source)
    assert document["messages"][1]["skipped_pin_ids"] == [first.pk]
    document["messages"][1]["skipped_pin_ids"] = "all of them"
    job = import_now(owner, json.dumps(document).encode())
    assert job.conversation_ids == []
    assert "message 2's skipped_pin_ids is a string, not a list of ids" in job.skipped[0]["error"]
