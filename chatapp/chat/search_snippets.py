"""Snippets of message search (search_selectors): a few words of a message around its first word
the query found, every such word marked.

Cut in Python from the message's content with the same analyzer as the index
(`optimizer.lexical.analyze`), so both databases give the same snippet and a word is marked exactly
when its analyzed form matched: "runs" for a search of "running". Parts are plain text; whoever
renders them escapes them (SearchHit.snippet_html).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import regex

from chatapp.chat.textsafe import cluster_edge
from optimizer.lexical import analyze, fold, term_spans, unspaced

SNIPPET_WORDS_BEFORE = 10
SNIPPET_WORDS = 30
# In display columns: a Chinese or Japanese character (East Asian wide) takes two. The sidebar shows
# three lines of a snippet, so what stands before the match must fit in about one and a half:
# counted in characters, a run of Japanese (whose "words" are whole sentences, so the word limit
# never binds) put the match on the fourth line, hidden.
SNIPPET_COLUMNS_BEFORE = 60
SNIPPET_COLUMNS = 320


def _folding_to_words() -> str:
    """A character class of what is no word character as written but holds one folded (`lexical.fold`
    makes compatibility forms plain): superscript and subscript digits ("CO₂", "m²"), circled numbers,
    squared units ("㎏"), letterlike symbols ("™"). The index finds "co2" in "CO₂": the highlighter
    must read "CO₂" as one word to mark it."""
    letter = regex.compile(r"[^\W_]")
    found = [
        cp for cp in range(0xA0, 0x30000)
        if unicodedata.decomposition(chr(cp)).startswith("<") and not letter.match(chr(cp))
        and letter.search(unicodedata.normalize("NFKD", chr(cp)))
    ]
    runs: list[list[int]] = []
    for cp in found:
        if runs and cp == runs[-1][1] + 1:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp])
    return "[" + "".join(f"\\U{a:08x}-\\U{b:08x}" if b > a else f"\\U{a:08x}" for a, b in runs) + "]"


_FOLDING = _folding_to_words()
# A word character of the text as written: one as it stands, or one once folded.
_LETTER = rf"(?:[^\W_]|{_FOLDING})"
# optimizer.lexical's word pattern on the original text (so offsets are the content's), with the
# typographic apostrophe it folds, and a word never starting inside another ("o'neil" is one word).
# By the `regex` module, as lexical outside ASCII: a combining mark is inside its word ("हिन्दी").
# (`_WORD_BODY`: the words of ASCII text, which holds no character that folding makes a letter.)
_WORD_BODY = r"[^\W_]*(?:['\u2019][^\W_]+)*"
_WORD = regex.compile(rf"(?<!{_LETTER})(?<!{_LETTER}['\u2019]){_LETTER}+(?:['\u2019]{_LETTER}+)*")
_GRAPHEME = regex.compile(r"\X")
_SEPARATOR = regex.compile(rf"(?!{_FOLDING})(?:[^\w'\u2019]|_)")
STRETCH_CHARS = 2000


@dataclass(frozen=True, slots=True)
class SnippetPart:
    text: str
    marked: bool


@dataclass(frozen=True, slots=True)
class WordMatcher:
    """Finds the words of a text that the query found: words whose analyzed form is one of the
    whole terms or starts with the prefix (the last term), as the index matched them.

    Only words that could match are analyzed: English stemming keeps a word's first two letters
    (checked over 135,000 words; the exceptions are dying, lying, tying: "die", "lie", "tie"), so
    `candidates` finds words opening like a term, and a long message costs one regular-expression
    scan, not the stemming of every word.
    """

    whole: frozenset[str]
    prefix: str
    candidates: re.Pattern[str]
    # What a word the query found holds folded, apostrophes aside: its term's first three letters (two
    # of a shorter term; "dy" for "die"). Stemming changes a word's end only, so a stem but its last
    # letter opens the word (checked over 233,000 words made of this README's and the stemmer's endings).
    openings: tuple[str, ...]

    @classmethod
    def for_terms(cls, *, terms: Sequence[str], prefix_stems: Sequence[str] = ()) -> WordMatcher:
        """`prefix_stems`: stems the last word may be on its way to (search_match.search_prefix_stems),
        matched whole like the other terms."""
        terms = [*terms[:-1], *prefix_stems, *terms[-1:]]
        openings = {t[:2] for t in terms} | {t[0] + "y" for t in terms if t[1:2] == "i"}
        # an apostrophe may sit between them ("o'neil" is indexed as "oneil")
        alternatives = sorted(
            re.escape(o[0]) + ("['\u2019]?" + re.escape(o[1:]) if o[1:] else "") for o in openings
        )
        pattern = r"(?<![^\W_])(?<![^\W_]['\u2019])(?:" + "|".join(alternatives) + ")" + _WORD_BODY
        longer = {t[:3] if len(t) >= 4 else t[:2] for t in terms} | {t[0] + "y" for t in terms if t[1:2] == "i"}
        return cls(whole=frozenset(terms[:-1]), prefix=terms[-1], candidates=re.compile(pattern, re.IGNORECASE),
                   openings=tuple(sorted(longer)))

    def matches(self, word: str) -> bool:
        return any(self._found(t) for t in analyze(word))

    def _found(self, term: str) -> bool:
        return term in self.whole or term.startswith(self.prefix)

    def _marked_end(self, word: str, term: str, start: int, end: int) -> int:
        # One character typed alone finds the pairs it opens ("猫" finds "猫が"): only it is marked.
        one = term not in self.whole and term != self.prefix and len(_GRAPHEME.findall(self.prefix)) == 1
        if one and unspaced(term):
            return _GRAPHEME.match(word, start).end()
        return end

    def spans(self, text: str, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int]]:
        # A word with an accent or a letter that folds to two ("Éclair", "Straße") need not open
        # with its term's letters: outside ASCII a word is folded before it is tested.
        if text.isascii():
            for m in self.candidates.finditer(text, start, len(text) if end is None else end):
                if self.matches(m.group()):
                    yield m.span()
            return
        for lo, hi in _stretches(text, start, len(text) if end is None else end):
            # Analyzing every word cost 0.4 s of CPU on the way to a match at the end of a 200,000-character
            # message in Russian: a stretch whose folded text holds no term's opening holds no match
            # (folding a stretch cut before a separator folds each of its words as they are folded alone).
            if self._may_hold(text[lo:hi]):
                yield from self._word_spans(text, lo, hi)

    def _may_hold(self, stretch: str) -> bool:
        folded = fold(stretch).replace("'", "")
        return any(o in folded for o in self.openings)

    def _word_spans(self, text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
        for m in _WORD.finditer(text, start, end):
            # Only the terms found are marked: in a run of Japanese or Thai, the pairs of characters
            # the query holds (joined where they overlap), not the whole run; the run's terms as the
            # index stores them, so one character typed alone is marked at the run's end too.
            word = m.group()
            if not self._may_hold(word):
                continue
            marked = sorted((m.start() + a, m.start() + self._marked_end(word, term, a, b))
                            for term, a, b in term_spans(word, document=True) if self._found(term))
            joined: list[tuple[int, int]] = []
            for begin, stop in marked:
                if joined and begin <= joined[-1][1]:
                    joined[-1] = (joined[-1][0], max(joined[-1][1], stop))
                else:
                    joined.append((begin, stop))
            yield from joined


def _stretches(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """`text[start:end]` as consecutive stretches of about STRETCH_CHARS, each cut before a separator
    (neither a word's letter or mark nor an apostrophe, which may stand inside a word): no word spans two,
    and nothing composes across a cut, so the stretch folded holds each of its words folded."""
    lo = start
    while lo < end:
        cut = _SEPARATOR.search(text, min(lo + STRETCH_CHARS, end), end)
        hi = cut.start() if cut else end
        yield lo, hi
        lo = hi


def snippet_parts(*, content: str, matcher: WordMatcher) -> tuple[SnippetPart, ...]:
    """About SNIPPET_WORDS words of `content` around its first matching word, white space folded,
    matching words marked; "…" where the text goes on."""
    start = next(matcher.spans(content), (0, 0))[0]
    lo = _columns_back(content, start, SNIPPET_COLUMNS_BEFORE)
    before = [m.start() for m in _WORD.finditer(content, lo, start)]
    if len(before) > SNIPPET_WORDS_BEFORE:
        lo = before[-SNIPPET_WORDS_BEFORE]
    elif lo > 0 and before:
        lo = before[0]  # not from the middle of a word
    hi = _columns_ahead(content, lo, SNIPPET_COLUMNS)
    ends = [m.end() for m in _WORD.finditer(content, lo, hi)]
    if len(ends) > SNIPPET_WORDS:
        hi = ends[SNIPPET_WORDS - 1]
    elif hi < len(content) and ends:
        # the last word found may be cut by the limit: end on the one before it then
        hi = ends[-1] if ends[-1] < hi or len(ends) == 1 else ends[-2]
    lo, hi = cluster_edge(content, lo, forward=True), cluster_edge(content, hi, forward=False)
    text = " ".join(content[lo:hi].split())
    parts = list(marked_spans(text, list(matcher.spans(text))))
    if lo > 0:
        parts.insert(0, SnippetPart("… ", False))
    if hi < len(content) and content[hi:].strip():
        parts.append(SnippetPart(" …", False))
    return tuple(parts)


def _width(ch: str) -> int:
    return 2 if unicodedata.east_asian_width(ch) in "WF" else 1


def _columns_back(text: str, end: int, columns: int) -> int:
    """Where the stretch of `text` ending at `end` that fills at most `columns` display columns starts."""
    start = max(0, end - columns)
    if text[start:end].isascii():
        return start
    used = 0
    start = end
    while start > 0 and used + _width(text[start - 1]) <= columns:
        start -= 1
        used += _width(text[start])
    return start


def _columns_ahead(text: str, start: int, columns: int) -> int:
    """Where the stretch of `text` from `start` that fills at most `columns` display columns ends."""
    end = min(len(text), start + columns)
    if text[start:end].isascii():
        return end
    used = 0
    end = start
    while end < len(text) and used + _width(text[end]) <= columns:
        used += _width(text[end])
        end += 1
    return end


def folded_spans(text: str, query: str) -> list[tuple[int, int]]:
    """Where `query` stands in `text`, both folded (`lexical.fold`), as spans of `text` itself: each
    character is folded alone ("ß" to "ss", "é" to "e", a combining mark to nothing) and remembers
    where it came from. A mark after a found span stays with its letter, inside the span."""
    needle = fold(query)
    if not needle:
        return []
    pieces = [fold(ch) for ch in text]
    origin = [i for i, piece in enumerate(pieces) for _ in piece]
    # Where each character's folded letters start (and the end): the next match is looked for from
    # the character after a span, not from inside its last one ("sßs", "ss": a second "ss" opening in
    # the "ß" gave spans that overlap, and the title showed the "ß" twice).
    starts = [0]
    for piece in pieces:
        starts.append(starts[-1] + len(piece))
    folded = "".join(pieces)
    spans: list[tuple[int, int]] = []
    at = folded.find(needle)
    while at >= 0:
        begin, end = origin[at], origin[at + len(needle) - 1] + 1
        while end < len(text) and not pieces[end]:
            end += 1
        spans.append((begin, end))
        at = folded.find(needle, starts[end])
    return spans


def marked_spans(text: str, spans: list[tuple[int, int]]) -> tuple[SnippetPart, ...]:
    """`text` as parts, the (ordered, disjoint) `spans` marked."""
    parts: list[SnippetPart] = []
    at = 0
    for begin, end in spans:
        if begin > at:
            parts.append(SnippetPart(text[at:begin], False))
        parts.append(SnippetPart(text[begin:end], True))
        at = end
    if at < len(text):
        parts.append(SnippetPart(text[at:], False))
    return tuple(parts)
