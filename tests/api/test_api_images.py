"""Images sent with a message: checked by their bytes, stored, listed with the message, and served
to their owner only."""

from __future__ import annotations

import json

import pytest

from chatapp.chat.image_models import MessageImage
from chatapp.chat.models import Message
from optimizer.images import image_tokens
from tests.support.images import b64, jpeg_header, png_bytes, png_header
from tests.support.streaming import sse_events

pytestmark = pytest.mark.django_db


def _send(api, conversation_id: int, images, content: str = "What is this?"):
    body = {"content": content, "images": images}
    return api.post(f"/api/conversations/{conversation_id}/messages/", body, format="json")


@pytest.fixture
def chat(api, echo_config):
    return api.post("/api/conversations/", {}, format="json").json()


def test_an_image_is_stored_listed_and_served(api, chat):
    png = png_bytes(640, 480)
    response = _send(api, chat["id"], [{"data": b64(png), "name": "cat.png"}])
    assert response.status_code == 200
    accepted = dict(sse_events(response.recorded_body))["accepted"]["user_message"]
    [shown] = accepted["images"]
    assert (shown["mime"], shown["width"], shown["height"], shown["name"]) == ("image/png", 640, 480, "cat.png")
    assert shown["bytes"] == len(png) and shown["url"] == f"/api/images/{shown['id']}/"

    timeline = api.get(f"/api/conversations/{chat['id']}/messages/").json()["results"]
    assert timeline[0]["images"] == [shown]
    assert timeline[1]["images"] == []

    served = api.get(shown["url"])
    assert served.status_code == 200
    assert served["Content-Type"] == "image/png"
    assert "private" in served["Cache-Control"] and "immutable" in served["Cache-Control"]
    assert served.recorded_body == png


def test_the_type_is_read_from_the_bytes_not_the_client(api, chat):
    data = f"data:image/png;base64,{b64(jpeg_header(800, 600))}"
    assert _send(api, chat["id"], [{"data": data}]).status_code == 200
    image = MessageImage.objects.get()
    assert (image.mime, image.width, image.height, image.name) == ("image/jpeg", 800, 600, "")


def test_a_name_that_is_not_valid_unicode_is_stored_with_its_character_replaced(api, chat):
    """JSON may spell a lone surrogate, which no UTF-8 column stores: the send went through the checks
    and failed at the write, losing the message."""
    body = {"content": "What is this?", "images": [{"data": b64(png_bytes(64, 48)), "name": "cat\ud800\x00.png"}]}
    response = api.post(f"/api/conversations/{chat['id']}/messages/", json.dumps(body),  # escaped: ASCII
                        content_type="application/json")
    assert response.status_code == 200
    assert MessageImage.objects.get().name == "cat\ufffd.png"
    assert Message.objects.filter(role="user", content="What is this?").exists()


def test_the_message_counts_the_images_cost(api, chat):
    _send(api, chat["id"], [{"data": b64(png_bytes(1024, 1024))}], content="hi")
    with_image = Message.objects.get(role="user").token_count
    _send(api, chat["id"], [], content="hi")
    without = Message.objects.filter(role="user").order_by("id").last().token_count
    assert with_image - without == image_tokens(1024, 1024) == 765


@pytest.mark.parametrize(
    ("images", "words"),
    [
        ([{"data": b64(b"just some text, not an image")}], "not an image"),
        ([{"data": b64(b"<svg xmlns='http://www.w3.org/2000/svg'/>"), "name": "x.svg"}], "x.svg is not an image"),
        ([{"data": "not base64!"}], "base64"),
        ([b64(png_bytes())], "object"),
        ({"data": b64(png_bytes())}, "list"),
        ([{"data": b64(png_bytes())}] * 5, "at most 4 images"),
    ],
)
def test_what_is_not_a_taken_image_is_refused_and_nothing_stored(api, chat, images, words):
    response = _send(api, chat["id"], images)
    assert response.status_code == 400
    assert words in str(response.json())
    assert not Message.objects.filter(conversation_id=chat["id"]).exists()
    assert not MessageImage.objects.exists()


@pytest.mark.parametrize("size", [(100_000, 100_000), (0xFFFF_FFFF, 1)])
def test_a_header_claiming_more_pixels_than_a_decoder_takes_is_refused(api, chat, size):
    """A few bytes may claim any size: a model's server refuses to decode such a "decompression bomb",
    which failed every later turn of the chat, and past 2**31 a side its row was a 500 on PostgreSQL."""
    response = _send(api, chat["id"], [{"data": b64(png_header(*size)), "name": "bomb.png"}])
    assert response.status_code == 400
    assert "bomb.png is" in str(response.json()) and "at most 178,956,970 pixels" in str(response.json())
    assert not Message.objects.filter(conversation_id=chat["id"]).exists()


def test_an_image_just_under_the_pixel_limit_is_taken(api, chat):
    assert _send(api, chat["id"], [{"data": b64(png_header(13_378, 13_376))}]).status_code == 200
    assert (MessageImage.objects.get().width, MessageImage.objects.get().height) == (13_378, 13_376)


def test_an_image_over_the_limit_is_refused_with_413(api, chat, settings):
    settings.MAX_IMAGE_BYTES = 2048
    response = _send(api, chat["id"], [{"data": b64(png_bytes(64, 64) + b"\0" * 4000)}])
    assert response.status_code == 413
    assert response.json()["limit"] == 2048
    assert not Message.objects.filter(conversation_id=chat["id"]).exists()


def test_another_users_image_is_not_found(api, other_api, chat):
    _send(api, chat["id"], [{"data": b64(png_bytes())}])
    image = MessageImage.objects.get()
    assert other_api.get(f"/api/images/{image.pk}/").status_code == 404
    assert api.get(f"/api/images/{image.pk}/").status_code == 200


def test_an_edit_keeps_the_messages_images(api, chat):
    _send(api, chat["id"], [{"data": b64(png_bytes(1024, 1024)), "name": "a.png"}], content="hi")
    original = Message.objects.get(role="user")
    response = api.post(f"/api/messages/{original.pk}/edit/", {"content": "hi"}, format="json")
    accepted = dict(sse_events(response.recorded_body))["accepted"]["user_message"]
    assert [(i["name"], i["width"]) for i in accepted["images"]] == [("a.png", 1024)]
    edited = Message.objects.get(pk=accepted["id"])
    assert edited.images.get().data == original.images.get().data
    assert edited.token_count == original.token_count  # the same text, the same image


def test_a_chat_that_never_held_an_image_looks_for_none(api, client, user, chat):
    """Most chats hold no image: their page and their message list read no image rows; once an image is
    sent, both show it."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(user)
    assert _send(api, chat["id"], [], content="Just words").status_code == 200
    page_url, list_url = f"/c/{chat['id']}/", f"/api/conversations/{chat['id']}/messages/"
    with CaptureQueriesContext(connection) as plain:
        assert client.get(page_url).status_code == 200
        assert [m["images"] for m in api.get(list_url).json()["results"]] == [[], []]
    assert plain.captured_queries
    assert not [q for q in plain.captured_queries if MessageImage._meta.db_table in q["sql"]]

    _send(api, chat["id"], [{"data": b64(png_bytes(64, 48)), "name": "cat.png"}])
    listed = api.get(list_url).json()["results"]
    assert [len(m["images"]) for m in listed] == [0, 0, 1, 0]
    [shown] = listed[2]["images"]
    page = client.get(page_url).content.decode()
    assert page.count('class="msg-image"') == 1 and f'href="{shown["url"]}"' in page
