"""A message's images in exports (JSON: the files, base64; Markdown: a line each), imports (restored,
checked as a send's), branches into a new chat, and share links (read through the link's token)."""

from __future__ import annotations

import base64
import json

import pytest
from django.test import Client
from markdown_it import MarkdownIt

from chatapp.chat.image_models import MessageImage
from chatapp.chat.import_writing import ModelChoice, conversation_import
from chatapp.chat.imports import ConversationError, longchat
from chatapp.chat.models import Conversation, Message
from chatapp.chat.share_services import conversation_share_create, conversation_share_revoke
from optimizer.images import image_tokens
from tests.support.images import b64, png_bytes
from tests.support.streaming import sse_events

pytestmark = pytest.mark.django_db


@pytest.fixture
def chat(api, echo_config):
    chat = api.post("/api/conversations/", {}, format="json").json()
    png = png_bytes(640, 480)
    response = api.post(
        f"/api/conversations/{chat['id']}/messages/",
        {"content": "Look", "images": [{"data": b64(png), "name": "cat.png"}]},
        format="json",
    )
    assert sse_events(response.recorded_body)[-1][0] == "done"
    return Conversation.objects.get(pk=chat["id"])


def _export(api, chat) -> dict:
    response = api.get(f"/api/conversations/{chat.pk}/export/?format=json")
    return json.loads(response.recorded_body)


def test_json_export_carries_the_files_and_an_import_restores_them(api, user, chat):
    document = _export(api, chat)
    question, reply = document["messages"]
    [image] = question["images"]
    assert {k: image[k] for k in ("name", "mime", "width", "height")} == {
        "name": "cat.png",
        "mime": "image/png",
        "width": 640,
        "height": 480,
    }
    assert base64.b64decode(image["data"]) == png_bytes(640, 480)
    assert reply["images"] == []

    copy = conversation_import(
        owner=user, record=longchat.conversation_parse(document, index=0), index=0, models=ModelChoice(owner=user)
    )
    [restored] = MessageImage.objects.filter(message__conversation=copy)
    assert (restored.name, restored.mime, restored.width, restored.height) == ("cat.png", "image/png", 640, 480)
    assert bytes(restored.data) == png_bytes(640, 480)
    imported = Message.objects.get(conversation=copy, role="user")
    assert imported.token_count == Message.objects.get(conversation=chat, role="user").token_count
    assert imported.token_count > image_tokens(640, 480)


def test_an_import_refuses_a_file_that_is_not_an_image(api, user, chat):
    document = _export(api, chat)
    document["messages"][0]["images"][0]["data"] = b64(b"<script>alert(1)</script>")
    with pytest.raises(ConversationError, match=r"message 1's images: cat\.png is not an image"):
        conversation_import(
            owner=user, record=longchat.conversation_parse(document, index=0), index=0, models=ModelChoice(owner=user)
        )


def test_markdown_export_names_each_image(api, chat):
    response = api.get(f"/api/conversations/{chat.pk}/export/?format=markdown")
    text = response.recorded_body.decode()
    assert "Look\n\n[image: cat.png 640x480]" in text


def test_an_image_name_cannot_break_the_markdown(api, chat):
    # The name (any text the browser sent) was written as is: a "]" closed the image's bracket, a
    # "](url)" made a link of it, a line break a heading, "*" emphasis.
    MessageImage.objects.update(name="cat]\n\n# not a heading](https://x.test) *bold* <b>\\")
    text = api.get(f"/api/conversations/{chat.pk}/export/?format=markdown").recorded_body.decode()
    [line] = [line for line in text.splitlines() if line.startswith("[image:")]
    html = MarkdownIt("commonmark").render(line)
    assert html == "<p>[image: cat] # not a heading](https://x.test) *bold* &lt;b&gt;\\ 640x480]</p>\n"


def test_a_branch_into_a_new_chat_keeps_the_images(api, chat):
    reply = Message.objects.get(conversation=chat, role="assistant")
    forked = api.post(f"/api/messages/{reply.pk}/fork/")
    assert forked.status_code in (200, 201)
    copy = Conversation.objects.exclude(pk=chat.pk).get()
    assert MessageImage.objects.filter(message__conversation=copy).count() == 1


def test_a_share_link_shows_its_images_through_its_token(user, chat, api):
    issued = conversation_share_create(owner=user, conversation=chat)
    image = MessageImage.objects.get()
    anyone = Client()
    page = anyone.get(f"/s/{issued.token}/").content.decode()
    address = f"/s/{issued.token}/images/{image.pk}/"
    assert f'src="{address}"' in page and "/api/images/" not in page
    served = anyone.get(address)
    assert served.status_code == 200 and served["Content-Type"] == "image/png"
    assert served.content == png_bytes(640, 480)
    assert "no-store" in served["Cache-Control"]
    assert anyone.get(f"/api/images/{image.pk}/").status_code in (401, 403, 404)  # not the owner's address

    # An image the link does not show (a later message) is not read through it.
    later = MessageImage.objects.create(
        message=Message.objects.create(conversation=chat, role="user", content="x"),
        mime="image/png",
        width=2,
        height=2,
        byte_count=1,
        data=png_bytes(),
    )
    assert anyone.get(f"/s/{issued.token}/images/{later.pk}/").status_code == 404
    conversation_share_revoke(owner=user, share=issued.share)
    assert anyone.get(address).status_code == 404


def test_an_import_stores_its_images_together_and_flags_the_chat(api, user, chat):
    """An import's images go in with a few inserts, not two statements a message, and the new chat is
    known to hold images (its pages and turns look for them)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    document = _export(api, chat)
    question, reply = document["messages"]
    sizes = [(32 + k, 24) for k in range(20)]
    document["messages"] = [
        message
        for k, (width, height) in enumerate(sizes)
        for message in (
            {**question, "id": 2 * k + 1, "parent_id": 2 * k or None, "content": f"Look {k}",
             "images": [{**question["images"][0], "width": width, "data": b64(png_bytes(width, height))}]},
            {**reply, "id": 2 * k + 2, "parent_id": 2 * k + 1, "reply_to_id": 2 * k + 1, "content": f"A picture {k}."},
        )
    ]
    with CaptureQueriesContext(connection) as queries:
        copy = conversation_import(
            owner=user, record=longchat.conversation_parse(document, index=0), index=0, models=ModelChoice(owner=user)
        )
    inserts = [q for q in queries.captured_queries
               if q["sql"].startswith("INSERT") and MessageImage._meta.db_table in q["sql"]]
    assert len(inserts) == 2  # 20 images, 16 an insert
    # The chat is made knowing it holds images: no UPDATE comes back to flag it.
    assert not [q for q in queries.captured_queries if q["sql"].startswith("UPDATE") and "has_images" in q["sql"]]
    restored = MessageImage.objects.filter(message__conversation=copy).order_by("message_id", "id")
    assert [(i.width, i.height, i.message.content) for i in restored] == [
        (width, height, f"Look {k}") for k, (width, height) in enumerate(sizes)
    ]
    assert Conversation.objects.get(pk=copy.pk).has_images
