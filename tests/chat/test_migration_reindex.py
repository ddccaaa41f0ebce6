"""Data migrations that index stored messages again after the analyzer changed (search_reindex): a
database indexed by the release before gets its changed messages indexed again, with the BM25
statistics moved by the difference to exactly what indexing from scratch gives
(reindexed_by_migration), and the words the change was for are found.

- chat.0008: terms are folded ("Königstraße" is "konigstrass", "café" is "cafe").
- chat.0010: runs of scripts written without spaces (and Korean) are pairs of characters, where a
  whole run was one term; English rows are untouched.
- chat.0011: each such run also ends with its last character alone, so that one character searched
  finds the runs ending with it (a database that ran 0010 before that analyzer had only the pairs).
- chat.0015: Latin letters with a stroke or a ligature are folded as typed without it ("tromsø" is
  "tromso", "æ" is "ae").
- chat.0029: the modifier letter apostrophe (U+02BC, Ukrainian's) is an apostrophe (a word written
  with it is the word without it, "мясо"), where it was a term of its own that cut its word.

(chat.0009, which also swaps SQLite's FTS5 tokenizer, has its own test: test_migration_marked_words.)
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from chatapp.chat.search_selectors import message_search
from tests.support.migrations import reindexed_by_migration

# Each message with the terms the analyzer gave before folding (lower-cased, accents kept).
UNFOLDED = [("user", "Meeting at the Königstraße café", "meet königstraß café"),
            ("assistant", "Meeting notes are on the wiki", "meet note wiki"),
            ("user", "The café was closed", "café close")]
# Each message with the terms the analyzer gave before pairs: one term per run.
UNPAIRED = [("user", "私は東京に行きました", "私は東京に行きました"),
            ("assistant", "서울에서 만나요", "서울에서 만나요"),
            ("user", "The Lisbon trip is booked", "lisbon trip book")]
# The terms 0010 gave before runs ended with their last character (pairs only; 서울에서 then 만나요).
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

CASES = {
    "0008-folded-terms": dict(
        before="0007_summaryjob_quota_idx", after="0008_search_folded_terms", messages=UNFOLDED,
        terms=[("meet konigstrass cafe", 3), ("meet note wiki", 3), ("cafe close", 2)], corpus=(3, 8),
        df={"cafe": 2, "meet": 2, "café": None, "königstraß": None}, found={"konigstrasse": [0], "Königstraße": [0]},
    ),
    "0010-character-pairs": dict(
        before="0009_search_marked_words", after="0010_search_character_pairs", messages=UNPAIRED,
        terms=[(f"{PAIRS[0]} た", 10), (f"{PAIRS[1]} 서 만나 나요 요", 7), ("lisbon trip book", 3)],
        df={"東京": 1, "서울": 1, "lisbon": 1, "私は東京に行きました": None}, corpus=(3, 20),
        found={"東京": [0], "서울": [1], "lisbon": [2]},
    ),
    "0011-run-last-character": dict(
        before="0010_search_character_pairs", after="0011_search_run_last_character",
        messages=[*UNPAIRED_0010, UNPAIRED[2]],
        terms=[(f"{PAIRS[0]} た", 10), (f"{PAIRS[1]} 서 만나 나요 요", 7), ("lisbon trip book", 3)],
        df={"た": 1, "서": 1, "요": 1, "東京": 1}, corpus=(3, 20),
        found={"た": [0], "요": [1], "東京": [0]},
    ),
    "0015-stroked-letters": dict(
        before="0014_import_fingerprints", after="0015_search_fold_stroked_letters", messages=STROKED,
        terms=[("ferri tromso lukasz", 3), ("ferri leav nine", 3), ("aebleskiv tromso", 2)], corpus=(3, 8),
        df={"tromso": 2, "ferri": 2, "lukasz": 1, "tromsø": None, "æbleskiv": None},
        found={"tromso": [2, 0], "Tromsø": [2, 0], "aebleskiver": [2]},
    ),
    "0029-modifier-apostrophe": dict(
        before="0028_message_images", after="0029_search_modifier_apostrophe", messages=APOSTROPHE,
        terms=[("це мясо дуже смачне", 4), ("свіжа мята саду", 3), ("lisbon trip book", 3)], corpus=(3, 10),
        df={"мясо": 1, "мята": 1, "\u02bc": None, "ясо": None},
        found={"м'ясо": [0], "м\u02bcята": [1], "п\u02bcята": []},  # noqa: RUF001 - Cyrillic on purpose
    ),
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_messages_are_indexed_again_and_the_statistics_follow(case):
    owner = get_user_model().objects.create_user(username="reindexed", password="a long test password 2")
    _, (rows, df_after, corpus) = reindexed_by_migration(before=("chat", case["before"]), after=("chat", case["after"]),
                                                         owner_id=owner.pk, messages=case["messages"])
    ids = sorted(rows)
    assert [rows[pk] for pk in ids] == case["terms"]
    assert {term: df_after.get(term) for term in case["df"]} == case["df"]
    assert corpus == case["corpus"]
    for query, which in case["found"].items():
        assert [h.message_id for h in message_search(owner=owner, query=query).hits] == [ids[i] for i in which]
