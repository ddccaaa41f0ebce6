"""NUL and unpaired surrogates (issue 11, finding 2): a model reply that carries them is stored
whole, with each replaced by U+FFFD; a user message that carries them is refused with a JSON 400
before it uses a rate-limit slot; nothing is left streaming."""

from __future__ import annotations

import json

import pytest

from chatapp.chat.models import Conversation, Message
from chatapp.chat.services import user_settings_update
from chatapp.chat.textsafe import text_problem, text_storable
from tests.support.chat import make_config, post_stream, send
from tests.support.wire import chunk, chunked, head, sse, wire_server

pytestmark = pytest.mark.django_db


def test_storable_text_joins_split_pairs_and_replaces_the_rest():
    assert text_storable("plain") == "plain"
    assert text_storable("a\x00b") == "a\ufffdb"
    assert text_storable("\ud83d" + "\ude00") == "\U0001f600"  # a pair a stream split in two
    assert text_storable("x\udc00y\ud800") == "x\ufffdy\ufffd"
    assert text_problem("fine") is None
    assert "NUL" in text_problem("a\x00")
    assert "surrogate" in text_problem("\ud800")


def _reply_from(user, fake_openai, model: str, *, ends_with: str):
    """One message sent to `model`: (the stream, the stored reply), the stream ending with `ends_with`."""
    conversation = Conversation.objects.create(owner=user, llm_config=make_config(user, fake_openai.base_url,
                                                                                 model=model))
    result = send(user, conversation, "Say something odd")
    assert result.names[-1] == ends_with, result.events
    return result, Message.objects.get(conversation=conversation, role="assistant")


def test_a_reply_with_odd_bytes_is_stored_whole(user, fake_openai):
    result, reply = _reply_from(user, fake_openai, "odd-bytes", ends_with="done")

    assert reply.status == Message.Status.COMPLETE
    assert reply.content.endswith(" NUL\ufffd here, pair \U0001f600, lone \ufffd end.")
    # the finish_reason's own NUL and lone surrogate failed the reply's write, losing all its text
    assert reply.finish_reason == "stop\ufffd\ufffd"
    assert reply.char_count == len(reply.content) and reply.token_count > 0
    assert result.named("done")[0]["message"]["content"] == reply.content


@pytest.mark.parametrize("text", ["before\x00after", "lone \ud800 surrogate"])
def test_a_user_message_with_odd_bytes_gets_a_json_400(user, conversation, settings, text):
    settings.SEND_RATE_LIMIT_PER_MINUTE = 1
    # json.dumps escapes both as \\u sequences, as a browser's JSON.stringify does
    path = f"/api/conversations/{conversation.pk}/messages/"
    refused = post_stream(user, path, raw=json.dumps({"content": text}))
    assert refused.status == 400
    assert "content" in refused.body
    assert not Message.objects.filter(conversation=conversation).exists()
    # the refused message used no slot of the rate limit
    assert send(user, conversation, "a normal message").names[-1] == "done"


def test_a_provider_error_with_odd_bytes_is_stored_and_frees_the_chat(user, fake_openai):
    # The provider's words go into the reply's error column: a NUL (PostgreSQL) or a lone surrogate
    # (any database) made that write fail, the reply stay "streaming" and every next send answer 409.
    _, reply = _reply_from(user, fake_openai, "fail-odd-400", ends_with="error")

    assert reply.status == Message.Status.ERROR
    assert "\x00" not in reply.error and "Invalid byte \ufffd at position 3; lone \ufffd here." in reply.error
    assert text_problem(reply.error) is None
    conversation = reply.conversation
    conversation.llm_config.model = "fake-echo"
    conversation.llm_config.save(update_fields=["model"])
    assert send(user, conversation, "again").names[-1] == "done"


# Text nothing of which shows: zero-width spaces and joiners, a word joiner, a byte order mark, tag
# characters (Unicode's format characters), alone or between white space.
INVISIBLE = ["\u200b", "\ufeff", " \u200b\u200d\n\u2060 ", "\U000e0001\U000e0020"]


@pytest.mark.parametrize("text", INVISIBLE)
def test_a_message_nothing_of_which_shows_is_refused_as_empty(user, conversation, text):
    path = f"/api/conversations/{conversation.pk}/messages/"
    refused = post_stream(user, path, raw=json.dumps({"content": text}))
    assert (refused.status, refused.body["detail"]) == (400, "Type a message before sending.")
    assert not Message.objects.filter(conversation=conversation).exists()

    send(user, conversation, "A question")
    asked = Message.objects.get(conversation=conversation, role="user")
    edit = post_stream(user, f"/api/messages/{asked.pk}/edit/", raw=json.dumps({"content": text}))
    assert (edit.status, edit.body["detail"]) == (400, "Type a message before sending.")
    assert list(Message.objects.filter(conversation=conversation, role="user").values_list("content", flat=True)) == [
        "A question"]


def test_an_invisible_first_line_does_not_name_the_chat(user, conversation):
    user_settings_update(user=user, generate_titles=False)  # the title the first message gives, kept
    send(user, conversation, "\u200b\u2060\nWhere is the config file?")
    conversation.refresh_from_db()
    assert conversation.title == "Where is the config file?"


@pytest.mark.parametrize("count", [3_000_000_000, 10**20])
def test_a_usage_figure_no_column_holds_does_not_lose_the_reply(user, count):
    """An endpoint reporting a token count past what the database's integer columns hold (a bug of its
    own, garbage from a proxy) failed the reply's store: "integer out of range", the stream cut without
    an error event, the reply left streaming and the chat refusing sends until the orphan sweep."""
    body = sse(chunk({"content": "Hi there"}), chunk({}, "stop"),
               chunk(None, usage={"prompt_tokens": count, "completion_tokens": count}), "[DONE]")
    with wire_server(([head(), chunked(body)], False)) as server:
        conversation = Conversation.objects.create(owner=user, llm_config=make_config(user, server.base_url, model="m"))
        result = send(user, conversation, "Hello")

    assert result.names[-1] == "done", result.events
    reply = Message.objects.get(conversation=conversation, role="assistant")
    assert (reply.status, reply.content) == ("complete", "Hi there")
    assert (reply.prompt_tokens, reply.completion_tokens) == (0, 0)  # no figure, as one that is not a number
