"""search_snippets.folded_spans: where a title search's query stands in the title as written."""

from __future__ import annotations

import re
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from chatapp.chat.search_snippets import folded_spans
from optimizer.lexical import fold


def test_spans_cover_the_letters_as_written():
    assert folded_spans("Umzug in die Königstraße", "konigstrasse") == [(13, 24)]
    assert folded_spans("Café, café, CAFE", "cafe") == [(0, 4), (6, 10), (12, 16)]
    # A combining mark after the last letter found stays with it.
    assert folded_spans("Cafe\u0301 noir", "cafe") == [(0, 5)]
    assert folded_spans("Straße", "strasse") == [(0, 6)]
    assert folded_spans("Straße", "") == [] and folded_spans("Straße", "x") == []


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=40),
       st.text(alphabet=st.characters(max_codepoint=127), min_size=1, max_size=4))
def test_on_ascii_they_are_a_case_blind_search(text, query):
    assert folded_spans(text, query) == [m.span() for m in re.finditer(re.escape(query), text, re.IGNORECASE)]


@given(st.text(max_size=40), st.text(min_size=1, max_size=4))
def test_spans_are_ordered_disjoint_and_hold_the_folded_query(text, query):
    spans = folded_spans(text, query)
    assert all(0 <= b < e <= len(text) for b, e in spans)
    assert all(e1 <= b2 for (_, e1), (b2, _) in pairwise(spans))
    for begin, end in spans:
        assert fold(query) in "".join(fold(ch) for ch in text[begin:end])
