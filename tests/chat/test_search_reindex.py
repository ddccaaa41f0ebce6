"""search_reindex, which a data migration runs after the analyzer changed: messages indexed by an older
analyzer are indexed again, with the BM25 statistics moved by the difference to exactly what indexing
from scratch gives (tests.support.search_index.reindexed), and the words the change was for are
found. The cases are the analyzer changes made so far (their migrations are squashed now,
chat 0001_squashed_0029), each from the terms the analyzer gave before it:

- folding ("Königstraße" is "konigstrass", "café" is "cafe");
- runs of scripts written without spaces (and Korean) as pairs of characters, where a whole run was
  one term, each run also ending with its last character alone (from whole runs, and from pairs only);
- Latin letters with a stroke or a ligature folded ("tromsø" is "tromso", "æ" is "ae");
- the modifier letter apostrophe (U+02BC) inside its word ("мясо"), where it was a term of its own;
- words of scripts written with combining marks whole ("रश्मि"), where they were cut at the marks;
- a possessive's "'s" off before the apostrophes ("Paris's" is "pari"), where its "s" could stay ("pariss").
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from chatapp.chat.search_reindex import POSSESSIVE
from chatapp.chat.search_selectors import message_search
from tests.support.search_index import reindexed

# Each message with the terms the analyzer gave before folding (lower-cased, accents kept).
UNFOLDED = [("user", "Meeting at the Königstraße café", "meet königstraß café"),
            ("assistant", "Meeting notes are on the wiki", "meet note wiki"),
            ("user", "The café was closed", "café close")]
# Each message with the terms the analyzer gave before pairs: one term per run.
UNPAIRED = [("user", "私は東京に行きました", "私は東京に行きました"),
            ("assistant", "서울에서 만나요", "서울에서 만나요"),
            ("user", "The Lisbon trip is booked", "lisbon trip book")]
# The terms given while runs were pairs only, before they ended with their last character (서울에서 then 만나요).
PAIRS = ["私は は東 東京 京に に行 行き きま まし した", "서울 울에 에서"]
UNPAIRED_0010 = [("user", UNPAIRED[0][1], PAIRS[0]), ("assistant", UNPAIRED[1][1], f"{PAIRS[1]} 만나 나요")]

# Each message with the terms the analyzer gave while "ø", "ł" and "æ" were kept.
STROKED = [("user", "Ferry to Tromsø with Łukasz", "ferri tromsø łukasz"),
           ("assistant", "The ferry leaves at nine", "ferri leav nine"),
           ("user", "Æbleskiver in Tromsø", "æbleskiv tromsø")]

# Each message with the terms the analyzer gave while U+02BC was a letter of a run of its own.
APOSTROPHE = [("user", "Це м\u02bcясо дуже смачне", "це \u02bc ясо дуже смачне"),  # noqa: RUF001 - Cyrillic on purpose
              ("assistant", "Свіжа м\u02bcята в саду", "свіжа \u02bc ята саду"),  # noqa: RUF001 - Cyrillic on purpose
              ("user", "The Lisbon trip is booked", "lisbon trip book")]

# Each message with the terms the analyzer gave while words with combining marks were cut at the marks
# into fragments (single letters dropped).
MARKED = [("user", "मेरी बहन रश्मि लिस्बन जा रही है।", "बहन रश बन रह"),
          ("assistant", "लिस्बन बहुत सुंदर शहर है।", "बन बह दर शहर"),
          ("user", "The Lisbon trip is booked", "lisbon trip book")]

# Each message with the terms the analyzer gave while apostrophes came out before a possessive's "'s".
POSSESSIVES = [("user", "We visited Paris\u2019s old museum with James's boss", "visit pariss museum jamess boss"),
               ("assistant", "The boss's car is red", "bosss car red"),
               ("user", "Paris in spring", "pari spring")]

CASES = {
    "folded-terms": dict(
        messages=UNFOLDED,
        terms=[("meet konigstrass cafe", 3), ("meet note wiki", 3), ("cafe close", 2)], corpus=(3, 8),
        df={"cafe": 2, "meet": 2, "café": None, "königstraß": None}, found={"konigstrasse": [0], "Königstraße": [0]},
    ),
    "character-pairs": dict(
        messages=UNPAIRED,
        terms=[(f"{PAIRS[0]} た", 10), (f"{PAIRS[1]} 서 만나 나요 요", 7), ("lisbon trip book", 3)],
        df={"東京": 1, "서울": 1, "lisbon": 1, "私は東京に行きました": None}, corpus=(3, 20),
        found={"東京": [0], "서울": [1], "lisbon": [2]},
    ),
    "run-last-character-from-pairs": dict(
        messages=[*UNPAIRED_0010, UNPAIRED[2]],
        terms=[(f"{PAIRS[0]} た", 10), (f"{PAIRS[1]} 서 만나 나요 요", 7), ("lisbon trip book", 3)],
        df={"た": 1, "서": 1, "요": 1, "東京": 1}, corpus=(3, 20),
        found={"た": [0], "요": [1], "東京": [0]},
    ),
    "stroked-letters": dict(
        messages=STROKED,
        terms=[("ferri tromso lukasz", 3), ("ferri leav nine", 3), ("aebleskiv tromso", 2)], corpus=(3, 8),
        df={"tromso": 2, "ferri": 2, "lukasz": 1, "tromsø": None, "æbleskiv": None},
        found={"tromso": [2, 0], "Tromsø": [2, 0], "aebleskiver": [2]},
    ),
    "modifier-apostrophe": dict(
        messages=APOSTROPHE,
        terms=[("це мясо дуже смачне", 4), ("свіжа мята саду", 3), ("lisbon trip book", 3)], corpus=(3, 10),
        df={"мясо": 1, "мята": 1, "\u02bc": None, "ясо": None},
        found={"м'ясо": [0], "м\u02bcята": [1], "п\u02bcята": []},  # noqa: RUF001 - Cyrillic on purpose
    ),
    "marked-words": dict(
        messages=MARKED,
        terms=[("मेरी बहन रश्मि लिस्बन जा रही है", 7), ("लिस्बन बहुत सुंदर शहर है", 5), ("lisbon trip book", 3)],
        corpus=(3, 15),
        df={"रश्मि": 1, "लिस्बन": 2, "रश": None, "बन": None},
        found={"रश्मि": [0], "सुंदर": [1], "lisbon": [2]},
    ),
    "possessives": dict(
        messages=POSSESSIVES, pattern=POSSESSIVE,
        terms=[("visit pari museum jame boss", 5), ("boss car red", 3), ("pari spring", 2)], corpus=(3, 10),
        df={"pari": 2, "boss": 2, "jame": 1, "pariss": None, "bosss": None},
        found={"Paris": [2, 0], "boss": [1, 0], "James": [0]},
    ),
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_messages_are_indexed_again_and_the_statistics_follow(case):
    owner = get_user_model().objects.create_user(username="reindexed", password="a long test password 2")
    _, (rows, df_after, corpus) = reindexed(owner_id=owner.pk, messages=case["messages"], pattern=case.get("pattern"))
    ids = sorted(rows)
    assert [rows[pk] for pk in ids] == case["terms"]
    assert {term: df_after.get(term) for term in case["df"]} == case["df"]
    assert corpus == case["corpus"]
    for query, which in case["found"].items():
        assert [h.message_id for h in message_search(owner=owner, query=query).hits] == [ids[i] for i in which]
