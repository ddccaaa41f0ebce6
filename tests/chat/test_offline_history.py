"""The offline demo model's replies describe the context they were sent, not the conversation: they
are never sent to a real model as history, nor quoted by recall (issue 14, finding 8)."""

from __future__ import annotations

import pytest

from chatapp.chat.context import live_chat_q, offline_reply_q
from chatapp.chat.models import Message, OptimizationRecord
from chatapp.chat.recall_source import DatabaseRecallSource
from chatapp.chat.search_services import conversation_index_rebuild
from chatapp.chat.services import conversation_create, conversation_set_config
from chatapp.providers.llm import OFFLINE_MODEL
from optimizer.lexical import build_query
from tests.support.chat import make_config, send

pytestmark = pytest.mark.django_db


def test_offline_replies_are_not_history_for_a_real_model(user, fake_openai):
    conversation = conversation_create(owner=user)  # no model yet: the offline demo answers
    assert conversation.offline
    first = send(user, conversation, "We keep invoices in PostgreSQL.")
    assert first.names[-1] == "done", first.events
    offline_reply = Message.objects.get(conversation=conversation, role="assistant")
    assert offline_reply.model == OFFLINE_MODEL
    # still the demo's own history while the demo answers
    again = send(user, conversation, "And what did you see?")
    assert again.names[-1] == "done"
    assert OptimizationRecord.objects.latest("id").messages_after == 3

    config = make_config(user, fake_openai.base_url)
    config.is_default = True
    config.save()
    fake_openai.reset()
    # a model added later does not take the chat over: it stays with the demo until the user switches
    stays = send(user, conversation, "Still there?")
    assert stays.names[-1] == "done", stays.events
    assert fake_openai.completions == []
    assert Message.objects.filter(conversation=conversation, role="assistant").latest("id").model == OFFLINE_MODEL

    conversation_set_config(conversation=conversation, llm_config=config)
    result = send(user, conversation, "Which database holds the invoices?")

    assert result.names[-1] == "done", result.events
    [received] = [c.messages for c in fake_openai.completions]
    assert received == [{
        "role": "user",
        "content": "We keep invoices in PostgreSQL.\n\nAnd what did you see?\n\nStill there?\n\n"
                   "Which database holds the invoices?",
    }]


def test_the_database_source_never_gives_recall_an_offline_reply_to_quote_to_a_real_model(user, conversation):
    Message.objects.create(conversation=conversation, role="user", content="Tell me about the lighthouse.")
    demo = Message.objects.create(conversation=conversation, role="assistant", model=OFFLINE_MODEL,
                                  content="The lighthouse context holds 2 messages.")
    real = Message.objects.create(conversation=conversation, role="assistant", model="fake-echo",
                                  content="The lighthouse was built in 1902.")
    conversation_index_rebuild(conversation=conversation)
    ids = [str(demo.pk), str(real.pk)]
    hits = DatabaseRecallSource(conversation=conversation).search(
        build_query("lighthouse"), limit=10, exclude_ids=frozenset()
    )
    assert set(ids) <= {i for i, _ in hits}
    assert set(DatabaseRecallSource(conversation=conversation).messages(ids)) == set(ids)  # the demo's own view
    assert set(DatabaseRecallSource(conversation=conversation, offline_replies=False).messages(ids)) == {str(real.pk)}


def test_the_api_switches_a_chat_to_the_offline_model_and_back_and_the_next_turn_follows(user, fake_openai):
    from rest_framework.test import APIClient

    config = make_config(user, fake_openai.base_url)
    config.is_default = True
    config.save()
    conversation = conversation_create(owner=user)
    assert not conversation.offline and conversation.llm_config_id == config.pk
    api = APIClient()
    api.force_authenticate(user)
    url = f"/api/conversations/{conversation.pk}/"

    switched = api.patch(url, {"offline": True}, format="json")
    assert switched.status_code == 200 and (switched.json()["offline"], switched.json()["llm_config"]) == (True, None)
    fake_openai.reset()
    demo = send(user, conversation, "Who answers now?")
    assert demo.names[-1] == "done", demo.events
    assert demo.named("done")[0]["message"]["model"] == OFFLINE_MODEL
    assert fake_openai.completions == []

    back = api.patch(url, {"llm_config": config.pk}, format="json")
    assert back.status_code == 200 and (back.json()["offline"], back.json()["llm_config"]) == (False, config.pk)
    real = send(user, conversation, "And now?")
    assert real.names[-1] == "done", real.events
    assert real.named("done")[0]["message"]["model"] == config.model
    assert len(fake_openai.completions) == 1


def _offline_totals(conversation) -> tuple[int, int, int]:
    conversation.refresh_from_db()
    return conversation.offline_reply_count, conversation.offline_reply_chars, conversation.offline_reply_tokens


def _offline_rows(conversation) -> tuple[int, int, int]:
    live = Message.objects.filter(live_chat_q(), offline_reply_q(), conversation=conversation)
    return live.count(), sum(live.values_list("char_count", flat=True)), sum(live.values_list("token_count", flat=True))


def test_a_chat_switched_from_the_demo_to_a_real_model_counts_only_its_real_history(user, fake_openai):
    """The demo's replies stay counted apart through regenerate and branch switches, so a real model's
    gauge, trigger and record see the history it is sent: no needless cut and no "saved" figure."""
    from rest_framework.test import APIClient

    from tests.support.chat import post_stream

    api = APIClient()
    api.force_authenticate(user)
    conversation = conversation_create(owner=user)
    for question in ("We keep invoices in PostgreSQL.", "The backups run at 02:00.", "Reports go out on Fridays."):
        assert send(user, conversation, question).names[-1] == "done"
    assert _offline_totals(conversation) == _offline_rows(conversation) and _offline_totals(conversation)[0] == 3

    last = Message.objects.filter(conversation=conversation, role="assistant").latest("id")
    assert post_stream(user, f"/api/messages/{last.pk}/regenerate/").names[-1] == "done"
    assert _offline_totals(conversation) == _offline_rows(conversation) and _offline_totals(conversation)[0] == 3
    shown = api.post(f"/api/messages/{last.pk}/branch/", {"index": 1}, format="json")
    assert shown.status_code == 200, shown.content
    assert _offline_totals(conversation) == _offline_rows(conversation) and _offline_totals(conversation)[0] == 3

    demo_tokens = _offline_totals(conversation)[2]
    users = list(Message.objects.filter(live_chat_q(), conversation=conversation, role="user"))
    real_history = sum(m.token_count for m in users)
    # a window whose trigger the demo's long replies would cross, but the questions alone are far under
    config = make_config(user, fake_openai.base_url, window=500 + 3 * (real_history + demo_tokens) // 4, max_output=500)
    conversation_set_config(conversation=conversation, llm_config=config)
    gauge = api.get(f"/api/conversations/{conversation.pk}/context/").json()
    assert gauge["history_tokens"] < real_history + 20 < gauge["budget"] * 0.8 < real_history + demo_tokens

    fake_openai.reset()
    result = send(user, conversation, "Which database holds the invoices?")

    assert result.names[-1] == "done", result.events
    record = OptimizationRecord.objects.latest("id")
    assert record.strategy == "none" and record.tokens_full == record.tokens_sent
    [received] = [c.messages for c in fake_openai.completions]
    assert [m["role"] for m in received] == ["user"]  # the questions, merged: nothing of the demo's
    conversation.refresh_from_db()
    assert _offline_totals(conversation)[0] == 3  # the real model's reply is not the demo's
