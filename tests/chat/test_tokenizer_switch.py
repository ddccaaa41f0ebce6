"""A chat moved to a model with another tokenizer: its stored counts are the old tokenizer's, so the
gauge and the records say they are estimates instead of claiming to be exact."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

import optimizer
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation, OptimizationRecord
from chatapp.providers.services import llm_config_delete, llm_config_make_default, llm_config_update
from tests.support.chat import make_config, send

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_rate_limit")]

QUESTIONS = [
    "Could you compare freestanding and semi-freestanding tents for exposed alpine campsites?",
    "What guy-line configuration resists gusts above fifty kilometres per hour on granite slabs?",
    "How should I pitch the vestibule relative to the prevailing wind direction overnight?",
]


def _switch(api: APIClient, conversation: Conversation, config) -> dict:
    response = api.patch(f"/api/conversations/{conversation.pk}/", {"llm_config": config.pk}, format="json")
    assert response.status_code == 200
    return api.get(f"/api/conversations/{conversation.pk}/context/").json()


def test_a_switch_to_another_tokenizer_marks_the_counts_estimated(user, fake_openai):
    o200k = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=16_000, max_output=500)
    also_o200k = make_config(user, fake_openai.base_url, model="gpt-4o", window=16_000, max_output=500, name="4o")
    cl100k = make_config(user, fake_openai.base_url, model="gpt-4", window=8_192, max_output=500, name="gpt-4")
    conversation = Conversation.objects.create(owner=user, llm_config=o200k)
    for text in QUESTIONS[:2]:
        assert send(user, conversation, text).names[-1] == "done"
    api = APIClient()
    api.force_authenticate(user)

    assert _switch(api, conversation, also_o200k)["estimated"] is False  # the same tokenizer: still exact
    # the old tokenizer's counts were flagged exact: 205 counted where gpt-4 was sent 213
    assert _switch(api, conversation, cl100k)["estimated"] is True
    conversation.refresh_from_db()
    assert send(user, conversation, QUESTIONS[2]).names[-1] == "done"
    record = OptimizationRecord.objects.filter(conversation=conversation).latest("id")
    assert (record.model, record.estimated) == ("gpt-4", True)
    assert _switch(api, conversation, o200k)["estimated"] is True  # mixed for good: nothing was recounted


def test_a_new_chat_switched_before_its_first_message_stays_exact(user, fake_openai):
    o200k = make_config(user, fake_openai.base_url, model="gpt-4o-mini")
    cl100k = make_config(user, fake_openai.base_url, model="gpt-4", window=8_192, max_output=500, name="gpt-4")
    conversation = Conversation.objects.create(owner=user, llm_config=o200k)
    api = APIClient()
    api.force_authenticate(user)

    assert _switch(api, conversation, cl100k)["estimated"] is False


# Written for this test: Russian prose, which cl100k cuts into about 1.7 times the tokens o200k does.
ROUTE = ("День {n}: мы поднялись к перевалу по каменистой тропе, поставили палатку у холодного озера, "  # noqa: RUF001 - Cyrillic on purpose
         "а утром спустились через берёзовый лес к деревне, где купили хлеб и сыр.")  # noqa: RUF001 - Cyrillic on purpose


def test_a_switch_to_a_tokenizer_that_counts_more_still_sends_what_fits(user, fake_openai):
    o200k = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=128_000, max_output=500)
    cl100k = make_config(user, fake_openai.base_url, model="gpt-4", window=8_192, max_output=500, name="gpt-4")
    conversation = Conversation.objects.create(owner=user, llm_config=o200k)
    for n in range(240):  # about 13,000 tokens as o200k counts them, stored with the chat
        message_append(conversation=conversation, role="user" if n % 2 == 0 else "assistant",
                       content=ROUTE.format(n=n))
    api = APIClient()
    api.force_authenticate(user)
    assert _switch(api, conversation, cl100k)["estimated"] is True
    conversation.refresh_from_db()

    assert send(user, conversation, "Где мы ночевали на второй день похода?").names[-1] == "done"

    sent = fake_openai.completions[-1].messages
    # The stored counts said the request fits; what gpt-4's tokenizer makes of it must fit too, or the
    # provider refuses it (context_length_exceeded).
    assert optimizer.count_messages(sent, model="gpt-4") <= 8_192 - 500
    assert len(sent) > 10  # still a conversation, not just the question


def test_must_keep_messages_that_only_fit_by_the_old_counts_are_refused_against_the_models_budget(
        user, fake_openai):
    o200k = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=128_000, max_output=500)
    cl100k = make_config(user, fake_openai.base_url, model="gpt-4", window=8_192, max_output=500, name="gpt-4")
    conversation = Conversation.objects.create(owner=user, llm_config=o200k)
    for n in range(120):  # pinned, so always sent: about 6,600 tokens as o200k counts them, 9,000+ for gpt-4
        message_append(conversation=conversation, role="user" if n % 2 == 0 else "assistant",
                       content=ROUTE.format(n=n), pinned=True)
    api = APIClient()
    api.force_authenticate(user)
    _switch(api, conversation, cl100k)
    conversation.refresh_from_db()

    before = len(fake_openai.completions)
    result = send(user, conversation, "Где мы купили сыр?")

    [error] = result.named("error")
    assert error["kind"] == "context_too_large"
    # The model's budget (8,192 - 500), not the smaller room the estimates were packed again into.
    assert "the model's budget is 7,692" in error["error"]
    needed = int(error["error"].split(" need ")[1].split(" tokens")[0].replace(",", ""))
    assert needed > 7_692
    # nothing the provider would refuse was sent
    assert not any("купили сыр?" in str(c.messages) for c in fake_openai.completions[before:])


def _route_chat(user, config) -> Conversation:
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    for n in range(240):  # about 13,000 tokens as o200k counts them, stored with the chat
        message_append(conversation=conversation, role="user" if n % 2 == 0 else "assistant",
                       content=ROUTE.format(n=n))
    return conversation


def _edit_model(user, o200k, fake_openai):
    llm_config_update(config=o200k, model="gpt-4", context_window=8_192)


def _delete_config(user, o200k, fake_openai):
    llm_config_make_default(config=make_config(user, fake_openai.base_url, model="gpt-4", window=8_192,
                                               max_output=500, name="gpt-4"))
    llm_config_delete(config=o200k)  # its chats follow the default from now on


def _default_followed_changes(user, o200k, fake_openai):
    llm_config_delete(config=o200k)  # its chats follow the default: gpt-4o-mini's, the same tokenizer
    llm_config_make_default(config=make_config(user, fake_openai.base_url, model="gpt-4", window=8_192,
                                               max_output=500, name="gpt-4"))


@pytest.mark.parametrize("move", [_edit_model, _delete_config, _default_followed_changes])
def test_a_chat_whose_model_moves_with_its_config_counts_for_the_new_tokenizer(user, fake_openai, move):
    """The model of a chat also changes without the chat being edited: its config's model is edited, its
    config is deleted (it follows the default), or the default it follows changes. Its counts are the
    old tokenizer's then too: estimates, and the request fits what the model's tokenizer counts."""
    o200k = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=8_192, max_output=500)
    make_config(user, fake_openai.base_url, model="gpt-4o", window=8_192, max_output=500, name="4o")
    llm_config_make_default(config=o200k)
    conversation = _route_chat(user, o200k)
    api = APIClient()
    api.force_authenticate(user)
    assert api.get(f"/api/conversations/{conversation.pk}/context/").json()["estimated"] is False

    move(user, o200k, fake_openai)

    conversation.refresh_from_db()
    assert api.get(f"/api/conversations/{conversation.pk}/context/").json()["estimated"] is True
    assert send(user, conversation, "Где мы ночевали на второй день похода?").names[-1] == "done"
    sent = fake_openai.completions[-1].messages
    assert fake_openai.completions[-1].model == "gpt-4"
    assert optimizer.count_messages(sent, model="gpt-4") <= 8_192 - 500


def test_a_config_edited_to_a_model_of_the_same_tokenizer_keeps_its_chats_counts_exact(user, fake_openai):
    o200k = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=8_192, max_output=500)
    conversation = Conversation.objects.create(owner=user, llm_config=o200k)
    message_append(conversation=conversation, role="user", content=ROUTE.format(n=1))
    llm_config_update(config=o200k, model="gpt-4o")
    conversation.refresh_from_db()
    assert conversation.token_counts_mixed is False


def test_a_history_under_the_trigger_that_the_new_tokenizer_counts_just_past_the_budget_still_fits(
        user, fake_openai):
    """1,099 tokens as o200k counts them, 1,784 for gpt-4, whose budget is 1,780: packed again in less
    room, the history stayed under that room's trigger and went out unchanged, three times, and the
    third packing was sent without being counted: 4 tokens past the window (context_length_exceeded)."""
    o200k = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=128_000, max_output=500)
    cl100k = make_config(user, fake_openai.base_url, model="gpt-4", window=2_080, max_output=300, name="gpt-4")
    conversation = Conversation.objects.create(owner=user, llm_config=o200k)
    for n in range(20):
        message_append(conversation=conversation, role="user" if n % 2 == 0 else "assistant",
                       content=ROUTE.format(n=n))
    api = APIClient()
    api.force_authenticate(user)
    _switch(api, conversation, cl100k)
    conversation.refresh_from_db()

    assert send(user, conversation, "Где мы ночевали на второй день похода?").names[-1] == "done"

    sent = fake_openai.completions[-1].messages
    assert optimizer.count_messages(sent, model="gpt-4") <= 2_080 - 300
    record = OptimizationRecord.objects.filter(conversation=conversation).latest("id")
    assert record.tokens_sent <= record.budget
