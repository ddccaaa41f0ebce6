"""Every dashboard JSON answer matches, key for key and type for type, the serializer that documents it
in the OpenAPI schema (chatapp/dashboard/serializers.py): the schema cannot drift from what is sent."""

from __future__ import annotations

import pytest
from rest_framework import serializers

from chatapp.chat.models import OptimizationRecord
from chatapp.dashboard import series as series_module
from chatapp.dashboard.serializers import (
    ConversationSavingsSerializer,
    HeadlineSerializer,
    MessageMapSerializer,
    OverviewSerializer,
    RecordContextSerializer,
    SeriesSerializer,
)
from tests.dashboard.factories import make_long_conversation, make_recall_turns

pytestmark = pytest.mark.django_db

_LEAVES = {
    serializers.BooleanField: (bool,),
    serializers.IntegerField: (int,),
    serializers.FloatField: (int, float),
    serializers.CharField: (str,),
    serializers.DateTimeField: (str,),
}


def mismatches(data, field, where: str = "") -> list[str]:
    """Where `data` departs from `field` (a serializer, a list/dict field or a leaf), as readable paths."""
    if data is None:
        return [] if getattr(field, "allow_null", False) else [f"{where}: null, not declared nullable"]
    if isinstance(field, serializers.ListSerializer | serializers.ListField):
        if not isinstance(data, list):
            return [f"{where}: {type(data).__name__}, expected a list"]
        return [p for i, item in enumerate(data) for p in mismatches(item, field.child, f"{where}[{i}]")]
    if isinstance(field, serializers.Serializer):
        if not isinstance(data, dict):
            return [f"{where}: {type(data).__name__}, expected an object"]
        declared = field.fields
        problems = [f"{where}.{k}: sent, not declared" for k in data.keys() - declared.keys()]
        problems += [f"{where}.{k}: declared, not sent" for k in declared.keys() - data.keys()]
        for k in declared.keys() & data.keys():
            problems += mismatches(data[k], declared[k], f"{where}.{k}")
        return problems
    if isinstance(field, serializers.DictField):
        if not isinstance(data, dict):
            return [f"{where}: {type(data).__name__}, expected an object"]
        return [p for k, v in data.items() for p in mismatches(v, field.child, f"{where}[{k}]")]
    kinds = next(t for cls, t in _LEAVES.items() if isinstance(field, cls))
    if (isinstance(data, bool) and bool not in kinds) or not isinstance(data, kinds):
        return [f"{where}: {data!r} is not {'/'.join(t.__name__ for t in kinds)}"]
    return []


def test_the_checker_catches_a_drift():
    assert mismatches({"count": 1}, MessageMapSerializer())  # keys missing
    assert mismatches({"id": "7", "title": "x"}, HeadlineSerializer().fields["conversation"])  # a string id
    assert not mismatches({"id": 7, "title": "x"}, HeadlineSerializer().fields["conversation"])


def _conversations(small, user):
    return [small.conversation, make_recall_turns(owner=user).conversation]


def test_conversation_answers_match_their_serializers(owner_client, small, user):
    for conversation in _conversations(small, user):
        base = f"/api/dashboard/conversations/{conversation.pk}/"
        for suffix, serializer in [("", HeadlineSerializer()), ("series/", SeriesSerializer()),
                                   ("map/", MessageMapSerializer())]:
            response = owner_client.get(base + suffix)
            assert response.status_code == 200
            assert mismatches(response.json(), serializer, suffix or "headline") == []
        for record in OptimizationRecord.objects.filter(conversation=conversation):
            response = owner_client.get(f"{base}records/{record.pk}/")
            assert response.status_code == 200
            assert mismatches(response.json(), RecordContextSerializer(), f"record {record.pk}") == []


def test_bucketed_series_and_ranges_match_the_serializer(owner_client, user, monkeypatch):
    # Small limits: per-turn, record-bucketed and block-bucketed answers from one small conversation.
    monkeypatch.setattr(series_module, "MAX_POINTS", 10)
    monkeypatch.setattr(series_module, "RECORD_TURNS", 40)
    conversation = make_long_conversation(owner=user, turns=120)
    base = f"/api/dashboard/conversations/{conversation.pk}/series/"
    for query, size in [("", 16), ("?first=20&last=25", 1), ("?first=20&last=50", 4), ("?first=&last=", 16),
                        ("?first=500", 1)]:
        data = owner_client.get(base + query).json()
        assert mismatches(data, SeriesSerializer(), f"series{query}") == []
        assert data["bucket_size"] == size and 0 < data["points"] <= 10, query
        assert data["totals"]["turns"] == data["count"] == 120


def test_overview_answers_match_their_serializers(owner_client, small, user):
    _conversations(small, user)
    overview = owner_client.get("/api/dashboard/overview/").json()
    assert overview["top"], "the check must see rows"
    assert mismatches(overview, OverviewSerializer(), "overview") == []
    page = owner_client.get("/api/dashboard/conversations/").json()
    assert page["results"]
    assert mismatches(page["results"], ConversationSavingsSerializer(many=True), "savings") == []


def test_the_schema_has_no_untyped_object():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    untyped = []

    def walk(node, where):
        if isinstance(node, dict):
            if node.get("type") == "object" and not node.get("properties") and node.get("additionalProperties") == {}:
                untyped.append(where)
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}[{i}]")

    walk(schema, "")
    assert untyped == []
