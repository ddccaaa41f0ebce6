"""What an Open WebUI chat brings beyond its messages' text: its own system prompt (as our own format
does: test_import.py) and, for a message of attachments only, what was attached."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from chatapp.chat.imports import openwebui
from chatapp.chat.imports.records import record_fingerprint
from chatapp.chat.models import Conversation
from tests.chat.importkit import import_now
from tests.support.images import b64, png_bytes

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user(username="webui", password="a long test password 5")


def _openwebui_chat(title: str, **chat: object) -> dict:
    messages = {
        "u1": {"id": "u1", "parentId": None, "childrenIds": ["a1"], "role": "user", "content": "Bonjour ?",
               "timestamp": 1720000010},
        "a1": {"id": "a1", "parentId": "u1", "childrenIds": [], "role": "assistant", "content": "Bonjour !",
               "model": "llama3.1", "timestamp": 1720000020},
    }
    return {"id": f"id-{title}", "title": title, "created_at": 1720000000, "updated_at": 1720000020,
            "chat": {"title": title, "history": {"messages": messages, "currentId": "a1"}, **chat}}


def test_an_open_webui_chats_system_prompt_is_the_imported_chats(owner):
    """Open WebUI keeps a chat's system prompt (Chat Controls → System Prompt) in `chat.params.system`
    and sends it before the messages; the chat here must send it too, not start without it."""
    document = [
        _openwebui_chat("French", params={"system": "Answer in French only.\nBe brief. 🇫🇷"}),
        _openwebui_chat("Plain", params={"temperature": 0.2}),
        _openwebui_chat("Odd", params={"system": 42}),  # not text: nothing to keep
    ]

    job = import_now(owner, json.dumps(document).encode())

    assert (job.status, job.skipped) == ("done", [])
    prompts = [Conversation.objects.get(pk=pk).system_prompt for pk in job.conversation_ids]
    assert prompts == ["Answer in French only.\nBe brief. 🇫🇷", "", ""]


def test_an_open_webui_message_of_attachments_only_keeps_its_place(owner):
    """A question sent as a picture alone (Open WebUI sends it with empty text) was dropped as empty:
    its answer then followed the previous answer, a reply to nothing. It stays, as a placeholder
    saying what was attached, as ChatGPT's pictures do ("[image]")."""
    chat = _openwebui_chat("Photo")
    history = chat["chat"]["history"]["messages"]
    history["a1"]["childrenIds"] = ["u2"]
    history["u2"] = {"id": "u2", "parentId": "a1", "childrenIds": ["a2"], "role": "user", "content": "",
                     "files": [{"type": "image", "url": "data:image/png;base64,AAAA"},
                               {"type": "file", "name": "notes.pdf", "content_type": "application/pdf"}],
                     "timestamp": 1720000030}
    history["a2"] = {"id": "a2", "parentId": "u2", "childrenIds": [], "role": "assistant",
                     "content": "A cat on a pile of notes.", "timestamp": 1720000040}
    chat["chat"]["history"]["currentId"] = "a2"

    job = import_now(owner, json.dumps([chat]).encode())

    assert (job.status, job.omitted) == ("done", {})
    rows = list(Conversation.objects.get(pk=job.conversation_ids[0]).messages.order_by("id"))
    assert [(m.role, m.content) for m in rows[2:]] == [
        ("user", "[image]\n[file: notes.pdf]"), ("assistant", "A cat on a pile of notes.")]
    assert rows[3].reply_to_id == rows[2].pk


def test_an_open_webui_reasoning_block_is_the_reply_s_thinking_not_its_answer(owner):
    """Open WebUI keeps a reasoning model's thinking in the reply's text, as a `<details type="reasoning">`
    block of quoted lines before the answer (HTML-escaped in newer versions). Imported as text, it was
    answer: sent back to the model at every turn, counted, summarized and searched. It is the reply's
    thinking, as a reply streamed here keeps it."""
    chat = _openwebui_chat("Bikes")
    history = chat["chat"]["history"]["messages"]
    history["a1"]["content"] = (
        '<details type="reasoning" done="true" duration="12">\n<summary>Thought for 12 seconds</summary>\n'
        "> The user greets me in French.\n>\n> Answer <b>briefly</b> & kindly.\n</details>\nBonjour !"
    )
    history["a1"]["childrenIds"] = ["u2"]
    history["u2"] = {"id": "u2", "parentId": "a1", "childrenIds": ["a2"], "role": "user", "content": "Et toi ?",
                     "timestamp": 1720000030}
    history["a2"] = {"id": "a2", "parentId": "u2", "childrenIds": [], "role": "assistant", "timestamp": 1720000040,
                     "content": '<details type="reasoning" done="true" duration="3">\n<summary>Thought for 3 '
                                "seconds</summary>\n&gt; A question back: 5 &lt; 6.\n</details>\n\nÇa va.",
                     "model": "deepseek-r1"}
    history["a2"]["childrenIds"] = ["u3"]
    history["u3"] = {"id": "u3", "parentId": "a2", "childrenIds": ["a3"], "role": "user", "content": "Et hier ?",
                     "timestamp": 1720000050}
    # Versions before the block kept the model's text as it came.
    history["a3"] = {"id": "a3", "parentId": "u3", "childrenIds": [], "role": "assistant", "timestamp": 1720000060,
                     "content": "<think>\nYesterday, then.\n</think>\n\nHier aussi."}
    chat["chat"]["history"]["currentId"] = "a3"
    # A reply that only writes about the tag keeps its text.
    plain = _openwebui_chat("Tags")
    plain["chat"]["history"]["messages"]["a1"]["content"] = 'Open WebUI writes <details type="reasoning">.'

    job = import_now(owner, json.dumps([chat, plain]).encode())

    assert (job.status, job.skipped) == ("done", [])
    bikes, tags = (Conversation.objects.get(pk=pk) for pk in job.conversation_ids)
    replies = list(bikes.messages.filter(role="assistant").order_by("id").values_list("content", "reasoning"))
    assert replies == [
        ("Bonjour !", "The user greets me in French.\n\nAnswer <b>briefly</b> & kindly."),
        ("Ça va.", "A question back: 5 < 6."),
        ("Hier aussi.", "Yesterday, then."),
    ]
    assert list(tags.messages.filter(role="assistant").values_list("content", "reasoning")) == [
        ('Open WebUI writes <details type="reasoning">.', None)
    ]


def test_an_answer_after_an_open_webui_reasoning_block_keeps_its_first_line_s_indentation(owner):
    """As a reply streamed here after its thinking keeps it (providers.thinking.blank_lines_off): an answer
    that opens with an indented code block or a nested list item lost its first line's indentation."""
    chat = _openwebui_chat("Code")
    chat["chat"]["history"]["messages"]["a1"]["content"] = (
        '<details type="reasoning" done="true" duration="2">\n<summary>Thought for 2 seconds</summary>\n'
        "> Show the loop.\n</details>\n\n    for bike in shed:\n        print(bike)\n\nThat is all."
    )

    job = import_now(owner, json.dumps([chat]).encode())

    assert (job.status, job.skipped) == ("done", [])
    reply = Conversation.objects.get(pk=job.conversation_ids[0]).messages.get(role="assistant")
    assert (reply.content, reply.reasoning) == ("    for bike in shed:\n        print(bike)\n\nThat is all.",
                                                "Show the loop.")


def test_an_open_webui_reply_kept_in_its_structured_output_is_imported_not_dropped(owner):
    """Open WebUI 0.10 keeps a reply as Responses-style items in `output` (its page shows their text
    before `content`, which that version stored empty): the reply was dropped as a message with no
    text, and the question after it followed the question before. Its answer and its reasoning come
    from those items, as Open WebUI shows them."""
    chat = _openwebui_chat("Structured")
    history = chat["chat"]["history"]["messages"]
    history["a1"]["content"] = ""
    history["a1"]["output"] = [
        {"type": "reasoning", "id": "rs_1", "status": "completed",
         "summary": [{"type": "summary_text", "text": "They greet me in French."}]},
        {"type": "function_call", "call_id": "c1", "name": "clock", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "9:00"}]},
        {"type": "message", "id": "m1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Bonjour ! "}, {"type": "output_text", "text": "Ça va ?"}]},
        {"type": "message", "id": "m2", "content": [{"type": "output_text", "text": "Il est 9 h."}]},
    ]

    job = import_now(owner, json.dumps([chat]).encode())

    assert (job.status, job.skipped, job.omitted) == ("done", [], {})
    reply = Conversation.objects.get(pk=job.conversation_ids[0]).messages.get(role="assistant")
    assert (reply.content, reply.reasoning) == ("Bonjour ! Ça va ?\nIl est 9 h.", "They greet me in French.")


def test_an_open_webui_reply_that_failed_is_kept_failed_with_its_error(owner):
    """Open WebUI shows a failed reply with its error (`error: {"content": ...}`, the text empty): it was
    dropped as a message with no text, the question left unanswered with no trace; it is kept as a
    failed reply here, never sent to the model, as failed replies are."""
    failed = _openwebui_chat("Failed")
    reply = failed["chat"]["history"]["messages"]["a1"]
    reply["content"], reply["error"] = "", {"content": "Ollama: model 'llama9' not found"}

    job = import_now(owner, json.dumps([failed]).encode())

    assert (job.status, job.omitted) == ("done", {})
    conversation = Conversation.objects.get(pk=job.conversation_ids[0])
    row = conversation.messages.get(role="assistant")
    assert (row.status, row.error, row.content) == ("error", "Ollama: model 'llama9' not found", "")
    assert conversation.live_message_count == 1  # the question only: a failed reply is not sent


def test_an_open_webui_reply_marked_failed_with_its_error_in_its_text_is_kept_failed(owner):
    """Versions before the error object set `error: true` and wrote the error where the answer would be
    ("Uh-oh! There was an issue connecting to Ollama."), and showed it as an error: it was imported as
    the model's answer, sent back to the model at every turn."""
    failed = _openwebui_chat("Failed before")
    reply = failed["chat"]["history"]["messages"]["a1"]
    reply["content"], reply["error"] = "Uh-oh! There was an issue connecting to Ollama.", True

    job = import_now(owner, json.dumps([failed]).encode())

    assert (job.status, job.omitted) == ("done", {})
    conversation = Conversation.objects.get(pk=job.conversation_ids[0])
    row = conversation.messages.get(role="assistant")
    assert (row.status, row.error, row.content) == ("error", "Uh-oh! There was an issue connecting to Ollama.", "")
    assert conversation.live_message_count == 1


def test_a_chat_imported_while_error_true_was_read_as_an_answer_is_not_imported_again(owner):
    # Its fingerprint then held the reply as a complete answer of that text: it must still be found.
    failed = _openwebui_chat("Failed before")
    reply = failed["chat"]["history"]["messages"]["a1"]
    reply["content"] = "Uh-oh! There was an issue connecting to Ollama."
    as_read_then = record_fingerprint(openwebui.conversation_parse(failed, index=0))
    reply["error"] = True

    assert record_fingerprint(openwebui.conversation_parse(failed, index=0)) == as_read_then


def _with_question(chat: dict, question: dict) -> dict:
    """`chat` with `question` (a user message) and an answer to it after its first exchange."""
    history = chat["chat"]["history"]["messages"]
    history["a1"]["childrenIds"] = ["u2"]
    history["u2"] = {"id": "u2", "parentId": "a1", "childrenIds": ["a2"], "role": "user", "timestamp": 1720000030,
                     **question}
    history["a2"] = {"id": "a2", "parentId": "u2", "childrenIds": [], "role": "assistant",
                     "content": "A black square.", "timestamp": 1720000040}
    chat["chat"]["history"]["currentId"] = "a2"
    return chat


def _data_url(data: bytes) -> str:
    return f"data:image/png;base64,{b64(data)}"


def test_an_open_webui_picture_kept_in_the_chat_is_imported_as_the_messages_image(owner):
    """Open WebUI keeps a picture a user sent in the chat itself, as a data: URL (in the message's
    `files`, or as an `image_url` part of its content): it was imported as the words "[image]"."""
    alone = _with_question(_openwebui_chat("Alone"), {"content": "", "files": [
        {"type": "image", "url": _data_url(png_bytes(64, 48)), "name": "square.png"}]})
    with_text = _with_question(_openwebui_chat("With text"), {"content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": _data_url(png_bytes(32, 32))}}]})

    job = import_now(owner, json.dumps([alone, with_text]).encode())

    assert (job.status, job.skipped, job.omitted) == ("done", [], {})
    first, second = (Conversation.objects.get(pk=pk) for pk in job.conversation_ids)
    question = first.messages.get(role="user", content="")
    assert [(i.name, i.width, i.height) for i in question.images.all()] == [("square.png", 64, 48)]
    assert first.messages.filter(reply_to=question, content="A black square.").exists()
    asked = second.messages.get(role="user", content="What is this?")
    assert [(i.mime, i.width) for i in asked.images.all()] == [("image/png", 32)]
    assert question.token_count > 0 and asked.token_count > len("What is this?") // 4 + 20


def test_an_open_webui_picture_this_chat_cannot_take_stays_a_placeholder(owner, settings):
    """A picture refused as a send's would be (too large, not an image) must not skip the whole chat."""
    settings.MAX_IMAGE_BYTES = 2048
    too_large = _with_question(_openwebui_chat("Large"), {"content": "Look", "files": [
        {"type": "image", "url": "data:image/png;base64," + b64(bytes(range(256)) * 16)}]})
    unreadable = _with_question(_openwebui_chat("Unreadable"), {"content": "", "files": [
        {"type": "image", "url": "data:image/png;base64," + b64(b"not a picture")}]})
    job = import_now(owner, json.dumps([too_large, unreadable]).encode())
    assert (job.status, job.skipped) == ("done", [])
    large, broken = (Conversation.objects.get(pk=pk) for pk in job.conversation_ids)
    assert not large.messages.get(role="user", content="Look").images.exists()
    assert not broken.messages.get(role="user", content="[image]").images.exists()


def test_a_chat_imported_when_its_pictures_were_placeholders_is_not_imported_again(owner):
    picture = {"content": "", "files": [{"type": "image", "url": _data_url(png_bytes(8, 8))}]}
    now = openwebui.conversation_parse(_with_question(_openwebui_chat("Photo"), picture), index=0)
    # What the reader read before: the same chat with a picture it did not take (a link, not data).
    linked = {"content": "", "files": [{"type": "image", "url": "https://example.com/photo.png"}]}
    before = openwebui.conversation_parse(_with_question(_openwebui_chat("Photo"), linked), index=0)
    assert [m.content for m in before.messages][2] == "[image]"
    assert record_fingerprint(now) == record_fingerprint(before)


@pytest.mark.parametrize("files", [5, True, 1.5])
def test_a_user_message_whose_files_are_not_a_list_is_imported_with_its_text(owner, files):
    """A user message's `files` that is not a list (a damaged or hand-edited file) crashed the reader
    looking for pictures in it: the whole job failed as an internal error, the chats after it never
    imported. It holds no pictures: the message is read by its text, as for `files` absent."""
    odd = _with_question(_openwebui_chat("Odd files"), {"content": "Still readable?", "files": files})

    job = import_now(owner, json.dumps([odd, _openwebui_chat("After it")]).encode())

    assert (job.status, job.skipped) == ("done", [])
    first, second = (Conversation.objects.get(pk=pk) for pk in job.conversation_ids)
    assert first.messages.filter(role="user", content="Still readable?").exists()
    assert not first.has_images and second.title == "After it"
