"""`manage.py pack`: the optimizer CLI's contract answered through the app's request path.

Conversations here are written for the tests (no dataset text). Runs on SQLite and, with
DATABASE_URL, on PostgreSQL.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from chatapp.chat.management.commands.pack import USERNAME_PREFIX, _store
from chatapp.chat.models import (
    Conversation,
    Message,
    MessageSearch,
    OptimizationRecord,
    RecallCorpus,
    RecallTerm,
    SummaryJob,
    UserSettings,
)
from chatapp.providers.models import LLMConfig
from optimizer import cli

TOPICS = ["the greenhouse heater", "a broken bicycle chain", "the spring choir concert", "tax forms for 2023",
          "a sourdough starter", "moving the piano upstairs", "the leaking kitchen tap", "a trip to Lisbon"]


def conversation(rounds: int, *, pin: str | None = None, dated: bool = False) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"id": "sys", "role": "system", "content": "You are a patient helper."}]
    for r in range(rounds):
        topic = TOPICS[r % len(TOPICS)]
        user = {"id": f"u{r}", "role": "user", "content": f"Round {r}: what should I do about {topic}? " * 3}
        reply = {"id": f"a{r}", "role": "assistant",
                 "content": f"For {topic}, start small and write down what you tried in round {r}. " * 6}
        if dated:
            user["created_at"] = f"2024-03-{1 + r % 28:02d}T09:00:00"
            reply["created_at"] = f"2024-03-{1 + r % 28:02d}T09:05:00+00:00"
        msgs += [user, reply]
    for m in msgs:
        m["pinned"] = m["id"] == pin
    msgs.append({"id": "q", "role": "user", "content": "Remind me what we said about the piano?"})
    return msgs


def request(rid: str, rounds: int = 40, **extra: Any) -> dict[str, Any]:
    return {"id": rid, "budget": 1500, "preference": "fast", "messages": conversation(rounds, pin="u5"), **extra}


def run_pack(tmp_path: Path, text: str, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    path = tmp_path / "in.jsonl"
    path.write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        call_command("pack", "--input", str(path), *args, stdout=out, stderr=err)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, [json.loads(line) for line in out.getvalue().splitlines() if line.strip()], err.getvalue()


def run_cli(tmp_path: Path, text: str, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    path = tmp_path / "cli.jsonl"
    path.write_text(text, encoding="utf-8")
    code = cli.main(["pack", "--input", str(path), *args])
    return code, capsys.readouterr().err


def table_counts() -> dict[str, int]:
    return {model.__name__: model.objects.count()
            for model in (get_user_model(), UserSettings, LLMConfig, Conversation, Message, SummaryJob,
                          OptimizationRecord, MessageSearch, RecallTerm, RecallCorpus)}


def lines(*reqs: dict[str, Any]) -> str:
    return "".join(json.dumps(r) + "\n" for r in reqs)


def test_contract_ids_mapped_back_and_budget_exact(db, tmp_path):
    reqs = [request("a"), request("b", budget=2500, preference="balanced"), request("c", rounds=2)]
    code, out, err = run_pack(tmp_path, lines(*reqs))
    assert code == 0, err
    assert [o["id"] for o in out] == ["a", "b", "c"]
    for req, res in zip(reqs, out, strict=True):
        ids = {m["id"] for m in req["messages"]}
        assert set(res) == {"id", "messages", "stats"}
        for m in res["messages"]:
            assert set(m) == {"role", "content", "source_ids"}
            assert m["source_ids"] and set(m["source_ids"]) <= ids  # request ids, not database ids
        # the budget reaches the optimizer as given: no reply reserve taken off it
        assert res["stats"]["budget"] == req["budget"]
        assert res["stats"]["tokens_after"] <= req["budget"]
        assert res["messages"][0] == {"role": "system", "content": "You are a patient helper.", "source_ids": ["sys"]}
        assert res["messages"][-1]["source_ids"] == ["q"]
        if res["stats"]["window_start"] is not None:
            assert res["stats"]["window_start"] in ids
        assert set(res["stats"]["removed_ids"]) <= ids
    a, _, c = out
    assert a["stats"]["optimization_applied"] is True
    assert ["u5"] in [m["source_ids"] for m in a["messages"]]  # pinned
    # nothing to optimize: every message as sent, in order
    assert [m["source_ids"] for m in c["messages"]] == [[m["id"]] for m in reqs[2]["messages"]]


def test_short_conversation_matches_the_cli(db, tmp_path, capsys):
    req = request("same", rounds=3)
    code, out, _ = run_pack(tmp_path, lines(req))
    assert code == 0
    assert cli.main(["pack", "--input", str(tmp_path / "in.jsonl")]) == 0
    theirs = json.loads(capsys.readouterr().out)
    assert out[0]["messages"] == theirs["messages"]


def test_extractive_writes_the_summary_with_the_app_and_names_covered_ids(db, tmp_path):
    req = request("s", rounds=60, preference="quality", summarizer="extractive", budget=3000)
    # about nothing to recall: a question about the past would fill the room with quotes first, the
    # summary taking what they leave (test_quotes_come_before_the_summary_without_window_state)
    req["messages"][-1]["content"] = "Thanks!"
    code, out, err = run_pack(tmp_path, lines(req))
    assert code == 0, err
    res = out[0]
    summaries = [m for m in res["messages"] if m["content"].startswith("[Conversation summary")]
    assert len(summaries) == 1 and summaries[0]["role"] == "system"
    covered = summaries[0]["source_ids"]
    static = {"sys", "u0", "u5", "q"}  # system, first user message, pin, newest message
    assert len(covered) > 10 and not set(covered) & static
    assert set(covered) <= {m["id"] for m in req["messages"]}
    assert res["stats"]["summary_used"] is True and res["stats"]["summary_generated"] is True
    assert res["stats"]["tokens_after"] <= 3000


def test_quotes_come_before_the_summary_without_window_state(db, tmp_path):
    """As in the core: the app's summary, written on the spot, takes only the room the quotes leave;
    its span is reported for the turns after, and the block is as large as with no summarizer."""
    with_summary = request("s", rounds=60, preference="quality", summarizer="extractive", budget=3000)
    without = request("n", rounds=60, preference="quality", budget=3000)
    code, out, err = run_pack(tmp_path, lines(with_summary, without))
    assert code == 0, err
    summarized, plain = out
    assert summarized["stats"]["recall_tokens"] == plain["stats"]["recall_tokens"] > 0
    assert not summarized["stats"]["summary_used"]
    assert summarized["stats"]["tokens_after"] <= 3000


def test_summarizer_none_reports_the_span_in_request_ids(db, tmp_path):
    req = request("n", rounds=60, preference="quality", budget=3000)
    code, out, err = run_pack(tmp_path, lines(req))
    assert code == 0, err
    stats = out[0]["stats"]
    assert stats["strategy_chosen"] == "summarize" and stats["summary_used"] is False
    span = stats["summary_span"]
    assert span is not None and span["messages"] > 0
    ids = {m["id"] for m in req["messages"]}
    assert span["through_id"] in ids and (span["after_id"] is None or span["after_id"] in ids)


def test_window_start_is_stored_as_the_conversations_window(db, tmp_path):
    code, out, err = run_pack(tmp_path, lines(request("w", window_start="u35")))
    assert code == 0, err
    assert out[0]["stats"]["window_start"] == "u35"  # kept: it fits under the trigger
    flow = [m["source_ids"][0] for m in out[0]["messages"] if len(m["source_ids"]) == 1]
    assert "u35" in flow and "a34" not in flow


def test_created_at_and_pins_stored(db):
    owner = get_user_model().objects.create_user(username="pack-store-test")
    parsed = cli.parse_request({"id": "d", "messages": conversation(3, pin="a1", dated=True)}, "t",
                               cli._parser().parse_args(["pack"]))
    stored = _store(owner=owner, r=parsed)
    rows = {stored.to_request_id[str(m.pk)]: m for m in Message.objects.filter(conversation=stored.conversation)}
    assert rows["u2"].created_at.isoformat() == "2024-03-03T09:00:00+00:00"  # naive taken as UTC
    assert rows["a0"].created_at.isoformat() == "2024-03-01T09:05:00+00:00"
    assert rows["a1"].pinned and not rows["u1"].pinned
    assert all(m.token_count > 0 and m.char_count == len(m.content) for m in rows.values())
    conv = Conversation.objects.get(pk=stored.conversation.pk)
    assert conv.live_message_count == len(rows) and conv.live_token_count == sum(m.token_count for m in rows.values())


def test_nothing_left_in_the_database_and_others_untouched(db, tmp_path):
    other = get_user_model().objects.create_user(username="bystander")
    theirs = Conversation.objects.create(owner=other, title="keep me")
    Message.objects.create(conversation=theirs, role="user", content="still here")
    before = table_counts()
    reqs = [request("x", rounds=60, preference="quality", summarizer="extractive", budget=3000), request("y")]
    code, out, err = run_pack(tmp_path, lines(*reqs))
    assert code == 0 and len(out) == 2, err
    assert table_counts() == before
    assert not get_user_model().objects.filter(username__startswith=USERNAME_PREFIX).exists()
    assert Message.objects.get(conversation=theirs).content == "still here"


@pytest.mark.parametrize(
    ("second", "args"),
    [
        ("{not json\n", ()),
        (json.dumps(request("bad", budget=0)) + "\n", ()),
        (json.dumps(request("bad", preference="slow")) + "\n", ()),
        (json.dumps({"id": "bad", "messages": [{"id": "1", "role": "user", "content": "hi"},
                                               {"id": "1", "role": "assistant", "content": "again"}]}) + "\n", ()),
        (json.dumps({"id": "bad", "messages": [{"id": "1", "role": "robot", "content": "hi"}]}) + "\n", ()),
        (json.dumps(request("bad", budget=10)) + "\n", ()),  # must-keeps cannot fit
        ("[1, 2]\n", ()),
    ],
)
def test_bad_input_same_error_line_and_exit_code_as_the_cli(db, tmp_path, capsys, second, args):
    text = json.dumps(request("good", rounds=3)) + "\n" + second
    before = table_counts()
    code, out, err = run_pack(tmp_path, text, *args)
    assert code == cli.EXIT_BAD_INPUT
    assert [o["id"] for o in out] == ["good"]  # answered before the bad one; nothing of the bad one
    assert table_counts() == before
    cli_code, cli_err = run_cli(tmp_path, text, *args, capsys=capsys)
    assert cli_code == code
    assert err.count("\n") == 1 and err.startswith("manage.py pack: error: ")
    assert err.removeprefix("manage.py pack: error: ") == cli_err.removeprefix("optimizer pack: error: ")


def test_app_specific_refusals_are_bad_input(db, tmp_path):
    tool = {"id": "t", "messages": [{"id": "1", "role": "user", "content": "hi"},
                                    {"id": "2", "role": "tool", "content": "{}"}]}
    parts = {"id": "p", "messages": [{"id": "1", "role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    for req, word in ((tool, "role 'tool'"), (parts, "text content only")):
        code, out, err = run_pack(tmp_path, lines(req))
        assert code == 2 and out == []
        assert err.startswith(f"manage.py pack: error: request {req['id']!r} (line 1): ") and word in err
    assert not get_user_model().objects.filter(username__startswith=USERNAME_PREFIX).exists()


@pytest.mark.parametrize("text", ["half a pair \ud800", "a NUL \x00 here"])
def test_text_the_database_cannot_store_is_bad_input(db, tmp_path, text):
    """A lone surrogate (JSON may escape one) failed the insert with a traceback, and a NUL on PostgreSQL:
    the core CLI packs both, the app refuses them, as its message API does, with the contract's error."""
    bad = {"id": "b", "messages": [{"id": "1", "role": "user", "content": "hi"}, {"id": "2", "role": "user",
                                                                               "content": text}]}
    code, out, err = run_pack(tmp_path, lines(request("good", rounds=3), bad))
    assert code == 2 and [o["id"] for o in out] == ["good"]
    assert err.count("\n") == 1 and err.startswith("manage.py pack: error: request 'b' (line 2): message '2': ")
    assert not get_user_model().objects.filter(username__startswith=USERNAME_PREFIX).exists()


def test_recall_block_quotes_old_messages_with_their_dates_and_request_ids(db, tmp_path):
    req = {"id": "r", "budget": 2000, "preference": "balanced", "messages": conversation(40, dated=True)}
    code, out, err = run_pack(tmp_path, lines(req))
    assert code == 0, err
    res = out[0]
    blocks = [m for m in res["messages"] if m["content"].startswith("[Recalled from earlier")]
    assert len(blocks) == 1 and res["messages"][-2] == blocks[0]  # right before the newest message
    quoted = blocks[0]["source_ids"]
    assert quoted == res["stats"]["recall_ids"] and set(quoted) <= {m["id"] for m in req["messages"]}
    assert "piano" in blocks[0]["content"] and "March 2024" in blocks[0]["content"]  # stored created_at
