"""The gauge says what the next request does with the messages left out: which ones the summary it
sends stands in for, and whether the daily limit turned summaries into truncation (issue 14,
findings 2 and 10)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from chatapp.chat import chat_turn
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation
from chatapp.chat.services import user_settings_update
from tests.support.chat import make_config, post_stream, seed_messages

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_summary_ahead(monkeypatch):
    """These turns end near the trigger, where a reply asks for a summary ahead of need on the summary
    requests' thread, which outlives the test: its job landed in a later test's database
    (tests/chat/test_summary_requests.py then found an `ahead` job where it looks for its own). The
    gauge is what is tested here; summaries ahead are tested in test_summary_requests.py."""
    monkeypatch.setattr(chat_turn, "summary_ahead_submit", lambda **kwargs: None)


@pytest.fixture
def long_chat(user, fake_openai):
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=4_000, max_output=500)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    ids = seed_messages(conversation, 300, model="gpt-4o-mini")
    message_append(
        conversation=conversation, role="system", kind="summary", content="[Conversation summary]\n\nEarly part.",
        covers_from_id=ids[1], covers_through_id=ids[99],
    )
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[200])
    client = APIClient()
    client.force_authenticate(user)
    return conversation, ids, client


def test_the_gauge_names_what_the_summary_sent_covers(long_chat):
    conversation, ids, client = long_chat
    gauge = client.get(f"/api/conversations/{conversation.pk}/context/").json()
    assert gauge["window_start_id"] >= ids[200]
    assert gauge["summary_through_id"] == ids[99]  # what lies between is left out, not summarized
    assert gauge["summary_quota_reached"] is False


def test_the_gauge_says_when_the_daily_limit_turned_summaries_into_truncation(long_chat, user, settings):
    conversation, _, client = long_chat
    user_settings_update(user=user, preference="quality")
    settings.SUMMARIES_PER_DAY = 0
    gauge = client.get(f"/api/conversations/{conversation.pk}/context/").json()
    assert gauge["summary_quota_reached"] is True and gauge["strategy"] == "truncate"


def test_a_system_prompt_over_the_budget_is_said_shortened_and_the_summary_still_goes(long_chat):
    conversation, ids, client = long_chat
    assert client.get(f"/api/conversations/{conversation.pk}/context/").json()["prompt_shortened"] is False
    rules = "\n".join(f"Rule {i}: answer in the house style, citing handbook section {i}." for i in range(250))
    assert client.patch(f"/api/conversations/{conversation.pk}/", {"system_prompt": rules},
                        format="json").status_code == 200

    gauge = client.get(f"/api/conversations/{conversation.pk}/context/").json()

    assert gauge["prompt_shortened"] is True and gauge["tokens"] <= gauge["budget"]
    # compressing the prompt made room: the summary in use is sent beside it (it was dropped)
    assert gauge["summary_through_id"] == ids[99]


def test_the_gauge_after_a_reply_still_says_the_prompt_is_shortened(user, fake_openai, no_rate_limit):
    # The gauge a reply ends with (no repacking below the trigger) lost the flag: the row went away.
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=4_000, max_output=500)
    rules = "\n".join(f"Rule {i}: answer in the house style, citing handbook section {i}." for i in range(250))
    conversation = Conversation.objects.create(owner=user, llm_config=config, system_prompt=rules)

    sent = post_stream(user, f"/api/conversations/{conversation.pk}/messages/", {"content": "Hello there"})

    assert sent.names[-1] == "done"
    assert sent.named("start")[0]["context"]["prompt_shortened"] is True
    assert sent.named("done")[0]["context"]["prompt_shortened"] is True


def test_a_message_too_long_for_the_budget_is_named_shortened(user, fake_openai, no_rate_limit):
    """A pasted text longer than the budget goes as its beginning and end: the gauge names the message,
    so the chat can mark it (it said nothing, and the gauge looked healthy)."""
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=4_000, max_output=500)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    pasted = "\n".join(f"Line {i} of the log: service {i % 7} answered in {i * 3} ms." for i in range(600))

    sent = post_stream(user, f"/api/conversations/{conversation.pk}/messages/", {"content": pasted})

    assert sent.names[-1] == "done"
    question = sent.named("start")[0]["user_message"]["id"]
    assert sent.named("start")[0]["context"]["shortened_message_ids"] == [question]
    # Nothing is left out: the strategy says none (it said truncate, which the chat read as turns dropped).
    assert sent.named("start")[0]["context"]["strategy"] == sent.named("done")[0]["context"]["strategy"] == "none"
    assert sent.named("done")[0]["context"]["tokens"] <= sent.named("done")[0]["context"]["budget"]
    client = APIClient()
    client.force_authenticate(user)
    gauge = client.get(f"/api/conversations/{conversation.pk}/context/").json()
    assert question in gauge["shortened_message_ids"]  # the next request sends it shortened too

    # A message that fits is named by none.
    short = Conversation.objects.create(owner=user, llm_config=config)
    sent = post_stream(user, f"/api/conversations/{short.pk}/messages/", {"content": "Hello there"})
    assert sent.named("start")[0]["context"]["shortened_message_ids"] == []


def test_the_gauge_a_reply_ends_with_is_the_next_requests_just_under_the_trigger(user, fake_openai, no_rate_limit):
    """Below the trigger the `done` gauge is this context plus the reply, without packing again. The
    trigger judges the request as packed, while the gauge counts it as shaped (the custom instructions
    and the system prompt joined into one message, a few tokens fewer): a history those few tokens
    under the trigger by the gauge's count is over it by the packer's, and the next request cut it to
    half while the gauge said nothing would move."""
    user_settings_update(user=user, custom_instructions="Answer briefly.", generate_titles=False)
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=2_500, max_output=500)
    client = APIClient()
    client.force_authenticate(user)
    cut = 0
    for pad in range(12):  # the history a token or two at a time across the trigger (1,600 of 2,000)
        conversation = Conversation.objects.create(owner=user, llm_config=config, system_prompt="You guide hikes.")
        for n in range(14):
            message_append(conversation=conversation, role="user" if n % 2 == 0 else "assistant",
                           content=f"Turn {n}: " + "walk " * 100)
        message_append(conversation=conversation, role="user", content="pad " * (pad + 1))
        message_append(conversation=conversation, role="assistant", content="ok")
        conversation.refresh_from_db()

        sent = post_stream(user, f"/api/conversations/{conversation.pk}/messages/", {"content": "and then?"})

        assert sent.names[-1] == "done"
        done = sent.named("done")[0]["context"]
        gauge = client.get(f"/api/conversations/{conversation.pk}/context/").json()
        assert (done["tokens"], done["window_start_id"]) == (gauge["tokens"], gauge["window_start_id"]), pad
        cut += gauge["window_start_id"] is not None
    assert 0 < cut < 12  # the trigger was crossed within the range


def test_the_gauge_a_cut_turn_ends_with_is_the_context_endpoints(user, fake_openai, no_rate_limit):
    """The turn that first cuts the window lets recall fill the room the cut freed (no prompt prefix is
    cached yet); its `done` gauge counted that block as the next request's, 67 % of the budget, where
    the next request (and the context endpoint, after a reload) sends 40 %: the figures the README says
    are the context endpoint's."""
    user_settings_update(user=user, preference="fast", generate_titles=False)
    config = make_config(user, fake_openai.base_url, model="gpt-4", window=2_500, max_output=100)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    client = APIClient()
    client.force_authenticate(user)
    cuts = 0
    for turn in range(14):
        topic = ["invoices", "orders", "tents", "routes"][turn % 4]
        words = " ".join(f"{topic}{(turn * 13 + j) % 50}" for j in range(40 if turn % 3 else 120))
        sent = post_stream(user, f"/api/conversations/{conversation.pk}/messages/",
                           {"content": f"Turn {turn}: {words}"})
        assert sent.names[-1] == "done"
        cuts += sent.named("start")[0]["context"]["triggered"]
        gauge = client.get(f"/api/conversations/{conversation.pk}/context/").json()
        assert sent.named("done")[0]["context"] == gauge, turn
    assert cuts  # the chat was cut at least once
