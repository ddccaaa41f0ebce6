"""A runaway reply is cut at settings.MAX_REPLY_CHARS and marked (issue 11, finding 4); the render
cache holds a bounded number of characters whatever the replies."""

from __future__ import annotations

import json

import pytest

from chatapp.chat import rendering
from chatapp.chat.models import Conversation, Message
from chatapp.chat.reply_stream import reply_cut_note
from tests.support.chat import make_config, send
from tests.support.fake_openai import echo_reply

pytestmark = pytest.mark.django_db


def test_a_reply_past_the_cap_is_cut_and_marked(user, fake_openai, settings):
    settings.MAX_REPLY_CHARS = 60
    config = make_config(user, fake_openai.base_url)
    conversation = Conversation.objects.create(owner=user, llm_config=config)

    result = send(user, conversation, "Tell me everything, at length, please, with many words")

    assert result.names[-1] == "done", result.events
    full = echo_reply(fake_openai.completions[-1].messages)
    assert len(full) > 60
    reply = Message.objects.get(conversation=conversation, role="assistant")
    assert reply.status == Message.Status.COMPLETE
    assert reply.content == full[:60] + reply_cut_note()
    assert "".join(d["text"] for d in result.named("delta")) == reply.content
    assert result.named("done")[0]["message"]["content"] == reply.content


def test_the_render_cache_is_bounded_by_characters_not_entries():
    cache = rendering._ByteBoundedCache(total_limit=10_000, item_limit=4_000)
    for k in range(50):
        text = f"{k} " + "x" * 1_500
        cache.put(text, rendering.markdown_render(text))
        assert cache.size <= 10_000
    assert cache.get("0 " + "x" * 1_500) is None  # the oldest went first
    big = "y" * 5_000
    cache.put(big, big)
    assert cache.get(big) is None  # larger than an item may be: rendered each time, never held


def test_a_reply_cut_at_the_cap_comes_back_whole_from_its_export(user, fake_openai, settings):
    # The stored reply is the cap's characters and the mark after them: longer than the cap, as every
    # reply cut there is, and the JSON export is an exact round trip (README, Import).
    from tests.chat.importkit import export_document, import_now

    settings.MAX_MESSAGE_CHARS = settings.MAX_REPLY_CHARS = 60
    conversation = Conversation.objects.create(owner=user, llm_config=make_config(user, fake_openai.base_url))
    send(user, conversation, "Tell me everything, at length, please, with many words")
    reply = Message.objects.get(conversation=conversation, role="assistant")
    assert reply.content.endswith(reply_cut_note())

    job = import_now(user, json.dumps(export_document(conversation)).encode())

    assert (job.status, job.skipped, len(job.conversation_ids)) == ("done", [], 1)
    copy = Message.objects.get(conversation_id=job.conversation_ids[0], role="assistant")
    assert copy.content == reply.content
