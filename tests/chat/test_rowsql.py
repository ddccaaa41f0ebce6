"""rowsql writes and reads one row as the ORM would: the same stored values (dates, decimals, JSON,
booleans), NULL-safe maxima and minima on both databases, and the rows it changed."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import Q
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chatapp.chat.models import Conversation, Message, OptimizationRecord
from chatapp.chat.rowsql import (
    CompiledQuery,
    row_create,
    row_insert_statement,
    row_instance,
    row_read,
    row_update,
    row_update_statement,
    statements_run,
)
from chatapp.chat.token_models import ApiToken
from chatapp.chat.token_services import api_token_create
from chatapp.dashboard.models import DashboardTotals, DashboardTurnBlock
from tests.support.chat import make_config

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation() -> Conversation:
    owner = User.objects.create_user(username="rowsql", password="x")
    return Conversation.objects.create(owner=owner, title="rows")


def _message(conversation: Conversation, **fields) -> Message:
    return Message.objects.create(conversation=conversation, role="assistant", content="", **fields)


def test_assign_stores_what_the_orm_stores(conversation):
    when = timezone.now() - timedelta(days=3, microseconds=17)
    ours, theirs = _message(conversation), _message(conversation)
    values = {"content": "écrit — 📎", "token_count": 7, "status": Message.Status.COMPLETE, "updated_at": when,
              "prompt_tokens": None, "error": ""}

    assert row_update(Message, where={"id": ours.pk}, assign=values) == 1
    Message.objects.filter(pk=theirs.pk).update(**values)

    fields = ("content", "token_count", "status", "updated_at", "prompt_tokens", "error", "superseded")
    mine = Message.objects.filter(pk=ours.pk).values(*fields).get()
    orm = Message.objects.filter(pk=theirs.pk).values(*fields).get()
    assert mine == orm
    assert mine["updated_at"] == when


def test_where_conditions_and_ranges_decide_the_rows(conversation):
    first, second, third = (_message(conversation, token_count=n) for n in (1, 2, 3))

    # A condition that does not hold changes nothing (the reply was no longer streaming).
    assert row_update(Message, where={"id": first.pk, "status": Message.Status.STREAMING},
                      assign={"content": "late"}) == 0
    assert row_update(Message, where={"conversation_id": conversation.pk, "id__gte": second.pk,
                                      "id__lte": third.pk}, add={"token_count": 10}) == 2

    assert list(Message.objects.filter(conversation=conversation).order_by("id").values_list(
        "token_count", "content")) == [(1, ""), (12, ""), (13, "")]


def test_increments_add_decimals_and_floats(conversation):
    DashboardTotals.objects.create(conversation=conversation, cost_full_usd=Decimal("1.250000"), cache_sent_usd=0.5)
    for _ in range(2):
        row_update(DashboardTotals, where={"conversation_id": conversation.pk},
                   add={"turns": 1, "cost_full_usd": Decimal("0.000125"), "cache_sent_usd": 0.25},
                   assign={"last_model": "gpt-4o-mini", "summary_ids": [3, 9]})

    totals = DashboardTotals.objects.get(conversation=conversation)
    assert (totals.turns, totals.cost_full_usd, totals.cache_sent_usd) == (2, Decimal("1.250250"), 1.0)
    assert (totals.last_model, totals.summary_ids) == ("gpt-4o-mini", [3, 9])


def test_maxima_and_minima_treat_a_null_column_as_empty(conversation):
    block = DashboardTurnBlock.objects.create(conversation=conversation, number=0, first_record_id=1, last_record_id=1,
                                              tokens_sent_min=500, tokens_full_max=800, provider_max=None)
    where = {"conversation_id": conversation.pk, "number": 0}

    row_update(DashboardTurnBlock, where=where, high={"provider_max": 300, "tokens_full_max": 700},
               low={"tokens_sent_min": 600})
    block.refresh_from_db()
    assert (block.provider_max, block.tokens_full_max, block.tokens_sent_min) == (300, 800, 500)

    row_update(DashboardTurnBlock, where=where, high={"provider_max": 200, "tokens_full_max": 900},
               low={"tokens_sent_min": 450})
    block.refresh_from_db()
    assert (block.provider_max, block.tokens_full_max, block.tokens_sent_min) == (300, 900, 450)


def test_read_converts_like_the_orm(conversation):
    DashboardTotals.objects.create(conversation=conversation, summary_ids=[4, 8], last_model="m", last_record_id=None)
    record = OptimizationRecord.objects.create(
        conversation=conversation, preference="balanced", model="m", context_window=100, budget=80, triggered=True,
        strategy="none", tokens_full=10, tokens_sent=10, cost_sent_usd=Decimal("0.000100"), stats={"a": [1, "b"]},
    )

    with transaction.atomic():
        totals = row_read(DashboardTotals, where={"conversation_id": conversation.pk}, lock=True,
                          fields=("summary_ids", "last_model", "last_record_id", "turns"))
    assert totals == {"summary_ids": [4, 8], "last_model": "m", "last_record_id": None, "turns": 0}
    fields = ("triggered", "cost_sent_usd", "stats", "created_at")
    assert row_read(OptimizationRecord, where={"id": record.pk}, fields=fields) == (
        OptimizationRecord.objects.filter(pk=record.pk).values(*fields).get()
    )
    assert row_read(OptimizationRecord, where={"id": record.pk + 1000}, fields=fields) is None


def test_an_update_needs_something_to_set(conversation):
    with pytest.raises(ValueError, match="something to set"):
        row_update(Message, where={"conversation_id": conversation.pk})


def test_an_instance_loads_like_the_orm_and_saves_in_place(conversation):
    from chatapp.chat.models import UserSettings

    made = UserSettings.objects.create(user=conversation.owner, preference="quality", confirm_compaction=True)
    loaded = row_instance(UserSettings, where={"user_id": conversation.owner_id})

    orm = UserSettings.objects.get(pk=made.pk)
    fields = [f.attname for f in UserSettings._meta.concrete_fields]
    assert [getattr(loaded, f) for f in fields] == [getattr(orm, f) for f in fields]
    loaded.preference = "fast"
    loaded.save(update_fields=["preference"])  # an UPDATE of the row read, not a second row
    assert list(UserSettings.objects.values_list("pk", "preference")) == [(made.pk, "fast")]
    assert row_instance(UserSettings, where={"user_id": conversation.owner_id + 1000}) is None


def test_an_insert_stores_exactly_the_values_given(conversation):
    from chatapp.chat.models import MessageSearch

    message = _message(conversation)
    statements_run([row_insert_statement(MessageSearch, values={
        "message_id": message.pk, "conversation_id": conversation.pk, "scope": "_c1 _u2", "terms": "index",
        "length": 1, "recallable": True})])

    assert MessageSearch.objects.filter(pk=message.pk).values("scope", "terms", "length", "recallable").get() == {
        "scope": "_c1 _u2", "terms": "index", "length": 1, "recallable": True}


def _stored(model, pk: int) -> dict:
    row = model.objects.filter(pk=pk).values().get()
    return {k: v for k, v in row.items() if k not in ("id", "created_at", "updated_at")}


def test_a_created_message_is_the_row_and_instance_the_orm_creates(conversation):
    fields = {"conversation": conversation, "role": Message.Role.USER, "content": "écrit — 📎", "token_count": 7,
              "char_count": 9, "parent_id": None, "client_key": "k-1"}
    orm = Message.objects.create(**{**fields, "client_key": "k-0"})
    ours = row_create(Message, **fields)

    assert ours.pk is not None and ours.pk != orm.pk
    assert not ours._state.adding and ours._state.db == orm._state.db
    assert {**_stored(Message, ours.pk), "client_key": "k-0"} == _stored(Message, orm.pk)
    # auto_now_add / auto_now filled in on the instance, as a save does, and stored as it holds them.
    stored = Message.objects.filter(pk=ours.pk).values("created_at", "updated_at").get()
    assert stored == {"created_at": ours.created_at, "updated_at": ours.updated_at}
    assert ours.created_at is not None and ours.status == Message.Status.COMPLETE  # the model's default
    # The instance saves in place afterwards (the turn updates the reply it created).
    ours.content = "changed"
    ours.save(update_fields=["content"])
    assert Message.objects.filter(conversation=conversation).count() == 2


def test_a_created_record_stores_json_and_decimals_as_the_orm_does(conversation):
    reply = _message(conversation)
    other = _message(conversation)
    fields = {"conversation": conversation, "preference": "balanced", "model": "gpt-4o-mini", "context_window": 8192,
              "budget": 7000, "triggered": True, "strategy": "truncate", "reason": "why",
              "scores": {"truncate": 0.5, "nested": [1, "two", None]}, "tokens_full": 9000, "tokens_sent": 6000,
              "sent": [{"id": "3", "origin": "history", "tokens": 12}], "dropped_ranges": [[1, 4]],
              "cost_sent_usd": Decimal("0.000123456"), "cost_full_usd": Decimal("0.5"), "stats": {"a": 1.25}}
    orm = OptimizationRecord.objects.create(reply=reply, **fields)
    ours = row_create(OptimizationRecord, reply=other, **fields)

    assert {**_stored(OptimizationRecord, ours.pk), "reply_id": reply.pk} == _stored(OptimizationRecord, orm.pk)
    assert OptimizationRecord.objects.get(pk=ours.pk).scores == fields["scores"]


@pytest.mark.parametrize("model", [Message, OptimizationRecord])
def test_created_models_have_no_save_override_or_save_receivers(model):
    # row_create skips Model.save() and the save signals: right only while these models have neither.
    from django.db.models import Model
    from django.db.models.signals import post_save, pre_save

    assert model.save is Model.save and model.save_base is Model.save_base
    assert not pre_save.has_listeners(model) and not post_save.has_listeners(model)


def test_writes_run_together_land_together_in_one_round_trip_on_postgresql(conversation):
    from chatapp.chat.models import MessageSearch

    first, second = _message(conversation), _message(conversation)
    statements = [
        row_insert_statement(MessageSearch, values={
            "message_id": m.pk, "conversation_id": conversation.pk, "scope": "_c1", "terms": f"term{i}",
            "length": i, "recallable": bool(i)})
        for i, m in enumerate([first, second])
    ]
    statements.append(("UPDATE chat_message SET content = %s WHERE id = %s", ["changed", first.pk]))
    with CaptureQueriesContext(connection) as queries:
        statements_run(statements)

    assert len(queries) == (1 if connection.vendor == "postgresql" else 3)
    assert sorted(MessageSearch.objects.values_list("message_id", "terms", "length", "recallable")) == [
        (first.pk, "term0", 0, False), (second.pk, "term1", 1, True)]
    assert Message.objects.get(pk=first.pk).content == "changed"


@pytest.mark.parametrize("last_matches", [True, False])
def test_writes_run_together_answer_the_last_ones_row_count(conversation, last_matches):
    # A caller closes the list with the write whose count decides its next step (a turn block updated,
    # or to be created): the count is that write's, not the first's nor a sum.
    first, second, third = _message(conversation), _message(conversation), _message(conversation)
    earlier = row_update_statement(Message, where={"id__lte": first.pk, "conversation_id": conversation.pk},
                                   assign={"error": "earlier"})
    last = row_update_statement(Message, where={"id": second.pk if last_matches else third.pk + 1000},
                                add={"token_count": 5})
    with CaptureQueriesContext(connection) as queries:
        changed = statements_run([earlier, last])

    assert changed == (1 if last_matches else 0)
    assert len(queries) == (1 if connection.vendor == "postgresql" else 2)
    assert Message.objects.get(pk=first.pk).error == "earlier"  # the earlier write landed either way
    assert Message.objects.get(pk=second.pk).token_count == (5 if last_matches else 0)
    assert row_update_statement(Message, where={"id": first.pk}, assign={"error": "x"})[1] == ["x", first.pk]


def _pinned_or_after(shape, *, conversation_id: int, since: int):
    rows = Message.objects.filter(conversation_id=conversation_id).filter(Q(pinned=True) | Q(id__gte=since))
    if shape:  # user messages only
        rows = rows.filter(role="user")
    return rows.order_by("id").values_list("id", "pinned")


def test_a_compiled_query_returns_what_the_orm_returns_for_other_values(conversation):
    other = Conversation.objects.create(owner=conversation.owner, title="other")
    made = [Message.objects.create(conversation=c, role=("user", "assistant")[k % 2], content=str(k),
                                   pinned=k in (1, 4)) for k in range(8) for c in (conversation, other)]
    query = CompiledQuery(_pinned_or_after)
    for shape in (False, True):
        for c in (conversation, other):
            for since in (made[0].pk, made[9].pk, made[-1].pk + 1):
                expected = [(pk, bool(p)) for pk, p in _pinned_or_after(shape, conversation_id=c.pk, since=since)]
                got = query.rows(shape, conversation_id=c.pk, since=since)
                assert [(pk, bool(p)) for pk, p in got] == expected


def test_a_compiled_query_refuses_a_value_that_chooses_the_shape(conversation):
    def shaped_by_value(shape, *, conversation_id: int, limit: int):
        return Message.objects.filter(conversation_id=conversation_id).values_list("id")[:3]

    with pytest.raises(ValueError, match="limit"):
        CompiledQuery(shaped_by_value).rows(None, conversation_id=conversation.pk, limit=3)


def _conversation_with_config(shape, *, pk: int, owner_id: int):
    rows = Conversation.objects.filter(pk=pk, owner_id=owner_id)
    return rows.select_related("llm_config", "owner") if shape else rows


def _loaded(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


def test_compiled_instances_load_as_the_orm_loads_them(conversation):
    owner = conversation.owner
    config = make_config(owner, "http://127.0.0.1:9/v1")
    conversation.llm_config = config
    conversation.save(update_fields=["llm_config"])
    bare = Conversation.objects.create(owner=owner, title="no config")  # the LEFT JOIN's empty side
    query = CompiledQuery(_conversation_with_config)
    for c in (conversation, bare):
        expected = Conversation.objects.select_related("llm_config", "owner").get(pk=c.pk)
        with CaptureQueriesContext(connection) as queries:
            (got,) = query.instances(True, pk=c.pk, owner_id=owner.pk)
            # the joined objects come with it, converted (aware datetimes, booleans, decimals) as the ORM does
            assert _loaded(got) == _loaded(expected)
            assert got.owner is not None and _loaded(got.owner) == _loaded(expected.owner)
            config_loaded = got.llm_config and _loaded(got.llm_config)
            assert config_loaded == (expected.llm_config and _loaded(expected.llm_config))
        assert len(queries) == 1
        assert got.created_at.tzinfo is not None and got._state.adding is False
    assert query.instances(True, pk=conversation.pk, owner_id=owner.pk + 1000) == []
    # saved in place: a loaded instance is an existing row
    (plain,) = query.instances(False, pk=bare.pk, owner_id=owner.pk)
    plain.title = "renamed"
    plain.save(update_fields=["title"])
    assert Conversation.objects.get(pk=bare.pk).title == "renamed"


def test_compiled_instances_take_text_values(conversation):
    token = api_token_create(user=conversation.owner, name="test", made_in="settings").token

    def by_digest(shape, *, digest: str):
        return ApiToken.objects.select_related("user").filter(digest=digest)

    query = CompiledQuery(by_digest)
    (got,) = query.instances(None, digest=token.digest)
    assert got.pk == token.pk and got.user.username == conversation.owner.username
    assert query.instances(None, digest="0" * 64) == []
