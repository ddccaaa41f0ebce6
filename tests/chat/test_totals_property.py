"""Property: the conversation's running totals (`live_*`, `offline_reply_*`) equal a recount from the
rows after every operation of the turn lifecycle and the message tree — sends that complete, fail
before or after their first chunk, are stopped or left by the client; regenerate, retry, edit,
branch switches, pins, summaries, the orphan sweep and a swept stream that completes after all."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatapp.chat import reply_stream
from chatapp.chat.branch_selectors import message_sibling_places
from chatapp.chat.branch_services import branch_switch
from chatapp.chat.chat_retry import chat_edit_start, chat_regenerate_start, chat_retry_start
from chatapp.chat.chat_turn import chat_turn_start, chat_turn_stream, turn_pack, turn_stream
from chatapp.chat.message_services import message_append, message_pin_set, message_stop
from chatapp.chat.models import Conversation, Message
from tests.support.branches import active_path
from tests.support.chat import make_config
from tests.support.totals import recount, stored_totals

pytestmark = pytest.mark.django_db

_texts = itertools.count()


def assert_totals(conversation: Conversation, history: list) -> None:
    assert stored_totals(conversation) == recount(conversation), history
    assert sorted(Message.objects.filter(conversation=conversation, kind="chat", superseded=False)
                  .values_list("id", flat=True)) == active_path(conversation), history


def _consume(events, *, until: str | None = None, then: str = "") -> None:
    """Read a turn's events; at the first `until` event, `then`: "stop" (the Stop button) or "leave"
    (the client disconnects)."""

    async def run() -> None:
        waiting = until
        while True:
            try:
                event = await anext(events)
            except StopAsyncIteration:
                return
            if waiting is None or event.get("event") != waiting:
                continue
            waiting = None
            if then == "leave":
                await events.aclose()
                # The reply goes on without its client; this loop ends with run(), the server's would not.
                await reply_stream.unwatched_replies_wait()
                return
            reply = await sync_to_async(_streaming_reply_id)()
            if reply is not None:
                await sync_to_async(message_stop)(message=await sync_to_async(Message.objects.get)(pk=reply))
                reply_stream.stop_flag(reply)  # what message_stop's on_commit does

    async_to_sync(run)()


_conversation_id: list[int] = []


def _streaming_reply_id() -> int | None:
    return Message.objects.filter(conversation_id=_conversation_id[0], status="streaming").values_list(
        "id", flat=True).first()


def _use_model(conversation: Conversation, model: str, configs: dict) -> None:
    if model == "offline":
        Conversation.objects.filter(pk=conversation.pk).update(offline=True, llm_config=None)
    else:
        Conversation.objects.filter(pk=conversation.pk).update(offline=False, llm_config=configs[model])
    conversation.refresh_from_db()


def _on_path(conversation: Conversation, **filters) -> list[Message]:
    return list(Message.objects.filter(conversation=conversation, kind="chat", superseded=False, **filters)
                .order_by("id"))


def _stream(start, how: str) -> None:
    if how == "leave-accepted":
        _consume(chat_turn_stream(start=start), until="accepted", then="leave")
    elif how == "stop":
        _consume(chat_turn_stream(start=start), until="delta", then="stop")
    elif how == "leave":
        _consume(chat_turn_stream(start=start), until="delta", then="leave")
    else:
        _consume(chat_turn_stream(start=start))


def _orphan(user, conversation: Conversation, pick: int) -> None:
    """A turn whose process dies after opening its reply: the sweep finishes it; sometimes the stream
    was only stalled and completes after all."""
    turn = turn_pack(start=chat_turn_start(user=user, conversation=conversation, content=f"orphan {next(_texts)}"))
    if turn.failure is not None:
        return
    long_ago = timezone.now() - timedelta(minutes=10)
    Message.objects.filter(pk=turn.reply_id).update(updated_at=long_ago)
    reply_stream.reply_orphans_finish()
    if pick % 3 != 1:  # the process is gone: its claim ages until the next turn takes it over
        Conversation.objects.filter(pk=conversation.pk).update(turn_claimed_at=long_ago)
    if pick % 3 == 2:  # another send meanwhile (it takes the claim over), then the stalled stream completes
        _consume(chat_turn_stream(start=chat_turn_start(user=user, conversation=conversation,
                                                        content=f"meanwhile {next(_texts)}")))
    if pick % 3:

        async def run() -> None:
            async for _ in turn_stream(turn=turn):
                pass

        async_to_sync(run)()


def _apply(user, conversation: Conversation, op: str, pick: int, how: str) -> None:  # noqa: C901
    text = f"question {next(_texts)} about pick {pick}"
    if op == "send":
        _stream(chat_turn_start(user=user, conversation=conversation, content=text), how)
    elif op == "edit":
        mine = _on_path(conversation, role="user")
        if mine:
            _stream(chat_edit_start(user=user, message=mine[pick % len(mine)], content=text), how)
    elif op == "regenerate":
        path = _on_path(conversation)
        if path and path[-1].role == "assistant":
            _stream(chat_regenerate_start(user=user, reply=path[-1]), how)
    elif op == "retry":
        path = _on_path(conversation)
        mine = [m for m in path if m.role == "user"]
        if mine:
            _stream(chat_retry_start(user=user, message=mine[-1]), how)
    elif op == "switch":
        branched = [(m, places[m.pk][1]) for m in _on_path(conversation)
                    for places in [message_sibling_places(messages=[m])] if places[m.pk][1] > 1]
        if branched:
            message, count = branched[pick % len(branched)]
            branch_switch(message=message, index=pick % count + 1)
    elif op == "pin":
        chat = list(Message.objects.filter(conversation=conversation, kind="chat").order_by("id"))
        if chat:
            message = chat[pick % len(chat)]
            message_pin_set(message=message, pinned=not message.pinned)
    elif op == "summary":
        path = active_path(conversation)
        if len(path) >= 4:
            message_append(conversation=conversation, role="system", kind="summary", content="[summary] earlier",
                           covers_from_id=path[0], covers_through_id=path[pick % (len(path) - 2)],
                           covered_message_count=2)
    elif op == "orphan":
        _orphan(user, conversation, pick)


OPS = st.lists(
    st.tuples(
        st.sampled_from(["send", "send", "edit", "regenerate", "retry", "switch", "pin", "summary", "orphan"]),
        st.integers(0, 50),
        st.sampled_from(["complete", "complete", "stop", "leave", "leave-accepted"]),
        st.sampled_from(["slow-20", "slow-20", "offline", "stream-error", "fail-500"]),
    ),
    min_size=3,
    max_size=14,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_running_totals_equal_a_recount_after_every_operation(user, fake_openai, ops):
    configs = {model: make_config(user, fake_openai.base_url, model=model, name=f"{model} {next(_texts)}")
               for model in ("slow-20", "stream-error", "fail-500")}
    conversation = Conversation.objects.create(owner=user, llm_config=configs["slow-20"])
    _conversation_id[:] = [conversation.pk]
    history: list = []
    for op, pick, how, model in [("send", 0, "complete", "slow-20"), *ops, ("send", 1, "complete", "offline")]:
        history.append((op, pick, how, model))
        _use_model(conversation, model, configs)
        try:
            _apply(user, conversation, op, pick, how)
        except ValidationError as exc:  # a refusal stores nothing
            assert exc.code != "conflict", (exc, history)
        conversation.refresh_from_db()
        # No turn holds the chat once its operation ended: a claim left behind (a dead turn's, a branch
        # switch's mark) is older than a live one can be, and the next turn takes it over.
        claim = conversation.turn_claimed_at
        assert claim is None or claim < timezone.now() - timedelta(seconds=django_settings.STREAM_ORPHAN_SECONDS), (
            history)
        assert_totals(conversation, history)
