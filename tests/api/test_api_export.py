"""`GET /api/conversations/<id>/export/`: the JSON copy round-trips every stored field in order, the
Markdown reads well, the owner alone can fetch it, and it streams (an async iterator, page by page,
first bytes before the last page is read through a real uvicorn)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import httpx
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from markdown_it import MarkdownIt
from rest_framework.test import APIClient

from chatapp.chat import conversation_export
from chatapp.chat.conversation_export import conversation_export_chunks
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from tests.support.accounts import api_key_for
from tests.support.asgi_server import asgi_server  # noqa: F401  (the live uvicorn fixture)
from tests.support.chat import seed_messages

pytestmark = pytest.mark.django_db

# Written out, not imported from the module: dropping a field from the export must fail here.
MESSAGE_KEYS = {
    "id", "role", "kind", "status", "content", "created_at", "updated_at", "pinned", "superseded",
    "reply_to_id", "model", "token_count", "prompt_tokens", "completion_tokens", "latency_ms", "cost_usd",
    "error", "covers_from_id", "covers_through_id", "covered_message_count", "source_chars", "extractive",
    "discarded", "edited", "edited_from_id", "parent_id", "off_path_by",  # the tree: issue 13, branches
    "skipped_pin_ids",  # a summary's pins passed over
    "reasoning",  # a reasoning model's thinking
    "finish_reason",  # why the model ended a reply ("length": cut at its output limit)
    "images",  # a user message's images (image_export): tests/api/test_api_image_exports.py
}
T0 = datetime(2024, 3, 9, 14, 2, 33, 123456, tzinfo=UTC)
FENCE_OPEN = "Here is code:\n```python\nprint('never closed')"


def _msg(conversation: Conversation, minutes: int, **fields) -> Message:
    message = Message.objects.create(conversation=conversation, **fields)
    # auto_now_add ignores a value given at create time
    Message.objects.filter(pk=message.pk).update(created_at=T0 + timedelta(minutes=minutes))
    message.refresh_from_db()
    return message


@pytest.fixture
def chat(user, make_config, plain_key):
    """A conversation with every kind of message the chat stores (ids in order of creation)."""
    config = make_config(user, name="Work model", api_key=plain_key)
    c = Conversation.objects.create(owner=user, title="Trip to Lisbon", llm_config=config)
    u1 = _msg(c, 0, role="user", content="Plan a trip to Lisbon in May, please.", pinned=True, token_count=15)
    a1 = _msg(c, 1, role="assistant", content="Sure — **day 1**: Alfama.", reply_to=u1, model="gpt-4o-mini",
              prompt_tokens=40, completion_tokens=12, latency_ms=830, cost_usd=Decimal("0.000123"),
              reasoning="Three days: start with the old town.", finish_reason="length")
    old = _msg(c, 2, role="assistant", content="An earlier answer", reply_to=u1, superseded=True)
    u2 = _msg(c, 3, role="user", content=FENCE_OPEN)
    failed = _msg(c, 4, role="assistant", content="", status="error", error="Model unreachable (timeout).", reply_to=u2)
    summary = _msg(c, 5, role="system", kind="summary", content="[Summary] Lisbon trip so far.\nSecond line.",
                   covers_from_id=u1.pk, covers_through_id=u2.pk, covered_message_count=4, source_chars=120,
                   extractive=True)
    discarded = _msg(c, 6, role="system", kind="summary", content="A DISCARDED SUMMARY", discarded=True,
                     covers_from_id=u1.pk, covers_through_id=u2.pk)
    edited = _msg(c, 7, role="system", kind="summary", content="Edited summary text", edited=True,
                  edited_from=discarded, covers_from_id=u1.pk, covers_through_id=u2.pk)
    u3 = _msg(c, 8, role="user", content="And the trams? ünïcödé 🚋")
    stopped = _msg(c, 9, role="assistant", content="Tram 28 is", status="stopped", reply_to=u3)
    OptimizationRecord.objects.create(
        conversation=c, preference="quality", model="gpt-4o-mini", context_window=16000, budget=14000,
        strategy="none", tokens_full=10, tokens_sent=10,
    )
    c.refresh_from_db()
    return c, [u1, a1, old, u2, failed, summary, discarded, edited, u3, stopped]


def _export(api, pk: int, fmt: str | None = None, **extra):
    return api.get(f"/api/conversations/{pk}/export/", {"format": fmt} if fmt else {}, **extra)


def test_json_round_trips_every_message_field_in_order(api, chat, plain_key):
    conversation, messages = chat
    response = _export(api, conversation.pk)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == 'attachment; filename="Trip to Lisbon.json"'
    doc = json.loads(response.recorded_body)
    assert (doc["format"], doc["version"]) == ("longchat.conversation", 1)
    assert abs(datetime.fromisoformat(doc["exported_at"]) - datetime.now(UTC)) < timedelta(minutes=1)
    head = doc["conversation"]
    assert head["id"] == conversation.pk and head["title"] == "Trip to Lisbon"
    assert datetime.fromisoformat(head["created_at"]) == conversation.created_at
    config = conversation.llm_config
    assert head["llm_config"] == {"name": "Work model", "model": "gpt-4o-mini", "context_window": config.context_window,
                                  "max_output_tokens": config.max_output_tokens, "temperature": config.temperature}
    assert head["preference"] == "quality"

    assert [m["id"] for m in doc["messages"]] == [m.pk for m in messages]
    for out, stored in zip(doc["messages"], messages, strict=True):
        assert set(out) == MESSAGE_KEYS
        assert out["images"] == []
        for key in MESSAGE_KEYS - {"created_at", "updated_at", "cost_usd", "skipped_pin_ids", "images"}:
            assert out[key] == getattr(stored, key), key
        # A summary that passed over no pin stores null: the file says "none" ([]), which a null would not.
        summary_none = [] if stored.kind == "summary" else None
        assert out["skipped_pin_ids"] == (stored.skipped_pin_ids or summary_none)
        assert datetime.fromisoformat(out["created_at"]) == stored.created_at  # microseconds kept
        assert datetime.fromisoformat(out["updated_at"]) == stored.updated_at
        assert (Decimal(out["cost_usd"]) if out["cost_usd"] is not None else None) == stored.cost_usd
    summary = doc["messages"][5]
    assert (summary["kind"], summary["covers_from_id"], summary["covers_through_id"]) == (
        "summary", messages[0].pk, messages[3].pk)
    assert doc["messages"][8]["content"] == "And the trams? ünïcödé 🚋"
    # Nothing secret: not the key, not where the model lives.
    body = response.recorded_body.decode()
    assert plain_key not in body and plain_key[-4:] not in body
    assert "api.openai.com" not in body and "api_key" not in body


def test_json_pages_read_in_chunks_and_join_into_one_document(user, chat):
    conversation, messages = chat

    async def read(chunk_rows: int) -> list[str]:
        return [c async for c in conversation_export_chunks(conversation=conversation, fmt="json",
                                                            chunk_rows=chunk_rows)]

    with CaptureQueriesContext(connection) as queries:
        chunks = async_to_sync(read)(3)
    # The head, one chunk per page of 3 (10 messages: 3 + 3 + 3 + 1), the closing bracket.
    assert len(chunks) == 1 + 4 + 1
    page_reads = [q["sql"] for q in queries.captured_queries if "LIMIT 3" in q["sql"]]
    assert len(page_reads) == 4
    # No query reads the messages without a page limit (content is read only by the page reads).
    assert not [q for q in queries.captured_queries
                if '"content"' in q["sql"] and "chat_message" in q["sql"] and "LIMIT 3" not in q["sql"]]
    whole = json.loads("".join(chunks))
    assert [m["id"] for m in whole["messages"]] == [m.pk for m in messages]
    one_page = json.loads("".join(async_to_sync(read)(500)))
    assert one_page["messages"] == whole["messages"]


def test_export_stops_at_the_newest_message_when_it_started(user, chat):
    conversation, messages = chat

    async def export_while_a_message_arrives() -> str:
        stream = conversation_export_chunks(conversation=conversation, fmt="json", chunk_rows=5)
        head = await anext(stream)
        await sync_to_async(Message.objects.create)(conversation=conversation, role="user", content="later")
        return head + "".join([c async for c in stream])

    doc = json.loads(async_to_sync(export_while_a_message_arrives)())
    assert [m["id"] for m in doc["messages"]] == [m.pk for m in messages]
    doc = json.loads(async_to_sync(export_while_a_message_arrives)())
    assert doc["messages"][-1]["content"] == "later" and len(doc["messages"]) == len(messages) + 1


@pytest.mark.parametrize("fmt", ["json", "markdown"])
def test_a_conversation_deleted_while_it_is_exported_fails_the_download(user, chat, fmt):
    """Export, then Delete in another tab before the download ended (a long chat, a slow connection):
    the download ended as a whole document holding only the pages read before the deletion, which
    the user kept as the chat's copy. It fails instead (the connection closes before the end)."""
    conversation, _ = chat

    async def export_while_the_chat_is_deleted() -> None:
        stream = conversation_export_chunks(conversation=conversation, fmt=fmt, chunk_rows=3)
        await anext(stream)
        await anext(stream)  # the first page
        await sync_to_async(Conversation.objects.filter(pk=conversation.pk).delete)()
        async for _ in stream:
            pass

    with pytest.raises(conversation_export.ExportGoneError):
        async_to_sync(export_while_the_chat_is_deleted)()


def test_markdown_has_dates_numbers_marks_and_summary_ranges(api, chat):
    conversation, _ = chat
    response = _export(api, conversation.pk, "markdown")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="Trip to Lisbon.md"'
    text = response.recorded_body.decode()
    assert text.startswith("# Trip to Lisbon\n")
    assert "model: Work model (gpt-4o-mini)" in text
    headings = re.findall(r"^### .*$", text, flags=re.M)
    assert headings == [
        "### 1 · User — 2024-03-09 14:02 UTC · pinned",
        "### 2 · Assistant — 2024-03-09 14:03 UTC · gpt-4o-mini, cut at the output limit",
        # Issue 13 (branches): numbered as the app numbers messages, along the active path; a replaced
        # reply is another branch, unnumbered.
        "### — · Assistant — 2024-03-09 14:04 UTC · another version (not on the active path)",
        "### 3 · User — 2024-03-09 14:05 UTC",
        "### 4 · Assistant — 2024-03-09 14:06 UTC · failed",
        "### 5 · User — 2024-03-09 14:10 UTC",
        "### 6 · Assistant — 2024-03-09 14:11 UTC · stopped",
    ]
    assert "*Error: Model unreachable (timeout).*" in text
    # The summaries in use, quoted and marked with the chat numbers they cover; the discarded one left out.
    assert "> **Summary of messages 1\u20133** (2024-03-09 14:07 UTC, extractive, written without a model)\n>\n" \
           "> [Summary] Lisbon trip so far.\n> Second line.\n" in text
    assert "> **Summary of messages 1\u20133** (2024-03-09 14:09 UTC, edited)\n>\n> Edited summary text\n" in text
    assert "A DISCARDED SUMMARY" not in text
    assert "System prompt" not in text  # this chat has none
    # The unclosed fence is closed before the next message, whose heading stays a heading.
    after = text.split(FENCE_OPEN, 1)[1]
    assert after.startswith("\n```\n\n### 4 · Assistant")


def test_the_chats_system_prompt_opens_both_formats(api, chat):
    conversation, _ = chat
    Conversation.objects.filter(pk=conversation.pk).update(system_prompt="Be brief.\n\nAnswer in French.")
    document = json.loads(_export(api, conversation.pk, "json").recorded_body)
    assert document["conversation"]["system_prompt"] == "Be brief.\n\nAnswer in French."
    text = _export(api, conversation.pk, "markdown").recorded_body.decode()
    block = "> **System prompt**\n>\n> Be brief.\n>\n> Answer in French.\n\n---\n\n"
    assert block in text and text.index(block) < text.index("### 1 ·")


def test_markdown_numbers_stay_right_across_pages(user):
    conversation = Conversation.objects.create(owner=user, title="Long")
    ids = seed_messages(conversation, 9)
    Message.objects.create(conversation=conversation, role="system", kind="summary", content="S",
                           covers_from_id=ids[2], covers_through_id=ids[7])
    seed_messages(conversation, 2, start=9)

    async def read() -> str:
        return "".join([c async for c in conversation_export_chunks(conversation=conversation, fmt="markdown",
                                                                    chunk_rows=4)])

    text = async_to_sync(read)()
    assert "Summary of messages 3\u20138" in text
    assert [int(n) for n in re.findall(r"^### (\d+) ·", text, flags=re.M)] == list(range(1, 12))


def test_an_empty_conversation_exports_a_valid_document(api, user, make_conversation):
    conversation = make_conversation(user, title="Nothing yet")
    doc = json.loads(_export(api, conversation.pk).recorded_body)
    assert doc["messages"] == [] and doc["conversation"]["llm_config"] is None
    text = _export(api, conversation.pk, "markdown").recorded_body.decode()
    assert text.startswith("# Nothing yet\n") and "###" not in text


def test_another_users_conversation_is_a_404_like_a_missing_one(api, other_user, make_conversation):
    theirs = make_conversation(other_user, title="private", messages=3)
    missing = _export(api, theirs.pk + 1000)
    response = _export(api, theirs.pk, "markdown")
    assert response.status_code == missing.status_code == 404
    assert response.json() == missing.json()
    assert b"private" not in response.recorded_body and b"message number" not in response.recorded_body


def test_unauthenticated_is_refused_like_other_api_views(make_conversation, user):
    conversation = make_conversation(user, messages=1)
    client = APIClient()
    response = client.get(f"/api/conversations/{conversation.pk}/export/")
    other = client.get(f"/api/conversations/{conversation.pk}/")
    assert response.status_code == other.status_code == 401
    assert "WWW-Authenticate" in response


def test_session_login_works_too(client, user, make_conversation):
    conversation = make_conversation(user, messages=2)
    client.force_login(user)
    response = client.get(f"/api/conversations/{conversation.pk}/export/?format=markdown")
    assert response.status_code == 200 and response.is_async


def test_bad_format_is_a_400_that_says_which_exist(api, user, make_conversation):
    conversation = make_conversation(user, messages=1)
    response = _export(api, conversation.pk, "xml")
    assert response.status_code == 400
    assert response.json()["format"] == ['Unknown export format "xml": use json or markdown.']
    with pytest.raises(ValueError, match="json, markdown"):
        conversation_export_chunks(conversation=conversation, fmt="xml")


def test_accept_header_does_not_get_in_the_way(api, user, make_conversation):
    conversation = make_conversation(user, messages=2)
    response = _export(api, conversation.pk, "markdown", HTTP_ACCEPT="text/markdown")
    assert response.status_code == 200
    assert response.recorded_body.count(b"\n### ") == 2


def test_response_streams_from_an_async_iterator(api, user, make_conversation):
    conversation = make_conversation(user, messages=2)
    for fmt in ("json", "markdown"):
        response = _export(api, conversation.pk, fmt)
        assert response.streaming and response.is_async
        assert response["Cache-Control"] == "no-store"
        assert response["X-Accel-Buffering"] == "no"


def test_schema_documents_the_route_format_and_both_media_types(api):
    schema = api.get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/conversations/{id}/export/"]["get"]
    (fmt,) = [p for p in operation["parameters"] if p["name"] == "format"]
    assert fmt["in"] == "query" and fmt["schema"]["enum"] == ["json", "markdown"]
    assert set(operation["responses"]["200"]["content"]) == {"application/json", "text/markdown"}
    assert {"400", "404"} <= set(operation["responses"])


def test_through_uvicorn_first_bytes_arrive_before_the_last_page_is_read(asgi_server, monkeypatch):  # noqa: F811
    """The real ASGI path: Django's handler would read a sync iterator whole before sending anything.
    The second page read waits for the client to have received bytes; buffered, it would time out."""
    user = get_user_model().objects.create_user(username="hedy", password="a long test password 4")
    token = api_key_for(user)
    conversation = Conversation.objects.create(owner=user, title="Long one")
    ids = seed_messages(conversation, 1200)
    received_first = threading.Event()
    gate_outcomes: list[bool] = []
    read_page = conversation_export._read_page

    async def gated_read_page(**kwargs):
        if kwargs["after_id"] != 0 and not gate_outcomes:
            gate_outcomes.append(await asyncio.to_thread(received_first.wait, 10))
        return await read_page(**kwargs)

    monkeypatch.setattr(conversation_export, "_read_page", gated_read_page)
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=asgi_server.url, headers=headers, timeout=30) as client:
        body = b""
        with client.stream("GET", f"/api/conversations/{conversation.pk}/export/") as response:
            assert response.status_code == 200
            for chunk in response.iter_bytes():
                received_first.set()
                body += chunk
        assert gate_outcomes == [True]
        doc = json.loads(body)
        assert [m["id"] for m in doc["messages"]] == ids
        assert doc["messages"][-1]["content"].startswith("message 1199 ")

        markdown = client.get(f"/api/conversations/{conversation.pk}/export/?format=markdown")
        assert markdown.status_code == 200
        assert markdown.text.count("\n### ") == 1200 and "### 1200 · Assistant" in markdown.text


def _headings(markdown: str) -> list[str]:
    """The h3 headings a CommonMark reader finds (each message opens with one)."""
    tokens = MarkdownIt("commonmark").parse(markdown)
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag == "h3"]


def _export_markdown(api, conversation: Conversation) -> str:
    response = api.get(f"/api/conversations/{conversation.pk}/export/", {"format": "markdown"})
    assert response.status_code == 200
    return response.recorded_body.decode()


def test_a_reply_stopped_inside_a_code_block_of_a_list_does_not_swallow_the_next_messages(api, user):
    c = Conversation.objects.create(owner=user, title="Setup")
    q = Message.objects.create(conversation=c, role="user", content="How do I install it?")
    # Stopped while the model was writing a code block inside a numbered list (indented fence).
    Message.objects.create(conversation=c, role="assistant", status="stopped", reply_to=q,
                           content="Steps:\n\n1. Install it:\n\n   ```bash\n   pip install longchat")
    Message.objects.create(conversation=c, role="user", content="And then?")
    Message.objects.create(conversation=c, role="assistant", content="Then run it.")
    text = _export_markdown(api, c)
    # All four headings are in the text...
    assert len(re.findall(r"^### \d+ · ", text, flags=re.M)) == 4
    # ...and all four are headings when the document is read as Markdown.
    assert len(_headings(text)) == 4, _headings(text)


def test_a_user_message_is_not_read_as_markup_that_hides_the_rest(api, user):
    c = Conversation.objects.create(owner=user, title="HTML questions")
    # Shown as typed in the chat (user text is never rendered as Markdown or HTML).
    Message.objects.create(conversation=c, role="user", content="<!-- is this how an HTML comment starts?")
    Message.objects.create(conversation=c, role="assistant", content="Yes, and `-->` ends it.")
    Message.objects.create(conversation=c, role="user", content="Thanks!")
    text = _export_markdown(api, c)
    assert len(_headings(text)) == 3, _headings(text)


@pytest.mark.parametrize("text", [
    "Steps:\n\n```python\nprint(1)\n````\nmore",  # closed by a longer run: nothing to add
    "~~~\nnever closed",
    "<script>\nlet x = 1;",  # an HTML block that would run to the end: shown as written
    # A line of ``` indented by four columns or more is code, not the fence's end (CommonMark)...
    "```python\ndef f():\n    \"\"\"\n    ```\n    example",
    "```\ncode\n\t```",
    # ...and a fence opened in a list item ends with the item, so a ``` at the margin opens another.
    "1. Install it:\n\n   ```bash\n   pip install x\n```\nmore",
    # Python's splitlines ends a line at a form feed (pasted from a PDF) or U+2028; CommonMark does not,
    # so the ``` after one is text on the code's line, not the fence's end.
    "```\npage one\x0c```",
    "```js\nlet s = 'a\u2028```",
    # A lone CR ends a line for CommonMark too: the HTML block and the indented fence after one count.
    "Old Mac text\r<!-- a comment left open",
    "1. Install it:\r\r   ```bash\r   pip install x\r```\rmore",
    # Only spaces and tabs may follow a closing fence: one with a no-break space after it (pasted from a
    # web page) closes nothing.
    "```\ncode\n```\u00a0",
])
def test_no_message_text_takes_the_next_message_in(api, user, text):
    c = Conversation.objects.create(owner=user, title="Edges")
    Message.objects.create(conversation=c, role="assistant", content=text)
    Message.objects.create(conversation=c, role="user", content="next")
    assert len(_headings(_export_markdown(api, c))) == 2


@pytest.mark.parametrize(("title", "disposition"), [
    ("Voyage à Lisbonne", "attachment; filename*=utf-8''Voyage%20%C3%A0%20Lisbonne.md"),
    ('Plan: a/b "test" <v2>?', 'attachment; filename="Plan a b test v2.md"'),
    # Nothing to name it by: the chat's id, so two such chats' files are told apart.
    ("../..", 'attachment; filename="conversation-{pk}.md"'),
    ("x" * 200, 'attachment; filename="' + "x" * 100 + '.md"'),
])
def test_a_download_is_named_after_its_chat_whatever_the_title_holds(api, user, title, disposition):
    # It was conversation-<id>.md: a folder of exports said nothing of what each held.
    conversation = Conversation.objects.create(owner=user, title=title)

    expected = disposition.replace("{pk}", str(conversation.pk))
    assert _export(api, conversation.pk, "markdown")["Content-Disposition"] == expected
