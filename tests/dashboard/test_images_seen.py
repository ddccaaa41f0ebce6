""""What the model saw" of a turn whose message carried an image, against the request the endpoint got:
the image sent beside the text to a model that sees images, its placeholder in the text to one that
does not."""

from __future__ import annotations

import pytest

from chatapp.chat.models import Conversation, OptimizationRecord
from tests.support.chat import make_config, post_stream
from tests.support.images import b64, png_bytes

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_rate_limit")]


def _turn_with_an_image(user, client, fake_openai, *, sees: bool) -> tuple[dict, dict, OptimizationRecord]:
    fake_openai.reset()
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini")
    config.accepts_images = sees
    config.save()
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    image = {"data": b64(png_bytes(640, 480))}
    result = post_stream(user, f"/api/conversations/{conversation.pk}/messages/",
                         {"content": "What is this?", "images": [image]})
    assert result.events[-1][0] == "done", result.events
    [wire] = [r for r in fake_openai.requests if r.path.endswith("/chat/completions")][-1].messages
    record = OptimizationRecord.objects.get(conversation=conversation)
    client.force_login(user)
    context = client.get(f"/api/dashboard/conversations/{conversation.pk}/records/{record.pk}/").json()
    [entry] = context["entries"]
    return wire, entry, record


def test_a_model_that_does_not_see_images_is_shown_the_placeholder_it_was_sent(user, client, fake_openai):
    # The view showed "What is this?" and called it the text sent (content_is_sent_text), where the
    # model was sent "What is this?" and the image's placeholder.
    wire, entry, record = _turn_with_an_image(user, client, fake_openai, sees=False)
    assert wire["content"] == "What is this?\n\n[image: 640x480]"
    assert entry["content"] == wire["content"] and entry["content_is_sent_text"]
    assert entry["images"] == 0
    assert record.tokens_sent == record.provider_prompt_tokens


def test_a_model_that_sees_images_is_said_to_have_been_sent_the_image(user, client, fake_openai):
    # The view showed the question alone beside its count, the image's cost in it, with no word of an
    # image sent.
    wire, entry, _ = _turn_with_an_image(user, client, fake_openai, sees=True)
    assert [part["type"] for part in wire["content"]] == ["text", "image_url"]
    assert entry["content"] == "What is this?" and entry["images"] == 1


WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]


def test_an_image_dropped_for_a_model_that_does_not_see_images_counts_as_its_placeholder(user, client, fake_openai):
    # Such a model's full history counts each image as its placeholder (what it would be sent), but the
    # tokens a turn dropped summed the dropped messages' stored counts, the images' cost in them: a turn
    # read "1,569 dropped with no summary" beside 815 not sent, and the card's split (clamped to the
    # tokens not sent) called every summarized token dropped.
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=1600, max_output=200)
    config.accepts_images = False
    config.save()
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    url = f"/api/conversations/{conversation.pk}/messages/"
    assert post_stream(user, url, {"content": "Hello there, a first question."}).events[-1][0] == "done"
    picture = {"content": "Look at this picture please.", "images": [{"data": b64(png_bytes(1024, 1024))}]}
    assert post_stream(user, url, picture).events[-1][0] == "done"
    for turn in range(8):
        # Words of this turn's own (no term shared with another message): recall quotes nothing, so a
        # turn's tokens not sent are all dropped ones.
        ending = ["ka", "lo", "mu", "ne", "po", "ri", "su", "ta"][turn]
        text = " ".join(WORDS[(turn + k) % len(WORDS)] + ending for k in range(110))
        assert post_stream(user, url, {"content": text}).events[-1][0] == "done"
    image_message = conversation.messages.filter(role="user").order_by("id")[1]
    records = list(OptimizationRecord.objects.filter(conversation=conversation).order_by("id"))
    # A turn that summarized nothing and recalled nothing: what it dropped is what it did not send (a
    # token or so apart, the placeholder counted apart from the text it follows).
    plain = [r for r in records if r.summary_id is None and not r.recall_tokens]
    dropping = [r for r in plain if any(first <= image_message.pk <= last for first, last in r.dropped_ranges)]
    assert dropping
    for record in dropping:
        assert abs(record.dropped_tokens - (record.tokens_full - record.tokens_sent)) <= 2, record.__dict__
