"""A message that is an image alone (no text, as ChatGPT, Open WebUI and LibreChat take one): sent,
counted, shown to the model as the image (or its placeholder), titled, summarized, searched past,
exported, shared, edited, regenerated and retried; a message with neither text nor image is refused."""

from __future__ import annotations

import base64
import json

import pytest

import optimizer
from chatapp.chat.context_images import messages_with_placeholders
from chatapp.chat.image_models import MessageImage
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from optimizer.images import image_tokens
from tests.support.images import b64, png_bytes
from tests.support.streaming import sse_events

pytestmark = pytest.mark.django_db


def _chat(api, echo_config, *, accepts_images=True):
    patched = api.patch(f"/api/configs/{echo_config['id']}/", {"accepts_images": accepts_images}, format="json")
    assert patched.status_code == 200
    return api.post("/api/conversations/", {}, format="json").json()


def _send(api, chat, body):
    return api.post(f"/api/conversations/{chat['id']}/messages/", body, format="json")


def _image(width=640, height=480, name="cat.png"):
    return {"data": b64(png_bytes(width, height)), "name": name}


def _last_user(fake_openai):
    return [m for m in fake_openai.requests[-1].messages if m["role"] == "user"][-1]


@pytest.mark.parametrize("content", ["", "  \n\t ", None])
def test_an_image_alone_is_sent_and_stored_without_text(api, echo_config, fake_openai, content):
    chat = _chat(api, echo_config)
    body = {"images": [_image()]} if content is None else {"content": content, "images": [_image()]}
    fake_openai.reset()
    response = _send(api, chat, body)
    assert response.status_code == 200, response.recorded_body
    events = sse_events(response.recorded_body)
    assert events[-1][0] == "done"
    accepted = dict(events)["accepted"]["user_message"]
    assert accepted["content"] == "" and [i["name"] for i in accepted["images"]] == ["cat.png"]

    # Only the image goes to a model that sees images: no empty text part.
    [part] = _last_user(fake_openai)["content"]
    assert part["type"] == "image_url"
    assert part["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(png_bytes(640, 480)).decode()

    stored = Message.objects.get(conversation_id=chat["id"], role="user")
    assert stored.content == "" and stored.char_count == 0
    text_only = optimizer.count_message({"role": "user", "content": ""}, model="fake-echo")
    assert stored.token_count == text_only + image_tokens(640, 480)  # no text, the image's cost
    record = OptimizationRecord.objects.get(conversation_id=chat["id"])
    assert record.tokens_sent > image_tokens(640, 480)
    gauge = api.get(f"/api/conversations/{chat['id']}/context/").json()
    assert json.dumps(gauge)  # the gauge reads it


def test_a_model_that_does_not_see_images_is_sent_the_placeholder_alone(api, echo_config, fake_openai):
    chat = _chat(api, echo_config, accepts_images=False)
    fake_openai.reset()
    assert sse_events(_send(api, chat, {"content": "", "images": [_image()]}).recorded_body)[-1][0] == "done"
    assert _last_user(fake_openai)["content"] == "[image: 640x480]"
    assert OptimizationRecord.objects.get(conversation_id=chat["id"]).tokens_sent < 100


@pytest.mark.parametrize("body", [
    {"content": ""}, {"content": "   "}, {"content": " ", "images": []}, {"content": "", "images": None},
])
def test_neither_text_nor_image_is_refused(api, echo_config, body):
    chat = _chat(api, echo_config)
    response = _send(api, chat, body)
    assert response.status_code == 400
    assert "Type a message" in json.dumps(response.json())
    assert not Message.objects.filter(conversation_id=chat["id"]).exists()


def test_no_content_and_no_images_asks_for_the_text(api, echo_config):
    chat = _chat(api, echo_config)
    response = _send(api, chat, {"client_key": "k"})
    assert response.status_code == 400 and "content" in response.json()["detail"]


def test_the_same_image_alone_sent_twice_under_one_key_is_stored_once(api, echo_config):
    chat = _chat(api, echo_config)
    first = _send(api, chat, {"content": "", "images": [_image()], "client_key": "once"})
    assert first.status_code == 200
    again = _send(api, chat, {"content": "", "images": [_image()], "client_key": "once"})
    assert again.status_code == 409 and again.json()["repeated"] is True
    assert Message.objects.filter(conversation_id=chat["id"], role="user").count() == 1


def test_the_chats_title_names_the_image_until_the_model_names_it(api, echo_config):
    chat = _chat(api, echo_config)
    accepted = dict(sse_events(_send(api, chat, {"content": "", "images": [_image()]}).recorded_body))["accepted"]
    assert accepted["title"] == "Image: cat.png"
    pasted = api.post("/api/conversations/", {}, format="json").json()
    accepted = dict(sse_events(_send(api, pasted, {"images": [_image(name="")]}).recorded_body))["accepted"]
    assert accepted["title"] == "Image"


def test_the_title_model_reads_the_placeholder(api, echo_config, fake_openai):
    from chatapp.chat.title_services import conversation_title_generate

    chat = _chat(api, echo_config)
    _send(api, chat, {"content": "", "images": [_image()]})
    conversation = Conversation.objects.get(pk=chat["id"])
    assert conversation_title_generate(conversation_id=chat["id"], expected=conversation.title) == "named"
    asked = fake_openai.requests[-1].messages[-1]["content"]
    assert asked.startswith("User:\n[image: 640x480]\n\nAssistant:\n")


def test_a_summary_reads_the_placeholder_alone(api, echo_config):
    chat = _chat(api, echo_config)
    _send(api, chat, {"content": "", "images": [_image()]})
    rows = messages_with_placeholders(list(Message.objects.filter(conversation_id=chat["id"]).order_by("id")))
    assert rows[0].content == "[image: 640x480]"


def test_search_and_recall_pass_an_image_alone(api, echo_config, fake_openai):
    chat = _chat(api, echo_config)
    _send(api, chat, {"content": "tell me about penguins", "images": []})
    assert sse_events(_send(api, chat, {"content": "", "images": [_image()]}).recorded_body)[-1][0] == "done"
    later = _send(api, chat, {"content": "and penguins again?"})
    assert sse_events(later.recorded_body)[-1][0] == "done"
    found = api.get("/api/search/", {"q": "penguins"})
    assert found.status_code == 200 and found.json()["ranked"] >= 1


def test_regenerate_retry_and_branches_of_an_image_alone(api, echo_config, fake_openai):
    chat = _chat(api, echo_config)
    _send(api, chat, {"content": "", "images": [_image()]})
    reply = Message.objects.get(conversation_id=chat["id"], role="assistant")
    fake_openai.reset()
    regenerated = api.post(f"/api/messages/{reply.pk}/regenerate/")
    assert sse_events(regenerated.recorded_body)[-1][0] == "done"
    assert [p["type"] for p in _last_user(fake_openai)["content"]] == ["image_url"]

    switched = api.post(f"/api/messages/{reply.pk}/branch/", {"index": 1}, format="json")
    assert switched.status_code == 200

    api.patch(f"/api/configs/{echo_config['id']}/", {"model": "fail-500"}, format="json")
    failed = _send(api, chat, {"content": " ", "images": [_image(32, 32, "dog.png")]})
    assert sse_events(failed.recorded_body)[-1][0] == "error"
    question = Message.objects.filter(conversation_id=chat["id"], role="user").order_by("id").last()
    api.patch(f"/api/configs/{echo_config['id']}/", {"model": "fake-echo"}, format="json")
    fake_openai.reset()
    retried = api.post(f"/api/messages/{question.pk}/retry/")
    assert sse_events(retried.recorded_body)[-1][0] == "done"
    assert [p["type"] for p in _last_user(fake_openai)["content"]] == ["image_url"]


def test_the_image_alone_is_listed_with_no_text(api, echo_config):
    chat = _chat(api, echo_config)
    _send(api, chat, {"content": "", "images": [_image()]})
    [question, _reply] = api.get(f"/api/conversations/{chat['id']}/messages/").json()["results"]
    assert question["content"] == "" and len(question["images"]) == 1
    assert MessageImage.objects.get().message_id == question["id"]


@pytest.mark.parametrize("origin", ["verbatim", "compressed"])
@pytest.mark.parametrize("sees", [True, False])
def test_a_packed_image_alone_is_never_an_empty_message(api, echo_config, origin, sees):
    from chatapp.chat.context_images import msgs_counted_as_sent, packed_images_attach
    from optimizer.types import Msg, PackedMessage

    chat = _chat(api, echo_config)
    _send(api, chat, {"content": "", "images": [_image(1024, 1024)]})
    question = Message.objects.get(conversation_id=chat["id"], role="user")
    stored = question.token_count
    # As packed: a model that does not see the image packs it counted with its placeholder.
    [loaded] = msgs_counted_as_sent([Msg(str(question.pk), "user", "", False, stored)], model="gpt-4o")
    count = {"verbatim": stored if sees else loaded.tokens, "compressed": 4}[origin]
    packed = PackedMessage(role="user", content="", source_ids=(str(question.pk),), origin=origin, tokens=count)
    [sent] = packed_images_attach([packed], sees=sees, model="gpt-4o", loaded=[loaded])
    placeholder = optimizer.count_text("[image: 1024x1024]", model="gpt-4o")
    image = [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(png_bytes(1024, 1024))}"}}]
    expected = {
        (True, "verbatim"): (image, count),  # the image alone, at its stored count
        (False, "verbatim"): ("[image: 1024x1024]", stored - image_tokens(1024, 1024) + placeholder),
        # Shortened to fit its share (counted without its image): its placeholder, not an empty message.
        (True, "compressed"): ("[image: 1024x1024]", count + placeholder),
        (False, "compressed"): ("[image: 1024x1024]", count + placeholder),
    }
    assert (sent.content, sent.tokens) == expected[sees, origin]


@pytest.mark.parametrize("content", ["", "   "])
def test_an_edit_of_an_image_message_may_leave_the_image_alone(api, echo_config, fake_openai, content):
    chat = _chat(api, echo_config)
    _send(api, chat, {"content": "What is this?", "images": [_image()]})
    original = Message.objects.get(conversation_id=chat["id"], role="user")
    fake_openai.reset()
    response = api.post(f"/api/messages/{original.pk}/edit/", {"content": content}, format="json")
    assert response.status_code == 200, response.recorded_body
    events = sse_events(response.recorded_body)
    assert events[-1][0] == "done"
    accepted = dict(events)["accepted"]["user_message"]
    assert accepted["content"] == "" and [i["name"] for i in accepted["images"]] == ["cat.png"]
    assert [p["type"] for p in _last_user(fake_openai)["content"]] == ["image_url"]
    text_only = optimizer.count_message({"role": "user", "content": ""}, model="fake-echo")
    assert Message.objects.get(pk=accepted["id"]).token_count == text_only + image_tokens(640, 480)


def test_an_edit_to_no_text_of_a_message_without_images_is_refused(api, echo_config):
    chat = _chat(api, echo_config)
    _send(api, chat, {"content": "Hello"})
    original = Message.objects.get(conversation_id=chat["id"], role="user")
    response = api.post(f"/api/messages/{original.pk}/edit/", {"content": "  "}, format="json")
    assert response.status_code == 400 and "Type a message" in json.dumps(response.json())
    assert Message.objects.filter(conversation_id=chat["id"], role="user").count() == 1


def _image_alone_chat(api, echo_config):
    chat = _chat(api, echo_config)
    assert sse_events(_send(api, chat, {"content": "", "images": [_image()]}).recorded_body)[-1][0] == "done"
    return Conversation.objects.get(pk=chat["id"])


def test_exports_and_an_import_keep_an_image_alone(api, user, echo_config):
    from chatapp.chat.import_writing import ModelChoice, conversation_import
    from chatapp.chat.imports import longchat

    chat = _image_alone_chat(api, echo_config)
    document = json.loads(api.get(f"/api/conversations/{chat.pk}/export/?format=json").recorded_body)
    question = document["messages"][0]
    assert question["content"] == "" and [i["name"] for i in question["images"]] == ["cat.png"]
    copy = conversation_import(
        owner=user, record=longchat.conversation_parse(document, index=0), index=0, models=ModelChoice(owner=user)
    )
    imported = Message.objects.get(conversation=copy, role="user")
    assert imported.content == "" and imported.images.get().name == "cat.png"
    assert imported.token_count == Message.objects.get(conversation=chat, role="user").token_count

    markdown = api.get(f"/api/conversations/{chat.pk}/export/?format=markdown").recorded_body.decode()
    user_part = markdown.split("· User —", 1)[1].split("###", 1)[0]
    assert "[image: cat.png 640x480]" in user_part and "(no text)" not in user_part


def test_a_share_link_and_the_chat_page_show_an_image_alone(api, user, echo_config):
    from django.test import Client

    from chatapp.chat.share_services import conversation_share_create

    chat = _image_alone_chat(api, echo_config)
    issued = conversation_share_create(owner=user, conversation=chat)
    image = MessageImage.objects.get()
    page = Client().get(f"/s/{issued.token}/").content.decode()
    assert f'src="/s/{issued.token}/images/{image.pk}/"' in page
    owner = Client()
    owner.force_login(user)
    drawn = owner.get(f"/c/{chat.pk}/").content.decode()
    assert f'src="/api/images/{image.pk}/"' in drawn
