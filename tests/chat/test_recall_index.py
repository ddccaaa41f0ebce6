"""The message full-text index: kept in step with writes, ranked like the core's MemorySource,
owner-scoped, and used by the real chat request path (recall block) and the conversation search.

Runs on SQLite (FTS5) by default and on PostgreSQL (tsvector + GIN) with DATABASE_URL set.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chatapp.chat.chat_retry import chat_regenerate_start, chat_retry_start
from chatapp.chat.management.commands.seed_long_conversation import conversation_seed_long
from chatapp.chat.message_services import message_append, message_stop
from chatapp.chat.models import Conversation, Message, MessageSearch, OptimizationRecord, RecallCorpus, RecallTerm
from chatapp.chat.recall_source import DatabaseRecallSource
from chatapp.chat.search_services import conversation_index_rebuild, message_index_sync
from chatapp.chat.selectors import conversation_list, user_settings_get
from chatapp.chat.services import conversation_delete
from chatapp.chat.summary_services import summary_edit
from optimizer.bm25 import MAX_QUERY_TERMS
from optimizer.lexical import Query, build_query, index_text
from optimizer.recall import HEADER, MemorySource, RecallItem, recall_cap
from tests.support.chat import make_config, seed_messages, send

pytestmark = pytest.mark.django_db

FACTS = [
    ("user", "We adopted a grey cat from the shelter on Saturday and named her Pumpernickel."),
    ("assistant", "Pumpernickel is a lovely name! Grey cats from shelters are often very calm."),
    ("user", "My sister Rosalind is moving to Lisbon in March for a job at the aquarium."),
    ("assistant", "Lisbon's aquarium is one of the largest in Europe; Rosalind will enjoy it."),
    ("user", "The database migration failed because the PostgreSQL server ran out of disk space."),
    ("assistant", "Free disk space on the server, then rerun the migration; check the WAL directory too."),
    ("user", "For dinner on Friday I am cooking a mushroom risotto with parmesan."),
    ("assistant", "Risotto needs patience: add the stock slowly and stir the rice often."),
    ("user", "Our cat knocked the risotto off the table while we watched a film about Lisbon."),
    ("assistant", "Cats and risotto: a classic Friday disaster."),
]
QUERIES = [
    "What did we name the cat?",
    "Where is Rosalind moving?",
    "why did the migration on the server fail",
    "risotto recipe for Friday",
    "Lisbon cat",
]


def _append(conversation: Conversation, rows=FACTS) -> list[Message]:
    return [message_append(conversation=conversation, role=role, content=text) for role, text in rows]


def _fts_rows(message_ids: list[int]) -> int:
    """Rows the vendor's full-text structure holds for these messages."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            marks = ",".join("%s" for _ in message_ids)
            cursor.execute(f"SELECT count(*) FROM chat_message_fts WHERE rowid IN ({marks})", message_ids)  # noqa: S608
        else:
            cursor.execute(
                "SELECT count(*) FROM chat_messagesearch WHERE message_id = ANY(%s) AND tsv IS NOT NULL",
                [message_ids],
            )
        return cursor.fetchone()[0]


def _ids(queries: dict[str, tuple[str, str]]) -> list[int]:
    """The message ids the vendor's query (SQL, its one parameter) returns, in order."""
    sql, param = queries[connection.vendor]
    with connection.cursor() as cursor:
        cursor.execute(sql, [param])
        return [row[0] for row in cursor.fetchall()]


def _fts_match(conversation: Conversation, term: str) -> list[int]:
    """Message ids the vendor's full-text index finds for one term in `conversation`."""
    return _ids({
        "sqlite": ("SELECT rowid FROM chat_message_fts WHERE chat_message_fts MATCH %s ORDER BY rowid",
                   f'"_c{conversation.pk}" AND "{term}"'),
        "postgresql": ("SELECT message_id FROM chat_messagesearch WHERE tsv @@ %s::tsquery ORDER BY message_id",
                       f"'_c{conversation.pk}' & '{term}'"),
    })


def _stats(conversation: Conversation) -> tuple[tuple[int, int] | None, dict[str, int]]:
    corpus = RecallCorpus.objects.filter(conversation=conversation).values_list("docs", "length").first()
    return corpus, dict(RecallTerm.objects.filter(conversation=conversation).values_list("term", "df"))


def _expected_stats(conversation: Conversation) -> tuple[tuple[int, int] | None, dict[str, int]]:
    """The statistics recomputed from scratch over the live user/assistant messages."""
    docs = length = 0
    df: dict[str, int] = {}
    for text in Message.objects.filter(
        conversation=conversation, kind="chat", status__in=Message.LIVE_STATUSES, superseded=False,
        role__in=["user", "assistant"],
    ).values_list("content", flat=True):
        terms = index_text(text).split()
        docs += 1
        length += len(terms)
        for term in set(terms):
            df[term] = df.get(term, 0) + 1
    return ((docs, length) if docs else None), df



def _recall_match(conversation: Conversation, term: str) -> list[int]:
    """Message ids recall's scoped index finds for one term in `conversation` (`c<id>_term`)."""
    return _ids({
        "sqlite": ("SELECT rowid FROM chat_message_rfts WHERE chat_message_rfts MATCH %s ORDER BY rowid",
                   f'"c{conversation.pk}_{term}"'),
        "postgresql": ("SELECT message_id FROM chat_messagesearch WHERE rtsv @@ %s::tsquery AND recallable "
                       "ORDER BY message_id", f"'c{conversation.pk}_{term}'"),
    })


def _recall_index_matches_the_rows(conversation: Conversation) -> None:
    """Every term of the conversation's rows finds exactly the recallable rows holding it."""
    rows = list(MessageSearch.objects.filter(conversation=conversation).values_list("message_id", "terms",
                                                                                      "recallable"))
    for term in sorted({t for _, terms, _ in rows for t in terms.split()}):
        expected = sorted(pk for pk, terms, recallable in rows if recallable and term in terms.split())
        assert _recall_match(conversation, term) == expected, term

# --- kept in step ---------------------------------------------------------------------------------


def test_a_new_message_is_indexed_with_the_core_terms(user, conversation):
    msgs = _append(conversation)
    row = MessageSearch.objects.get(message=msgs[0])
    assert row.terms == index_text(FACTS[0][1])
    assert row.recallable and row.conversation_id == conversation.pk
    assert _fts_rows([m.pk for m in msgs]) == len(msgs)
    assert _fts_match(conversation, "pumpernickel") == [msgs[0].pk, msgs[1].pk]
    assert _stats(conversation) == _expected_stats(conversation)


def test_a_reply_is_indexed_when_it_completes_and_leaves_when_superseded(user, conversation, fake_openai):
    _append(conversation)
    result = send(user, conversation, "Tell me about the aquarium in Lisbon")
    reply_id = result.named("start")[0]["assistant_message"]["id"]
    reply = Message.objects.get(pk=reply_id)
    assert reply.status == "complete"
    assert MessageSearch.objects.get(message=reply).terms == index_text(reply.content)
    assert MessageSearch.objects.get(message=reply).recallable
    assert _stats(conversation) == _expected_stats(conversation)

    chat_regenerate_start(user=user, reply=reply)
    row = MessageSearch.objects.get(message=reply)
    assert not row.recallable  # superseded: stays searchable, never recalled
    assert _stats(conversation) == _expected_stats(conversation)


def test_a_summary_edit_leaves_the_index_unchanged(user, conversation):
    msgs = _append(conversation)
    summary = Message.objects.create(
        conversation=conversation, role="system", kind="summary", content="The user adopted a cat.",
        covers_from_id=msgs[0].pk, covers_through_id=msgs[3].pk,
    )
    message_index_sync(message_ids=[summary.pk])
    before = (_stats(conversation), list(MessageSearch.objects.order_by("pk").values_list("pk", "terms")))
    edited = summary_edit(summary=summary, content="The user adopted a grey cat called Pumpernickel.")
    message_index_sync(message_ids=[summary.pk, edited.pk])
    after = (_stats(conversation), list(MessageSearch.objects.order_by("pk").values_list("pk", "terms")))
    assert before == after
    assert not MessageSearch.objects.filter(message__in=[summary, edited]).exists()


def test_an_edited_message_text_is_reindexed(user, conversation):
    msgs = _append(conversation)
    Message.objects.filter(pk=msgs[0].pk).update(content="We adopted a tortoise named Archibald.")
    message_index_sync(message_ids=[msgs[0].pk])
    assert _fts_match(conversation, "archibald") == [msgs[0].pk]
    assert _fts_match(conversation, "pumpernickel") == [msgs[1].pk]
    assert _stats(conversation) == _expected_stats(conversation)
    message_index_sync(message_ids=[msgs[0].pk])  # idempotent
    assert _stats(conversation) == _expected_stats(conversation)


def test_deleting_a_conversation_removes_its_index(user, conversation):
    msgs = _append(conversation)
    other = Conversation.objects.create(owner=user)
    kept = _append(other, FACTS[:2])
    conversation_delete(conversation=conversation)
    assert _fts_rows([m.pk for m in msgs]) == 0
    assert not MessageSearch.objects.filter(message_id__in=[m.pk for m in msgs]).exists()
    assert not RecallTerm.objects.filter(conversation_id=msgs[0].conversation_id).exists()
    assert not RecallCorpus.objects.filter(conversation_id=msgs[0].conversation_id).exists()
    assert _fts_rows([m.pk for m in kept]) == 2
    assert _fts_match(other, "pumpernickel") == [m.pk for m in kept]


def test_rebuild_matches_the_write_path(user, conversation):
    _append(conversation)
    incremental = (_stats(conversation), list(MessageSearch.objects.order_by("pk").values_list("pk", "terms")))
    conversation_index_rebuild(conversation=conversation)
    assert incremental == (_stats(conversation), list(MessageSearch.objects.order_by("pk").values_list("pk", "terms")))


# --- ranking --------------------------------------------------------------------------------------


def _memory(conversation: Conversation) -> MemorySource:
    return MemorySource([
        RecallItem(id=str(pk), role=role, content=content, position=pk)
        for pk, role, content in Message.objects.filter(conversation=conversation).order_by("id").values_list(
            "id", "role", "content"
        )
    ])


def test_database_source_ranks_like_memory_source(user, conversation):
    msgs = _append(conversation)
    _append(conversation, [(r, f"{t} (again, day {k})") for k, (r, t) in enumerate(FACTS[::3])])
    memory = _memory(conversation)
    exact = DatabaseRecallSource(conversation=conversation, floor_ratio=0)
    default = DatabaseRecallSource(conversation=conversation)
    exclude = frozenset({str(msgs[-1].pk)})
    for text in QUERIES:
        query = build_query(text)
        expected = memory.search(query, limit=120, exclude_ids=exclude)
        got = exact.search(query, limit=120, exclude_ids=exclude)
        assert expected, text
        assert [i for i, _ in got] == [i for i, _ in expected], text
        assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-12), text
        # the default source returns the same head, down to the share of the best recall keeps
        head = default.search(query, limit=120, exclude_ids=exclude)
        assert [i for i, _ in head] == [i for i, _ in expected[: len(head)]]
        assert str(msgs[-1].pk) not in {i for i, _ in got}


@pytest.mark.parametrize(("rows", "question", "first"), [
    # Hindi's vowel signs are combining marks: each word is one term, and recall's scoped index looks
    # it up whole (SQLite's FTS5 tables do not cut it at the marks: their `ascii` tokenizer).
    ([("user", "मेरी बहन रश्मि मार्च में लिस्बन जा रही है।"), ("assistant", "लिस्बन बहुत सुंदर शहर है।"),
      ("user", "आज मौसम अच्छा है।"), ("assistant", "हाँ, धूप खिली है।")], "रश्मि कहाँ जा रही है?", "मेरी बहन"),
    # Japanese writes no space between words: a run is indexed as pairs of characters, so a question
    # naming a move finds the old message that mentions it inside a sentence.
    ([("user", "妹は三月に大阪へ引っ越す予定です。"), ("assistant", "大阪はいい街ですね。"),
      ("user", "今日は天気がいいです。"), ("assistant", "散歩日和ですね。")], "妹はいつ引っ越すの?", "妹は三月に"),
], ids=["combining-marks", "no-spaces"])
def test_recall_finds_words_of_other_scripts(user, conversation, rows, question, first):
    _append(conversation, rows)
    _recall_index_matches_the_rows(conversation)
    query = build_query(question)
    got = DatabaseRecallSource(conversation=conversation, floor_ratio=0).search(query, limit=10, exclude_ids=())
    expected = _memory(conversation).search(query, limit=10, exclude_ids=frozenset())
    assert [i for i, _ in got] == [i for i, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-12)
    assert [Message.objects.get(pk=int(i)).content[: len(first)] for i, _ in got[:1]] == [first]


@pytest.mark.parametrize("common", [1000, 2], ids=["all-rare", "some-very-common"])
def test_rare_terms_looked_up_together_rank_as_one_at_a_time(user, conversation, common):
    """Batched lookups read the same ranking in fewer statements: pruning between batches instead of
    between terms changes which rows are read, never what is returned (with or without the floor,
    with very common terms looked up among the newest messages)."""
    msgs = _append(conversation)
    _append(conversation, [(r, f"{t} (again, day {k})") for k, (r, t) in enumerate(FACTS[::3])])
    exclude = frozenset({str(msgs[-1].pk)})
    fewer = 0
    for floor in (0, None):
        kwargs = {"conversation": conversation, "max_postings": common, "recent": 6}
        if floor is not None:
            kwargs["floor_ratio"] = floor
        one_at_a_time = DatabaseRecallSource(batch_rows=0, **kwargs)
        together = DatabaseRecallSource(**kwargs)
        for text in QUERIES:
            query = build_query(text)
            with CaptureQueriesContext(connection) as each:
                expected = one_at_a_time.search(query, limit=5, exclude_ids=exclude)
            with CaptureQueriesContext(connection) as batched:
                got = together.search(query, limit=5, exclude_ids=exclude)
            assert got == expected and expected, text
            assert len(batched) <= len(each), text
            fewer += len(batched) < len(each)
    assert fewer


def test_a_very_common_term_is_looked_up_among_the_newest_messages(user, conversation):
    rows = [("user" if k % 2 == 0 else "assistant", f"The bike needed a new chain, day {k}.") for k in range(12)]
    rows[1] = ("assistant", "Your Brompton bike folds in ten seconds.")
    msgs = _append(conversation, rows)
    ids = [str(m.pk) for m in msgs]
    memory = _memory(conversation)
    none = frozenset()
    # "bike" is in all 12 messages: above max_postings, so only the newest `recent` are looked up
    bounded = DatabaseRecallSource(conversation=conversation, floor_ratio=0, max_postings=3, recent=4)
    got = bounded.search(build_query("bike"), limit=120, exclude_ids=none)
    assert {i for i, _ in got} == set(ids[-4:])
    # a rarer term is looked up everywhere; its message is scored with the common term counted too
    got = dict(bounded.search(build_query("Brompton bike"), limit=120, exclude_ids=none))
    expected = dict(memory.search(build_query("Brompton bike"), limit=120, exclude_ids=none))
    assert set(got) == {ids[1], *ids[-4:]}
    assert all(got[i] == pytest.approx(expected[i], rel=1e-12) for i in got)
    # a conversation no longer than `recent` is searched whole: the ranking is MemorySource's
    whole = DatabaseRecallSource(conversation=conversation, floor_ratio=0, max_postings=3, recent=12)
    got = whole.search(build_query("bike chain"), limit=120, exclude_ids=none)
    expected = memory.search(build_query("bike chain"), limit=120, exclude_ids=none)
    assert [i for i, _ in got] == [i for i, _ in expected] and len(got) == 12
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-12)


def test_a_long_query_reads_its_very_common_terms_together_naming_only_them(user, conversation):
    """A pasted document is searched by dozens of terms, the rare ones read first. Its very common
    terms are looked up together, by their names only: naming every term read before, to leave out
    what was found, made PostgreSQL test each posting of a common term, in the whole conversation,
    against all of them (13.6 ms against 4.0 for one lookup in a 10,000-message conversation), once
    per common term. A message found again is skipped, so the ranking is the one a lookup at a time
    gives."""
    rows = [("user" if k % 2 == 0 else "assistant", f"The bike and the chain, day {k}: note{k} item{k}.")
            for k in range(12)]
    rows[1] = ("assistant", "Your Brompton bike folds in ten seconds, chain oiled.")
    msgs = _append(conversation, rows)
    ids = [str(m.pk) for m in msgs]
    text = "Brompton bike chain " + " ".join(f"note{k} item{k}" for k in range(0, 12, 3))
    query = build_query(text)
    source = DatabaseRecallSource(conversation=conversation, floor_ratio=0, max_postings=3, recent=6)
    with CaptureQueriesContext(connection) as captured:
        got = source.search(query, limit=120, exclude_ids=frozenset())
    lookups = [q["sql"] for q in captured if "_bike" in q["sql"] or "_chain" in q["sql"]]
    assert len(lookups) == 1 and "_bike" in lookups[0] and "_chain" in lookups[0]
    assert not [sql for sql in lookups if "_note" in sql or "_item" in sql or "_brompton" in sql]
    one_at_a_time = DatabaseRecallSource(conversation=conversation, floor_ratio=0, max_postings=3, recent=6,
                                         batch_rows=0)
    assert got == one_at_a_time.search(query, limit=120, exclude_ids=frozenset())
    expected = dict(_memory(conversation).search(query, limit=120, exclude_ids=frozenset()))
    # every message a rare term found is scored whole (the common terms counted in), and the very
    # common terms add the newest messages
    assert {ids[1], ids[0], ids[3], ids[6], ids[9], *ids[-6:]} == set(dict(got))
    assert all(score == pytest.approx(expected[i], rel=1e-12) for i, score in got)


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_very_common_terms_read_together_rank_as_memory_with_pruning(user, conversation, limit):
    """With a small limit and recall's floor, pruning stops before the very common terms or after the
    rare ones: the common terms' one lookup returns what the exact ranking does (a conversation no
    longer than `recent` is searched whole, where the result is MemorySource's)."""
    rows = [("user" if k % 2 == 0 else "assistant", f"The bike and the chain, day {k}: note{k % 4} item{k % 3}.")
            for k in range(12)]
    rows[1] = ("assistant", "Your Brompton bike folds in ten seconds, chain oiled.")
    _append(conversation, rows)
    memory = _memory(conversation)
    for text in ("Brompton bike chain note1", "bike chain", "bike chain item2 note3", "chain"):
        query = build_query(text)
        expected = memory.search(query, limit=limit, exclude_ids=frozenset())
        exact = DatabaseRecallSource(conversation=conversation, floor_ratio=0, max_postings=3, recent=12)
        got = exact.search(query, limit=limit, exclude_ids=frozenset())
        assert [i for i, _ in got] == [i for i, _ in expected], text
        assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-12), text
        floored = DatabaseRecallSource(conversation=conversation, max_postings=3, recent=12)
        head = floored.search(query, limit=limit, exclude_ids=frozenset())
        assert head and [i for i, _ in head] == [i for i, _ in expected[: len(head)]], text


def test_a_rarer_term_is_read_whole_before_a_very_common_one(user, conversation):
    """A very common term is looked up among the newest messages only, so it is read after every
    other term: an old message with both must still be found through the rarer one."""
    rows = [("user" if k % 2 == 0 else "assistant", f"Notes on day {k}.") for k in range(12)]
    rows[1] = ("assistant", "Your Brompton bike folds in ten seconds.")
    for k in (8, 9, 10, 11):
        rows[k] = (rows[k][0], f"The bike needed a new chain, day {k}.")
    msgs = _append(conversation, rows)
    ids = [str(m.pk) for m in msgs]
    # "bike" (in 5 messages, over max_postings) weighs more than "brompton" here, so by bound alone
    # it would be read first and, looked up among the newest 4 only, hide the old message
    query = Query(weights={"bike": 1.5, "brompton": 0.2})
    source = DatabaseRecallSource(conversation=conversation, floor_ratio=0, max_postings=3, recent=4)
    got = dict(source.search(query, limit=120, exclude_ids=frozenset()))
    expected = dict(_memory(conversation).search(query, limit=120, exclude_ids=frozenset()))
    assert ids[1] in got and got[ids[1]] == pytest.approx(expected[ids[1]], rel=1e-12)
    assert set(got) == {ids[1], *ids[8:]}


def test_the_newest_messages_of_a_common_term_end_at_through_id(user, conversation):
    msgs = _append(conversation, [("user" if k % 2 == 0 else "assistant", f"The bike, day {k}.") for k in range(12)])
    ids = [str(m.pk) for m in msgs]
    source = DatabaseRecallSource(
        conversation=conversation, through_id=msgs[5].pk, floor_ratio=0, max_postings=3, recent=4
    )
    got = {i for i, _ in source.search(build_query("bike"), limit=120, exclude_ids=frozenset())}
    assert got == set(ids[2:6])  # the newest 4 up to the message answered again


def test_neighbours_and_messages_are_live_ones_with_dates(user, conversation, fake_openai):
    msgs = _append(conversation)
    # a failed reply between two messages is skipped
    stopped = message_append(conversation=conversation, role="assistant", content="half a risotto", status="error")
    later = message_append(conversation=conversation, role="user", content="Anyway, back to the cat.")
    source = DatabaseRecallSource(conversation=conversation)
    links = source.neighbours([str(msgs[-1].pk), str(msgs[0].pk), str(stopped.pk)])
    assert links == {
        str(msgs[-1].pk): (str(msgs[-2].pk), str(later.pk)),
        str(msgs[0].pk): (None, str(msgs[1].pk)),
    }
    got = source.messages([str(msgs[-1].pk), str(stopped.pk)])
    assert set(got) == {str(msgs[-1].pk)}
    last = got[str(msgs[-1].pk)]
    assert last.content == FACTS[-1][1] and last.position == msgs[-1].pk and last.role == "assistant"
    assert last.created_at == Message.objects.get(pk=msgs[-1].pk).created_at  # aware, to the microsecond
    assert last.tokens == msgs[-1].token_count
    # a regenerate or retry bounds the conversation: nothing after `through_id`
    bounded = DatabaseRecallSource(conversation=conversation, through_id=msgs[-1].pk)
    assert bounded.neighbours([str(msgs[-1].pk)]) == {str(msgs[-1].pk): (str(msgs[-2].pk), None)}
    assert bounded.messages([str(later.pk)]) == {}


def test_another_users_messages_never_come_back(user, other_user, conversation):
    mine = _append(conversation)
    theirs_conversation = Conversation.objects.create(owner=other_user)
    doubled = [(r, t.replace("Pumpernickel", "Pumpernickel Pumpernickel")) for r, t in FACTS]
    theirs = _append(theirs_conversation, doubled)
    their_ids = {str(m.pk) for m in theirs}
    source = DatabaseRecallSource(conversation=conversation, floor_ratio=0)
    for text in QUERIES:
        hits = source.search(build_query(text), limit=120, exclude_ids=frozenset())
        assert hits and not their_ids & {i for i, _ in hits}
    assert not source.neighbours(sorted(their_ids)) and not source.messages(sorted(their_ids))
    assert set(source.messages([str(m.pk) for m in mine])) == {str(m.pk) for m in mine}


# --- conversation search --------------------------------------------------------------------------


def test_sidebar_search_finds_message_text_through_the_index(user, other_user, conversation):
    _append(conversation)
    conversation.title = "Weekend plans"
    conversation.save(update_fields=["title"])
    other = Conversation.objects.create(owner=user, title="Cooking")
    _append(other, [("user", "How long should I knead bread dough?")])
    foreign = Conversation.objects.create(owner=other_user, title="Pumpernickel bakery")
    _append(foreign, [("user", "Pumpernickel bread and Lisbon aquariums")])

    def found(query: str) -> list[int]:
        return list(conversation_list(owner=user, query=query).values_list("pk", flat=True))

    assert found("pumpernickel") == [conversation.pk]
    assert found("adopting cats") == [conversation.pk]  # stemmed: adopted/adopting, cat/cats
    assert found("aquar") == [conversation.pk]  # the last word as a prefix: search as you type
    assert found("kneading") == [other.pk]
    assert found("weekend") == [conversation.pk]  # titles still match as substrings
    assert found("lisbon bread") == []  # every word must be in one message
    assert found("the") == []  # stop words alone look nothing up
    assert found("bakery") == []  # another user's conversation never shows


def test_api_list_search_uses_the_index(user, conversation, client):
    _append(conversation)
    client.force_login(user)
    response = client.get("/api/conversations/", {"q": "Rosalind"})
    assert response.status_code == 200
    body = response.json()
    items = body["results"] if isinstance(body, dict) else body
    assert [item["id"] for item in items] == [conversation.pk]


# --- the request path -----------------------------------------------------------------------------


def test_a_chat_turn_in_a_long_conversation_sends_a_recall_block(user, fake_openai):
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=4_000, max_output=500)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    # the first user message is always sent (static layer), so the fact comes after it
    _append(conversation, [("user", "Hello! A few things happened this week."), ("assistant", "Tell me.")])
    facts = _append(conversation, FACTS[:2])
    seed_messages(conversation, 400, model="gpt-4o-mini")
    conversation_index_rebuild(conversation=conversation)  # the seed bulk-creates past the services
    fake_openai.reset()

    result = send(user, conversation, "What name did we give the grey cat from the shelter?")
    assert result.names[-1] == "done"
    sent = fake_openai.completions[-1].messages
    # the block opens the newest message (one leading system message, roles alternating: optimizer.shape)
    assert [m for m in sent if HEADER in m["content"]] == [sent[-1]]
    block, question = sent[-1]["content"].rsplit("\n\n", 1)
    assert block.startswith(HEADER) and "Pumpernickel" in block
    assert question == "What name did we give the grey cat from the shelter?"
    record = OptimizationRecord.objects.get(reply_id=result.named("start")[0]["assistant_message"]["id"])
    recalled = {str(i) for i in record.stats["recall_ids"]}
    assert {str(facts[0].pk), str(facts[1].pk)} <= recalled


def test_a_running_conversation_holds_the_block_to_its_share_of_the_budget(user, fake_openai):
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=4_000, max_output=500)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    _append(conversation, [("user", "Hello! A few things happened this week."), ("assistant", "Tell me.")])
    for _ in range(16):  # the fact, told again and again, so the block could take far more than its share
        _append(conversation, FACTS[:2])
        seed_messages(conversation, 24, model="gpt-4o-mini")
    conversation_index_rebuild(conversation=conversation)
    question = "What name did we give the grey cat from the shelter?"

    first = send(user, conversation, question)  # no stored window yet: recall may fill the budget
    second = send(user, conversation, question)  # the window is stored now: the prefix is cached

    records = [
        OptimizationRecord.objects.get(reply_id=r.named("start")[0]["assistant_message"]["id"]) for r in (first, second)
    ]
    cap = recall_cap(user_settings_get(user=user).preference, budget=3_500, stateful=True)
    assert records[0].stats["recall_tokens"] > cap
    assert 0 < records[1].stats["recall_tokens"] <= cap


def test_a_short_conversation_sends_no_recall_block(user, conversation, fake_openai):
    _append(conversation, FACTS[:4])
    fake_openai.reset()
    send(user, conversation, "What did we name the cat?")
    assert not [m for m in fake_openai.completions[-1].messages if m["content"].startswith(HEADER)]


# --- every service path indexes explicitly (no signal) --------------------------------------------


def test_the_index_has_no_signal_receiver():
    from django.db.models.signals import post_save

    assert not post_save.has_listeners(Message)


def test_each_write_path_keeps_the_index(user, conversation, fake_openai):
    # message_append: a chat message is indexed and recallable at once, a stopped reply too (it is sent
    # as far as it went); a failed one is indexed, not recalled
    user_msg = message_append(conversation=conversation, role="user", content="Pumpernickel sleeps on the sofa.")
    assert MessageSearch.objects.get(message=user_msg).recallable
    stopped = message_append(conversation=conversation, role="assistant", content="half a reply", status="stopped")
    assert MessageSearch.objects.get(message=stopped).recallable
    failed = message_append(conversation=conversation, role="assistant", content="a broken reply", status="error")
    assert not MessageSearch.objects.get(message=failed).recallable
    # a summary is never indexed
    summary = message_append(conversation=conversation, role="system", kind="summary", content="The cat sleeps.")
    assert not MessageSearch.objects.filter(message=summary).exists()

    # a turn: the streaming reply is not indexed until reply_store stores its text
    result = send(user, conversation, "Where does the cat sleep?")
    reply = Message.objects.get(pk=result.named("start")[0]["assistant_message"]["id"])
    assert MessageSearch.objects.get(message=reply).terms == index_text(reply.content)
    assert MessageSearch.objects.get(message=reply).recallable

    # Stop: a streaming reply's status leaves streaming and the index follows: recalled as far as it went
    streaming = message_append(conversation=conversation, role="assistant", content="partial", status="streaming")
    assert not MessageSearch.objects.get(message=streaming).recallable
    message_stop(message=streaming)
    assert Message.objects.get(pk=streaming.pk).status == "stopped"
    assert MessageSearch.objects.get(message=streaming).recallable

    # Retry: the stopped reply is superseded, the new reply indexed when it finishes
    question = message_append(conversation=conversation, role="user", content="Tell me about Lisbon")
    failed = message_append(conversation=conversation, role="assistant", content="Lisbon is", status="stopped",
                            reply_to=question)
    chat_retry_start(user=user, message=question)
    assert not MessageSearch.objects.get(message=failed).recallable
    assert _stats(conversation) == _expected_stats(conversation)


def test_the_seed_command_indexes_its_conversation(user):
    conversation = conversation_seed_long(owner=user, messages=120)
    assert _stats(conversation) == _expected_stats(conversation)
    assert MessageSearch.objects.filter(conversation=conversation, recallable=True).exists()
    assert not MessageSearch.objects.filter(conversation=conversation, message__kind="summary").exists()


def test_recalls_scoped_index_follows_every_write(user, conversation, fake_openai):
    msgs = _append(conversation)
    other = Conversation.objects.create(owner=user)
    kept = _append(other, FACTS[:2])
    _recall_index_matches_the_rows(conversation)
    assert _recall_match(conversation, "pumpernickel") == [msgs[0].pk, msgs[1].pk]
    assert _recall_match(other, "pumpernickel") == [m.pk for m in kept]  # each conversation its own postings

    Message.objects.filter(pk=msgs[0].pk).update(content="We adopted a tortoise named Archibald.")
    message_index_sync(message_ids=[msgs[0].pk])  # an edit: the old terms leave, the new ones come
    assert _recall_match(conversation, "archibald") == [msgs[0].pk]
    assert _recall_match(conversation, "pumpernickel") == [msgs[1].pk]

    result = send(user, conversation, "Tell me about the aquarium in Lisbon")
    reply = Message.objects.get(pk=result.named("start")[0]["assistant_message"]["id"])
    chat_regenerate_start(user=user, reply=reply)  # superseded: searchable, no longer recalled
    assert not MessageSearch.objects.get(message=reply).recallable
    _recall_index_matches_the_rows(conversation)

    conversation_delete(conversation=conversation)
    assert _recall_match(conversation, "lisbon") == []
    assert _recall_match(other, "pumpernickel") == [m.pk for m in kept]


def test_a_long_message_is_searched_by_its_strongest_terms_as_memory_source_does(user, conversation):
    """A pasted document is searched by MAX_QUERY_TERMS of its terms in both sources alike."""
    msgs = _append(conversation)
    pasted = " ".join(f"zeta{k}" for k in range(MAX_QUERY_TERMS + 30))
    about = "Pumpernickel the grey cat and Rosalind in Lisbon, with the server migration"
    newest = message_append(conversation=conversation, role="user", content=f"{pasted} {about}")
    query = build_query(newest.content)
    assert len(query.weights) > MAX_QUERY_TERMS
    exclude = frozenset({str(newest.pk)})
    expected = _memory(conversation).search(query, limit=20, exclude_ids=exclude)
    got = DatabaseRecallSource(conversation=conversation, floor_ratio=0).search(query, limit=20, exclude_ids=exclude)
    assert expected and [i for i, _ in got] == [i for i, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-12)
    assert str(msgs[0].pk) in {i for i, _ in got}  # the cat's message, found by its name
