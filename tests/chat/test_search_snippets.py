"""search_snippets.folded_spans: where a title search's query stands in the title as written."""

from __future__ import annotations

import random
import re
import unicodedata
from itertools import pairwise

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from chatapp.chat.search_snippets import (
    SNIPPET_COLUMNS,
    SNIPPET_COLUMNS_BEFORE,
    STRETCH_CHARS,
    WordMatcher,
    folded_spans,
    marked_spans,
    snippet_parts,
)
from optimizer.lexical import fold


def test_spans_cover_the_letters_as_written():
    assert folded_spans("Umzug in die Königstraße", "konigstrasse") == [(13, 24)]
    assert folded_spans("Café, café, CAFE", "cafe") == [(0, 4), (6, 10), (12, 16)]
    # A combining mark after the last letter found stays with it.
    assert folded_spans("Cafe\u0301 noir", "cafe") == [(0, 5)]
    assert folded_spans("Straße", "strasse") == [(0, 6)]
    assert folded_spans("Straße", "") == [] and folded_spans("Straße", "x") == []


def test_a_match_never_starts_inside_the_letter_the_previous_one_ended_in():
    # "sßs" folds to "ssss": the second "ss" starts in the "ß" the first one ends in. Both spans held
    # the "ß", and a title hit showed it twice ("sßßs"), marked twice.
    spans = folded_spans("sßs", "ss")
    assert spans == [(0, 2)]
    assert "".join(p.text for p in marked_spans("sßs", spans)) == "sßs"
    assert folded_spans("ßß", "ss") == [(0, 1), (1, 2)]


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=40),
       st.text(alphabet=st.characters(max_codepoint=127), min_size=1, max_size=4))
def test_on_ascii_they_are_a_case_blind_search(text, query):
    assert folded_spans(text, query) == [m.span() for m in re.finditer(re.escape(query), text, re.IGNORECASE)]


@given(st.text(max_size=40), st.text(min_size=1, max_size=4))
@example("sßs", "ss")
def test_spans_are_ordered_disjoint_and_hold_the_folded_query(text, query):
    spans = folded_spans(text, query)
    assert all(0 <= b < e <= len(text) for b, e in spans)
    assert all(e1 <= b2 for (_, e1), (b2, _) in pairwise(spans))
    for begin, end in spans:
        assert fold(query) in "".join(fold(ch) for ch in text[begin:end])


def _columns(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


_PIECES = ["東京", "今日は", "天気", "でした。", "weather", "today", " ", "。", "서울에서", "x"]
_MIXED = st.lists(st.sampled_from(_PIECES), min_size=1, max_size=200).map("".join)


@given(_MIXED, _MIXED)
def test_a_snippet_holds_its_match_within_the_columns_before_it_and_in_all(before, after):
    content = before + " 大阪に行く " + after
    parts = snippet_parts(content=content, matcher=WordMatcher.for_terms(terms=["大阪"]))
    text = "".join(p.text for p in parts).removeprefix("… ").removesuffix(" …")
    marked = [p.text for p in parts if p.marked]
    assert marked[:1] == ["大阪"]
    assert _columns(text[: text.index("大阪")]) <= SNIPPET_COLUMNS_BEFORE
    assert _columns(text) <= SNIPPET_COLUMNS


_CLUSTERS = ["\U0001f469\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466", "नमस्ते", "ตัดคำ", "e\u0301", "東京", " "]


@given(st.lists(st.sampled_from(_CLUSTERS), min_size=1, max_size=120).map("".join),
       st.lists(st.sampled_from(_CLUSTERS), min_size=0, max_size=120).map("".join))
def test_a_snippet_is_cut_between_user_perceived_characters(before, after):
    # A cut between code points lost a vowel sign or split an emoji family, leaving a stray joiner.
    import regex

    content = before + " 大阪 " + after
    text = "".join(p.text for p in snippet_parts(content=content, matcher=WordMatcher.for_terms(terms=["大阪"])))
    text = text.removeprefix("… ").removesuffix(" …")
    clusters = set(regex.findall(r"\X", content))
    assert set(regex.findall(r"\X", text)) <= clusters


_TOKENS = ["Ärger", "о'нил", "м\u02bcясо", "dying", "Éclair", "straße", "東京に行く", "猫が好き",  # noqa: RUF001 - Cyrillic
           "café,", "«слово»", "x_y", "ﬁle", "naïve", "…", "—", "(1)", "ÇA", "sí.", "日本語の文章です。", "a" * 70]


@pytest.mark.parametrize("terms", [["arger"], ["мясо"], ["die"], ["eclair", "strass"], ["東京"], ["猫"], ["file"],
                                   ["si"], ["слово"], ["онил"], ["文章"]])
def test_a_long_text_is_marked_as_each_of_its_words_alone(terms):
    """Spans of a text far longer than a stretch (search_snippets.STRETCH_CHARS, read only where its
    folded text holds a term's opening) are those of its words read one by one."""
    rng = random.Random(11)
    text = " ".join(rng.choice(_TOKENS) for _ in range(6000))
    matcher = WordMatcher.for_terms(terms=terms)
    alone = []
    for m in re.finditer(r"\S+", text):
        alone += [(m.start() + a, m.start() + b) for a, b in matcher.spans(m.group())]
    assert len(text) > 10 * STRETCH_CHARS
    assert list(matcher.spans(text)) == alone
    assert alone  # the text holds a match of every query
