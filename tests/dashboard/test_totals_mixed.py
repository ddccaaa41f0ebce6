"""The stored aggregates after a conversation that does everything the dashboard counts: real turns
through the request path on a priced model with a small window (truncation, provider usage with cached
tokens), summaries made by jobs, edited and discarded, a pin, a regeneration and branch switches, a
refused request, a switch to an unpriced model and to the offline demo. After each step the stored
totals, blocks and ledger equal a recomputation from the rows, and the headline, series, message map,
overview and downloads agree with it."""

from __future__ import annotations

import csv
import io
import json

import pytest
from asgiref.sync import async_to_sync

from chatapp.chat.models import Conversation, Message, OptimizationRecord, SummaryJob
from chatapp.chat.services import conversation_set_config, user_settings_update
from chatapp.chat.summary_runner import summary_job_run
from chatapp.chat.summary_services import summary_discard, summary_edit
from chatapp.dashboard.models import DashboardTotals
from tests.dashboard.test_totals import assert_totals_match
from tests.support.chat import make_config, post_stream, send

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_rate_limit")]

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo",
         "lima", "mike"]


def _text(turn: int) -> str:
    return f"Turn {turn}: " + " ".join(WORDS[(turn * 3 + k) % len(WORDS)] for k in range(45))


def _body(response) -> bytes:
    async def read() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(read)()


def check(client, conversation: Conversation) -> dict:
    """Every figure read back against the rows."""
    # reading first would rebuild a row behind its records: the stored row must be right as written
    stored = assert_totals_match(conversation)
    records = OptimizationRecord.objects.filter(conversation=conversation)
    summaries = Message.objects.filter(conversation=conversation, kind=Message.Kind.SUMMARY)
    jobs = SummaryJob.objects.filter(conversation=conversation)
    base = f"/api/dashboard/conversations/{conversation.pk}/"
    h = client.get(base).json()
    assert h["turns"] == records.count()
    assert h["tokens"]["full"] == sum(r.tokens_full for r in records)
    assert h["tokens"]["sent"] == sum(r.tokens_sent for r in records)
    assert h["summaries"]["made"] == summaries.filter(edited_from__isnull=True).count()
    assert h["summaries"]["edited"] == summaries.filter(edited=True).count()
    assert h["summaries"]["jobs"] == jobs.count()
    assert h["summaries"]["jobs_done"] == jobs.filter(status="done").count()
    assert h["summaries"]["discarded"] + (h["summaries"]["live"] or 0) == summaries.count()
    assert h["money"]["summary_cost_usd"] == pytest.approx(sum(float(j.cost_usd or 0) for j in jobs))
    # the ledger holds the summaries up to the newest reply (later ones are read when shown)
    newest = records.order_by("-id").first()
    assert stored.summary_ids == sorted(summaries.filter(id__lt=newest.reply_id).values_list("id", flat=True))
    series = client.get(base + "series/").json()
    assert sum(series["tokens_full_sum"]) == series["totals"]["tokens_full"] == h["tokens"]["full"]
    assert sum(series["tokens_sent_sum"]) == series["totals"]["tokens_sent"] == h["tokens"]["sent"]
    assert sum(series["truncations"]) == series["totals"]["truncations"]
    assert sum(series["summarizations"]) == series["totals"]["summarizations"]
    assert series["points"]  # checked after requests only
    assert series["saved_cumulative"][-1] == h["tokens"]["saved"]
    return h


def test_every_figure_after_a_conversation_that_does_everything(user, fake_openai, client, published):
    fake_openai.reset()
    client.force_login(user)
    priced = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=1600, max_output=200)
    summarizer = make_config(user, fake_openai.base_url, model="gpt-4o-mini", name="summaries")
    user_settings_update(user=user, preference="quality", summary_config=summarizer)
    conversation = Conversation.objects.create(owner=user, llm_config=priced)
    for turn in range(12):
        assert send(user, conversation, _text(turn)).names[-1] == "done"
    check(client, conversation)

    # a summary made by a job, then edited, a second made, and the edit discarded
    assert client.post(f"/api/conversations/{conversation.pk}/compact/", {},
                       content_type="application/json").status_code in (200, 201, 202)
    for job in SummaryJob.objects.filter(conversation=conversation, status="pending"):
        summary_job_run(job_id=job.pk)
    for turn in range(12, 16):
        assert send(user, conversation, _text(turn)).names[-1] == "done"
    summary = Message.objects.filter(conversation=conversation, kind=Message.Kind.SUMMARY).order_by("id").last()
    assert summary is not None
    edited = summary_edit(summary=summary, content="[Summary] an edited account of the turns so far.")
    check(client, conversation)
    for turn in range(16, 20):
        assert send(user, conversation, _text(turn)).names[-1] == "done"
    summary_discard(summary=edited)
    assert send(user, conversation, _text(20)).names[-1] == "done"
    check(client, conversation)

    # a pin, a regeneration and switches between the two replies
    first_user = Message.objects.filter(conversation=conversation, role="user").order_by("id").first()
    assert client.post(f"/api/messages/{first_user.pk}/pin/", {"pinned": True},
                       content_type="application/json").status_code == 200
    reply = Message.objects.filter(conversation=conversation, role="assistant").order_by("id").last()
    assert post_stream(user, f"/api/messages/{reply.pk}/regenerate/").names[-1] == "done"
    check(client, conversation)
    assert client.post(f"/api/messages/{reply.pk}/branch/", {"index": 1},
                       content_type="application/json").status_code == 200
    check(client, conversation)

    # a refused request, then an unpriced model, then the offline demo
    conversation_set_config(conversation=conversation,
                            llm_config=make_config(user, fake_openai.base_url, model="fail-500", name="broken"))
    assert send(user, conversation, _text(21)).names[-1] == "error"
    conversation.refresh_from_db()
    conversation_set_config(conversation=conversation,
                            llm_config=make_config(user, fake_openai.base_url, model="my-local-llama", name="local",
                                                   window=1600, max_output=200))
    conversation.refresh_from_db()
    for turn in range(22, 24):
        assert send(user, conversation, _text(turn)).names[-1] == "done"
    conversation.refresh_from_db()
    conversation_set_config(conversation=conversation, llm_config=None, offline=True)
    conversation.refresh_from_db()
    assert send(user, conversation, _text(24)).names[-1] == "done"
    h = check(client, conversation)
    assert h["money"]["unpriced_records"] >= 3

    # the map's categories add up to the messages it maps
    m = client.get(f"/api/dashboard/conversations/{conversation.pk}/map/").json()
    status = m["status_counts"]
    assert sum(status.values()) == m["count"] == len(m["roles"]), m

    # the downloads hold the records API's rows
    api = client.get(f"/api/dashboard/conversations/{conversation.pk}/records/?limit=500").json()
    rows = api["results"]
    assert len(rows) == api["count"] == h["turns"]
    exported = json.loads(_body(client.get(f"/c/{conversation.pk}/dashboard/export.json")))
    table = list(csv.DictReader(io.StringIO(
        _body(client.get(f"/c/{conversation.pk}/dashboard/export.csv")).decode("utf-8-sig"))))
    assert [r["id"] for r in exported["records"]] == [int(r["id"]) for r in table] == [r["id"] for r in rows]
    for row, out, cell in zip(rows, exported["records"], table, strict=True):
        for key in ("tokens_full", "tokens_sent", "strategy", "model"):
            assert out[key] == row[key], key
            assert cell[key] == str(row[key]), key
        for key in ("cost_sent_usd", "cost_full_usd"):
            assert out[key] == row[key], key
            assert cell[key] == ("" if row[key] is None else str(row[key])), key

    # the overview is the conversation's totals (it is the user's only one)
    o = client.get("/api/dashboard/overview/").json()
    assert (o["turns"], o["tokens"]["saved"]) == (h["turns"], h["tokens"]["saved"])
    assert o["money"]["net_saved_usd"] == pytest.approx(h["money"]["net_saved_usd"])
    assert o["summaries"]["made"] == h["summaries"]["made"]
    assert DashboardTotals.objects.filter(conversation=conversation).count() == 1
