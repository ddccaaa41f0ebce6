"""Reads: owner scoping (404 for others' objects), search, timeline pages."""

from __future__ import annotations

import pytest
from django.http import Http404

from chatapp.chat import search_selectors, selectors, services
from chatapp.chat.models import Message, UserSettings
from chatapp.chat.search_services import conversation_index_rebuild
from chatapp.providers import selectors as config_selectors
from chatapp.providers import services as config_services

pytestmark = pytest.mark.django_db


def _conversation(owner, title, *contents):
    conversation = services.conversation_create(owner=owner, title=title)
    Message.objects.bulk_create(
        [Message(conversation=conversation, role="user", content=c) for c in contents]
    )
    conversation_index_rebuild(conversation=conversation)  # bulk_create bypasses message_append
    return conversation


def test_other_users_objects_answer_404(user, other_user):
    theirs = _conversation(other_user, "Secret plans", "hidden")
    config = config_services.llm_config_create(
        owner=other_user, name="Theirs", base_url="https://api.openai.com/v1", model="gpt-4o-mini"
    )
    message = Message.objects.get(conversation=theirs)

    with pytest.raises(Http404):
        selectors.conversation_get(owner=user, pk=theirs.pk)
    with pytest.raises(Http404):
        config_selectors.llm_config_get(owner=user, pk=config.pk)
    with pytest.raises(Http404):
        selectors.message_get(owner=user, pk=message.pk)
    assert config_selectors.llm_config_get_or_none(owner=user, pk=config.pk) is None
    assert selectors.conversation_get(owner=other_user, pk=theirs.pk) == theirs
    assert list(selectors.conversation_list(owner=user)) == []
    assert list(config_selectors.llm_config_list(owner=user)) == []


def test_search_by_title_and_content_without_duplicates(user, other_user):
    by_title = _conversation(user, "Kubernetes notes", "nothing here")
    by_content = _conversation(user, "Misc", "how do I scale kubernetes?", "more KUBERNETES", "and again kubernetes")
    _conversation(user, "Cooking", "pasta")
    _conversation(other_user, "Kubernetes too", "kubernetes")

    found = list(selectors.conversation_list(owner=user, query="  kubernetes "))
    assert sorted(c.pk for c in found) == sorted([by_title.pk, by_content.pk])
    assert len(list(selectors.conversation_list(owner=user, query=""))) == 3


@pytest.mark.parametrize(("title", "query"), [
    ("CAFÉ ÜBER ALLES", "café über"),
    ("Отчёт за МАРТ", "отчёт за март"),  # noqa: RUF001 - Cyrillic on purpose
    ("Ελληνικά ΘΈΜΑΤΑ", "θέματα"),
    ("100% done_ok", "% DONE_"),
])
def test_title_search_ignores_case_beyond_ascii(user, title, query):
    """SQLite's LIKE folds ASCII only; titles in other scripts are found whatever their case too, and
    LIKE's wildcards in the query still match only themselves."""
    found = _conversation(user, title)
    _conversation(user, "Unrelated")
    assert [c.pk for c in selectors.conversation_list(owner=user, query=query)] == [found.pk]
    assert [hit.conversation_id for hit in search_selectors.title_hits(owner=user, query=query)] == [found.pk]
    assert not list(selectors.conversation_list(owner=user, query=query + "x"))


@pytest.mark.parametrize(("title", "query", "marked"), [
    ("Lunch at the Café Müller", "cafe muller", "<mark>Café Müller</mark>"),
    ("Umzug in die Königstraße", "KONIGSTRASSE", "<mark>Königstraße</mark>"),
    ("Notes on Strasse names", "straße", "<mark>Strasse</mark>"),
    ("Re\u0301sume\u0301 draft", "resume", "<mark>Re\u0301sume\u0301</mark>"),  # decomposed accents
    ("हिन्दी पाठ", "हिन्दी", "<mark>हिन्दी</mark>"),
    ("Weekend in Tromsø", "tromso", "<mark>Tromsø</mark>"),
])
def test_title_search_folds_accents_as_message_search_does(user, title, query, marked):
    found = _conversation(user, title)
    _conversation(user, "Unrelated café")
    assert [c.pk for c in selectors.conversation_list(owner=user, query=query)] == [found.pk]
    (hit,) = search_selectors.title_hits(owner=user, query=query)
    assert hit.conversation_id == found.pk and marked in str(hit.snippet_html)
    assert not list(selectors.conversation_list(owner=user, query=query + "x"))


def test_a_query_typed_with_two_spaces_finds_the_title_as_search_does(user):
    found = _conversation(user, "Lunch at the Café Müller")
    assert [c.pk for c in selectors.conversation_list(owner=user, query="cafe  muller")] == [found.pk]
    hits = search_selectors.message_search(owner=user, query="cafe  muller").hits
    assert [h.conversation_id for h in hits if h.kind == "title"] == [found.pk]


def test_a_query_that_folds_to_nothing_finds_no_title(user):
    """Combining marks alone fold to nothing (accents off); an empty text is in every title, so every
    chat was listed, and the newest five came back as title hits with nothing marked."""
    _conversation(user, "Groceries")
    _conversation(user, "Café plans")
    query = "\u0301\u0301"
    assert list(selectors.conversation_list(owner=user, query=query)) == []
    assert search_selectors.title_hits(owner=user, query=query) == []
    assert search_selectors.message_search(owner=user, query=query).hits == []


def test_list_is_newest_first(user):
    old = _conversation(user, "Old")
    new = _conversation(user, "New")
    assert [c.pk for c in selectors.conversation_list(owner=user)] == [new.pk, old.pk]


def test_message_pages_by_before_id(user):
    conversation = _conversation(user, "Long", *[f"m{i}" for i in range(10)])
    ids = list(Message.objects.filter(conversation=conversation).order_by("id").values_list("id", flat=True))

    newest = selectors.message_list(conversation=conversation, limit=4)
    assert [m.pk for m in newest] == ids[-4:]
    older = selectors.message_list(conversation=conversation, before_id=newest[0].pk, limit=4)
    assert [m.pk for m in older] == ids[2:6]
    oldest = selectors.message_list(conversation=conversation, before_id=older[0].pk, limit=4)
    assert [m.pk for m in oldest] == ids[:2]


def test_user_settings_get_creates_once(user):
    first = selectors.user_settings_get(user=user)
    assert first.preference == "balanced" and first.auto_optimize is True
    assert selectors.user_settings_get(user=user).pk == first.pk
    assert UserSettings.objects.filter(user=user).count() == 1
