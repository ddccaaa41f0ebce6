"""Records written by the real request path (APP-B's chat turn, fake OpenAI endpoint) on the dashboard."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.test import AsyncClient

from chatapp.chat.models import Conversation, Message, OptimizationRecord
from chatapp.providers.crypto import secret_encrypt
from chatapp.providers.models import LLMConfig

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_rate_limit")]

WORDS = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
    "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa",
]


def _send(user, conversation: Conversation, content: str) -> list[str]:
    async def run() -> list[str]:
        client = AsyncClient()
        await client.aforce_login(user)
        response = await client.post(
            f"/api/conversations/{conversation.pk}/messages/", data=json.dumps({"content": content}),
            content_type="application/json",
        )
        assert response.status_code == 200, response.content[:300]
        body = b""
        async for chunk in response.streaming_content:
            body += chunk
        return [line[6:].strip() for line in body.decode().splitlines() if line.startswith("event:")]

    return async_to_sync(run)()


def test_dashboard_rebuilds_what_the_request_path_sent(client, fake_openai):
    user = get_user_model().objects.create_user(username="ada", password="a long test password 1")
    key = "sk-test-dash-KEY-0001"
    config = LLMConfig.objects.create(
        owner=user, name="fake", base_url=fake_openai.base_url, model="fake-echo",
        api_key_encrypted=secret_encrypt(key), api_key_last4=key[-4:], context_window=1600, max_output_tokens=200,
    )
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    for turn in range(10):
        if turn == 6:
            # What a finished summary job leaves (covering all but the first user message and the last
            # two exchanges): the next requests send it in place of what it covers.
            chat = Message.objects.filter(conversation=conversation).order_by("id")
            covered = list(chat.values_list("id", flat=True))[1:-4]
            Message.objects.create(
                conversation=conversation, role="system", kind="summary", content="[Summary] turns so far.",
                token_count=12, char_count=23, covers_from_id=covered[0], covers_through_id=covered[-1],
                covered_message_count=len(covered),
            )
        text = f"Turn {turn}: " + " ".join(WORDS[(turn + k) % len(WORDS)] for k in range(110))
        assert _send(user, conversation, text)[-1] == "done"

    records = list(OptimizationRecord.objects.filter(conversation=conversation).order_by("id"))
    assert len(records) == 10
    assert any(r.tokens_sent < r.tokens_full for r in records), "the small window should force optimization"

    client.force_login(user)
    base = f"/api/dashboard/conversations/{conversation.pk}/"
    assert client.get(f"/c/{conversation.pk}/dashboard/").status_code == 200
    series = client.get(base + "series/").json()
    assert series["count"] == 10
    assert series["tokens_sent"] == [r.tokens_sent for r in records]
    assert series["first_optimized_index"] is not None

    origins = set()
    for record in records:
        ctx = client.get(base + f"records/{record.pk}/").json()
        entries = ctx["entries"]
        assert [e["origin"] for e in entries] == [s["origin"] for s in record.sent]
        assert [e["tokens"] for e in entries] == [s["tokens"] for s in record.sent]
        assert not any(e["missing"] for e in entries), entries
        for entry, sent in zip(entries, record.sent, strict=True):
            origins.add(entry["origin"])
            if entry["origin"] in ("verbatim", "pinned"):
                stored = Message.objects.get(pk=entry["source_ids"][0])
                assert entry["content"] == stored.content
                assert entry["role"] == stored.role
            elif entry["origin"] == "summary":
                # The request path names the summary message it sent.
                assert entry["content"] == Message.objects.get(pk=sent["summary_id"], kind="summary").content
            elif entry["origin"] == "compressed":
                assert entry["content"] == sent["content"]
    assert "summary" in origins

    mp = client.get(base + "map/").json()
    assert mp["count"] == Message.objects.filter(conversation=conversation).count()
    statuses = [mp["statuses"][code] for code, length in mp["status_runs"] for _ in range(length)]
    ids = [start + k for start, length in mp["id_runs"] for k in range(length)]
    by_id = dict(zip(ids, statuses, strict=True))
    latest = records[-1]
    for entry in latest.sent:
        if entry["origin"] != "summary":
            # A recall block's quotes (a hit beside a neighbour too long for the block) are "recalled".
            status = "recalled" if entry["origin"] == "recall" else entry["origin"]
            assert {by_id[int(i)] for i in entry["source_ids"]} == {status}
    assert by_id[latest.reply_id] == "new"
    # Every message older than the window is accounted for: summarized or dropped, never "unsent".
    assert "unsent" not in statuses


def test_the_records_list_marks_turns_of_another_branch(client, fake_openai):
    """An edit makes a new branch: the first turn's reply leaves the active path and its record says so,
    while it still counts in the totals (its tokens were paid)."""
    user = get_user_model().objects.create_user(username="grace", password="a long test password 2")
    config = LLMConfig.objects.create(owner=user, name="fake", base_url=fake_openai.base_url, model="fake-echo",
                                      context_window=8000, max_output_tokens=200)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    assert _send(user, conversation, "Which tent for a windy ridge?")[-1] == "done"
    question = Message.objects.get(conversation=conversation, role="user")

    async def edit() -> None:
        api = AsyncClient()
        await api.aforce_login(user)
        response = await api.post(f"/api/messages/{question.pk}/edit/", data=json.dumps({"content": "Which tent?"}),
                                  content_type="application/json")
        assert response.status_code == 200, response.content[:300]
        async for _ in response.streaming_content:
            pass

    async_to_sync(edit)()
    client.force_login(user)
    base = f"/api/dashboard/conversations/{conversation.pk}/"
    listed = client.get(base + "records/").json()
    assert [r["on_active_path"] for r in listed["results"]] == [False, True]
    assert client.get(base).json()["turns"] == 2
