"""Send / regenerate / retry / stop through Django's ASGI path against the real fake endpoint."""

from __future__ import annotations

import itertools
import json

import pytest
from asgiref.sync import sync_to_async
from django.db.models import Q
from django.test import Client

from chatapp.chat.api import stream_views
from chatapp.chat.chat_retry import chat_regenerate_start
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from chatapp.dashboard.headline import dashboard_headline
from chatapp.providers.models import LLMConfig
from optimizer import count_message, count_messages
from tests.support.chat import TEST_KEY, chat_deleted_around, make_config, post_stream, seed_messages, send
from tests.support.fake_openai import closed_port_url

pytestmark = pytest.mark.django_db


def _use_model(config: LLMConfig, model: str, base_url: str | None = None) -> None:
    config.model = model
    if base_url is not None:
        config.base_url = base_url
    config.save()


def test_chunks_are_sent_as_they_arrive_and_a_burst_as_one_event(user, conversation, echo_config, fake_openai):
    """A model that streams chunk by chunk is relayed chunk by chunk; chunks that are already waiting
    when the server gets to them (the instant fake model sends all at once) go out as one event."""
    _use_model(echo_config, "slow-30")
    slow = send(user, conversation, "Tell me about indexes")
    _use_model(echo_config, "fake-echo")
    burst = send(user, conversation, "Tell me about indexes")

    slow_deltas = [e["text"] for e in slow.named("delta")]
    burst_deltas = [e["text"] for e in burst.named("delta")]
    assert len(slow_deltas) > 5
    assert len(burst_deltas) < len(slow_deltas)
    for result, deltas in ((slow, slow_deltas), (burst, burst_deltas)):
        assert "".join(deltas) == result.named("done")[0]["message"]["content"]


def test_send_streams_the_reply_and_stores_it_with_usage(user, conversation, fake_openai):
    fake_openai.reset()
    result = send(user, conversation, "Tell me about **indexes**")

    assert result.status == 200
    assert result.headers["content-type"].startswith("text/event-stream")
    assert result.headers["cache-control"] == "no-cache"
    assert result.headers["x-accel-buffering"] == "no"
    assert result.names[:2] == ["accepted", "start"] and result.names[-1] == "done"
    assert result.names.count("delta") >= 1

    start = result.named("start")[0]
    done = result.named("done")[0]
    user_message = Message.objects.get(pk=start["user_message"]["id"])
    reply = Message.objects.get(pk=start["assistant_message"]["id"])
    assert user_message.content == "Tell me about **indexes**"
    assert reply.status == "complete" and reply.reply_to_id == user_message.pk
    assert reply.content == result.text == done["message"]["content"]
    assert reply.content.startswith("Echo: received 1 messages")

    request = fake_openai.completions[-1]
    assert request.stream and request.messages == [{"role": "user", "content": "Tell me about **indexes**"}]
    assert request.api_key == TEST_KEY
    assert reply.prompt_tokens == done["message"]["prompt_tokens"] and reply.prompt_tokens > 0
    assert reply.completion_tokens == done["message"]["completion_tokens"] and reply.completion_tokens > 0
    assert reply.latency_ms is not None and reply.model == "fake-echo"
    assert done["message"]["html"] and "<script" not in done["message"]["html"]
    assert done["title"] == "Tell me about indexes"

    record = OptimizationRecord.objects.get(reply=reply)
    assert record.provider_prompt_tokens == reply.prompt_tokens
    assert record.tokens_sent == start["context"]["tokens"]
    assert done["context"]["budget"] == record.budget
    conversation.refresh_from_db()
    assert conversation.live_message_count == 2
    assert conversation.live_token_count == user_message.token_count + reply.token_count


def test_record_has_costs_origins_and_counts(user, fake_openai):
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=6_000, max_output=1_000)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    ids = seed_messages(conversation, 600, model="gpt-4o-mini")
    Message.objects.filter(pk=ids[200]).update(pinned=True)
    result = send(user, conversation, "Summarize where we are")
    assert result.names[-1] == "done"

    record = OptimizationRecord.objects.get(reply_id=result.named("start")[0]["assistant_message"]["id"])
    assert record.triggered and record.strategy in {"truncate", "summarize"}
    assert record.reason and set(record.scores) >= {"truncate", "summarize"}
    assert not record.estimated and record.model == "gpt-4o-mini"
    assert record.cost_sent_usd is not None and record.cost_full_usd is not None
    assert record.cost_sent_usd < record.cost_full_usd
    assert record.tokens_sent < record.tokens_full
    origins = {entry["origin"] for entry in record.sent}
    assert "pinned" in origins and "verbatim" in origins
    sent_ids = {i for entry in record.sent for i in entry["source_ids"]}
    assert ids[200] in sent_ids
    # the record counts the request as the model got it; shaping it (optimizer.shape) only saves overhead
    assert sum(entry["tokens"] for entry in record.sent) + 3 >= record.tokens_sent
    # Every dropped id is neither sent nor covered, and the ranges are ordered and disjoint.
    flat = [bound for pair in record.dropped_ranges for bound in pair]
    assert flat == sorted(flat)
    for first, last in record.dropped_ranges:
        assert not [i for i in sent_ids if first <= i <= last]
    # what was dropped with no summary standing in is measured apart (not a saving of the same kind)
    in_ranges = Q()
    for first, last in record.dropped_ranges:
        in_ranges |= Q(id__gte=first, id__lte=last)
    expected = sum(Message.objects.filter(in_ranges, conversation=conversation, kind="chat", status="complete",
                                          superseded=False).values_list("token_count", flat=True))
    assert record.dropped_tokens == expected > 0
    tokens = dashboard_headline(conversation=conversation)["tokens"]
    assert tokens["dropped"] == min(expected, tokens["saved"])
    assert tokens["summarized"] == tokens["saved"] - tokens["dropped"]
    assert tokens["dropped_unmeasured"] == 0
    assert record.pack_ms >= 0
    request = fake_openai.completions[-1]
    assert count_messages(request.messages, model="gpt-4o-mini") == record.tokens_sent
    roles = [m["role"] for m in request.messages]
    assert "system" not in roles[1:] and roles[-1] == "user"
    talk = roles[1:] if roles[0] == "system" else roles
    assert talk[0] == "user" and all(a != b for a, b in itertools.pairwise(talk))


FAILURES = [
    # model, kind, retryable
    ("fail-401", "auth", False),
    ("fail-404", "not_found", False),
    ("fail-429", "rate_limit", True),
    ("fail-500", "server", True),
    ("fail-timeout", "timeout", True),
    ("cut-stream", "stream_cut", True),
    ("refused", "connection", True),
]


@pytest.mark.parametrize(("model", "kind", "retryable"), FAILURES)
def test_model_failure_keeps_the_message_and_marks_the_reply(
    user, conversation, echo_config, fake_openai, settings, model, kind, retryable
):
    settings.LLM_TIMEOUT_SECONDS = 1
    if model == "refused":
        _use_model(echo_config, "fake-echo", closed_port_url())
    else:
        _use_model(echo_config, model)
    result = send(user, conversation, "Is anyone there?")

    assert result.status == 200
    assert result.names[:2] == ["accepted", "start"] and result.names[-1] == "error"
    error = result.named("error")[0]
    assert error["kind"] == kind and error["retryable"] is retryable
    # The wait the endpoint named (fail-429's Retry-After: 2), for the page to hold Retry that long.
    assert error["retry_after"] == (2 if model == "fail-429" else None)
    assert error["error"] and "Traceback" not in error["error"] and TEST_KEY not in error["error"]
    assert TEST_KEY[-12:] not in json.dumps(result.events)

    user_message = Message.objects.get(conversation=conversation, role="user")
    assert user_message.content == "Is anyone there?" and user_message.status == "complete"
    reply = Message.objects.get(pk=error["message"]["id"])
    assert reply.status == "error" and error["message"]["status"] == "error"
    assert reply.error == error["error"]
    assert reply.content == result.text == error["message"]["content"]
    if model == "cut-stream":
        assert reply.content, "the partial reply is kept"

    # The failed reply is never sent again: the next request carries only the surviving exchange.
    _use_model(echo_config, "fake-echo", fake_openai.base_url)
    fake_openai.reset()
    retry = post_stream(user, f"/api/messages/{user_message.pk}/retry/")
    assert retry.names[-1] == "done"
    assert fake_openai.completions[-1].messages == [{"role": "user", "content": "Is anyone there?"}]
    reply.refresh_from_db()
    assert reply.status == "error" and reply.superseded  # still visible, marked
    new_reply = Message.objects.get(pk=retry.named("start")[0]["assistant_message"]["id"])
    assert new_reply.reply_to_id == user_message.pk and new_reply.status == "complete"


def test_flaky_endpoint_then_retry(user, conversation, echo_config, fake_openai):
    _use_model(echo_config, "flaky-500-then-200")
    fake_openai.reset()
    first = send(user, conversation, "ping")
    assert first.names[-1] == "error" and first.named("error")[0]["retryable"]
    user_id = first.named("start")[0]["user_message"]["id"]
    retried = post_stream(user, f"/api/messages/{user_id}/retry/")
    assert retried.names[-1] == "done"
    assert Message.objects.filter(conversation=conversation, role="user").count() == 1


def test_replaced_and_failed_replies_are_not_sent_again(user, conversation, echo_config, fake_openai):
    first = send(user, conversation, "one")
    old_reply = first.named("done")[0]["message"]
    regenerated = post_stream(user, f"/api/messages/{old_reply['id']}/regenerate/")
    assert regenerated.names[-1] == "done"
    new_reply = regenerated.named("done")[0]["message"]
    assert Message.objects.get(pk=old_reply["id"]).superseded

    _use_model(echo_config, "cut-stream")
    broken = send(user, conversation, "two")
    assert broken.names[-1] == "error"
    _use_model(echo_config, "fake-echo")

    fake_openai.reset()
    third = send(user, conversation, "three")
    assert third.names[-1] == "done"
    sent = fake_openai.completions[-1].messages
    assert sent == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": new_reply["content"]},
        # the failed reply is not resent, and the two questions in a row go as one (roles alternate)
        {"role": "user", "content": "two\n\nthree"},
    ]
    assert old_reply["content"] not in [m["content"] for m in sent[2:]]
    record = OptimizationRecord.objects.get(reply_id=third.named("start")[0]["assistant_message"]["id"])
    assert record.stats["request_shape"] == ["consecutive user messages merged"]


def _send_stopped_at_first_delta(user, conversation, echo_config, stop):
    """A long reply from the slow model, `stop(client, reply_id)` awaited once, at its first delta;
    returns the send's result and {"reply": its id, "stopped": what stop returned}."""
    _use_model(echo_config, "slow-150")
    state: dict = {}

    async def on_event(client, name, data):
        if name == "start":
            state["reply"] = data["assistant_message"]["id"]
        elif name == "delta" and "stopped" not in state:
            state["stopped"] = await stop(client, state["reply"])

    return send(user, conversation, "write a long story " * 5, on_event=on_event), state


def test_stop_keeps_the_partial_reply_marked_stopped(user, conversation, echo_config, fake_openai):
    async def stop_by_the_api(client, reply_id):
        return (await client.post(f"/api/messages/{reply_id}/stop/")).status_code

    result, state = _send_stopped_at_first_delta(user, conversation, echo_config, stop_by_the_api)
    assert state["stopped"] == 200
    assert result.names[-1] == "error"
    error = result.named("error")[0]
    assert error["kind"] == "stopped" and error["message"]["status"] == "stopped"
    reply = Message.objects.get(pk=state["reply"])
    assert reply.status == "stopped" and reply.content == result.text and reply.content
    full = fake_openai.completions[-1]
    assert len(reply.content) < len("Echo: received 1 messages (1 user); summary absent. Last user message: ")\
        + len(full.messages[-1]["content"])

    # The next request sends it as far as it went, as the chat shows it: "go on" reaches a model that
    # knows what it said. It is counted once, with its final text.
    _use_model(echo_config, "fake-echo")
    fake_openai.reset()
    follow = send(user, conversation, "go on")
    assert follow.names[-1] == "done"
    assert fake_openai.completions[-1].messages == [
        {"role": "user", "content": "write a long story " * 5},
        {"role": "assistant", "content": reply.content},
        {"role": "user", "content": "go on"},
    ]
    conversation.refresh_from_db()
    live = Message.objects.filter(conversation=conversation)
    assert conversation.live_message_count == live.count() == 4
    assert conversation.live_token_count == sum(m.token_count for m in live)
    assert reply.token_count == count_message({"role": "assistant", "content": reply.content}, model=reply.model)


def test_retry_after_stop_takes_the_stopped_reply_off_the_path(user, conversation, echo_config, fake_openai):
    async def stop_by_the_api(client, reply_id):
        return (await client.post(f"/api/messages/{reply_id}/stop/")).status_code

    result, state = _send_stopped_at_first_delta(user, conversation, echo_config, stop_by_the_api)
    assert result.named("error")[0]["kind"] == "stopped"
    conversation.refresh_from_db()
    assert conversation.live_message_count == 2  # the question and the reply as far as it went
    _use_model(echo_config, "fake-echo")
    fake_openai.reset()
    question = Message.objects.get(conversation=conversation, role="user")
    retried = post_stream(user, f"/api/messages/{question.pk}/retry/")
    assert retried.names[-1] == "done"
    assert fake_openai.completions[-1].messages == [{"role": "user", "content": question.content}]
    assert Message.objects.get(pk=state["reply"]).superseded
    conversation.refresh_from_db()
    assert conversation.live_message_count == 2  # the question and the new reply


def test_retry_after_stop_counts_the_history_without_the_stopped_reply(user, conversation, echo_config, fake_openai):
    """Retry takes the stopped reply off the path before packing, but the turn counted the history from
    the chat's totals as read before that: the stopped reply stayed in its full history, so the record
    and the dashboard showed tokens saved on a turn that left nothing out, and its `done` gauge said a
    larger history than the context endpoint."""
    async def stop_by_the_api(client, reply_id):
        return (await client.post(f"/api/messages/{reply_id}/stop/")).status_code

    result, _ = _send_stopped_at_first_delta(user, conversation, echo_config, stop_by_the_api)
    assert result.named("error")[0]["kind"] == "stopped"
    _use_model(echo_config, "fake-echo")
    question = Message.objects.get(conversation=conversation, role="user")
    retried = post_stream(user, f"/api/messages/{question.pk}/retry/")
    assert retried.names[-1] == "done"

    record = OptimizationRecord.objects.get(reply_id=retried.named("start")[0]["assistant_message"]["id"])
    assert record.tokens_full == record.tokens_sent  # the question alone: nothing left out, nothing saved
    assert dashboard_headline(conversation=conversation)["tokens"]["saved"] == 0
    client = Client()
    client.force_login(user)
    gauge = client.get(f"/api/conversations/{conversation.pk}/context/").json()
    assert retried.named("done")[0]["context"] == gauge


def test_a_stop_made_by_another_process_is_seen_by_the_stream(user, conversation, echo_config, fake_openai):
    # Another web process cannot flag this one's memory: it writes the status, which the stream polls.
    async def stop_in_the_database(client, reply_id):
        return await sync_to_async(Message.objects.filter(pk=reply_id, status="streaming").update)(status="stopped")

    result, state = _send_stopped_at_first_delta(user, conversation, echo_config, stop_in_the_database)
    assert state["stopped"] == 1
    assert result.named("error")[0]["kind"] == "stopped"
    reply = Message.objects.get(pk=state["reply"])
    assert reply.status == "stopped" and reply.content == result.text
    assert len(result.named("delta")) < len(fake_openai.completions[-1].messages[-1]["content"].split())


def test_a_conversation_deleted_while_its_reply_streams_ends_the_stream_with_gone(
    user, conversation, echo_config, fake_openai, caplog
):
    """Deleted in another tab mid-reply: the stream says so (no Retry, no server error) and stops
    asking the model for text nobody will keep."""
    async def delete_the_conversation(client, reply_id):
        return (await client.delete(f"/api/conversations/{conversation.pk}/")).status_code

    result, state = _send_stopped_at_first_delta(user, conversation, echo_config, delete_the_conversation)

    error = result.named("error")[0]
    assert (state["stopped"], result.names[-1]) == (204, "error")
    assert (error["kind"], error["retryable"], error["message"]) == ("gone", False, None)
    assert not Message.objects.filter(pk=state["reply"]).exists()
    # the model was asked for less than its whole reply
    assert len(result.named("delta")) < len(fake_openai.completions[-1].messages[-1]["content"].split())
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []


@pytest.mark.django_db(transaction=True)  # the deletion meets the packing's commit, as on a server
def test_a_conversation_deleted_while_its_turn_waits_to_be_packed_ends_the_stream_with_gone(
    user, conversation, echo_config, fake_openai, caplog
):
    """Deleted in another tab after `accepted`, while the turn waited in line to be packed (admission):
    the stream ends with `gone` as it does mid-reply, where it broke off with no event at all and
    logged the packing's foreign-key failure as a server error."""
    async def delete_the_conversation(client, name, data):
        if name == "accepted":
            assert (await client.delete(f"/api/conversations/{conversation.pk}/")).status_code == 204

    result = send(user, conversation, "Tell me about indexes", on_event=delete_the_conversation)

    assert result.names == ["accepted", "error"]
    error = result.named("error")[0]
    assert (error["kind"], error["retryable"], error["message"]) == ("gone", False, None)
    assert not Message.objects.exists() and not OptimizationRecord.objects.exists()
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []


def test_a_conversation_deleted_as_its_reply_past_the_trigger_is_stored_ends_the_stream_with_gone(
    user, fake_openai, monkeypatch, caplog
):
    """Deleted in another tab just as the reply is stored, in a chat past its trigger (the gauge is then
    counted again, from the conversation's row): the stream broke off with no event at all, the page
    left with a reply that never ended, and a server error logged."""
    from chatapp.chat import chat_turn

    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=6_000, max_output=1_000)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    seed_messages(conversation, 600, model="gpt-4o-mini")
    chat_deleted_around(monkeypatch, chat_turn, "reply_store", conversation_id=conversation.pk)
    result = send(user, conversation, "Summarize where we are")

    assert result.named("start")[0]["context"]["triggered"]
    assert result.names[-1] == "error", result.names
    error = result.named("error")[0]
    assert (error["kind"], error["retryable"], error["message"]) == ("gone", False, None)
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []


def test_other_users_objects_answer_404(user, other_user, conversation):
    done = send(user, conversation, "mine").named("done")[0]["message"]
    user_id = Message.objects.get(conversation=conversation, role="user").pk
    for path, payload in [
        (f"/api/conversations/{conversation.pk}/messages/", {"content": "hi"}),
        (f"/api/messages/{done['id']}/regenerate/", None),
        (f"/api/messages/{user_id}/retry/", None),
        (f"/api/messages/{done['id']}/stop/", None),
    ]:
        assert post_stream(other_user, path, payload).status == 404, path
    assert Message.objects.filter(conversation=conversation).count() == 2


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        ('{"content": ""}', 400),
        ('{"content": "   \\n  "}', 400),
        ('{"content": 5}', 400),
        ("{}", 400),
        ("[1, 2]", 400),
        ('{"content": "unterminated', 400),
    ],
)
def test_bad_input_is_refused_and_nothing_stored(user, conversation, raw, status):
    result = post_stream(user, f"/api/conversations/{conversation.pk}/messages/", raw=raw)
    assert result.status == status
    assert result.body["detail"]
    assert not Message.objects.filter(conversation=conversation).exists()


def test_too_large_answers_413_with_the_limit(user, conversation, settings):
    settings.MAX_MESSAGE_CHARS = 50
    result = send(user, conversation, "y" * 51)
    assert result.status == 413
    assert result.body["limit"] == 50 and "50" in result.body["detail"]
    assert not Message.objects.filter(conversation=conversation).exists()


def test_repeated_sends_are_rate_limited(user, conversation, settings):
    settings.SEND_RATE_LIMIT_PER_MINUTE = 2
    assert send(user, conversation, "a").status == 200
    assert send(user, conversation, "b").status == 200
    limited = send(user, conversation, "c")
    assert limited.status == 429
    assert int(limited.headers["retry-after"]) >= 1
    assert "per minute" in limited.body["detail"] and limited.body["retry_after"] >= 1
    assert Message.objects.filter(conversation=conversation, role="user").count() == 2


def test_offline_model_when_no_config(user):
    conversation = Conversation.objects.create(owner=user)
    result = send(user, conversation, "hello offline")
    assert result.names[-1] == "done"
    reply = result.named("done")[0]["message"]
    assert reply["model"] == "offline-demo" and reply["content"]


def test_offline_model_is_told_what_the_optimizer_did(user):
    conversation = Conversation.objects.create(owner=user)
    seed_messages(conversation, 1_000, model="offline-demo")
    result = send(user, conversation, "what do you see?")
    reply = result.named("done")[0]["message"]["content"]
    assert "not sent verbatim" in reply
    assert result.named("start")[0]["context"]["triggered"]


def test_provider_prompt_cache_lowers_the_sent_cost(user, fake_openai):
    import optimizer

    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=128_000, max_output=1_000)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    seed_messages(conversation, 100, model="gpt-4o-mini")
    fake_openai.reset()
    assert send(user, conversation, "first").names[-1] == "done"
    assert send(user, conversation, "second").names[-1] == "done"
    first, record = OptimizationRecord.objects.filter(conversation=conversation).order_by("id")
    assert first.provider_cached_tokens == 0  # reported by the endpoint: nothing cached yet
    cached = record.provider_cached_tokens
    assert 0 < cached <= record.tokens_sent
    uncached = optimizer.cost_usd("gpt-4o-mini", prompt_tokens=record.tokens_sent)
    assert float(record.cost_sent_usd) == pytest.approx(
        optimizer.cost_usd("gpt-4o-mini", prompt_tokens=record.tokens_sent, cached_tokens=cached), abs=1e-6
    )
    assert float(record.cost_sent_usd) < uncached


@pytest.mark.parametrize("history", [0, 40, 600])
def test_done_gauge_is_what_the_next_request_will_send(user, fake_openai, history):
    from chatapp.chat.gauge import context_gauge

    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=6_000, max_output=1_000)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    seed_messages(conversation, history, model="gpt-4o-mini")
    for text in ("first question", "second question"):
        done = send(user, conversation, text).named("done")[0]
        conversation.refresh_from_db()
        assert done["context"] == context_gauge(conversation=conversation, user=user)

    # And it is what the next request then sends (before its own new message).
    gauge = done["context"]
    result = send(user, conversation, "third")
    start = result.named("start")[0]
    user_tokens = Message.objects.get(pk=start["user_message"]["id"]).token_count
    if not start["context"]["triggered"]:
        assert start["context"]["tokens"] == gauge["tokens"] + user_tokens


def test_silent_model_gets_keep_alive_comments_between_events(user, conversation, echo_config, settings):
    # The model waits 300 ms before each chunk; keep-alives are due after 50 ms of silence.
    settings.SSE_KEEPALIVE_SECONDS = 0.05
    _use_model(echo_config, "slow-300")
    state: dict = {}

    async def stop_after_two_deltas(client, name, data):
        if name == "start":
            state["reply"] = data["assistant_message"]["id"]
        elif name == "delta" and not state.get("stopped"):
            state["deltas"] = state.get("deltas", 0) + 1
            if state["deltas"] == 2:
                state["stopped"] = (await client.post(f"/api/messages/{state['reply']}/stop/")).status_code

    result = send(user, conversation, "think before you answer", on_event=stop_after_two_deltas)
    # Stopped: the stream stayed parseable.
    assert result.names[:2] == ["accepted", "start"] and result.names[-1] == "error"
    assert result.comments and {text for _, text in result.comments} == {"keep-alive"}
    # Sent while the model was silent: after `start`, before the reply ended — and on time, between
    # two chunks 300 ms apart, not only when something else woke the stream.
    assert all(1 <= position < len(result.events) for position, _ in result.comments)
    assert any(result.names[position] == "delta" for position, _ in result.comments)


def test_fast_model_gets_no_keep_alive(user, conversation):
    assert send(user, conversation, "hello").comments == []


def test_event_stream_accept_header_is_accepted_and_errors_stay_json(user, other_user, conversation):
    stream = "text/event-stream"
    sent = send(user, conversation, "hello", accept=stream)
    assert sent.status == 200 and sent.names[-1] == "done"
    assert sent.headers["content-type"].startswith("text/event-stream")
    reply_id = sent.named("done")[0]["message"]["id"]
    regenerated = post_stream(user, f"/api/messages/{reply_id}/regenerate/", accept=stream)
    assert regenerated.status == 200 and regenerated.names[-1] == "done"
    user_id = sent.named("start")[0]["user_message"]["id"]
    retried = post_stream(user, f"/api/messages/{user_id}/retry/", accept=stream)
    assert retried.status == 400 and retried.headers["content-type"] == "application/json"
    assert "Regenerate" in retried.body["detail"]

    empty = send(user, conversation, "  ", accept=stream)
    assert empty.status == 400 and empty.headers["content-type"] == "application/json" and empty.body["detail"]
    assert post_stream(other_user, f"/api/conversations/{conversation.pk}/messages/", {"content": "x"},
                       accept=stream).status == 404
    # Clients that accept neither are still refused.
    assert send(user, conversation, "hello", accept="image/png").status == 406


def test_a_regenerate_that_lost_the_race_answers_409(user, conversation, monkeypatch):
    reply_id = send(user, conversation, "hello").named("done")[0]["message"]["id"]
    stale = Message.objects.get(pk=reply_id)  # what the losing request read
    first = post_stream(user, f"/api/messages/{reply_id}/regenerate/")
    assert first.status == 200 and first.names[-1] == "done"
    monkeypatch.setattr(
        stream_views, "chat_regenerate_start", lambda *, user, reply: chat_regenerate_start(user=user, reply=stale)
    )

    second = post_stream(user, f"/api/messages/{reply_id}/regenerate/")

    assert second.status == 409 and "Reload the conversation" in second.body["detail"]
    assert Message.objects.filter(reply_to_id=stale.reply_to_id).count() == 2  # the first reply and one regenerate


def test_the_start_event_carries_the_title_a_first_message_gives(user, conversation, echo_config):
    """The header follows the title even when the first reply fails (issue 14, finding 10)."""
    _use_model(echo_config, "fail-500")
    result = send(user, conversation, "Plan a weekend in Porto")
    assert result.names[-1] == "error"
    conversation.refresh_from_db()
    assert conversation.title != "New chat"
    assert result.named("start")[0]["title"] == conversation.title


def test_a_message_has_one_shape_in_the_stream_and_the_api(user, conversation, fake_openai):
    from django.test import Client

    from chatapp.chat.api.serializers import MessageOutputSerializer

    result = send(user, conversation, "Tell me about **indexes**")
    user_sent = result.named("start")[0]["user_message"]
    reply_sent = result.named("done")[0]["message"]
    client = Client()
    client.force_login(user)
    listed = {m["id"]: m for m in client.get(f"/api/conversations/{conversation.pk}/messages/").json()["results"]}
    # the start event leaves the user's message unrendered (the first byte does not wait on markdown)
    assert user_sent["html"] is None and listed[user_sent["id"]]["html"]
    assert listed[user_sent["id"]] == {**user_sent, "html": listed[user_sent["id"]]["html"]}
    assert listed[reply_sent["id"]] == reply_sent
    # the serializer that documents the shape in the schema declares exactly these fields
    assert set(MessageOutputSerializer().fields) == set(reply_sent)


def test_a_reply_the_content_filter_ends_part_way_is_kept_marked_and_the_chat_goes_on(user, conversation, echo_config,
                                                                                    fake_openai):
    """End to end: the text before the filter's end is kept and shown with the reason, Retry offered, the
    tokens billed on the record, and the chat takes the next message."""
    from tests.support.wire import chunk, chunked, head, sse, wire_server

    usage = {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}
    body = sse(chunk({"content": "Step one: take the"}), chunk({}, "content_filter"), chunk(None, usage=usage),
               "[DONE]")
    with wire_server(([head(), chunked(body)], False)) as server:
        _use_model(echo_config, "m", server.base_url)
        result = send(user, conversation, "How do I do it?")

    assert result.names[-1] == "error" and result.text == "Step one: take the"
    error = result.named("error")[0]
    assert error["kind"] == "bad_request" and error["retryable"] and "content filter" in error["error"]
    reply = Message.objects.get(pk=error["message"]["id"])
    assert (reply.status, reply.content, reply.error) == ("error", "Step one: take the", error["error"])
    assert (reply.prompt_tokens, reply.completion_tokens) == (12, 4)
    assert OptimizationRecord.objects.get(reply_id=reply.pk).provider_prompt_tokens == 12

    _use_model(echo_config, "fake-echo", fake_openai.base_url)
    assert send(user, conversation, "Something else, then").names[-1] == "done"
