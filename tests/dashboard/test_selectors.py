"""Dashboard selectors on small hand-checkable data (see the `small` fixture in conftest.py)."""

from __future__ import annotations

import pytest

import optimizer
from chatapp.chat.summary_services import summary_discard, summary_edit
from chatapp.dashboard.headline import dashboard_conversation_get, dashboard_headline
from chatapp.dashboard.message_map import MAP_STATUSES, dashboard_message_map
from chatapp.dashboard.overview import dashboard_overview
from chatapp.dashboard.series import dashboard_series
from chatapp.dashboard.turns import dashboard_record_context, dashboard_summary_details, dashboard_summary_list
from tests.dashboard.factories import make_conversation, make_job, make_record, make_summary, sent_entry

pytestmark = pytest.mark.django_db


def decode_map(data: dict) -> tuple[list[int], list[str]]:
    ids = [start + k for start, length in data["id_runs"] for k in range(length)]
    statuses = [data["statuses"][code] for code, length in data["status_runs"] for _ in range(length)]
    return ids, statuses


def test_headline_totals(small):
    h = dashboard_headline(conversation=small.conversation)
    assert h["turns"] == 3
    # the factory's records predate the dropped/summarized split: all three turns unmeasured
    assert h["tokens"] == {"full": 900, "sent": 450, "saved": 450, "saved_share": 0.5, "dropped": 0,
                           "summarized": 450, "dropped_unmeasured": 3}
    money = h["money"]
    assert money["full_usd"] == pytest.approx(0.009)
    assert money["sent_usd"] == pytest.approx(0.0045)
    assert money["gross_saved_usd"] == pytest.approx(0.0045)
    assert money["summary_cost_usd"] == pytest.approx(0.0005)
    assert money["net_saved_usd"] == pytest.approx(0.004)
    assert money["unpriced_records"] == 0
    assert money["prices"]["input"] == pytest.approx(optimizer.model_info("gpt-4o-mini").input_cost_per_token)
    assert h["strategies"] == {
        "optimized_turns": 2, "triggered_turns": 2, "truncate": 1, "summarize": 1, "first_optimized_turn": 2,
    }
    assert h["summaries"]["made"] == 1
    assert h["summaries"]["jobs_done"] == 1
    assert h["usage"]["tokens"] == 200
    assert h["usage"]["budget"] == 1000
    assert h["usage"]["ratio"] == pytest.approx(0.2)
    acc = h["accuracy"]
    # |150 - 152| + |200 - 198| = 4 tokens off, over 350 counted by the provider.
    assert acc["requests"] == 2
    assert acc["ours"] == 350
    assert acc["provider"] == 350
    assert acc["error_share"] == pytest.approx(4 / 350)
    assert acc["bias_share"] == pytest.approx(0.0)


def test_headline_without_records(user):
    c = make_conversation(owner=user)
    h = dashboard_headline(conversation=c)
    assert h["turns"] == 0
    assert h["tokens"]["saved"] == 0
    assert h["usage"] is None
    assert h["accuracy"] is None


def test_unpriced_records_are_priced_from_the_registry(user):
    c = make_conversation(owner=user)
    make_record(conversation=c, tokens_full=1_000_000, tokens_sent=200_000)
    make_record(conversation=c, tokens_full=50, tokens_sent=50, model="no-such-model-xyz")
    money = dashboard_headline(conversation=c)["money"]
    full = optimizer.cost_usd("gpt-4o-mini", prompt_tokens=1_000_000)
    sent = optimizer.cost_usd("gpt-4o-mini", prompt_tokens=200_000)
    assert full is not None and full > sent > 0
    assert money["full_usd"] == pytest.approx(full)
    assert money["sent_usd"] == pytest.approx(sent)
    assert money["net_saved_usd"] == pytest.approx(full - sent)
    assert money["unpriced_records"] == 1


def test_series_is_columnar_per_turn(small):
    s = dashboard_series(conversation=small.conversation)
    assert s["count"] == 3
    assert s["ids"] == [r.pk for r in small.records]
    assert s["tokens_full"] == [100, 300, 500]
    assert s["tokens_sent"] == [100, 150, 200]
    assert s["saved_cumulative"] == [0, 150, 450]
    assert [s["strategy_codes"][c] for c in s["strategy"]] == ["none", "truncate", "summarize"]
    assert s["first_optimized_index"] == 1
    # From the record's stats where present, else the optimizer's default share of the budget.
    assert s["trigger"] == [700, 800, 800]
    assert s["provider_prompt_tokens"] == [None, 152, 198]


def test_message_map_statuses_in_latest_request(small):
    data = dashboard_message_map(conversation=small.conversation)
    m = small.m
    ids, statuses = decode_map(data)
    # Issue 13 (branches): the map is the active path's; the superseded (regenerated) reply is another
    # branch, not on it (it used to be listed as "excluded").
    expected = [
        (m[0], "verbatim"), (m[1], "summarized"), (m[2], "pinned"), (m[3], "summarized"), (m[4], "dropped"),
        (m[5], "compressed"), (m[6], "verbatim"), (m[7], "verbatim"),
        (small.summary, "summary"), (m[8], "new"),
    ]
    assert small.superseded.pk not in ids
    assert ids == [msg.pk for msg, _ in expected]
    assert statuses == [status for _, status in expected]
    assert data["roles"] == "uauauauaSa"  # "S": a summary, not numbered
    assert data["count"] == 10
    assert data["record_id"] == small.records[-1].pk
    assert sum(length for _, length in data["status_runs"]) == 10
    assert len(data["status_runs"]) == 9  # m6, m7 share a run
    assert data["status_counts"]["verbatim"] == 3
    assert set(data["status_counts"]) == set(MAP_STATUSES)


@pytest.mark.parametrize("change", ["discard", "edit"])
def test_message_map_keeps_the_summary_the_latest_request_sent_after_it_is_set_aside(small, change):
    # Discarded (or replaced by an edit, which discards it) after the latest request sent it: the map
    # said "Never sent" of it, beside the messages it stood for, "Summarized" in that same request.
    if change == "discard":
        summary_discard(summary=small.summary)
    else:
        summary_edit(summary=small.summary, content="[Summary] m1..m3, edited")
    data = dashboard_message_map(conversation=small.conversation)
    status = dict(zip(*decode_map(data), strict=True))
    assert status[small.summary.pk] == "summary"
    assert [status[small.m[i].pk] for i in (1, 3)] == ["summarized", "summarized"]
    assert data["summary_id"] == small.summary.pk


def test_current_usage_is_the_latest_request_of_the_path_shown(user):
    # A reply regenerated, then the first version switched back to: the newest request (the
    # regeneration's) is another branch's. The usage card described it while the map, on the same
    # page, showed the request of the path shown.
    from tests.dashboard.factories import make_message

    c = make_conversation(owner=user)
    make_message(conversation=c, role="user", content="question")
    first = make_message(conversation=c, role="assistant", content="first answer")
    regenerated = make_message(conversation=c, role="assistant", content="second answer", superseded=True)
    shown = make_record(conversation=c, tokens_full=300, tokens_sent=300, budget=1000, reply=first)
    make_record(conversation=c, tokens_full=300, tokens_sent=900, budget=1000, reply=regenerated, model="gpt-4o")
    usage = dashboard_headline(conversation=c)["usage"]
    assert usage["record_id"] == shown.pk == dashboard_message_map(conversation=c)["record_id"]
    assert (usage["tokens"], usage["ratio"], usage["model"]) == (300, pytest.approx(0.3), "gpt-4o-mini")


def test_message_map_without_records_marks_everything_new(user):
    c = make_conversation(owner=user)
    from tests.dashboard.factories import make_message

    for _ in range(3):
        make_message(conversation=c)
    data = dashboard_message_map(conversation=c)
    assert data["status_runs"] == [[MAP_STATUSES.index("new"), 3]]


def test_record_context_rebuilds_what_the_model_saw(small):
    m = small.m
    ctx = dashboard_record_context(conversation=small.conversation, record_id=small.records[-1].pk)
    assert ctx["record"]["turn"] == 3
    assert ctx["record"]["strategy"] == "summarize"
    entries = ctx["entries"]
    assert [e["origin"] for e in entries] == ["verbatim", "pinned", "summary", "compressed", "verbatim", "verbatim"]
    assert [e["source_ids"] for e in entries] == [
        [m[0].pk], [m[2].pk], [small.summary.pk], [m[5].pk], [m[6].pk], [m[7].pk],
    ]
    assert entries[0]["content"] == "message 0"
    assert entries[2]["content"] == "[Summary] m1..m3"
    assert entries[2]["covers"] == [m[1].pk, m[3].pk, 3]
    assert entries[3]["compressed"] is True
    assert entries[3]["tokens"] == 7
    assert entries[3]["original_tokens"] == 15
    assert ctx["entry_tokens"] == 10 + 12 + 40 + 7 + 16 + 17
    assert ctx["dropped_ranges"] == [[m[4].pk, m[4].pk]]
    assert ctx["summary"]["covers_through_id"] == m[3].pk


def test_record_context_of_another_conversation_is_404(small, user):
    from django.http import Http404

    other = make_conversation(owner=user)
    with pytest.raises(Http404):
        dashboard_record_context(conversation=other, record_id=small.records[0].pk)


def test_summary_details(small):
    rows = dashboard_summary_details(
        conversation=small.conversation, summaries=list(dashboard_summary_list(conversation=small.conversation))
    )
    assert len(rows) == 1
    row = rows[0]
    assert row["duration_s"] == pytest.approx(3.0)
    assert row["cost_usd"] == pytest.approx(0.0005)  # the job's cost wins over the message's
    assert row["method"] == "gpt-4o-mini"
    assert row["used_by_requests"] == 1
    assert row["covered_message_count"] == 3


def test_overview_totals_and_top_savers(small, user, other_user):
    bigger = make_conversation(owner=user, title="Bigger")
    make_record(conversation=bigger, tokens_full=2000, tokens_sent=1000, cost_full="0.02", cost_sent="0.01")
    make_job(conversation=bigger, summary=None, cost="0.001")
    make_conversation(owner=user, title="Empty")
    theirs = make_conversation(owner=other_user, title="Not mine")
    make_record(conversation=theirs, tokens_full=90_000, tokens_sent=1_000, cost_full="1", cost_sent="0.01")

    o = dashboard_overview(user=user)
    assert o["conversations"] == 3
    assert o["conversations_with_records"] == 2
    assert o["turns"] == 4
    assert o["tokens"]["saved"] == 450 + 1000
    assert o["money"]["net_saved_usd"] == pytest.approx(0.0045 + 0.01 - 0.0005 - 0.001)
    assert [row["title"] for row in o["top"]] == ["Bigger", "Small one"]
    assert o["top"][0]["net_saved_usd"] == pytest.approx(0.009)


def test_conversation_get_is_owner_only(small, other_user):
    from django.http import Http404

    with pytest.raises(Http404):
        dashboard_conversation_get(user=other_user, pk=small.conversation.pk)


def test_prompt_cache_estimate_follows_the_stable_prefix(user):
    c = make_conversation(owner=user)
    make_record(conversation=c, tokens_full=2000, tokens_sent=2000)
    make_record(conversation=c, tokens_full=2500, tokens_sent=2500)  # starts with the 2000 above
    make_record(conversation=c, tokens_full=3000, tokens_sent=1500, strategy="truncate", triggered=True)  # moved
    make_record(conversation=c, tokens_full=3400, tokens_sent=1900)  # starts with the 1500 above
    make_record(conversation=c, tokens_full=3800, tokens_sent=2300, model="gpt-4o")  # another model: no cache
    est = dashboard_series(conversation=c)["prompt_cache_estimate"]
    assert est["cached_tokens"] == 2000 + 1500
    mini = optimizer.model_info("gpt-4o-mini")
    big = optimizer.model_info("gpt-4o")
    assert mini.cached_input_cost_per_token < mini.input_cost_per_token
    full_price = (2000 + 2500 + 1500 + 1900) * mini.input_cost_per_token + 2300 * big.input_cost_per_token
    assert est["sent_usd"] == pytest.approx(full_price)
    saving = 3500 * (mini.input_cost_per_token - mini.cached_input_cost_per_token)
    assert est["sent_usd_with_cache"] == pytest.approx(full_price - saving)
    assert est["cached_share"] == pytest.approx(3500 / (2000 + 2500 + 1500 + 1900 + 2300))


def test_record_context_flags_a_summary_edited_after_the_request(small):
    small.summary.content = "[Summary] rewritten"
    small.summary.edited = True
    small.summary.save()
    ctx = dashboard_record_context(conversation=small.conversation, record_id=small.records[-1].pk)
    summary_entry = ctx["entries"][2]
    assert summary_entry["content"] == "[Summary] rewritten"
    assert summary_entry["edited_after"] is True
    assert not any(e["edited_after"] for i, e in enumerate(ctx["entries"]) if i != 2)


def _edit_of(summary, *, content: str):
    """What summary_services.summary_edit stores: a new summary message; the old one is discarded."""
    from chatapp.chat.models import Message

    edit = make_summary(
        conversation=summary.conversation,
        covers=(Message(pk=summary.covers_from_id), Message(pk=summary.covers_through_id)),
        covered=summary.covered_message_count, content=content, edited=True, edited_from=summary,
    )
    Message.objects.filter(pk=summary.pk).update(discarded=True)
    return edit


def test_an_edit_is_not_counted_as_another_summary_made(small, user):
    _edit_of(small.summary, content="[Summary] edited by hand")
    summaries = dashboard_headline(conversation=small.conversation)["summaries"]
    assert summaries["made"] == 1
    assert summaries["live"] == 1  # the edit is the summary in use: nothing was discarded
    assert summaries["edited"] == 1
    assert dashboard_overview(user=user)["summaries"]["made"] == 1


def test_a_sent_edit_discarded_later_is_not_flagged_as_edited_after(small):
    from django.utils import timezone

    from chatapp.chat.models import Message

    edit = _edit_of(small.summary, content="[Summary] edited by hand")
    record = make_record(conversation=small.conversation, tokens_full=600, tokens_sent=250, summary=edit,
                         sent=[sent_entry("verbatim", small.m[0]), sent_entry("summary", edit)])
    Message.objects.filter(pk=edit.pk).update(discarded=True, updated_at=timezone.now())
    entry = dashboard_record_context(conversation=small.conversation, record_id=record.pk)["entries"][1]
    assert entry["content"] == "[Summary] edited by hand"
    assert entry["edited"] is True
    assert entry["edited_after"] is False
    assert entry["replaced_by_id"] is None


def test_a_summary_replaced_by_an_edit_still_shows_the_text_sent(small):
    edit = _edit_of(small.summary, content="[Summary] edited by hand")
    entry = dashboard_record_context(conversation=small.conversation, record_id=small.records[-1].pk)["entries"][2]
    assert entry["content"] == "[Summary] m1..m3"
    assert entry["replaced_by_id"] == edit.pk
    assert entry["edited_after"] is False


def test_old_summary_entries_fall_back_to_the_record_summary(small):
    # Before `summary_id`, a summary entry's source_ids held the optimizer's last covered message id.
    m = small.m
    record = make_record(conversation=small.conversation, tokens_full=600, tokens_sent=250, summary=small.summary,
                         sent=[sent_entry("verbatim", m[0]), {**sent_entry("summary", m[3]), "tokens": 40}])
    entry = dashboard_record_context(conversation=small.conversation, record_id=record.pk)["entries"][1]
    assert entry["source_ids"] == [small.summary.pk]
    assert entry["content"] == "[Summary] m1..m3"
    assert entry["covers"] == [m[1].pk, m[3].pk, 3]


def test_record_context_uses_the_request_paths_summary_id_and_compressed_text(small):
    m = small.m
    newer = make_summary(conversation=small.conversation, covers=(m[1], m[4]), covered=4, content="[Summary] m1..m4")
    record = make_record(
        conversation=small.conversation, tokens_full=600, tokens_sent=80, summary=small.summary,
        sent=[
            {"source_ids": [newer.pk], "summary_id": newer.pk, "origin": "summary", "tokens": 40, "role": "system"},
            {"source_ids": [m[5].pk], "origin": "compressed", "tokens": 7, "role": "assistant",
             "content": "message … 5"},
        ],
    )
    entries = dashboard_record_context(conversation=small.conversation, record_id=record.pk)["entries"]
    assert entries[0]["content"] == "[Summary] m1..m4"
    assert entries[0]["covers"] == [m[1].pk, m[4].pk, 4]
    assert entries[1]["content"] == "message … 5"
    assert entries[1]["content_is_sent_text"] is True
    assert entries[1]["original_tokens"] == m[5].token_count


def test_money_saved_bills_provider_cached_tokens_at_the_cached_price(user):
    c = make_conversation(owner=user)
    # Stored without cost figures (priced by the dashboard from the registry).
    make_record(conversation=c, tokens_full=5000, tokens_sent=2000, provider=2010, provider_cached_tokens=1536)
    money = dashboard_headline(conversation=c)["money"]
    assert money["sent_usd"] == pytest.approx(optimizer.cost_usd("gpt-4o-mini", prompt_tokens=2000, cached_tokens=1536))
    assert money["sent_usd"] < optimizer.cost_usd("gpt-4o-mini", prompt_tokens=2000)
    # The full history is priced with the same cache hit (its prefix would have been cached too): the
    # saving is the tokens not sent at the full input price, never the cache's discount.
    assert money["full_usd"] == pytest.approx(optimizer.cost_usd("gpt-4o-mini", prompt_tokens=5000, cached_tokens=1536))
    assert money["gross_saved_usd"] == pytest.approx(optimizer.cost_usd("gpt-4o-mini", prompt_tokens=3000))


def test_overview_net_leaves_out_what_summarizing_an_unpriced_conversation_cost(small, user):
    # A local model's conversation (no price): its saving is unknown, "—" in the list below, so the
    # total is not lowered by what its summaries cost (README: "not minus the summaries' cost").
    local = make_conversation(owner=user, title="Local")
    make_record(conversation=local, tokens_full=2000, tokens_sent=1000, model="my-local-llama")
    make_job(conversation=local, summary=None, cost="0.002")

    o = dashboard_overview(user=user)
    rows = {row["title"]: row for row in o["top"]}
    assert rows["Local"]["net_saved_usd"] is None
    known = [row["net_saved_usd"] for row in o["top"] if row["net_saved_usd"] is not None]
    assert o["money"]["net_saved_usd"] == pytest.approx(sum(known))
    # and the card's parts give it: gross saved minus the summarizing it is net of
    assert o["money"]["full_usd"] - o["money"]["sent_usd"] - o["money"]["summary_cost_usd"] == pytest.approx(
        o["money"]["net_saved_usd"])
