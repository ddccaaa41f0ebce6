"""Importing conversations (issue 13): ChatGPT's conversations.json, Open WebUI's export and our own
JSON, with their dates, order and active branch; the round trip export → import; bad files.

Jobs run inline here (the task's body, `import_job_run`); tests/worker runs one on a real worker and
test_import_jobs.py covers the API, progress and redelivery.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optimizer
from chatapp.chat.branch_services import conversation_path_thread
from chatapp.chat.imports import chatgpt
from chatapp.chat.models import Conversation, Message, MessageSearch
from chatapp.chat.rendering import markdown_render
from chatapp.chat.search_selectors import message_search
from chatapp.chat.selectors import conversation_list
from tests.chat.importkit import chatgpt_conversation, export_document, file_bytes, import_now

pytestmark = pytest.mark.django_db
T0 = datetime(2024, 3, 9, 14, 2, 33, 123456, tzinfo=UTC)


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user(username="importer", password="a long test password 9")


def _messages(conversation: Conversation) -> list[Message]:
    return list(Message.objects.filter(conversation=conversation).order_by("id"))


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _path(conversation: Conversation) -> list[Message]:
    return list(Message.objects.filter(conversation=conversation, superseded=False).order_by("id"))


def test_chatgpt_imports_the_tree_with_its_dates_and_the_active_path(owner):
    job = import_now(owner, file_bytes("chatgpt_branch.json"), name="conversations.json")
    assert (job.status, job.format, job.total, job.done, job.error) == ("done", "chatgpt", 2, 2, "")
    first, second = (Conversation.objects.get(pk=pk) for pk in job.conversation_ids)
    assert first.title == "Sourdough schedule"
    assert (first.created_at, first.updated_at) == (_at(1700000000.25), _at(1700000900.5))
    rows = _path(first)
    assert [(m.role, m.content) for m in rows] == [
        ("user", "How long should a sourdough loaf proof?"),
        ("assistant", "Usually 4 to 6 hours at 24 °C, until it grows by half."),
        ("user", "[image]\nAnd at 18 °C, like in this photo?"),
        ("assistant", "At 18 °C plan on 8 to 10 hours; the pumpernickel-ish crumb will be tighter."),
    ]
    assert [m.created_at for m in rows] == [_at(1700000010.5), _at(1700000020.75), _at(1700000200.0),
                                            _at(1700000210.0)]
    assert rows[1].model == "gpt-4o"
    # the tree: each message follows its parent (the tool call between u2b and a2b is not stored)
    assert [m.parent_id for m in rows] == [None, rows[0].pk, rows[1].pk, rows[2].pk]
    assert rows[1].reply_to_id == rows[0].pk and rows[3].reply_to_id == rows[2].pk
    # The first version of the edited question and its answer: kept off the path, one hidden branch
    # under its first message, siblings of the active path's question.
    u2a, a2a = Message.objects.filter(conversation=first, superseded=True).order_by("id")
    assert (u2a.content, u2a.parent_id, u2a.off_path_by) == ("What about in a cold kitchen?", rows[1].pk, u2a.pk)
    assert (a2a.parent_id, a2a.off_path_by, a2a.reply_to_id) == (u2a.pk, u2a.pk, u2a.pk)
    assert "BRANCH-ONLY" in a2a.content
    assert job.omitted == {"tool_messages": 1, "hidden_messages": 1}
    # only the active path counts and is recalled
    assert first.live_message_count == 4
    assert MessageSearch.objects.filter(conversation=first, recallable=True).count() == 4
    # A message with no date takes the one before it.
    b1, b2 = _messages(second)
    assert b1.created_at == b2.created_at == _at(1710000100)


def test_an_imported_branch_is_switched_to_like_one_made_here(owner):
    from chatapp.chat.branch_services import branch_switch

    job = import_now(owner, file_bytes("chatgpt_branch.json"))
    conversation = Conversation.objects.get(pk=job.conversation_ids[0])
    question = _path(conversation)[2]  # the edited question, 2nd of its two versions
    branch_switch(message=question, index=1)
    assert [m.content[:28] for m in _path(conversation)] == [
        "How long should a sourdough ", "Usually 4 to 6 hours at 24 °", "What about in a cold kitchen",
        "BRANCH-ONLY answer about col"]
    branch_switch(message=Message.objects.get(pk=question.pk), index=2)
    assert _path(conversation)[-1].content.startswith("At 18 °C")


def test_chatgpt_without_current_node_follows_the_newest_leaf(owner):
    document = json.loads(file_bytes("chatgpt_branch.json"))[:1]
    del document[0]["current_node"]
    job = import_now(owner, json.dumps(document).encode())
    contents = [m.content for m in _path(Conversation.objects.get(pk=job.conversation_ids[0]))]
    assert contents[-1].startswith("At 18 °C")  # a2b (t=…210) is newer than a2a (t=…110)


def test_openwebui_walks_current_id_and_reads_millisecond_dates(owner):
    job = import_now(owner, file_bytes("openwebui_branch.json"))
    assert (job.status, job.format, job.total) == ("done", "openwebui", 2)
    seedlings, haiku = (Conversation.objects.get(pk=pk) for pk in job.conversation_ids)
    rows = _path(seedlings)
    assert [m.content[:20] for m in rows] == [
        "My tomato seedlings ", "They stretch towards", "How far above them s", "About 10 to 15 cm fo"]
    assert [m.created_at for m in rows] == [_at(1720000010), _at(1720000030), _at(1720000100), _at(1720000110)]
    assert rows[1].model == "llama3.1"
    assert seedlings.created_at == _at(1720000000) and seedlings.updated_at == _at(1720000500)
    assert job.omitted == {}
    # the first answer, regenerated: a sibling of the answer on the path, a hidden branch of its own
    (first_answer,) = Message.objects.filter(conversation=seedlings, superseded=True)
    assert first_answer.content.startswith("BRANCH-ONLY")
    assert (first_answer.parent_id, first_answer.off_path_by) == (rows[0].pk, first_answer.pk)
    assert rows[1].parent_id == rows[0].pk and first_answer.pk < rows[1].pk
    # No history: the visible list; the top-level title is empty, the chat's own is used; ms dates.
    assert haiku.title == "Haiku about rain"
    assert [m.created_at for m in _messages(haiku)] == [_at(1725000001), _at(1725000002)]
    assert haiku.created_at == _at(1725000000)


def test_counts_totals_and_index_are_those_of_stored_messages(owner):
    job = import_now(owner, file_bytes("openwebui_branch.json"))
    conversation = Conversation.objects.get(pk=job.conversation_ids[0])
    rows = _path(conversation)
    model = "offline-demo"  # no config: the offline demo model, as a new chat would get
    assert conversation.offline
    assert [m.token_count for m in rows] == [
        optimizer.count_message({"role": m.role, "content": m.content}, model=model) for m in rows]
    assert [m.char_count for m in rows] == [len(m.content) for m in rows]
    assert (conversation.live_message_count, conversation.live_char_count, conversation.live_token_count) == (
        4, sum(len(m.content) for m in rows), sum(m.token_count for m in rows))
    assert MessageSearch.objects.filter(conversation=conversation, recallable=True).count() == 4


def test_search_finds_imported_text(owner):
    job = import_now(owner, file_bytes("chatgpt_branch.json"))
    found = conversation_list(owner=owner, query="pumpernickel")
    assert [c.pk for c in found] == [job.conversation_ids[0]]
    # text only on another branch finds nothing, as in a chat edited here: the chat would open on a
    # path that does not show it
    assert list(conversation_list(owner=owner, query="kitchens")) == []
    assert message_search(owner=owner, query="kitchens").hits == []
    assert [h.conversation_id for h in message_search(owner=owner, query="pumpernickel").hits] == [
        job.conversation_ids[0]]


def test_a_zip_as_chatgpt_exports_it_is_read(owner):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("chat.html", "<html></html>")
        archive.writestr("conversations.json", file_bytes("chatgpt_branch.json"))
    job = import_now(owner, buffer.getvalue(), name="export.zip")
    assert (job.status, len(job.conversation_ids)) == ("done", 2)


def test_a_zip_whose_conversations_are_split_in_numbered_files_is_read_whole(owner):
    """ChatGPT's exports since early 2026 split the chats into conversations-000.json, -001.json, … beside
    other JSON files (export_manifest.json, user.json): every part is imported, in order."""
    chats = [chatgpt_conversation(i, messages=2) for i in range(5)]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("chat.html", "<html></html>")
        archive.writestr("conversations-001.json", json.dumps(chats[3:], indent=1))
        archive.writestr("conversations-000.json", "\ufeff" + json.dumps(chats[:3]) + "\n")
        archive.writestr("conversations-002.json", "[ ]")
        archive.writestr("export_manifest.json", json.dumps({"files": 3}))
        archive.writestr("user.json", json.dumps({"id": "user-1"}))
    job = import_now(owner, buffer.getvalue(), name="export.zip")
    assert (job.status, job.error, job.total, job.skipped) == ("done", "", 5, [])
    titles = [Conversation.objects.get(pk=pk).title for pk in job.conversation_ids]
    assert titles == [f"Chat {i}" for i in range(5)]


def test_a_split_part_that_is_not_a_list_fails_the_file_naming_it(owner):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("conversations-000.json", json.dumps([chatgpt_conversation(0, messages=2)]))
        archive.writestr("conversations-001.json", json.dumps({"mapping": {}}))
    job = import_now(owner, buffer.getvalue(), name="export.zip")
    assert job.status == "failed" and "conversations-001.json" in job.error and "not a list" in job.error
    assert not Conversation.objects.filter(owner=owner).exists()


def test_split_parts_larger_than_the_limit_together_fail_the_file(owner, settings):
    settings.IMPORT_MAX_BYTES = 100_000
    part = json.dumps([chatgpt_conversation(0, messages=1, text="word " * 12_000)])  # 60 kB each: one fits
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations-000.json", part)
        archive.writestr("conversations-001.json", part)
    job = import_now(owner, buffer.getvalue(), name="export.zip")
    assert job.status == "failed" and "more than 0.1 MB unpacked together" in job.error, job.error


def test_a_chatgpt_voice_chat_reads_as_its_transcripts_not_as_pictures(owner):
    """A voice conversation's messages hold the recording beside its transcription: the recording is not
    a picture ("[image]"), nor a part type to show ("[real_time_user_audio_video_asset_pointer]"); the
    transcription is the message, and a recording without one says it was audio."""
    chat = chatgpt_conversation(0, messages=3)
    recording = {"content_type": "audio_asset_pointer", "asset_pointer": "sediment://file_1", "format": "wav"}
    parts = [
        [{"content_type": "real_time_user_audio_video_asset_pointer", "audio_asset_pointer": recording,
          "frames_asset_pointers": [], "video_container_asset_pointer": None},
         {"content_type": "audio_transcription", "text": "Will it rain in Porto?", "direction": "in"}],
        [{"content_type": "audio_transcription", "text": "Not before Sunday.", "direction": "out"}, recording],
        [recording],
    ]
    for n, node_parts in enumerate(parts):
        chat["mapping"][f"n{n}"]["message"]["content"] = {"content_type": "multimodal_text", "parts": node_parts}
    job = import_now(owner, json.dumps([chat]).encode())
    rows = _messages(Conversation.objects.get(pk=job.conversation_ids[0]))
    assert [m.content for m in rows] == ["Will it rain in Porto?", "Not before Sunday.", "[audio]"]


# --- our own format: the round trip -------------------------------------------------------------------


def _msg(conversation: Conversation, minutes: int, **fields) -> Message:
    message = Message.objects.create(conversation=conversation, **fields)
    Message.objects.filter(pk=message.pk).update(created_at=T0 + timedelta(minutes=minutes),
                                                 updated_at=T0 + timedelta(minutes=minutes, seconds=5))
    return message


ROUND_TRIP_FIELDS = ("role", "kind", "status", "content", "created_at", "updated_at", "pinned", "superseded",
                     "model", "prompt_tokens", "completion_tokens", "latency_ms", "cost_usd", "error",
                     "covered_message_count", "source_chars", "extractive", "discarded", "edited")


def test_export_then_import_gives_the_same_conversation(owner):
    source = Conversation.objects.create(owner=owner, title="Trip to Lisbon", title_is_custom=True,
                                         system_prompt="You are a travel agent.\nAnswer in French.")
    u1 = _msg(source, 0, role="user", content="Plan a trip to Lisbon in May, please.", pinned=True)
    a1 = _msg(source, 1, role="assistant", content="Sure — **day 1**: Alfama.", reply_to=u1, model="gpt-4o-mini",
              prompt_tokens=40, completion_tokens=12, latency_ms=830, cost_usd=Decimal("0.000123"))
    _msg(source, 2, role="assistant", content="An earlier answer", reply_to=u1, superseded=True)
    u2 = _msg(source, 3, role="user", content="And the trams? ünïcödé 🚋")
    _msg(source, 4, role="assistant", content="", status="error", error="Model unreachable (timeout).", reply_to=u2)
    first = _msg(source, 5, role="system", kind="summary", content="[Summary] Lisbon so far.", covers_from_id=u1.pk,
                 covers_through_id=u2.pk, covered_message_count=4, source_chars=120, extractive=True, discarded=True)
    _msg(source, 6, role="system", kind="summary", content="Edited summary", edited=True, edited_from=first,
         covers_from_id=u1.pk, covers_through_id=a1.pk)
    _msg(source, 7, role="assistant", content="Tram 28 is", status="stopped", reply_to=u2)
    Conversation.objects.filter(pk=source.pk).update(
        window_start_id=u2.pk, created_at=T0, updated_at=T0 + timedelta(hours=1))
    conversation_path_thread(conversation_id=source.pk)  # the tree (issue 13) round-trips too
    source.refresh_from_db()

    document = export_document(source)
    job = import_now(owner, json.dumps(document).encode(), name="conversation.json")
    assert (job.status, job.format, job.skipped) == ("done", "longchat", [])
    copy = Conversation.objects.get(pk=job.conversation_ids[0])
    assert (copy.title, copy.title_is_custom, copy.created_at, copy.updated_at, copy.system_prompt) == (
        source.title, True, source.created_at, source.updated_at, source.system_prompt)
    old, new = _messages(source), _messages(copy)
    assert [[getattr(m, f) for f in ROUND_TRIP_FIELDS] for m in new] == [
        [getattr(m, f) for f in ROUND_TRIP_FIELDS] for m in old]
    # References point at the copies of the messages they pointed at.
    to_new = {o.pk: n.pk for o, n in zip(old, new, strict=True)}
    for o, n in zip(old, new, strict=True):
        assert n.reply_to_id == (to_new[o.reply_to_id] if o.reply_to_id else None)
        assert n.edited_from_id == (to_new[o.edited_from_id] if o.edited_from_id else None)
        assert (n.covers_from_id, n.covers_through_id) == (
            to_new.get(o.covers_from_id), to_new.get(o.covers_through_id))
        assert (n.parent_id, n.off_path_by) == (to_new.get(o.parent_id), to_new.get(o.off_path_by))
    assert any(m.off_path_by for m in old) and sum(m.parent_id is None for m in old if m.kind == "chat") == 1
    assert copy.window_start_id == to_new[u2.pk]
    assert copy.summary_count == 1  # the edit is the same summary, rewritten
    # Our file says which pins a summary passed over (none here, though u1 is pinned: see
    # test_import_pins.py for the rule where a file does not say).
    assert [m.skipped_pin_ids for m in new if m.kind == "summary"] == [None, None]
    assert [m["skipped_pin_ids"] for m in document["messages"] if m["kind"] == "summary"] == [[], []]
    # Exporting the copy gives the same document, ids aside.
    again = export_document(copy)
    assert _without_ids(again["messages"]) == _without_ids(document["messages"])


def _without_ids(messages: list[dict]) -> list[dict]:
    ignored = {"id", "reply_to_id", "edited_from_id", "covers_from_id", "covers_through_id", "token_count",
               "parent_id", "off_path_by"}
    return [{k: v for k, v in m.items() if k not in ignored} for m in messages]


message_lists = st.lists(
    st.tuples(
        st.sampled_from(["user", "assistant", "system"]),
        # Text the app stores (no NUL, no lone surrogate: every write path makes text storable first).
        st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40),
        st.booleans(),
        st.integers(min_value=0, max_value=10**9),
        st.sampled_from(["complete", "stopped", "error"]),
    ),
    max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=message_lists)
def test_random_message_lists_round_trip(owner, rows):
    source = Conversation.objects.create(owner=owner, title="Random")
    for role, text, pinned, seconds, status in rows:
        message = Message.objects.create(conversation=source, role=role, content=text, pinned=pinned, status=status)
        Message.objects.filter(pk=message.pk).update(created_at=T0 + timedelta(seconds=seconds))
    job = import_now(owner, json.dumps(export_document(source)).encode())
    assert job.status == "done" and job.skipped == []
    copy = Conversation.objects.get(pk=job.conversation_ids[0])
    fields = ("role", "content", "pinned", "created_at", "status")
    assert [[getattr(m, f) for f in fields] for m in _messages(copy)] == [
        [getattr(m, f) for f in fields] for m in _messages(source)]


# --- bad files -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("data", "expected"), [
    (b"Dear diary, today I exported nothing.", "The file is not JSON: it begins with 'Dear diary"),
    (file_bytes("truncated.json"), "The file is cut short in item 1 of the list: it looks truncated"),
    (file_bytes("foreign.json"), "not a known export: expected a Longchat export"),
    (b"[]", "The file holds an empty list"),
    (b'[{"mapping": {}}] trailing', "line 1 has 't' after the end of the document"),
    (b"\xff\xfe{\x00}\x00", "UTF-16"),
    (b'{"format": "longchat.conversation", "version": 2, "conversation": {}, "messages": []}',
     "version 2; this server reads version 1"),
])
def test_a_bad_file_fails_with_the_reason_and_stores_nothing(owner, data, expected):
    job = import_now(owner, data)
    assert job.status == "failed"
    assert expected in job.error
    assert job.conversation_ids == [] and job.payload in (b"", memoryview(b""))
    assert not Conversation.objects.filter(owner=owner).exists()
    assert not Message.objects.exists()


def test_foreign_json_names_what_it_found(owner):
    job = import_now(owner, file_bytes("foreign.json"))
    assert job.error.endswith("found a top-level object with keys name, version, dependencies.")


def test_a_bad_conversation_is_skipped_whole_and_the_others_are_imported(owner):
    good = [chatgpt_conversation(i, messages=6) for i in range(3)]
    bad = chatgpt_conversation(3, messages=6)
    del bad["mapping"]["n3"]["message"]["author"]  # its 4th message has no role
    document = [good[0], good[1], bad, good[2]]
    job = import_now(owner, json.dumps(document).encode())
    assert (job.status, job.total, job.done, len(job.conversation_ids)) == ("done", 4, 4, 3)
    assert job.skipped == [{"index": 2, "title": "", "error": "conversation 3 ('Chat 3'): message 4 has no role"}]
    titles = list(Conversation.objects.filter(owner=owner).order_by("id").values_list("title", flat=True))
    assert titles == ["Chat 0", "Chat 1", "Chat 2"]
    assert Message.objects.count() == 18  # nothing of the bad one
    assert not Message.objects.filter(content__endswith="of chat 3").exists()


def test_a_message_over_the_size_limit_skips_its_conversation(owner, settings):
    settings.MAX_MESSAGE_CHARS = settings.MAX_REPLY_CHARS = 1000
    document = [chatgpt_conversation(0, messages=2), chatgpt_conversation(1, messages=2, text="x" * 1001)]
    job = import_now(owner, json.dumps(document).encode())
    assert len(job.conversation_ids) == 1
    assert job.skipped[0]["error"] == (
        "conversation 2 ('Chat 1'): message 1 is 1,001 characters long; the limit is 1,000")
    assert job.skipped[0]["title"] == "Chat 1"
    assert Message.objects.count() == 2


def test_a_damaged_zip_fails_with_the_reason(owner):
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("conversations.json", json.dumps([chatgpt_conversation(i, messages=4) for i in range(50)]))
    damaged = bytearray(archive.getvalue())
    start = 30 + len("conversations.json") + 40  # inside the deflated member, past its local header
    damaged[start:start + 40] = bytes(b ^ 0x5A for b in damaged[start:start + 40])

    job = import_now(owner, bytes(damaged), name="export.zip")

    assert job.status == "failed" and "looks like a ZIP archive but cannot be read" in job.error


def _name_not_utf8(damaged: bytearray) -> None:
    directory = damaged.find(b"PK\x01\x02")
    damaged[directory + 9] |= 0x08  # general purpose flag bit 11: the name is UTF-8
    name_at = damaged.find(b"conversations.json", directory)
    damaged[name_at:name_at + 2] = b"\xff\xfe"


def _directory_past_its_place(damaged: bytearray) -> None:
    end = damaged.rfind(b"PK\x05\x06")  # the end record's offset of the central directory, 1000 too far
    struct.pack_into("<I", damaged, end + 16, struct.unpack_from("<I", damaged, end + 16)[0] + 1000)


def _name_of_no_length(damaged: bytearray) -> None:
    directory = damaged.find(b"PK\x01\x02")
    length = struct.unpack_from("<H", damaged, directory + 28)[0]
    struct.pack_into("<HHH", damaged, directory + 28, 0, 0, length)  # the name's bytes read as a comment


@pytest.mark.parametrize("damage", [_name_not_utf8, _directory_past_its_place, _name_of_no_length])
def test_a_zip_damaged_in_its_directory_fails_with_the_reason(owner, damage):
    """Damage zipfile reports as ValueError, UnicodeDecodeError or IndexError, not BadZipFile: the import
    said "Internal error while importing (ValueError)" (the task crashed and was logged as one)."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("conversations.json", json.dumps([chatgpt_conversation(0, messages=2)]))
    damaged = bytearray(archive.getvalue())
    damage(damaged)

    job = import_now(owner, bytes(damaged), name="export.zip")

    assert job.status == "failed" and "looks like a ZIP archive but cannot be read" in job.error, job.error


def test_a_number_longer_than_python_reads_fails_the_file_with_the_reason(owner):
    document = [chatgpt_conversation(1, messages=2), {"mapping": {}, "n": 0}]
    text = json.dumps(document).replace('"n": 0', '"n": 1' + "0" * 5000)
    job = import_now(owner, text.encode())
    assert job.status == "failed" and "not valid JSON" in job.error


def test_odd_values_skip_their_conversation_only(owner):
    no_role = chatgpt_conversation(0, messages=4)
    no_role["title"] = "Chat\u0000zero"  # a NUL, which PostgreSQL's JSON refuses, in the skipped list
    del no_role["mapping"]["n1"]["message"]["author"]
    far = json.dumps(chatgpt_conversation(2, messages=2)).replace(
        '"create_time": 1700002000,', '"create_time": 1' + "0" * 400 + ",", 1)  # no float holds it
    assert "0" * 400 in far
    document = f"[{json.dumps(no_role)}, {json.dumps(chatgpt_conversation(1, messages=2))}, {far}]"

    job = import_now(owner, document.encode())

    assert (job.status, len(job.conversation_ids), [s["index"] for s in job.skipped]) == ("done", 1, [0, 2])
    assert "\x00" not in job.skipped[0]["title"] and "not a timestamp" in job.skipped[1]["error"]


def _longchat(messages: list[dict]) -> bytes:
    return json.dumps({"format": "longchat.conversation", "version": 1, "conversation": {"title": "Loop"},
                       "messages": messages}).encode()


@pytest.mark.parametrize(
    "parents",
    [
        {1: 2, 2: 1, 3: 1},  # two messages each the other's parent
        {1: None, 2: 2, 3: 1},  # a message its own parent
        {1: 3, 2: 1, 3: None},  # a parent written after its child
    ],
)
def test_our_format_with_a_parent_that_does_not_come_first_is_skipped(owner, parents):
    """The app writes a child after its parent, so a path read in id order runs from its root, and the
    share page walks a message's parents up to one: a file whose parent links loop (or run forward)
    would make that walk endless, on a public page. Such a conversation is skipped with the reason."""
    roles = {1: "user", 2: "assistant", 3: "assistant"}
    rows = [{"id": n, "role": roles[n], "content": f"text {n}", "parent_id": parents[n],
             "superseded": n == 3, "off_path_by": 3 if n == 3 else None} for n in (1, 2, 3)]

    job = import_now(owner, _longchat(rows))

    assert (job.status, job.conversation_ids) == ("done", [])
    assert "parent" in job.skipped[0]["error"] and "comes after" in job.skipped[0]["error"]


def test_our_format_with_an_edit_older_than_its_original_is_skipped(owner):
    """A summary's edit is written after the summary it replaces: edits whose originals loop made the
    walk along the chain (discarding one) go on for ever."""
    summary = {"role": "system", "kind": "summary", "covers_from_id": 1, "covers_through_id": 2}
    rows = [{"id": 1, "role": "user", "content": "q"}, {"id": 2, "role": "assistant", "content": "a"},
            {**summary, "id": 3, "content": "one", "edited_from_id": 4},
            {**summary, "id": 4, "content": "two", "edited_from_id": 3}]

    job = import_now(owner, _longchat(rows))

    assert (job.status, job.conversation_ids) == ("done", [])
    assert "original summary" in job.skipped[0]["error"] and "comes after" in job.skipped[0]["error"]


def test_a_foreign_file_whose_keys_are_not_valid_unicode_fails_with_a_storable_reason(owner):
    """JSON may spell a lone surrogate ("\\ud800"), which no UTF-8 column stores: the reason that names
    the keys it found must still be saved (and shown), not crash the job."""
    job = import_now(owner, b'[{"name\\ud800": 1, "version": 2}]')
    assert job.status == "failed"
    assert "not a known export" in job.error
    assert "found a list whose first item is an object with keys name\ufffd, version" in job.error
    job.error.encode("utf-8")


def test_a_skipped_conversation_titled_with_a_lone_surrogate_is_reported_storably(owner):
    bad = chatgpt_conversation(1, messages=2)
    bad["title"] = "Broken \ud83d title"
    del bad["mapping"]["n1"]["message"]["author"]
    job = import_now(owner, json.dumps([chatgpt_conversation(0, messages=2), bad]).encode())
    assert job.status == "done" and len(job.conversation_ids) == 1
    assert job.skipped[0]["error"] == "conversation 2 ('Broken \ufffd title'): message 2 has no role"
    job.skipped[0]["title"].encode("utf-8")


def _chatgpt_line(*messages: tuple[str, str | None, str, str]) -> dict:
    """A ChatGPT conversation of (role, recipient, content type, text) messages in one line."""
    conversation = chatgpt_conversation(0, messages=0)
    mapping, parent = conversation["mapping"], "r"
    for n, (role, recipient, kind, text) in enumerate(messages):
        content = {"content_type": kind, "text": text} if kind == "code" else {"content_type": kind, "parts": [text]}
        message = {"id": f"m{n}", "author": {"role": role}, "create_time": 1_700_000_000 + n, "content": content,
                   "metadata": {}}
        if recipient is not None:
            message["recipient"] = recipient
        mapping[f"m{n}"] = {"id": f"m{n}", "parent": parent, "children": [], "message": message}
        mapping[parent]["children"].append(f"m{n}")
        parent = f"m{n}"
    conversation["current_node"] = parent
    return conversation


def _tool_round(question: str, call: tuple[str, str, str], output: tuple[str, str], answer: str) -> list[tuple]:
    """A question, the model's call to a tool (recipient, content type, text), the tool's output
    (content type, text) and the answer, as `_chatgpt_line` takes them."""
    return [("user", "all", "text", question), ("assistant", *call), ("tool", "all", *output),
            ("assistant", "all", "text", answer)]


def test_chatgpt_calls_to_hidden_tools_are_left_out_and_code_for_python_is_kept(owner):
    """ChatGPT's page hides what the model sends to DALL·E, the browser or its memory (a JSON prompt, a
    `search(...)` line) and shows only the code it runs: imported, the hidden calls read as replies."""
    conversation = _chatgpt_line(
        *_tool_round("Draw a cat in a hat.", ("dalle.text2im", "text", '{"prompt": "a cat in a hat"}'),
                     ("text", "DALL·E displayed 1 image."), "Here is your cat in a hat."),
        *_tool_round("What is the news today?", ("browser", "code", 'search("news today")'),
                     ("tether_browsing_display", "Results"), "Here are today's headlines."),
        *_tool_round("And 6 times 7?", ("python", "code", "print(6 * 7)"), ("execution_output", "42"), "It is 42."),
    )
    job = import_now(owner, json.dumps([conversation]).encode())
    assert job.status == "done"
    rows = _path(Conversation.objects.get(pk=job.conversation_ids[0]))
    assert [(m.role, m.content) for m in rows] == [
        ("user", "Draw a cat in a hat."),
        ("assistant", "Here is your cat in a hat."),
        ("user", "What is the news today?"),
        ("assistant", "Here are today's headlines."),
        ("user", "And 6 times 7?"),
        ("assistant", "```\nprint(6 * 7)\n```"),
        ("assistant", "It is 42."),
    ]
    assert [m.parent_id for m in rows[1:]] == [m.pk for m in rows[:-1]]
    assert job.omitted == {"tool_calls": 2, "tool_messages": 3}


def test_chatgpt_code_that_holds_a_fence_gets_a_longer_one_and_is_found_again_by_its_earlier_fingerprint(
    owner, monkeypatch
):
    """Code for python that writes Markdown holds ``` itself: inside a three-backtick block its own
    fence closed the block, and the rest of the code was drawn as Markdown. A chat imported before the
    longer fence (all code in three backticks) is still found when the same file comes again."""
    code = 'readme = """\n```sh\npip install x\n```\n"""\nprint(readme)'
    conversation = _chatgpt_line(*_tool_round("Write a README.", ("python", "code", code),
                                              ("execution_output", "done"), "Done."))
    file = json.dumps([conversation]).encode()
    job = import_now(owner, file)
    assert job.status == "done"
    rows = _path(Conversation.objects.get(pk=job.conversation_ids[0]))
    assert rows[1].content == f"````\n{code}\n````"
    assert markdown_render(rows[1].content, cached=False).count("<pre") == 1  # one block, the code whole in it
    again = import_now(owner, file)
    assert (again.status, again.conversation_ids) == ("done", [])

    # Imported as the earlier reader did (three backticks), then the same file read by this one.
    Conversation.objects.filter(owner=owner).delete()
    monkeypatch.setattr(chatgpt, "_code_block", lambda text: f"```\n{text}\n```")
    assert import_now(owner, file).status == "done"
    monkeypatch.undo()
    again = import_now(owner, file)
    assert (again.status, again.conversation_ids) == ("done", [])
    assert Conversation.objects.filter(owner=owner).count() == 1


def test_a_chatgpt_chat_imported_with_its_hidden_calls_as_replies_is_not_imported_again(owner):
    """Before the hidden calls were left out they were stored as replies, and the chat's fingerprint
    counted them: the same chat in a later export must still be found (`already_imported`)."""
    conversation = _chatgpt_line(
        ("user", "all", "text", "Draw a cat in a hat."),
        ("assistant", "dalle.text2im", "text", '{"prompt": "a cat in a hat"}'),
        ("tool", "all", "text", "DALL·E displayed 1 image."),
        ("assistant", "all", "text", "Here is your cat in a hat."),
    )
    # What the earlier reader read: the same file with the call's recipient unread.
    as_before = json.loads(json.dumps(conversation))
    for node in as_before["mapping"].values():
        if node["message"] is not None:
            node["message"].pop("recipient", None)
    first = import_now(owner, json.dumps([as_before]).encode())
    assert len(Message.objects.filter(conversation_id=first.conversation_ids[0])) == 3  # the call as a reply
    again = import_now(owner, json.dumps([conversation]).encode())
    assert (again.status, again.conversation_ids, again.duplicates) == ("done", [], 1)
    assert Conversation.objects.filter(owner=owner).count() == 1
