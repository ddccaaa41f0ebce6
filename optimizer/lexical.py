"""Lexical analysis for recall and search: one analyzer for every path (ranking: `optimizer.bm25`).

The same analyzer turns a message into index terms in the core's in-memory index and in the web
app's full-text indexes (`document_terms`; they store `index_text` and tokenize it on white space
only, so SQLite FTS5 and PostgreSQL index exactly these terms), and a query into its terms
(`analyze`), weighted (`build_query`).

Why these choices:

* Case and accents folded (`fold`): "Straße" meets "strasse", "café" meets "Cafe", full-width letters
  meet plain ones, as a search box is expected to; letters of other scripts keep their marks, inside
  their words ("हिन्दी" is one term).
* Scripts written without spaces between words (Chinese, Japanese, Thai, Lao, Khmer, Burmese) and
  Korean, whose particles join the word before them, are indexed as overlapping pairs of characters
  ("東京に行く": "東京", "京に", "に行", "行く"): with no dictionary to find their words, a pair is the
  unit that a word inside a run and the same word typed alone share, so "東京" finds "私は東京に行きました"
  and "서울" finds "서울에서". A character is a grapheme (Thai vowel signs stay on their consonant); a
  run of one is a term by itself. What is indexed also holds each run's last character alone
  (`document_terms`), so that one character typed into a search box finds every run holding it.
* Snowball English stemming, so "adopting", "adoption" and "adopted" meet; numbers are kept as
  written (a year or an amount is a strong signal and stemming would mangle nothing useful).
* Stop words: English function words plus chat filler ("thanks", "ok", "hey"): a message made only
  of them ("thanks!") has no query and recalls nothing.
* The query is the newest user message, plus the turn it answers at a lower weight (a follow-up
  such as "why did she pick that one?" names its subject only in the previous reply).
* No second pass: a pseudo-relevance pass (the rarest terms of the best hits joining the query at a
  low weight, for multi-hop questions) was measured on the dev set and gained nothing; dropping the
  participants' names from the query was mixed. Neither is used.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

import regex
import snowballstemmer

# Apostrophes folded into "'": the typographic one, and the modifier letter apostrophe (U+02BC), which
# Ukrainian writes (between "м" and "ясо") and some keyboards and models type for any apostrophe.
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'"})
_WORD_PATTERN = r"[^\W_]+(?:'[^\W_]+)*"
_WORD = re.compile(_WORD_PATTERN)
# Outside ASCII, words by the `regex` module, whose word characters are Unicode's (TR 18): a
# combining mark belongs to its word. The standard library ends a word at one, which cuts the words
# of scripts written with marks (Devanagari's vowel signs and virama, Tamil's, Bengali's...) into
# single letters: "हिन्दी" was "ह", "न", "द". On ASCII text both find the same words, and the
# standard library's is the faster (13.7 against 21.2 µs on a 450-character English message), so
# ASCII keeps it: every message and query of a turn goes through here.
_WORD_MARKED = regex.compile(_WORD_PATTERN)

# English function words and chat filler. Written for this project: common closed-class words,
# question words (the question's shape, not its subject) and words that carry no topic in chat.
_STOP_TEXT = """
    a about above after again against all also am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down
    during each else even ever every few for from further had hadn't has hasn't have haven't having he he'd
    he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't
    it it's its itself just let's like me might more most much must mustn't my myself no nor not now of off
    on once only or other ought our ours ourselves out over own really same shall shan't she she'd she'll
    she's should shouldn't so some still such than that that's the their theirs them themselves then there
    there's these they they'd they'll they're they've this those though through to too under until up upon
    us very was wasn't we we'd we'll we're we've were weren't what what's whatever when when's where where's
    whether which while who who's whom whose why why's will with won't would wouldn't yet you you'd you'll
    you're you've your yours yourself yourselves
    yes yeah yep no nope ok okay oh ah hey hi hello bye thanks thank thx please sure cool great nice wow
    awesome lol haha hmm well got get gets getting go goes going gone went one ones thing things stuff lot
    lots kind sort maybe anyway actually definitely totally absolutely pretty quite way something anything
    everything nothing someone anyone everyone tell told say said says know knew think thought want wanted
    make made take took see saw look looks looking feel feels felt good bad really many much new old time
    sounds glad appreciate
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())

_stemmer = snowballstemmer.stemmer("english")
_stem_cache: dict[str, str] = {}


def _stem(word: str) -> str:
    hit = _stem_cache.get(word)
    if hit is None:
        hit = word if word.isdigit() else _stemmer.stemWord(word)
        if len(_stem_cache) < 200_000:  # bounded: a long-running worker must not grow without limit
            _stem_cache[word] = hit
    return hit


# The combining marks of Latin, Greek and Cyrillic letters (acute, grave, diaeresis, cedilla, caron,
# breve...), as compatibility decomposition splits them off. The marks of other scripts (Devanagari's
# vowel signs, Hebrew's points) are in their own blocks and stay: there they make the letter.
_DIACRITICS = re.compile("[\u0300-\u036f]+")


# Latin letters that carry their stroke or ligature in the letter itself, so no decomposition takes it
# off: written as a person without them types them ("tromso" finds "Tromsø", "lodz" "Łódź"). Lower
# case: they are looked up after case folding.
_UNDECOMPOSED = str.maketrans({
    "ø": "o", "đ": "d", "ð": "d", "ł": "l", "ħ": "h", "ŧ": "t", "\u0131": "i", "ƀ": "b", "ɨ": "i",
    "æ": "ae", "œ": "oe", "þ": "th",
})


def fold(text: str) -> str:
    """`text` as the index compares it: case-folded ("ß" is "ss"), compatibility forms made plain
    (full-width letters, ligatures, superscript digits), Latin, Greek and Cyrillic accents off, the
    Latin letters with a stroke or a ligature written plain (`_UNDECOMPOSED`: "ø" is "o", "æ" is
    "ae"), and the typographic and modifier letter apostrophes made plain. ASCII text is only
    lower-cased."""
    if text.isascii():
        return text.lower()
    # Decomposed before folding too: a mathematical bold capital has no case until it is a plain one.
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", text).casefold())
    plain = unicodedata.normalize("NFC", _DIACRITICS.sub("", decomposed)).translate(_UNDECOMPOSED)
    return plain.translate(_APOSTROPHES)


def words(text: str) -> list[str]:
    """Folded word tokens of `text` (`fold`), apostrophes kept inside words ("don't")."""
    found: list[str] = (_WORD if text.isascii() else _WORD_MARKED).findall(fold(text))
    return found


# Letters of scripts written without spaces (and Hangul), by script extension, so that marks used by
# both kana ("ー") and the Han iteration mark ("々") belong to their runs.
_UNSPACED_CLASS = (
    r"\p{scx=Han}\p{scx=Hiragana}\p{scx=Katakana}\p{scx=Hangul}\p{scx=Thai}\p{scx=Lao}\p{scx=Khmer}"
    r"\p{scx=Myanmar}"
)
# Less what some of them share with other scripts (their script extensions name Thai, Lao or Myanmar
# too): the Latin combining marks (a tilde, a dot below) and the modifier letter apostrophe. A run never
# opens with one, or the highlighter, which reads the text as written, cut "año" pasted decomposed (an,
# U+0303, o) at its tilde and marked nothing, and Ukrainian's "м", U+02BC, "ясо" lost its "м".
_NOT_UNSPACED = "(?![\u0300-\u036f\u02bc])"
_UNSPACED = regex.compile(f"{_NOT_UNSPACED}[{_UNSPACED_CLASS}]")
_UNSPACED_RUN = regex.compile(f"(?:{_NOT_UNSPACED}[{_UNSPACED_CLASS}]\\p{{M}}*)+")
_GRAPHEME = regex.compile(r"\X")


def _unspaced_runs(word: str) -> list[tuple[int, int, bool]]:
    """`word` (one of `words`) as consecutive (start, end, unspaced) pieces: runs of a script written
    without spaces, and the parts between them ("iphone用" is "iphone", then "用")."""
    pieces: list[tuple[int, int, bool]] = []
    at = 0
    for m in _UNSPACED_RUN.finditer(word):
        if m.start() > at:
            pieces.append((at, m.start(), False))
        pieces.append((m.start(), m.end(), True))
        at = m.end()
    if at < len(word):
        pieces.append((at, len(word), False))
    return pieces


def _character_pairs(graphemes: Sequence[str], *, document: bool = False) -> list[str]:
    """The terms of a run of graphemes of a script written without spaces: each pair of neighbours,
    or the one grapheme of a run of one. A `document`'s run also ends with its last grapheme alone:
    every grapheme of the run then opens one of its terms, so one character typed alone ("猫"), a
    prefix, finds the run wherever it stands in it, its end included ("黒猫" holds "黒猫" and "猫")."""
    if len(graphemes) < 2:
        return list(graphemes)
    pairs = [a + b for a, b in pairwise(graphemes)]
    return [*pairs, graphemes[-1]] if document else pairs


def term_spans(word: str, *, document: bool = False) -> list[tuple[str, int, int]]:
    """The terms `analyze` gives for `word` (`document_terms` with `document`; one word of a text as
    `words` would find it, not folded), each with the span of `word` it stands for: where a highlighter
    marks a term that was found. A pair of characters stands for its two graphemes (each folded by
    itself), any other term for its piece."""
    spans: list[tuple[str, int, int]] = []
    for start, end, unspaced in _unspaced_runs(word):
        if not unspaced:
            spans.extend((term, start, end) for term in analyze(word[start:end]))
            continue
        # Folded grapheme by grapheme, each folded character remembering the grapheme it came from, then
        # cut into graphemes again: a folded one can be two ("ำ" is "ํ" and "า", as analyze sees them).
        origin: list[tuple[int, int]] = []
        folded = []
        for m in _GRAPHEME.finditer(word, start, end):
            piece = fold(m.group())
            folded.append(piece)
            origin.extend([m.span()] * len(piece))
        text = "".join(folded)
        units = [(g.group(), origin[g.start()][0], origin[g.end() - 1][1]) for g in _GRAPHEME.finditer(text)]
        if len(units) < 2:
            spans.extend(units)
            continue
        spans.extend((a[0] + b[0], a[1], b[2]) for a, b in pairwise(units))
        if document:
            spans.append(units[-1])
    return spans


def _kept(word: str) -> bool:
    return word not in STOP_WORDS and (len(word) >= 2 or word.isdigit())


def _terms(text: str, *, document: bool = False) -> Iterator[tuple[str, bool]]:
    """(term before stemming, whether it is a run's character or pair) of non-ASCII `text`, in order."""
    for word in words(text):
        if _UNSPACED.search(word) is None:
            if _kept(word):
                yield word, False
            continue
        for start, end, unspaced in _unspaced_runs(word):
            if unspaced:
                graphemes = _GRAPHEME.findall(word[start:end])
                yield from ((pair, True) for pair in _character_pairs(graphemes, document=document))
            elif _kept(piece := word[start:end].strip("'")):
                yield piece, False


def analyze(text: str) -> list[str]:
    """Index terms of `text`, in order: stop words and one-letter words out, the rest stemmed; runs of
    scripts written without spaces as pairs of characters (`_character_pairs`), never stemmed."""
    if text.isascii():  # the common case, on every turn: no run of such a script to look for
        return [_stem(_unquoted(w)) for w in content_words(text)]
    return _stemmed(_terms(text))


def _stemmed(terms: Iterable[tuple[str, bool]]) -> list[str]:
    return [term if pair else _stem(_unquoted(term)) for term, pair in terms]


def _unquoted(word: str) -> str:
    """`word` as it is stemmed: a possessive's "'s" off, as the stemmer's first step takes it, then its
    apostrophes out ("O'Brien" is "obrien"; the index's terms hold none). Taken out first, they left the
    "s" to the stemmer, which keeps it after an "s" or a "u": "Paris's" was "pariss", never "Paris". A
    one-letter word keeps it ("A's" is "as"): one letter is no term."""
    return (word[:-2] if word.endswith("'s") and len(word) > 3 else word).replace("'", "")


def document_terms(text: str) -> list[str]:
    """What an index stores for `text`: `analyze`'s terms, and after each run of two or more
    characters of a script written without spaces its last character alone (`_character_pairs`).
    Queries keep `analyze`'s: "東京" typed alone must not ask for a "京" that ends a run, which
    "東京都" has not."""
    return analyze(text) if text.isascii() else _stemmed(_terms(text, document=True))


def unspaced(text: str) -> bool:
    """Whether `text` holds a letter of a script written without spaces (or Hangul): there one
    character can be a word."""
    return _UNSPACED.search(text) is not None


def content_words(text: str) -> list[str]:
    """The words of `text` that `analyze` keeps (before stemming): stop words and one-letter words out,
    runs of scripts written without spaces as their pairs of characters."""
    if text.isascii():  # _kept written out: a call per word made this 15 → 18 µs on a 390-character message
        return [w for w in words(text) if w not in STOP_WORDS and (len(w) >= 2 or w.isdigit())]
    return [term for term, _ in _terms(text)]


# Endings of English words that the stemmer takes off, in part or whole: the words a typed prefix
# may be on its way to ("decora" → "decorator", stored as "decor"). Inflections and the common
# derivational suffixes of the Snowball English algorithm's steps, as they are spelt in words.
_SUFFIX_TEXT = """
    s es ed ing ly edly ingly er ers ors or ator ators ation ations ational ationally ization izations
    isation ize izes ized izing ise ised ising izer alism ality ally al als ance ances ence ences ant
    ants ent ents ement ements ment ments ness fulness ful fully ousness ous ously iveness ive ives
    ivity bility ble able ably ible ibly ative alize icate icity ical ic ics ism isms ist ists ity ities
    ion ions less lessly ship
"""
_SUFFIXES = _SUFFIX_TEXT.split()


def prefix_stems(word: str) -> list[str]:
    """The stems, other than those starting with `word`'s own, of the words that `word` begins and
    that end in a common suffix: what a search box's last, unfinished word may be on its way to.

    The index stores stems, and a stem can be shorter than what was typed ("decorator" is stored as
    "decor", so the prefix "decora" would miss it): each completion by a suffix (from where the word
    could be inside it) is stemmed, and the stems shorter than the word's own come back, longest
    first. "generato" gives "generat"; "gene" is never among them, since no suffix goes on "rato".
    Without a dictionary some completions are no word ("ration" + "ness" gives "ratio"): callers
    rank these stems below the typed prefix's own matches.
    """
    word = _unquoted(fold(word))
    if _UNSPACED.search(word):  # pairs of characters: no suffix goes on them
        return []
    own = _stem(word)
    found: set[str] = set()
    for suffix in _SUFFIXES:
        for typed in range(len(suffix)):  # how much of the suffix the word already holds
            if word.endswith(suffix[:typed]):
                stem = _stem(word[: len(word) - typed] + suffix)
                # what was typed starts with the stem: a stemmer's rewrite ("uni" + "ing" gives "une")
                # is no word the typed one can become
                if stem and not stem.startswith(own) and word.startswith(stem):
                    found.add(stem)
    return sorted(found, key=lambda t: (-len(t), t))


def index_text(text: str) -> str:
    """What a full-text index stores for a message: its terms (`document_terms`) joined by spaces."""
    return " ".join(document_terms(text))


@dataclass(frozen=True, slots=True)
class Query:
    """Weighted query terms. `weights` maps a term to how much a match on it counts."""

    weights: Mapping[str, float]

    def __bool__(self) -> bool:
        return bool(self.weights)


# A newest message with fewer content terms than this is a follow-up ("and why did she?"): its
# subject is in the turn it answers, whose terms then join the query. A longer one stands alone,
# and the previous turn's words would only pull the ranking towards the recent topic.
FOLLOW_UP_TERMS = 3

_CAPITALIZED = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][\w'\u2019-]+)")
_NUMBER = re.compile(r"\d")


def build_query(text: str, *, context: str | None = None, context_weight: float = 0.35) -> Query:
    """The query for a newest message `text`; for a follow-up, the turn it answers (`context`) at a lower weight.

    Names and numbers (capitalized words inside a sentence, tokens with digits) weigh 1.5: they are
    what a question about a past event is most specific about.
    """
    weights: dict[str, float] = {}
    emphasized = {t for m in _CAPITALIZED.finditer(text) for t in analyze(m.group(1))}
    for term in analyze(text):
        w = 1.5 if (term in emphasized or _NUMBER.search(term)) else 1.0
        weights[term] = max(weights.get(term, 0.0), w)
    # no content word and no question ("thanks!", "ok"): an acknowledgement, about nothing to recall
    follow_up = bool(weights) or "?" in text
    if context and follow_up and len(weights) < FOLLOW_UP_TERMS:
        for term in analyze(context):
            if term not in weights:
                weights[term] = context_weight
    return Query(weights=weights)
