"""Chat titles written by the model (title_services): asked for after a new chat's first complete reply,
off the request path, of the summary model when the user chose one; never over a title the user set."""

from __future__ import annotations

import json

import pytest

from chatapp.chat import title_services
from chatapp.chat.message_services import TITLE_MAX_CHARS, title_cut
from chatapp.chat.models import Conversation, UserSettings
from chatapp.chat.summary_requests import summary_requests_wait
from chatapp.chat.title_services import conversation_title_generate, title_clean
from tests.support.chat import make_config, send
from tests.support.fake_openai import echo_reply

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "how do I rotate the nginx logs every night without losing lines?"


@pytest.fixture(autouse=True)
def _no_send_rate_limit(settings):
    settings.SEND_RATE_LIMIT_PER_MINUTE = 1000


@pytest.mark.parametrize(("answer", "title"), [
    ('Title: "Nightly nginx log rotation".', "Nightly nginx log rotation"),
    ("<think>They ask about logs.\nA short name.</think>\n\n**Rotating nginx logs**\nMore text", "Rotating nginx logs"),
    ("«Rotation des journaux»", "Rotation des journaux"),
    ("<think>never closed", ""),
    ("**Title:** Nightly nginx log rotation", "Nightly nginx log rotation"),
    ("## Title:\nNightly nginx log rotation", "Nightly nginx log rotation"),
    ("Nginx\x00 log rotation", "Nginx\ufffd log rotation"),  # what no column stores (NUL, a lone surrogate)
    ("Log rotation \udc00", "Log rotation \ufffd"),
    ("  \n\"\"\n", ""),
])
def test_a_models_answer_is_cleaned_to_its_title(answer, title):
    assert title_clean(answer) == title


@pytest.mark.parametrize("cluster", ["नमस्ते", "ตัดคำ", "\U0001f469\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"])
def test_a_long_title_is_cut_between_user_perceived_characters(cluster):
    # Cut between code points, Devanagari lost its vowel sign, Thai its last mark, an emoji family its members.
    import regex

    for lead in range(4):
        line = "a" * lead + cluster * 40
        cut = title_cut(line).removesuffix("…")
        assert cut and set(regex.findall(r"\X", cut)) <= set(regex.findall(r"\X", line))


def test_a_long_answer_is_cut_at_a_word():
    cleaned = title_clean("word " * 40)
    assert len(cleaned) <= TITLE_MAX_CHARS and cleaned.endswith("…") and not cleaned.endswith(" …")


def test_the_first_reply_asks_for_a_title_and_later_ones_do_not(user, fake_openai, titles_requested):
    """Once per chat: later replies, a regenerated first one, or the same request made twice ask nothing."""
    conversation = Conversation.objects.create(owner=user, llm_config=make_config(user, fake_openai.base_url))

    first = send(user, conversation, QUESTION)
    assert first.named("done")[0]["title_pending"] is True
    summary_requests_wait(timeout=10)
    first_words = Conversation.objects.get(pk=conversation.pk).title
    assert first_words.startswith("how do I rotate") and titles_requested == [(conversation.pk, first_words)]

    second = send(user, conversation, "and weekly?")
    assert second.named("done")[0]["title_pending"] is False
    title_services.title_request(conversation_id=conversation.pk, expected=first_words)  # e.g. from another tab
    summary_requests_wait(timeout=10)
    assert len(titles_requested) == 1


@pytest.mark.parametrize("why", ["setting off", "title set by the user", "offline model"])
def test_no_title_is_asked_for_when(why, user, fake_openai, titles_requested):
    UserSettings.objects.update_or_create(user=user, defaults={"generate_titles": why != "setting off"})
    config = None if why == "offline model" else make_config(user, fake_openai.base_url)
    conversation = Conversation.objects.create(owner=user, llm_config=config, offline=why == "offline model")
    if why == "title set by the user":
        Conversation.objects.filter(pk=conversation.pk).update(title="Logs", title_is_custom=True)

    done = send(user, conversation, QUESTION).named("done")[0]

    summary_requests_wait(timeout=10)
    assert done["title_pending"] is False and titles_requested == []


def test_a_first_reply_that_failed_leaves_the_title_to_the_first_complete_one(user, fake_openai, titles_requested):
    failing = make_config(user, fake_openai.base_url, model="fail-400")
    conversation = Conversation.objects.create(owner=user, llm_config=failing)
    assert send(user, conversation, QUESTION).named("error")
    summary_requests_wait(timeout=10)
    assert titles_requested == []

    Conversation.objects.filter(pk=conversation.pk).update(llm_config=make_config(user, fake_openai.base_url))
    done = send(user, conversation, "the logs of nginx, I mean").named("done")[0]  # a new message, not a Retry
    summary_requests_wait(timeout=10)
    assert done["title_pending"] is True and len(titles_requested) == 1
    titler = make_config(user, fake_openai.base_url, model="fake-title")
    UserSettings.objects.update_or_create(user=user, defaults={"summary_config": titler})

    assert conversation_title_generate(conversation_id=conversation.pk, expected=titles_requested[0][1]) == "named"
    # the exchange that has an answer is the one named
    assert Conversation.objects.get(pk=conversation.pk).title == "The logs of"


def _first_exchange(user, fake_openai, *, summary_model: str | None = None) -> Conversation:
    conversation = Conversation.objects.create(owner=user, llm_config=make_config(user, fake_openai.base_url))
    if summary_model is not None:
        titler = make_config(user, fake_openai.base_url, model=summary_model)
        UserSettings.objects.update_or_create(user=user, defaults={"summary_config": titler})
    assert send(user, conversation, QUESTION).named("done")
    conversation.refresh_from_db()
    return conversation


def test_the_summary_model_names_the_chat(user, fake_openai):
    conversation = _first_exchange(user, fake_openai, summary_model="fake-title")

    assert conversation_title_generate(conversation_id=conversation.pk, expected=conversation.title) == "named"

    assert Conversation.objects.get(pk=conversation.pk).title == "How do i"  # fake-title's 3 words
    asked = fake_openai.completions[-1]
    assert asked.model == "fake-title" and asked.body["max_tokens"] == title_services.MAX_TOKENS
    assert QUESTION in asked.messages[-1]["content"] and "Echo:" in asked.messages[-1]["content"]


def test_without_a_summary_model_the_chats_own_model_names_it(user, fake_openai):
    conversation = _first_exchange(user, fake_openai)

    conversation_title_generate(conversation_id=conversation.pk, expected=conversation.title)

    asked = fake_openai.completions[-1]
    assert asked.model == "fake-echo"
    assert Conversation.objects.get(pk=conversation.pk).title == title_clean(
        " ".join(echo_reply(asked.messages).split()[:title_services.MAX_TOKENS]))


def test_a_chat_renamed_before_the_title_arrives_keeps_the_users_name(user, fake_openai):
    conversation = _first_exchange(user, fake_openai, summary_model="fake-title")
    asked_with = conversation.title
    Conversation.objects.filter(pk=conversation.pk).update(title="My logs", title_is_custom=True)

    assert conversation_title_generate(conversation_id=conversation.pk, expected=asked_with) == "skipped"
    assert Conversation.objects.get(pk=conversation.pk).title == "My logs"


def test_a_chat_deleted_while_its_title_is_written_is_left_alone(user, fake_openai, monkeypatch):
    conversation = _first_exchange(user, fake_openai, summary_model="fake-title")
    real_call = title_services.llm_complete

    def call_while_the_chat_is_deleted(**kwargs):
        Conversation.objects.filter(pk=conversation.pk).delete()
        return real_call(**kwargs)

    monkeypatch.setattr(title_services, "llm_complete", call_while_the_chat_is_deleted)
    assert conversation_title_generate(conversation_id=conversation.pk, expected=conversation.title) == "skipped"
    assert conversation_title_generate(conversation_id=conversation.pk, expected=conversation.title) == "skipped"


def test_a_second_delivery_changes_nothing(user, fake_openai):
    conversation = _first_exchange(user, fake_openai, summary_model="fake-title")
    conversation_title_generate(conversation_id=conversation.pk, expected=conversation.title)
    calls = len(fake_openai.completions)

    assert conversation_title_generate(conversation_id=conversation.pk, expected=conversation.title) == "skipped"
    assert len(fake_openai.completions) == calls  # the model is not asked again


def test_a_failing_model_leaves_the_first_words(user, fake_openai):
    conversation = _first_exchange(user, fake_openai, summary_model="fail-500")
    before = len(fake_openai.completions)  # the session's server: earlier tests' requests are in its list

    assert conversation_title_generate(conversation_id=conversation.pk, expected=conversation.title) == "failed"
    assert Conversation.objects.get(pk=conversation.pk).title == conversation.title
    # The call and its two retries (another test's request still under way may land meanwhile: not counted).
    asked = [r for r in fake_openai.completions[before:]
             if r.messages and r.messages[0]["content"] == title_services.TITLE_PROMPT]
    assert len(asked) == 3 and {r.model for r in asked} == {"fail-500"}


def test_the_request_reaches_the_task_through_the_broker(user, fake_openai, monkeypatch, titles_requested):
    """The publish the other tests record: the task, run as a worker would (eagerly), names the chat."""
    from chatapp.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    monkeypatch.setattr(title_services, "_title_publish", titles_requested.publish)
    conversation = _first_exchange(user, fake_openai, summary_model="fake-title")
    summary_requests_wait(timeout=30)

    assert Conversation.objects.get(pk=conversation.pk).title == "How do i"


def test_the_setting_is_kept_from_the_settings_page_and_the_api(user):
    from django.test import Client
    from rest_framework.test import APIClient

    page = Client()
    page.force_login(user)
    assert 'name="generate_titles"' in page.get("/settings/").content.decode()
    # the form's switches, this one left unticked
    saved = page.post("/settings/", {"preference": "balanced", "auto_optimize": "on"})
    assert saved.status_code == 302
    assert UserSettings.objects.get(user=user).generate_titles is False

    api = APIClient()
    api.force_authenticate(user)
    answer = api.patch("/api/settings/", {"generate_titles": True}, format="json")
    assert answer.status_code == 200 and answer.json()["generate_titles"] is True
    assert UserSettings.objects.get(user=user).generate_titles is True


def test_an_imported_chat_keeps_the_title_it_came_with(user, fake_openai, titles_requested):
    from tests.chat.importkit import chatgpt_conversation, import_now

    untitled = {**chatgpt_conversation(0, messages=2), "title": ""}  # named by its first words, not by the user
    job = import_now(user, json.dumps([untitled]).encode())
    conversation = Conversation.objects.get(pk=job.conversation_ids[0])
    assert not conversation.title_is_custom
    Conversation.objects.filter(pk=conversation.pk).update(llm_config=make_config(user, fake_openai.base_url),
                                                           offline=False)

    assert send(user, conversation, QUESTION).named("done")[0]["title_pending"] is False
    summary_requests_wait(timeout=10)
    assert titles_requested == [] and Conversation.objects.get(pk=conversation.pk).title == conversation.title


def test_a_page_that_did_not_stream_the_first_reply_learns_that_a_title_is_coming(
    user, fake_openai, titles_requested, monkeypatch
):
    """Another tab, or the page reloaded mid-reply, never sees the turn's `done`: the conversation says the
    title is pending, from before its first reply is stored complete until the worker has answered."""
    from django.test import Client
    from rest_framework.test import APIClient

    from chatapp.chat import chat_turn

    api = APIClient()
    api.force_authenticate(user)
    page = Client()
    page.force_login(user)
    conversation = Conversation.objects.create(owner=user, llm_config=make_config(user, fake_openai.base_url))
    detail = f"/api/conversations/{conversation.pk}/"
    assert api.get(detail).json()["title_pending"] is False

    pending_when_stored: list[bool] = []

    def store(**kwargs):
        pending_when_stored.append(title_services.title_pending(conversation=Conversation.objects.get(pk=conversation.pk)))
        return chat_turn.reply_store.__wrapped__(**kwargs)

    store.__wrapped__ = chat_turn.reply_store
    monkeypatch.setattr(chat_turn, "reply_store", store)
    assert send(user, conversation, QUESTION).named("done")
    summary_requests_wait(timeout=10)

    assert pending_when_stored == [True]  # a page that sees the reply complete finds the title coming
    assert api.get(detail).json()["title_pending"] is True
    assert 'data-title-pending="1"' in page.get(f"/c/{conversation.pk}/").content.decode()
    UserSettings.objects.update_or_create(user=user, defaults={"summary_config": make_config(
        user, fake_openai.base_url, model="fake-title")})

    conversation_title_generate(conversation_id=conversation.pk, expected=titles_requested[0][1])

    named = api.get(detail).json()
    assert named["title_pending"] is False and named["title"] == "How do i"
    assert 'data-title-pending="0"' in page.get(f"/c/{conversation.pk}/").content.decode()


@pytest.mark.parametrize("end", ["model failed", "renamed by the user"])
def test_a_title_that_will_not_come_is_not_pending(end, user, fake_openai, titles_requested):
    conversation = _first_exchange(user, fake_openai, summary_model="fail-500")
    summary_requests_wait(timeout=10)
    assert title_services.title_pending(conversation=conversation)

    if end == "model failed":
        conversation_title_generate(conversation_id=conversation.pk, expected=conversation.title)
    else:
        Conversation.objects.filter(pk=conversation.pk).update(title="Logs", title_is_custom=True)
        conversation.refresh_from_db()

    assert not title_services.title_pending(conversation=conversation)


def test_a_failing_cache_costs_neither_the_reply_nor_the_page(user, fake_openai, titles_requested, monkeypatch):
    from django.test import Client

    class Down:
        def __getattr__(self, name):
            def down(*args, **kwargs):
                raise ConnectionError("Redis is restarting")
            return down

    monkeypatch.setattr(title_services, "cache", Down())  # only the titles' reads and writes fail here
    conversation = Conversation.objects.create(owner=user, llm_config=make_config(user, fake_openai.base_url))

    done = send(user, conversation, QUESTION).named("done")[0]
    summary_requests_wait(timeout=10)

    assert done["message"]["status"] == "complete" and done["title_pending"] is True
    assert len(titles_requested) == 1  # the worker is asked all the same
    page = Client()
    page.force_login(user)
    assert 'data-title-pending="0"' in page.get(f"/c/{conversation.pk}/").content.decode()


def test_a_named_chat_is_not_pending_where_the_workers_clearing_does_not_reach(user, fake_openai, titles_requested,
                                                                              monkeypatch):
    # Without Redis each process's cache is its own: the worker's clearing never reaches the web process.
    # The title the mark was to replace says it all the same.
    conversation = _first_exchange(user, fake_openai, summary_model="fake-title")
    summary_requests_wait(timeout=10)
    assert title_services.title_pending(conversation=conversation)
    monkeypatch.setattr(title_services, "_pending_clear", lambda conversation_id: None)

    assert conversation_title_generate(conversation_id=conversation.pk, expected=conversation.title) == "named"

    assert not title_services.title_pending(conversation=Conversation.objects.get(pk=conversation.pk))


def test_a_first_reply_stopped_after_its_last_chunk_leaves_no_title_pending(user, fake_openai, titles_requested,
                                                                            monkeypatch):
    from chatapp.chat import chat_turn
    from chatapp.chat.message_services import message_stop
    from chatapp.chat.models import Message

    def stopped_then_stored(**kwargs):
        message_stop(message=Message.objects.get(pk=kwargs["turn"].reply_id))  # the stop lands just before
        return stopped_then_stored.__wrapped__(**kwargs)

    stopped_then_stored.__wrapped__ = chat_turn.reply_store
    monkeypatch.setattr(chat_turn, "reply_store", stopped_then_stored)
    conversation = Conversation.objects.create(owner=user, llm_config=make_config(user, fake_openai.base_url))

    assert send(user, conversation, QUESTION).named("error")[0]["kind"] == "stopped"
    summary_requests_wait(timeout=10)

    assert titles_requested == [] and not title_services.title_pending(
        conversation=Conversation.objects.get(pk=conversation.pk))


def test_a_title_whose_worker_died_twice_is_not_asked_a_third_time(user, fake_openai, monkeypatch):
    conversation = _first_exchange(user, fake_openai, summary_model="fake-title")

    def worker_dies(**kwargs):
        raise SystemExit(137)  # as near as a test comes to a SIGKILL mid-call: the run ends without an outcome

    with monkeypatch.context() as patch:
        patch.setattr(title_services, "llm_complete", worker_dies)
        for _ in range(title_services.TITLE_MAX_DELIVERIES):
            with pytest.raises(SystemExit):
                conversation_title_generate(conversation_id=conversation.pk, expected=conversation.title)
    calls = len(fake_openai.completions)

    assert conversation_title_generate(conversation_id=conversation.pk, expected=conversation.title) == "abandoned"
    assert len(fake_openai.completions) == calls
    assert Conversation.objects.get(pk=conversation.pk).title == conversation.title


def test_a_title_redelivered_once_is_still_asked_for(user, fake_openai, monkeypatch):
    conversation = _first_exchange(user, fake_openai, summary_model="fake-title")

    with monkeypatch.context() as patch:
        patch.setattr(title_services, "llm_complete", lambda **kwargs: (_ for _ in ()).throw(SystemExit(137)))
        with pytest.raises(SystemExit):
            conversation_title_generate(conversation_id=conversation.pk, expected=conversation.title)

    assert conversation_title_generate(conversation_id=conversation.pk, expected=conversation.title) == "named"
