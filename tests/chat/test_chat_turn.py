"""Writes of the request path that need no model call: messages, pins, validation, titles, limits."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core.exceptions import ValidationError
from django.utils import timezone

import optimizer
from chatapp.chat import chat_retry, reply_stream
from chatapp.chat.chat_retry import chat_regenerate_start, chat_retry_start
from chatapp.chat.chat_turn import chat_turn_start, turn_pack, turn_stream
from chatapp.chat.message_services import MessageTooLarge, message_append, message_pin_set, title_from_text
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from chatapp.chat.rate_limit import RateLimited, send_rate_check

pytestmark = pytest.mark.django_db


def test_message_append_stores_counts_and_running_totals(conversation):
    first = message_append(conversation=conversation, role="user", content="How do I index a JSON field?")
    second = message_append(conversation=conversation, role="assistant", content="Use a GIN index.")
    stopped = message_append(conversation=conversation, role="assistant", content="partial", status="stopped")
    message_append(conversation=conversation, role="assistant", content="broken", status="error")

    assert first.token_count == optimizer.count_message(
        {"role": "user", "content": "How do I index a JSON field?"}, model="fake-echo"
    )
    assert first.char_count == len("How do I index a JSON field?")
    conversation.refresh_from_db()
    # a stopped reply is sent as far as it went: counted; a failed one is not
    assert conversation.live_message_count == 3
    assert conversation.live_char_count == first.char_count + second.char_count + stopped.char_count
    assert conversation.live_token_count == first.token_count + second.token_count + stopped.token_count


def test_pin_and_unpin(conversation):
    message = message_append(conversation=conversation, role="user", content="remember: port 5433")
    message_pin_set(message=message, pinned=True)
    assert Message.objects.get(pk=message.pk).pinned
    message_pin_set(message=message, pinned=False)
    assert not Message.objects.get(pk=message.pk).pinned
    summary = message_append(conversation=conversation, role="system", kind="summary", content="[s]")
    with pytest.raises(ValidationError):
        message_pin_set(message=summary, pinned=True)


@pytest.mark.parametrize("content", ["", "   \n\t ", None, 42])
def test_empty_or_non_text_is_refused_and_nothing_stored(user, conversation, content):
    with pytest.raises(ValidationError):
        chat_turn_start(user=user, conversation=conversation, content=content)
    assert not Message.objects.filter(conversation=conversation).exists()


def test_too_long_is_refused_with_the_limit(user, conversation, settings):
    settings.MAX_MESSAGE_CHARS = 100
    with pytest.raises(MessageTooLarge) as info:
        chat_turn_start(user=user, conversation=conversation, content="x" * 101)
    assert info.value.limit == 100
    assert "100" in info.value.messages[0]
    assert not Message.objects.filter(conversation=conversation).exists()


def test_title_from_first_message_unless_custom(user, conversation, echo_config):
    chat_turn_start(user=user, conversation=conversation, content="## Deploying Django behind nginx\nmore")
    conversation.refresh_from_db()
    assert conversation.title == "Deploying Django behind nginx"
    custom = Conversation.objects.create(owner=user, llm_config=echo_config, title="Mine", title_is_custom=True)
    chat_turn_start(user=user, conversation=custom, content="something else entirely")
    custom.refresh_from_db()
    assert custom.title == "Mine"


def test_title_is_short():
    title = title_from_text(text="word " * 50)
    assert len(title) <= 60 and title.endswith("…")


def test_turn_start_records_decision_and_placeholder(user, conversation):
    turn = turn_pack(start=chat_turn_start(user=user, conversation=conversation, content="hello"))
    reply = Message.objects.get(pk=turn.reply_id)
    assert (reply.role, reply.status, reply.reply_to_id) == ("assistant", "streaming", turn.user_message_id)
    record = OptimizationRecord.objects.get(pk=turn.record_id)
    assert record.reply_id == reply.pk
    assert record.strategy == "none" and not record.triggered
    assert record.sent == [
        {"source_ids": [turn.user_message_id], "origin": "verbatim", "tokens": record.sent[0]["tokens"],
         "role": "user"}
    ]
    assert turn.messages == [{"role": "user", "content": "hello"}]
    assert record.tokens_sent == turn.context["tokens"]
    assert record.dropped_ranges == []
    assert record.budget == optimizer.compute_budget(context_window=16_000, max_output_tokens=500)


def test_context_too_large_keeps_the_user_message(user, fake_openai):
    from tests.support.chat import make_config

    config = make_config(user, fake_openai.base_url, window=1_200, max_output=200)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    for i in range(8):
        message = message_append(conversation=conversation, role="user", content=f"fact {i} " + "alpha beta " * 90)
        message_pin_set(message=message, pinned=True)
    turn = turn_pack(start=chat_turn_start(user=user, conversation=conversation, content="and now?"))
    assert turn.failure is not None and turn.failure.kind == "context_too_large"
    assert "budget" in turn.failure.error and "Unpin" in turn.failure.error
    assert Message.objects.filter(pk=turn.user_message_id, content="and now?").exists()
    assert Message.objects.get(pk=turn.reply_id).status == "error"


def test_context_too_large_for_the_output_kept_names_max_output_tokens(user, fake_openai):
    """A config whose max output takes nearly all its window (2,000 of 2,001 tokens: a budget of 1) was
    told only to unpin messages or choose a model with a larger context window, when lowering its max
    output is what makes room."""
    from tests.support.chat import make_config

    config = make_config(user, fake_openai.base_url, window=2_001, max_output=2_000)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    turn = turn_pack(start=chat_turn_start(user=user, conversation=conversation, content="hello there"))
    assert turn.failure is not None and turn.failure.kind == "context_too_large"
    assert "budget is 1 (its 2,001-token context window less the 2,000 tokens kept for the reply)" in turn.failure.error
    assert f"Lower Max output tokens of “{config.name}” in Settings" in turn.failure.error


def test_a_greeting_before_the_first_question_is_among_the_dropped_ranges(user, fake_openai):
    """An imported chat opening with the assistant's greeting: once a cut leaves it out, the record
    says so (and counts its tokens), as for any other message below the window."""
    from chatapp.chat.record_finish import dropped_tokens_sum
    from tests.support.chat import make_config, seed_messages

    config = make_config(user, fake_openai.base_url, window=2_000, max_output=200)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    greeting = message_append(conversation=conversation, role="assistant", content="Welcome! " * 30)
    ids = seed_messages(conversation, 120, words=30)
    conversation.window_start_id = ids[100]
    conversation.save(update_fields=["window_start_id"])

    turn = turn_pack(start=chat_turn_start(user=user, conversation=conversation, content="and now?"))

    record = OptimizationRecord.objects.get(pk=turn.record_id)
    sent = {i for entry in record.sent for i in entry["source_ids"]}
    assert greeting.pk not in sent and ids[0] in sent  # the first question is kept, the greeting is not
    assert any(first <= greeting.pk <= last for first, last in record.dropped_ranges)
    dropped = dropped_tokens_sum(conversation_id=conversation.pk, ranges=record.dropped_ranges)
    below = Message.objects.filter(conversation=conversation, id__lt=ids[100]).exclude(id__in=sent)
    assert dropped == sum(below.values_list("token_count", flat=True))


def test_regenerate_supersedes_the_old_reply(user, conversation):
    user_message = message_append(conversation=conversation, role="user", content="q")
    old = message_append(conversation=conversation, role="assistant", content="old answer", reply_to=user_message)
    conversation.refresh_from_db()
    before = conversation.live_token_count
    turn = turn_pack(start=chat_regenerate_start(user=user, reply=old))
    old.refresh_from_db()
    conversation.refresh_from_db()
    assert old.superseded and old.status == "complete"
    assert conversation.live_token_count == before - old.token_count
    assert turn.user_message_id == user_message.pk
    assert Message.objects.get(pk=turn.reply_id).reply_to_id == user_message.pk
    assert turn.messages == [{"role": "user", "content": "q"}]
    with pytest.raises(ValidationError):
        chat_regenerate_start(user=user, reply=old)


def test_only_the_latest_exchange_can_be_regenerated_or_retried(user, conversation):
    q1 = message_append(conversation=conversation, role="user", content="q1")
    a1 = message_append(conversation=conversation, role="assistant", content="a1", reply_to=q1)
    message_append(conversation=conversation, role="user", content="q2")
    with pytest.raises(ValidationError):
        chat_regenerate_start(user=user, reply=a1)
    with pytest.raises(ValidationError):
        chat_retry_start(user=user, message=q1)


def test_retry_refuses_an_answered_message(user, conversation):
    q = message_append(conversation=conversation, role="user", content="q")
    message_append(conversation=conversation, role="assistant", content="a", reply_to=q)
    with pytest.raises(ValidationError):
        chat_retry_start(user=user, message=q)


def test_send_rate_limit_counts_per_user(user, other_user, settings):
    settings.SEND_RATE_LIMIT_PER_MINUTE = 3
    for _ in range(3):
        send_rate_check(user=user)
    with pytest.raises(RateLimited) as info:
        send_rate_check(user=user)
    assert 1 <= info.value.retry_after <= 120  # into the next minute, which this one's sends weigh on
    assert "3 per minute" in str(info.value)
    send_rate_check(user=other_user)  # another user's quota is untouched


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("Tell me about **indexes**", "Tell me about indexes"),
        ("## Deploying `nginx` _quickly_ with __care__", "Deploying nginx quickly with care"),
        ("> *Why* does ~~this~~ fail?", "Why does this fail?"),
        ("- [Django docs](https://docs.djangoproject.com) on **select_related**", "Django docs on select_related"),
        ("What does my_var_name or 2 * 3 * 4 do?", "What does my_var_name or 2 * 3 * 4 do?"),
        # a message opening with a code block is titled by its first line of code, not the fence
        ("```python\nprint(total)\n```\nWhy does this fail?", "print(total)"),
        ("```\n\n```\nExplain this", "Explain this"),
        ("~~~bash\nls -la\n~~~", "ls -la"),
        ("```", "New chat"),
    ],
)
def test_title_is_plain_text(text, title):
    assert title_from_text(text=text) == title


def _stream(turn, on_event) -> list[dict]:
    """Run a packed turn's stream to the end; `on_event(event)` (sync, may use the ORM) sees each event first."""

    async def run() -> list[dict]:
        events = []
        async for event in turn_stream(turn=turn):
            await sync_to_async(on_event)(event)
            events.append(event)
        return events

    return async_to_sync(run)()


def test_a_reply_superseded_while_streaming_is_not_counted(user, conversation):
    turn = turn_pack(start=chat_turn_start(user=user, conversation=conversation, content="hello"))
    conversation.refresh_from_db()
    totals = (conversation.live_message_count, conversation.live_char_count, conversation.live_token_count)

    def supersede_at_start(event):
        # What a Retry does to a reply it takes for dead.
        if event.get("event") == "start":
            Message.objects.filter(pk=turn.reply_id).update(superseded=True)

    _stream(turn, supersede_at_start)

    conversation.refresh_from_db()
    assert (conversation.live_message_count, conversation.live_char_count, conversation.live_token_count) == totals
    reply = Message.objects.get(pk=turn.reply_id)
    assert reply.superseded and reply.status != "complete" and reply.content  # kept, never counted


def test_a_long_stream_stays_alive_for_retry(user, conversation, echo_config, monkeypatch, settings):
    # Chunks a few ms apart, so they come as separate deltas (a burst is joined into one event).
    echo_config.model = "slow-5"
    echo_config.save(update_fields=["model"])
    # Every stop-flag check is also a heartbeat here; in production the heartbeat is every few seconds.
    monkeypatch.setattr(reply_stream, "STOP_POLL_SECONDS", 0.0)
    monkeypatch.setattr(reply_stream, "STREAM_HEARTBEAT_SECONDS", 0.0)
    user_message_turn = turn_pack(
        start=chat_turn_start(user=user, conversation=conversation, content="write a long essay")
    )
    long_ago = timezone.now() - timedelta(seconds=settings.LLM_TIMEOUT_SECONDS) - timedelta(hours=1)
    seen: dict = {"deltas": 0}

    def retry_mid_stream(event):
        if event.get("event") == "start":
            # As if the reply had been streaming for longer than the model timeout.
            Message.objects.filter(pk=user_message_turn.reply_id).update(updated_at=long_ago)
        elif event.get("event") == "delta":
            seen["deltas"] += 1
            if seen["deltas"] == 2:
                user_message = Message.objects.get(pk=user_message_turn.user_message_id)
                with pytest.raises(ValidationError) as info:
                    chat_retry_start(user=user, message=user_message)
                seen["code"] = info.value.code

    events = _stream(user_message_turn, retry_mid_stream)

    assert seen["code"] == "streaming"
    assert events[-1]["event"] == "done"
    assert Message.objects.filter(reply_to_id=user_message_turn.user_message_id).count() == 1


def test_regenerate_claims_the_reply_once(user, conversation):
    user_message = message_append(conversation=conversation, role="user", content="q")
    old = message_append(conversation=conversation, role="assistant", content="old answer", reply_to=user_message)
    stale = Message.objects.get(pk=old.pk)  # what a second tab loaded before the first regenerate
    turn_pack(start=chat_regenerate_start(user=user, reply=old))

    with pytest.raises(ValidationError) as info:
        chat_regenerate_start(user=user, reply=stale)

    assert info.value.code == "conflict"
    assert Message.objects.filter(reply_to=user_message, status="streaming").count() == 1


def test_retry_claims_the_failed_reply_once(user, conversation, monkeypatch):
    user_message = message_append(conversation=conversation, role="user", content="q")
    failed = message_append(
        conversation=conversation, role="assistant", content="", status="error", reply_to=user_message
    )
    stale = Message.objects.get(pk=failed.pk)
    turn_pack(start=chat_retry_start(user=user, message=user_message))
    # A concurrent retry that read the failed reply before the first one claimed it.
    monkeypatch.setattr(chat_retry, "_retry_last_reply", lambda *, message: stale)

    with pytest.raises(ValidationError) as info:
        chat_retry_start(user=user, message=user_message)

    assert info.value.code == "conflict"
    live = Message.objects.filter(reply_to=user_message, superseded=False)
    assert [m.status for m in live] == ["streaming"]


@pytest.mark.parametrize(("limit", "sent_at"), [(3, 10.0), (1, 10.0), (20, 45.5)])
def test_a_send_at_the_time_the_limit_said_to_wait_for_passes(user, settings, monkeypatch, limit, sent_at):
    # The minute's own sends fill the limit: they still weigh on the next minute (the window slides), so
    # the wait runs past its end. It said "wait until the minute ends", and a client that did was refused again.
    settings.SEND_RATE_LIMIT_PER_MINUTE = limit
    minute = 60 * 29_000_000
    now = [minute + sent_at]
    monkeypatch.setattr("chatapp.chat.rate_limit.time.time", lambda: now[0])
    for _ in range(limit):
        send_rate_check(user=user)
    with pytest.raises(RateLimited) as info:
        send_rate_check(user=user)

    now[0] += info.value.retry_after - 1
    with pytest.raises(RateLimited):
        send_rate_check(user=user)
    now[0] += 1
    send_rate_check(user=user)
