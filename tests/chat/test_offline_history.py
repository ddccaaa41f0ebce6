"""The offline demo model's replies describe the context they were sent, not the conversation: they
are never sent to a real model as history, nor quoted by recall (issue 14, finding 8)."""

from __future__ import annotations

import pytest

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
