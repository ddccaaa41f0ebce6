"""Property (issue 13, branches): whatever the sequence of sends, edits, regenerations, branch switches
and summaries, every request's packed context (its optimization record: verbatim, pinned, compressed,
recalled messages and the summary) holds messages of the active path only, found here the slow way by
walking parent pointers up from the path's tail. A small budget makes the window move, recall quote
old messages and summaries get used, so every source of context is exercised."""

from __future__ import annotations

import itertools

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatapp.chat.branch_selectors import message_sibling_places
from chatapp.chat.branch_services import branch_switch
from chatapp.chat.chat_retry import chat_edit_start, chat_regenerate_start
from chatapp.chat.chat_turn import chat_turn_start, turn_pack, turn_stream
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from tests.support.branches import active_path, assert_path_consistent
from tests.support.chat import make_config

pytestmark = pytest.mark.django_db

WORDS = ["tomato", "harbor", "violin", "glacier", "pepper", "lantern", "orbit", "meadow", "copper", "falcon"]
_texts = itertools.count()


def _text(seed: int) -> str:
    n = next(_texts)
    words = " ".join(WORDS[(seed + k * 3) % len(WORDS)] for k in range(14))
    return f"note {n}: the {WORDS[seed % len(WORDS)]} question about {words}?"


def _run(turn) -> None:
    async def run() -> None:
        async for _ in turn_stream(turn=turn):
            pass

    async_to_sync(run)()


def _check_record(conversation: Conversation, turn) -> None:
    """The record of `turn` sent messages of the path it was answered on, and a summary of that path."""
    path = set(active_path(conversation))
    record = OptimizationRecord.objects.filter(reply_id=turn.reply_id).first()
    if record is None:  # a context that cannot be held: an error reply, nothing sent
        return
    for entry in record.sent:
        ids = [i for i in entry["source_ids"] if isinstance(i, int)]
        if entry["origin"] == "summary":
            summary = Message.objects.get(pk=ids[0])
            assert not summary.superseded and summary.covers_through_id in path, entry
        else:
            assert set(ids) <= path, (entry, sorted(path))


def _user_messages(conversation: Conversation) -> list[Message]:
    return list(Message.objects.filter(conversation=conversation, role="user", superseded=False).order_by("id"))


def _apply(user, conversation: Conversation, op: str, pick: int) -> None:
    if op == "send":
        turn = turn_pack(start=chat_turn_start(user=user, conversation=conversation, content=_text(pick)))
    elif op == "edit":
        mine = _user_messages(conversation)
        if not mine:
            return
        turn = turn_pack(start=chat_edit_start(user=user, message=mine[pick % len(mine)], content=_text(pick)))
    elif op == "regenerate":
        reply = Message.objects.filter(conversation=conversation, superseded=False, kind="chat").order_by("-id").first()
        if reply is None or reply.role != "assistant":
            return
        turn = turn_pack(start=chat_regenerate_start(user=user, reply=reply))
    elif op == "switch":
        on_path = list(Message.objects.filter(conversation=conversation, superseded=False, kind="chat"))
        branched = [(m, count) for m in on_path
                    for _, count in [message_sibling_places(messages=[m])[m.pk]] if count > 1]
        if branched:
            message, count = branched[pick % len(branched)]
            branch_switch(message=message, index=pick % count + 1)
        return
    else:  # a summary of the path so far, as a worker writes one
        path = active_path(conversation)
        if len(path) < 4:
            return
        message_append(conversation=conversation, role="system", kind="summary",
                       content="[Conversation summary] earlier turns", covers_from_id=path[0],
                       covers_through_id=path[pick % (len(path) - 2)], covered_message_count=2)
        return
    conversation.refresh_from_db()
    _check_record(conversation, turn)
    _run(turn)


OPS = st.lists(
    st.tuples(st.sampled_from(["send", "send", "edit", "regenerate", "switch", "summary"]), st.integers(0, 50)),
    min_size=3,
    max_size=16,
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_packed_context_holds_only_the_active_path(user, fake_openai, ops):
    config = make_config(user, fake_openai.base_url, window=420, max_output=100, name=f"small {next(_texts)}")
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    for op, pick in [("send", 0), ("send", 1), *ops, ("send", 2)]:
        try:
            _apply(user, conversation, op, pick)
        except ValidationError as exc:  # a refusal (e.g. an exchange that is not the latest) stores nothing
            assert exc.code not in ("conflict",), exc
        conversation.refresh_from_db()
    # The path is one chain, and what the flags say is on it.
    assert sorted(Message.objects.filter(conversation=conversation, kind="chat", superseded=False)
                  .values_list("id", flat=True)) == active_path(conversation)
    # and the running totals and the recall index describe that path and nothing else
    assert_path_consistent(conversation)
