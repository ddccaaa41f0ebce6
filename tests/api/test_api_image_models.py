"""Images on their way to the model: content parts for a model that sees them, a placeholder for one
that does not; and which models see them (a config's accepts_images, else the model registry's word)."""

from __future__ import annotations

import base64
import struct

import pytest

from chatapp.chat.context_images import messages_with_placeholders, packed_images_attach
from chatapp.chat.models import Message, OptimizationRecord
from chatapp.providers.services import llm_config_create
from optimizer.tokens import count_messages, count_text
from optimizer.truncation import compress_text
from optimizer.types import Msg, PackedMessage
from tests.support.images import b64, jpeg_header, png_bytes
from tests.support.streaming import sse_events

pytestmark = pytest.mark.django_db


def _chat_with(api, echo_config, *, accepts_images):
    patched = api.patch(f"/api/configs/{echo_config['id']}/", {"accepts_images": accepts_images}, format="json")
    assert patched.status_code == 200
    return api.post("/api/conversations/", {}, format="json").json()


def _send_image(api, chat, png: bytes):
    response = api.post(
        f"/api/conversations/{chat['id']}/messages/",
        {"content": "What is this?", "images": [{"data": b64(png)}]},
        format="json",
    )
    assert sse_events(response.recorded_body)[-1][0] == "done"


def test_a_model_that_sees_images_is_sent_them_as_content_parts(api, echo_config, fake_openai):
    chat = _chat_with(api, echo_config, accepts_images=True)
    png = png_bytes(1024, 1024)
    fake_openai.reset()
    _send_image(api, chat, png)
    user = [m for m in fake_openai.requests[-1].messages if m["role"] == "user"][-1]
    text, image = user["content"]
    assert text == {"type": "text", "text": "What is this?"}
    assert image["type"] == "image_url"
    assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(png).decode()
    # The next turn sends it again, with the history.
    api.post(f"/api/conversations/{chat['id']}/messages/", {"content": "And now?"}, format="json")
    first = next(m for m in fake_openai.requests[-1].messages if m["role"] == "user")
    assert first["content"][1] == image
    record = OptimizationRecord.objects.order_by("id").first()
    assert record.tokens_sent > 765  # the image's documented cost is in the figures


def test_a_model_that_does_not_is_sent_a_placeholder(api, echo_config, fake_openai):
    chat = _chat_with(api, echo_config, accepts_images=False)
    fake_openai.reset()
    _send_image(api, chat, png_bytes(640, 480))
    user = [m for m in fake_openai.requests[-1].messages if m["role"] == "user"][-1]
    assert user["content"] == "What is this?\n\n[image: 640x480]"
    assert OptimizationRecord.objects.get().tokens_sent < 100  # not the image's 765 tokens


def test_the_gauge_counts_an_image_as_the_model_is_sent_it(api, echo_config):
    """The context endpoint packed a copy of the chat that left out `has_images`: it never looked for
    the images, so for a model that does not see them it counted each at its image cost (765 tokens
    here) where the request sends a placeholder of a few, and said another figure than the turn's own
    `done` gauge, which the README says is the endpoint's."""
    chat = _chat_with(api, echo_config, accepts_images=False)
    response = api.post(f"/api/conversations/{chat['id']}/messages/",
                        {"content": "What is this?", "images": [{"data": b64(png_bytes(1024, 1024))}]}, format="json")
    done = sse_events(response.recorded_body)[-1]
    assert done[0] == "done"

    gauge = api.get(f"/api/conversations/{chat['id']}/context/").json()
    assert gauge == done[1]["context"]
    assert gauge["tokens"] < 100  # the question, its placeholder and the reply; not the image's 765


def test_the_registry_decides_until_the_user_does(api, user):
    vision = llm_config_create(owner=user, name="4o", base_url="https://api.openai.com/v1", model="gpt-4o")
    text_only = llm_config_create(owner=user, name="3.5", base_url="https://api.openai.com/v1", model="gpt-3.5-turbo")
    unknown = llm_config_create(owner=user, name="mine", base_url="https://api.openai.com/v1", model="my-own")
    assert (vision.sees_images, text_only.sees_images, unknown.sees_images) == (True, False, False)
    shown = api.get(f"/api/configs/{unknown.pk}/").json()
    assert (shown["accepts_images"], shown["sees_images"]) == (None, False)
    shown = api.patch(f"/api/configs/{unknown.pk}/", {"accepts_images": True}, format="json").json()
    assert (shown["accepts_images"], shown["sees_images"]) == (True, True)
    shown = api.patch(f"/api/configs/{vision.pk}/", {"accepts_images": False}, format="json").json()
    assert shown["sees_images"] is False
    shown = api.patch(f"/api/configs/{vision.pk}/", {"accepts_images": None}, format="json").json()
    assert (shown["accepts_images"], shown["sees_images"]) == (None, True)


def test_summaries_are_written_from_text_with_a_placeholder_per_image(api, echo_config):
    chat = _chat_with(api, echo_config, accepts_images=True)
    _send_image(api, chat, png_bytes(640, 480))
    rows = messages_with_placeholders(list(Message.objects.filter(conversation_id=chat["id"]).order_by("id")))
    assert rows[0].content == "What is this?\n\n[image: 640x480]"
    assert "[image" not in rows[1].content
    assert Message.objects.get(pk=rows[0].pk).content == "What is this?"  # nothing written


def _question_with_an_image(api, echo_config) -> Message:
    chat = _chat_with(api, echo_config, accepts_images=True)
    _send_image(api, chat, png_bytes(1024, 1024))
    return Message.objects.get(conversation_id=chat["id"], role="user")


@pytest.mark.parametrize("sees", [True, False])
def test_a_whole_messages_count_follows_what_its_images_are_sent_as(api, echo_config, sees):
    question = _question_with_an_image(api, echo_config)
    # as packed: stored (the image's 765 in it; its placeholder's for a model not seeing it: msgs_counted_as_sent)
    packed = PackedMessage(role="user", content="What", source_ids=(str(question.pk),), origin="verbatim", tokens=800)
    [sent] = packed_images_attach([packed], sees=sees, model="gpt-4o", loaded=[])
    assert sent.tokens == 800
    assert (sent.content == "What\n\n[image: 1024x1024]") is not sees


@pytest.mark.parametrize("sees", [True, False])
def test_a_shortened_message_is_sent_its_placeholders_within_its_count(api, echo_config, sees):
    """Shortened to its share and counted again from its text alone: its image's placeholder in place
    of the image whatever the model, the text shortened that much more, so the message counts no more
    than the packer counted it (7: a message's overhead)."""
    question = _question_with_an_image(api, echo_config)
    long_text = " ".join(f"line {i} of a pasted log" for i in range(300))
    loaded = [Msg(str(question.pk), "user", long_text, False, 2_000)]
    shortened = compress_text(long_text, limit=100, model="gpt-4o")
    count = 7 + count_text(shortened, model="gpt-4o")
    packed = PackedMessage(role="user", content=shortened, source_ids=(str(question.pk),), origin="compressed",
                           tokens=count)
    [sent] = packed_images_attach([packed], sees=sees, model="gpt-4o", loaded=loaded)
    assert isinstance(sent.content, str)
    assert sent.content.startswith("line 0 of a pasted log") and "tokens omitted" in sent.content
    assert sent.content.endswith("\n\n[image: 1024x1024]")
    assert sent.tokens == 7 + count_text(sent.content, model="gpt-4o") <= count


def test_a_turn_in_a_chat_without_images_does_not_look_for_any(api, echo_config, fake_openai):
    """Most chats hold no image: their turns read no image rows (a statement more on every turn's path)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    chat = _chat_with(api, echo_config, accepts_images=True)
    with CaptureQueriesContext(connection) as plain:
        api.post(f"/api/conversations/{chat['id']}/messages/", {"content": "Hello"}, format="json")
    assert not [q for q in plain.captured_queries if "chat_messageimage" in q["sql"]]
    assert fake_openai.requests[-1].messages[-1]["content"] == "Hello"
    # Its first image is sent in that very turn, and with the history after it.
    fake_openai.reset()
    _send_image(api, chat, png_bytes(64, 64))
    assert [p["type"] for p in fake_openai.requests[-1].messages[-1]["content"]] == ["text", "image_url"]
    api.post(f"/api/conversations/{chat['id']}/messages/", {"content": "And now?"}, format="json")
    sent = [m for m in fake_openai.requests[-1].messages if m["role"] == "user"]
    assert [p["type"] for p in sent[-2]["content"]] == ["text", "image_url"]


def test_a_turn_for_a_model_that_does_not_see_images_reads_the_chats_images_once(api, echo_config, fake_openai):
    """The history's saving on images is read over the whole chat before loading, then over the messages
    the window left out: the same rows twice on every turn of an image chat. Now once, plus the loaded
    messages' own images (counted exactly, as they are sent)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    chat = _chat_with(api, echo_config, accepts_images=False)
    _send_image(api, chat, png_bytes(64, 64))
    with CaptureQueriesContext(connection) as turn:
        api.post(f"/api/conversations/{chat['id']}/messages/", {"content": "And now?"}, format="json")
    whole_chat = [q for q in turn.captured_queries
                  if "chat_messageimage" in q["sql"] and '"conversation_id" =' in q["sql"]]
    assert len(whole_chat) == 1, [q["sql"] for q in whole_chat]
    sent = [m for m in fake_openai.requests[-1].messages if m["role"] == "user"]
    assert sent[-2]["content"] == "What is this?\n\n[image: 64x64]"


def test_a_model_that_does_not_see_images_is_sent_the_placeholder_where_the_image_would_not_fit(
    api, echo_config, fake_openai
):
    """The packer judged the message by its stored count, which holds the image's cost as a seeing model
    is charged it (765 tokens), more than this model's whole budget: it shortened the message to its text
    and the model was sent "What is this?" alone, never told of an image, though the placeholder it is
    sent instead takes a few tokens."""
    api.patch(f"/api/configs/{echo_config['id']}/", {"context_window": 700, "max_output_tokens": 100}, format="json")
    chat = _chat_with(api, echo_config, accepts_images=False)
    _send_image(api, chat, png_bytes(1024, 1024))

    user = [m for m in fake_openai.requests[-1].messages if m["role"] == "user"][-1]
    assert user["content"] == "What is this?\n\n[image: 1024x1024]"
    gauge = api.get(f"/api/conversations/{chat['id']}/context/").json()
    assert (gauge["shortened_message_ids"], gauge["budget"]) == ([], 600)


def test_a_model_that_does_not_see_images_judges_the_history_by_their_placeholders(api, echo_config, fake_openai):
    """The live totals hold each image's cost as a seeing model is charged it: for a model sent its
    placeholder instead, a chat of 250 tokens with two images read as 1,700 and, past the trigger, cut
    its oldest turns out of a 1,200-token budget (and the gauge said the history was 140 % of it)."""
    api.patch(f"/api/configs/{echo_config['id']}/", {"context_window": 1_400, "max_output_tokens": 200}, format="json")
    chat = _chat_with(api, echo_config, accepts_images=False)
    api.post(f"/api/conversations/{chat['id']}/messages/", {"content": "Hello"}, format="json")
    _send_image(api, chat, png_bytes(1024, 1024))
    _send_image(api, chat, png_bytes(1024, 1024))
    api.post(f"/api/conversations/{chat['id']}/messages/", {"content": "And now?"}, format="json")

    sent = fake_openai.requests[-1].messages
    assert [m["role"] for m in sent] == ["user", "assistant"] * 3 + ["user"]
    assert sent[0]["content"] == "Hello" and sent[2]["content"] == "What is this?\n\n[image: 1024x1024]"
    gauge = api.get(f"/api/conversations/{chat['id']}/context/").json()
    assert (gauge["window_start_id"], gauge["strategy"]) == (None, "none")
    assert gauge["tokens"] <= gauge["history_tokens"] < 400  # not the images' 1,530


@pytest.mark.parametrize("accepts_images", [True, False])
def test_a_question_shortened_to_fit_keeps_a_placeholder_per_image(api, echo_config, fake_openai, accepts_images):
    """A long question with images, too long for the budget, is sent as head and tail: its images were
    dropped with nothing said, so the model answered as if the user had sent none. Its images are
    now their placeholders (to a model that sees images too: the image parts would not fit), within
    the count the packer gave the shortened message: the request still fits the budget."""
    api.patch(f"/api/configs/{echo_config['id']}/", {"context_window": 700, "max_output_tokens": 100}, format="json")
    chat = _chat_with(api, echo_config, accepts_images=accepts_images)
    long_text = " ".join(f"line {i} of a pasted log" for i in range(600))
    fake_openai.reset()
    response = api.post(
        f"/api/conversations/{chat['id']}/messages/",
        {"content": long_text, "images": [{"data": b64(png_bytes(640, 480))}, {"data": b64(png_bytes(64, 64))}]},
        format="json",
    )
    assert sse_events(response.recorded_body)[-1][0] == "done"

    user = [m for m in fake_openai.requests[-1].messages if m["role"] == "user"][-1]
    assert isinstance(user["content"], str) and "tokens omitted" in user["content"]
    assert user["content"].startswith("line 0 of a pasted log")
    assert user["content"].endswith("\n\n[image: 640x480]\n[image: 64x64]")
    record = OptimizationRecord.objects.get()
    assert record.tokens_sent <= 600
    question = Message.objects.get(conversation_id=chat["id"], role="user")
    gauge = api.get(f"/api/conversations/{chat['id']}/context/").json()
    assert gauge["shortened_message_ids"] == [question.pk] and gauge["budget"] == 600


@pytest.mark.parametrize("content", ["What are these?", "", "Compare them:\n\n- size\n- shape"])
def test_a_turn_that_sends_everything_saves_nothing_however_many_images(api, echo_config, content):
    """The full history took each image off as its own placeholder after a blank line, where the message
    is sent with its placeholders one per line and its text's last characters and the line break read
    as one token: three images in one message, all sent unchanged to a model that does not see them,
    read as 3 tokens saved, and the dashboards counted the turn among the optimized ones."""
    chat = _chat_with(api, echo_config, accepts_images=False)
    pngs = [png_bytes(1200, 800), png_bytes(300, 3000), png_bytes(64, 64)]
    response = api.post(f"/api/conversations/{chat['id']}/messages/",
                        {"content": content, "images": [{"data": b64(p)} for p in pngs]}, format="json")
    assert sse_events(response.recorded_body)[-1][0] == "done"
    api.post(f"/api/conversations/{chat['id']}/messages/", {"content": "And now?"}, format="json")

    records = list(OptimizationRecord.objects.order_by("id"))
    assert [r.strategy for r in records] == ["none", "none"]
    assert [(r.tokens_full, r.stats["tokens_saved"]) for r in records] == [(r.tokens_sent, 0) for r in records]
    gauge = api.get(f"/api/conversations/{chat['id']}/context/").json()
    assert gauge["tokens"] == gauge["history_tokens"]


def test_a_request_merging_a_jpeg_behind_large_metadata_reports_its_images_cost(api, echo_config, fake_openai):
    """Where the packer puts user messages side by side (the pinned first question beside the newest),
    the request counts them again from what it sends: a JPEG whose metadata (an editor's XMP) ran past
    the first 64 KiB counted 85 where it costs 765, and the record and the gauge said 428 tokens sent,
    a 1,220-token history, for a request of two images and a history of three (over 1,500 and 2,295)."""
    api.patch(f"/api/configs/{echo_config['id']}/", {"context_window": 3000, "max_output_tokens": 200}, format="json")
    chat = _chat_with(api, echo_config, accepts_images=True)
    xmp = b"\xff\xe1" + struct.pack(">H", 60_002) + b"http://ns.adobe.com/xap/1.0/\x00".ljust(60_000, b"x")
    header = jpeg_header(1024, 1024)
    jpeg = header[:2] + xmp * 2 + header[2:]
    for k in range(3):
        response = api.post(f"/api/conversations/{chat['id']}/messages/",
                            {"content": f"q{k} " + "word " * 30, "images": [{"data": b64(jpeg)}]}, format="json")
        assert sse_events(response.recorded_body)[-1][0] == "done"

    sent = fake_openai.requests[-1].messages
    assert sum(p["type"] == "image_url" for m in sent if isinstance(m["content"], list) for p in m["content"]) == 2
    assert OptimizationRecord.objects.order_by("id").last().tokens_sent > 2 * 765
    gauge = api.get(f"/api/conversations/{chat['id']}/context/").json()
    assert gauge["history_tokens"] > 3 * 765


@pytest.mark.parametrize("question", [
    "Which layout is better?",  # shorter than the placeholders: no room at all
    # longer: room left for a marker alone
    "Compare these two screenshots of our signup page and tell me which layout reads better on a small phone "
    "screen, considering contrast, spacing, the order of the fields and the size of the buttons.",
])
def test_a_short_question_beside_images_too_large_for_the_budget_is_sent_with_their_placeholders(
    api, echo_config, fake_openai, question
):
    """Two images costing 2,210 tokens in a 1,300-token budget: the question is "shortened" for its images
    alone, and its text, little longer than their placeholders, gave them room only as no text or a marker
    alone ("[... 38 tokens omitted ...]"): the model was sent the placeholders without the question. It is
    sent whole, a few tokens past its count, as an image alone's placeholders are, and the figures count it
    as sent."""
    api.patch(f"/api/configs/{echo_config['id']}/", {"context_window": 1_500, "max_output_tokens": 200}, format="json")
    chat = _chat_with(api, echo_config, accepts_images=True)
    fake_openai.reset()
    response = api.post(f"/api/conversations/{chat['id']}/messages/",
                        {"content": question, "images": [{"data": b64(png_bytes(2048, 1024))}] * 2}, format="json")
    assert sse_events(response.recorded_body)[-1][0] == "done"

    sent = fake_openai.requests[-1].messages
    assert sent[-1]["content"] == f"{question}\n\n[image: 2048x1024]\n[image: 2048x1024]"
    assert OptimizationRecord.objects.get().tokens_sent == count_messages(sent, model="fake-echo") <= 1_300
