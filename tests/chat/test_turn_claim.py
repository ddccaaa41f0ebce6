"""The turn split (issue 12): a send is acknowledged once its message is stored, under the
conversation's claim; the context is packed after the first byte; the claim is given back however the
turn ends."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.db import connection
from django.http import Http404
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chatapp.chat import chat_turn, reply_stream
from chatapp.chat.chat_retry import chat_retry_start
from chatapp.chat.chat_turn import chat_turn_start, chat_turn_stream, turn_pack
from chatapp.chat.message_services import message_stop
from chatapp.chat.models import Conversation, Message, MessageSearch
from chatapp.chat.search_selectors import message_search
from tests.support.branches import assert_path_consistent
from tests.support.chat import send

pytestmark = pytest.mark.django_db


def _claimed(conversation: Conversation) -> bool:
    return Conversation.objects.get(pk=conversation.pk).turn_claimed_at is not None


def test_a_send_is_stored_in_one_statement_or_two_and_packed_later(user, conversation):
    with CaptureQueriesContext(connection) as queries:
        start = chat_turn_start(user=user, conversation=conversation, content="where is the cabin?")
    written = [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(("BEGIN", "SAVEPOINT", "RELEASE"))]
    # The claim (with the totals, title and parent) and the message: one statement where the database
    # has data-modifying WITH clauses, else two in one transaction.
    assert len(written) == (1 if connection.vendor == "postgresql" else 2), written
    message = Message.objects.get(pk=start.user_message.pk)
    assert message.content == "where is the cabin?" and message.parent_id is None
    assert not Message.objects.filter(conversation=conversation, role="assistant").exists()
    conversation.refresh_from_db()
    assert conversation.live_message_count == 1 and conversation.live_token_count == message.token_count
    assert conversation.title == "where is the cabin?" and _claimed(conversation)
    assert start.accepted["user_message"]["id"] == message.pk
    assert start.accepted["user_message"]["place"] == "static"  # the first user message is always sent

    turn = turn_pack(start=start)
    assert turn.messages[-1] == {"role": "user", "content": "where is the cabin?"}
    assert _found(user, "cabin") == 1  # indexed with the packing


def test_a_send_after_a_reply_answers_it_and_is_stored_as_its_instance_says(user, conversation):
    _run(chat_turn_start(user=user, conversation=conversation, content="first"))
    reply = Message.objects.get(conversation=conversation, role="assistant")
    start = chat_turn_start(user=user, conversation=conversation, content="second", client_key="k-9")

    assert start.user_message.parent_id == reply.pk  # the path's tail, taken by the claim
    stored = Message.objects.get(pk=start.user_message.pk)
    for name in ("parent_id", "role", "kind", "status", "content", "token_count", "char_count", "client_key",
                 "superseded", "pinned", "created_at"):
        assert getattr(stored, name) == getattr(start.user_message, name), name
    assert start.accepted["user_message"]["id"] == stored.pk


def test_a_second_send_waits_for_the_claim_and_the_first_is_answered(user, conversation):
    first = chat_turn_start(user=user, conversation=conversation, content="first")
    with pytest.raises(ValidationError) as info:  # not packed yet: no reply exists, the claim says busy
        chat_turn_start(user=user, conversation=conversation, content="second")
    assert info.value.code == "conflict"
    assert list(Message.objects.filter(conversation=conversation).values_list("content", flat=True)) == ["first"]

    events = _run(first)
    assert [e["event"] for e in events][:2] == ["accepted", "start"] and events[-1]["event"] == "done"
    assert not _claimed(conversation)
    chat_turn_start(user=user, conversation=conversation, content="second")  # free again


def test_a_claim_left_by_a_dead_turn_is_taken_over(user, conversation, settings):
    chat_turn_start(user=user, conversation=conversation, content="the process died after this")
    old = timezone.now() - timedelta(seconds=settings.STREAM_ORPHAN_SECONDS + 1)
    Conversation.objects.filter(pk=conversation.pk).update(turn_claimed_at=old)

    start = chat_turn_start(user=user, conversation=conversation, content="and now?")

    assert Conversation.objects.get(pk=conversation.pk).turn_claimed_at == start.claimed_at != old
    assert start.user_message.parent_id == Message.objects.get(content="the process died after this").pk


def _die_before_packing(user, conversation, text: str, settings) -> Message:
    """A send whose turn never packed: its process died after storing the message, or the client left
    while the view stored it, so the response body that packs (and indexes the message) never ran."""
    start = chat_turn_start(user=user, conversation=conversation, content=text)
    old = timezone.now() - timedelta(seconds=settings.STREAM_ORPHAN_SECONDS + 1)
    Conversation.objects.filter(pk=conversation.pk).update(turn_claimed_at=old)
    return start.user_message


def test_a_message_a_dead_turn_left_unindexed_is_indexed_when_its_claim_is_taken_over(user, conversation, settings):
    message = _die_before_packing(user, conversation, "the lighthouse keeper asked about herrings", settings)
    assert not _indexed(message)

    _run(chat_turn_start(user=user, conversation=conversation, content="and now?"))

    assert _indexed(message)  # search finds it, recall may quote it
    assert_path_consistent(conversation)


def test_a_message_a_dead_turn_left_unindexed_is_indexed_when_it_is_retried(user, conversation, settings):
    message = _die_before_packing(user, conversation, "the lighthouse keeper asked about herrings", settings)

    _run(chat_retry_start(user=user, message=message))

    assert _indexed(message)
    assert_path_consistent(conversation)


def test_a_stalled_reply_whose_claim_was_taken_over_is_still_stored_when_it_ends(user, conversation, settings):
    """The takeover indexes a user message a dead turn left, never a reply that is only stalled: that one
    is indexed once, when it ends."""
    stalled = turn_pack(start=chat_turn_start(user=user, conversation=conversation, content="slow thoughts"))
    old = timezone.now() - timedelta(seconds=settings.STREAM_ORPHAN_SECONDS + 1)
    Conversation.objects.filter(pk=conversation.pk).update(turn_claimed_at=old)
    Message.objects.filter(pk=stalled.reply_id).update(updated_at=old, content="half a th")
    taken = chat_turn_start(user=user, conversation=conversation, content="meanwhile")
    assert taken.user_message.parent_id == stalled.reply_id

    async def stream() -> list[dict]:
        return [event async for event in chat_turn.turn_stream(turn=stalled)]

    assert async_to_sync(stream)()[-1]["event"] == "done"
    assert Message.objects.get(pk=stalled.reply_id).status == Message.Status.COMPLETE
    _run(taken)
    assert_path_consistent(conversation)


def test_a_reply_stopped_after_its_process_died_frees_the_chat_at_once(user, conversation):
    """The server restarted mid-reply: the page showed it "Writing…", Stop marked it stopped, and every
    send, Regenerate or Retry was then refused ("A reply is still being written") for up to
    STREAM_ORPHAN_SECONDS, by the claim of the turn that had died."""
    dead = turn_pack(start=chat_turn_start(user=user, conversation=conversation, content="slow thoughts"))
    message_stop(message=Message.objects.get(pk=dead.reply_id))

    taken = chat_turn_start(user=user, conversation=conversation, content="next question")

    assert taken.user_message.parent_id == dead.reply_id
    _run(taken)
    assert Message.objects.get(pk=dead.reply_id).status == Message.Status.STOPPED
    assert not _claimed(conversation)
    assert_path_consistent(conversation)


def _indexed(message: Message) -> bool:
    return MessageSearch.objects.filter(message=message, recallable=True, scope__contains="_u").exists()


def test_a_turn_in_a_chat_deleted_since_the_request_found_it_is_a_404(user, conversation):
    first = chat_turn_start(user=user, conversation=conversation, content="hello")
    reply = turn_pack(start=first)
    Conversation.objects.filter(pk=conversation.pk).delete()  # another tab, between lookup and claim

    with pytest.raises(Http404):
        chat_turn_start(user=user, conversation=conversation, content="still there?")
    with pytest.raises(Http404):
        chat_retry_start(user=user, message=first.user_message)
    assert reply.reply_id and not Message.objects.filter(conversation_id=conversation.pk).exists()


def test_a_repeated_client_key_is_stored_once(user, conversation):
    first = chat_turn_start(user=user, conversation=conversation, content="once", client_key="k-1")
    _run(first)
    with pytest.raises(ValidationError) as info:
        chat_turn_start(user=user, conversation=conversation, content="once", client_key="k-1")
    assert info.value.code == "conflict" and "already sent" in info.value.messages[0]
    assert Message.objects.filter(conversation=conversation, role="user").count() == 1
    conversation.refresh_from_db()
    assert conversation.live_message_count == 2 and not _claimed(conversation)  # nothing counted twice


@pytest.mark.django_db(transaction=True)
def test_a_repeated_send_outside_any_transaction_undoes_its_claim(user, conversation):
    # As a request runs it (autocommit): on PostgreSQL the claim and the insert are one statement, and
    # the refused insert must take the claim and the counted totals back with it.
    first = chat_turn_start(user=user, conversation=conversation, content="once", client_key="k-2")
    _run(first)
    before = Conversation.objects.get(pk=conversation.pk)
    with pytest.raises(ValidationError) as info:
        chat_turn_start(user=user, conversation=conversation, content="once", client_key="k-2")
    assert info.value.code == "conflict"
    after = Conversation.objects.get(pk=conversation.pk)
    assert after.turn_claimed_at is None
    assert (after.live_message_count, after.live_char_count, after.live_token_count) == (
        before.live_message_count, before.live_char_count, before.live_token_count)
    chat_turn_start(user=user, conversation=conversation, content="and another", client_key="k-3")  # free


def test_a_send_finding_the_claim_held_stores_nothing_of_its_own(user, conversation):
    chat_turn_start(user=user, conversation=conversation, content="first")
    counted = Conversation.objects.get(pk=conversation.pk).live_message_count
    with pytest.raises(ValidationError):
        chat_turn_start(user=user, conversation=conversation, content="second")
    assert Conversation.objects.get(pk=conversation.pk).live_message_count == counted
    assert list(Message.objects.filter(conversation=conversation).values_list("content", flat=True)) == ["first"]


def test_a_packing_failure_keeps_the_message_and_frees_the_chat(user, conversation, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("the optimizer broke")

    monkeypatch.setattr(chat_turn, "context_build_for", broken)
    result = send(user, conversation, "please keep this")

    assert result.names == ["accepted", "start", "error"]
    error = result.named("error")[0]
    assert error["kind"] == "server_error" and error["retryable"]
    user_message = Message.objects.get(conversation=conversation, role="user")
    assert user_message.content == "please keep this"
    assert Message.objects.get(pk=error["message"]["id"]).status == "error"
    assert not _claimed(conversation)
    assert _found(user, "keep") == 1

    monkeypatch.undo()
    retry = turn_pack(start=chat_retry_start(user=user, message=user_message))
    assert retry.failure is None and retry.messages[-1]["content"] == "please keep this"


def test_a_client_gone_before_the_packing_frees_the_chat_once_answered(user, conversation):
    # Left while packed: tests/chat/test_turn_end_races.py.
    start = chat_turn_start(user=user, conversation=conversation, content="hello and goodbye")

    async def leave_after_accepted() -> str:
        stream = chat_turn_stream(start=start)
        event = await anext(stream)
        await stream.aclose()
        await reply_stream.unwatched_replies_wait()  # answered without its client
        return event["event"]

    assert async_to_sync(leave_after_accepted)() == "accepted"
    assert not _claimed(conversation)
    statuses = list(Message.objects.filter(conversation=conversation).order_by("id").values_list("role", "status"))
    assert statuses == [("user", "complete"), ("assistant", "complete")]
    # the message is indexed (the reply, which may repeat it, is too)
    assert start.user_message.pk in {hit.message_id for hit in message_search(owner=user, query="goodbye").hits}


def _found(user, word: str) -> int:
    """How many messages (not titles) search finds for `word`."""
    return sum(1 for hit in message_search(owner=user, query=word).hits if hit.message_id is not None)


def _run(start) -> list[dict]:
    async def run() -> list[dict]:
        return [event async for event in chat_turn_stream(start=start)]

    return async_to_sync(run)()

