"""Branch in new chat (fork_services): a new chat holding the shown path up to a message, with its dates,
pins, summaries, system prompt and model; the original untouched."""

from __future__ import annotations

import contextlib
import itertools

import pytest
from django.core.exceptions import ValidationError
from django.http import Http404
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatapp.chat import fork_services
from chatapp.chat.chat_retry import chat_edit_start
from chatapp.chat.chat_turn import turn_pack
from chatapp.chat.context import context_load
from chatapp.chat.fork_services import conversation_fork
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation, Message
from chatapp.chat.search_selectors import message_search
from chatapp.chat.summary_selectors import summary_current
from tests.chat.test_branches import exchange, finish
from tests.chat.test_branches_property import OPS, _apply
from tests.support.branches import active_path, assert_path_consistent
from tests.support.chat import make_config

pytestmark = pytest.mark.django_db

_configs = itertools.count()
FIELDS = ("role", "kind", "content", "created_at", "pinned", "status")


def _path_rows(conversation: Conversation) -> list[tuple]:
    return [tuple(getattr(Message.objects.get(pk=pk), f) for f in FIELDS) for pk in active_path(conversation)]


@pytest.fixture
def chat(user):
    """An offline chat of three exchanges, the second question edited (its first version off the path)."""
    conversation = Conversation.objects.create(owner=user, offline=True, title="Garden", title_is_custom=True,
                                               system_prompt="Be brief.")
    exchange(user, conversation, "first question about tomatoes")
    q2, _ = exchange(user, conversation, "second question about cucumbers")
    finish(turn_pack(start=chat_edit_start(user=user, message=q2, content="second question about peppers")))
    exchange(user, conversation, "third question about basil")
    return conversation


def test_the_new_chat_holds_the_shown_path_up_to_the_message(user, chat):
    _, a1, _, a2, _, _ = active_path(chat)
    Message.objects.filter(pk=a1).update(pinned=True)
    before = _path_rows(chat)
    originals = Message.objects.filter(conversation=chat).count()

    fork = conversation_fork(owner=user, message_id=a2)

    assert fork.pk != chat.pk and fork.owner == user
    assert fork.title == "Garden (branch)" and fork.system_prompt == "Be brief."
    assert fork.offline and fork.llm_config_id is None
    # The path to the message, texts, dates and pins as they were; nothing after it, no other version.
    assert _path_rows(fork) == before[:4]
    assert Message.objects.filter(conversation=fork).count() == 4
    assert not Message.objects.filter(conversation=fork, content="second question about cucumbers").exists()
    assert_path_consistent(fork)
    # The original is as it was.
    assert _path_rows(chat) == before and Message.objects.filter(conversation=chat).count() == originals
    # Searched and recalled like any chat: its index holds the path's words.
    hits = message_search(owner=user, query="peppers").hits
    assert {hit.conversation_id for hit in hits} == {chat.pk, fork.pk}


def test_sending_in_the_new_chat_continues_from_the_message(user, chat):
    q1, a1, q2, *_ = active_path(chat)
    fork = conversation_fork(owner=user, message_id=q2)
    # A question with no reply yet: the new chat ends on it, and its next send answers on from there.
    assert [Message.objects.get(pk=pk).content for pk in active_path(fork)][-1] == "second question about peppers"
    exchange(user, fork, "and what about mint?")
    sent = [m.content for m in Message.objects.filter(conversation=fork, kind="chat").order_by("id")]
    assert sent[:3] == [Message.objects.get(pk=pk).content for pk in (q1, a1, q2)]
    assert sent[3] == "and what about mint?"
    assert_path_consistent(fork)


def test_a_summary_of_messages_up_to_the_message_comes_along_covering_the_same_messages(user, chat):
    q1, a1, _, _, q3, _ = active_path(chat)
    # Written after the whole chat, of its first exchange: it holds for a new chat from any later message.
    early = message_append(conversation=chat, role="system", kind="summary", content="[Conversation summary] tomatoes",
                           covers_from_id=q1, covers_through_id=a1)
    fork_after = conversation_fork(owner=user, message_id=q3)
    summary = summary_current(conversation=fork_after)
    assert summary is not None and summary.content == early.content
    first, reply = active_path(fork_after)[:2]
    assert (summary.covers_from_id, summary.covers_through_id) == (first, reply)
    assert context_load(conversation=fork_after).summary_message_id == summary.pk

    # A new chat from inside what it covers gets none: it would speak of a reply that chat has not got.
    fork_inside = conversation_fork(owner=user, message_id=q1)
    assert summary_current(conversation=fork_inside) is None
    assert not Message.objects.filter(conversation=fork_inside, kind="summary").exists()


def test_what_cannot_be_branched_from_is_refused_and_nothing_is_made(user, other_user, chat):
    off_path = Message.objects.get(conversation=chat, content="second question about cucumbers")
    summary = message_append(conversation=chat, role="system", kind="summary", content="[Conversation summary] x",
                             covers_from_id=active_path(chat)[0], covers_through_id=active_path(chat)[1])
    chats = Conversation.objects.count()
    with pytest.raises(ValidationError, match="switch to it first"):
        conversation_fork(owner=user, message_id=off_path.pk)
    with pytest.raises(ValidationError, match="not from a summary"):
        conversation_fork(owner=user, message_id=summary.pk)
    with pytest.raises(Http404):
        conversation_fork(owner=other_user, message_id=active_path(chat)[0])
    streaming = Message.objects.get(pk=active_path(chat)[-1])
    Message.objects.filter(pk=streaming.pk).update(status=Message.Status.STREAMING)
    with pytest.raises(ValidationError, match="still being written"):
        conversation_fork(owner=user, message_id=streaming.pk)
    assert Conversation.objects.count() == chats


def test_a_path_up_to_the_limit_is_written_in_the_request_a_longer_one_is_not(user, chat, monkeypatch):
    monkeypatch.setattr(fork_services, "MAX_FORK_MESSAGES", 3)
    chats = Conversation.objects.count()
    assert isinstance(conversation_fork(owner=user, message_id=active_path(chat)[3]), fork_services.ForkQueued)
    assert Conversation.objects.count() == chats  # left to the import worker (tests/chat/test_fork_job.py)
    assert conversation_fork(owner=user, message_id=active_path(chat)[2]).live_message_count == 3


def test_a_long_title_keeps_its_mark_within_the_limit(user, chat):
    Conversation.objects.filter(pk=chat.pk).update(title="x" * 200)
    fork = conversation_fork(owner=user, message_id=active_path(chat)[0])
    assert len(fork.title) == 200 and fork.title.endswith(" (branch)")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, where=st.integers(0, 1_000))
def test_whatever_the_branches_the_new_chat_is_the_path_up_to_the_message(user, fake_openai, ops, where):
    config = make_config(user, fake_openai.base_url, window=420, max_output=100, name=f"fork {next(_configs)}")
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    for op, pick in [("send", 0), ("send", 1), *ops]:
        with contextlib.suppress(ValidationError):  # a refusal (not the latest exchange) stores nothing
            _apply(user, conversation, op, pick)
    path = active_path(conversation)
    point = path[where % len(path)]
    fork = conversation_fork(owner=user, message_id=point)

    def shown(pks: list[int]) -> list[tuple]:
        return [Message.objects.values_list("role", "content", "created_at", "status").get(pk=pk) for pk in pks]

    assert shown(active_path(fork)) == shown(path[: path.index(point) + 1])
    assert fork.llm_config_id == config.pk
    assert_path_consistent(fork)
    # The summaries that came along are those of messages up to the point, each covering the same messages.
    wanted = Message.objects.filter(conversation=conversation, kind="summary", superseded=False,
                                    covers_through_id__lte=point).order_by("id")
    came = Message.objects.filter(conversation=fork, kind="summary").order_by("id")
    assert [(s.content, shown([s.covers_from_id, s.covers_through_id])) for s in came] == [
        (s.content, shown([s.covers_from_id, s.covers_through_id])) for s in wanted]
