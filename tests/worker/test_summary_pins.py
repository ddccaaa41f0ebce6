"""Pins and summaries: a summary passes over the messages pinned when it is written (they are sent as
themselves anyway) and lists them; one unpinned afterwards is still sent as itself, until a summary
folds it in. Nothing a summary never read drops out of what the model sees."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from chatapp.chat.context import context_load
from chatapp.chat.context_pack import context_build
from chatapp.chat.message_services import message_append, message_pin_set
from chatapp.chat.models import Conversation, Message
from chatapp.chat.summary_runner import summary_job_run
from chatapp.chat.summary_services import summary_edit, summary_job_request
from chatapp.providers import llm
from tests.support.accounts import token_client
from tests.support.chat import send

pytestmark = pytest.mark.django_db(transaction=True)


def _summarize(conversation: Conversation) -> Message:
    job = summary_job_request(conversation=conversation, trigger="auto")
    assert summary_job_run(job_id=job.pk).status == "done"
    job.refresh_from_db()
    return job.summary


def _sent_as_pinned(conversation: Conversation) -> set[int]:
    """The messages of the next request that the optimizer must send as themselves, whatever the window."""
    conversation.refresh_from_db()
    return {int(m.id) for m in context_load(conversation=conversation).msgs if m.pinned}


@pytest.fixture
def summarized(long_conversation):
    """A conversation summarized (offline: extractive) while one of the replies in its span was pinned."""
    conversation = long_conversation(config=None, rounds=10, window_rounds=3)
    pinned = list(conversation.messages.filter(role="assistant").order_by("id"))[2]
    message_pin_set(message=pinned, pinned=True)
    summary = _summarize(conversation)
    return conversation, pinned, summary


def test_a_summary_lists_the_pins_it_passed_over(summarized):
    conversation, pinned, summary = summarized
    assert summary.skipped_pin_ids == [pinned.pk]
    assert summary.covers_from_id < pinned.pk < summary.covers_through_id
    assert pinned.pk in _sent_as_pinned(conversation)


def test_unpinned_after_the_summary_it_is_sent_until_a_summary_folds_it_in(summarized):
    conversation, pinned, first = summarized
    message_pin_set(message=pinned, pinned=False)
    ctx = context_load(conversation=conversation)
    kept = next(m for m in ctx.msgs if m.id == str(pinned.pk))
    assert kept.pinned and kept.content == pinned.content
    assert pinned.pk in ctx.static_ids and ctx.summary is not None and ctx.summary.id == str(first.pk)
    result, _ = context_build(conversation=conversation, preference="balanced", target=llm.llm_target_for(config=None))
    assert [m.origin for m in result.messages if str(pinned.pk) in m.source_ids] == ["pinned"]

    # The next summary folds it in (the window has not moved: it is the whole of that summary's span),
    # keeps the coverage it extends, and lists nothing.
    second = _summarize(conversation)
    assert second.skipped_pin_ids is None
    assert (second.covers_from_id, second.covers_through_id) == (first.covers_from_id, first.covers_through_id)
    assert second.covered_message_count == first.covered_message_count + 1
    assert pinned.pk not in _sent_as_pinned(conversation)
    assert str(pinned.pk) not in {m.id for m in context_load(conversation=conversation).msgs}


def test_a_pin_left_pinned_stays_listed_with_the_next_summarys_own(summarized, owner):
    conversation, pinned, first = summarized
    later = []
    for i in range(4):
        later.append(message_append(conversation=conversation, role="user", content=f"Later question {i}?",
                                    token_model="gpt-4o-mini"))
        message_append(conversation=conversation, role="assistant", content=f"Later answer {i}.",
                       token_model="gpt-4o-mini")
    message_pin_set(message=later[0], pinned=True)
    conversation.window_start_id = later[-1].pk
    conversation.save(update_fields=["window_start_id"])
    second = _summarize(conversation)
    assert second.covers_through_id > first.covers_through_id
    assert second.skipped_pin_ids == [pinned.pk, later[0].pk]
    # Unpinned, both are still sent: neither summary read them.
    for message in (pinned, later[0]):
        message_pin_set(message=message, pinned=False)
    assert {pinned.pk, later[0].pk} <= _sent_as_pinned(conversation)


def test_an_edited_summary_keeps_the_list(summarized):
    conversation, pinned, summary = summarized
    edited = summary_edit(summary=summary, content="The invoices and the orders tables were discussed.")
    assert edited.pk != summary.pk and edited.skipped_pin_ids == [pinned.pk]
    message_pin_set(message=pinned, pinned=False)
    assert pinned.pk in _sent_as_pinned(conversation)


def test_a_regenerate_after_the_summary_sends_it_too(summarized):
    # Regenerate answers an earlier message (through_id): the summary still applies there, and so do its pins.
    conversation, pinned, summary = summarized
    message_pin_set(message=pinned, pinned=False)
    answered = conversation.messages.filter(role="user").order_by("-id").values_list("id", flat=True)[1]
    assert answered > summary.covers_through_id
    ctx = context_load(conversation=conversation, through_id=answered)
    assert ctx.summary is not None and str(pinned.pk) in {m.id for m in ctx.msgs if m.pinned}


def test_the_timeline_shows_it_still_sent_after_the_unpin(summarized, owner):
    conversation, pinned, _ = summarized
    other = list(conversation.messages.filter(role="assistant").order_by("id"))[3]  # summarized, never pinned
    api = token_client(owner)
    unpinned = api.post(f"/api/messages/{pinned.pk}/pin/", {"pinned": False}, format="json").json()
    assert (unpinned["pinned"], unpinned["place"]) == (False, "static")
    places = {m["id"]: m["place"] for m in api.get(f"/api/conversations/{conversation.pk}/messages/").json()["results"]}
    assert (places[pinned.pk], places[other.pk]) == ("static", "evicted")
    page = Client()
    page.force_login(owner)
    html = page.get(f"/c/{conversation.pk}/").content.decode()
    assert re.search(rf'data-id="{pinned.pk}"[^>]*data-place="static"', html)
    assert re.search(rf'data-id="{other.pk}"[^>]*data-place="evicted"', html)
    _summarize(conversation)  # folded in: it takes the place of any summarized message
    places = {m["id"]: m["place"] for m in api.get(f"/api/conversations/{conversation.pk}/messages/").json()["results"]}
    assert places[pinned.pk] == "evicted"


def test_a_chat_too_large_for_messages_unpinned_since_the_summary_says_to_compact_not_to_unpin(
        owner, make_config, fake_openai, published):
    """Four long questions pinned, a compaction passing them over, then all four unpinned: they are still
    sent until a summary takes them in, and on a 2,000-token model every turn failed with "Unpin some
    messages" — with nothing pinned. What takes them out of the must-keeps is compacting."""
    config = make_config("gpt-4o-mini")
    config.context_window, config.max_output_tokens = 2_000, 300
    config.save()
    conversation = Conversation.objects.create(owner=owner, llm_config=config)
    long = " ".join(f"detail{i}" for i in range(200))
    pins = []
    for i in range(10):
        question = message_append(conversation=conversation, role="user",
                                  content=f"Q{i} {long}" if 2 <= i <= 5 else f"Q{i} short", token_model="gpt-4o-mini")
        if 2 <= i <= 5:
            pins.append(message_pin_set(message=question, pinned=True))
        message_append(conversation=conversation, role="assistant", token_model="gpt-4o-mini",
                       content=f"A{i}. " + " ".join(f"note{i}x{j}" for j in range(80)))
    assert summary_job_run(job_id=summary_job_request(conversation=conversation, trigger="manual").pk).status == "done"
    for pin in pins:
        message_pin_set(message=pin, pinned=False)

    [error] = send(owner, conversation, f"Now {long}").named("error")

    assert error["kind"] == "context_too_large"
    assert "/compact" in error["error"] and "the 4 you unpinned" in error["error"]
    assert "Unpin some messages" not in error["error"]  # nothing is pinned
