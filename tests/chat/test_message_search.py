"""Message search (search_selectors.message_search, GET /api/search/, the sidebar's snippets): ranked,
stemmed, the last word a prefix, owner-scoped, paginated, snippets escaped with only our <mark> as markup.

Runs on SQLite (FTS5) by default and on PostgreSQL (tsvector + GIN) with DATABASE_URL set. Messages are
indexed by the services the app uses: message_append (message_index_add), or a bulk insert followed by
conversation_index_rebuild as the seed and import commands do.
"""

from __future__ import annotations

import random

import pytest
from django.db import transaction
from django.db.models.expressions import RawSQL
from django.urls import reverse
from rest_framework.test import APIClient

from chatapp.chat import search_selectors, search_snippets
from chatapp.chat.branch_services import branch_hide, branch_show
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation, Message
from chatapp.chat.search_match import MAX_QUERY_CHARS, conversation_ids_matching
from chatapp.chat.search_selectors import message_search
from chatapp.chat.search_services import conversation_index_rebuild
from tests.support.accounts import token_client

pytestmark = pytest.mark.django_db

FILLER = "lorem ipsum dolor sit amet consectetur adipiscing elit sed eiusmod"


def _chat(owner, title: str = "New chat") -> Conversation:
    return Conversation.objects.create(owner=owner, title=title, offline=True)


def _say(conversation: Conversation, *texts: str) -> list[Message]:
    return [
        message_append(conversation=conversation, role="user" if i % 2 == 0 else "assistant", content=text,
                       token_model="gpt-4o-mini")
        for i, text in enumerate(texts)
    ]


def _bulk(conversation: Conversation, texts: list[str]) -> list[int]:
    """Messages written past the services (a bulk import), then indexed as the seed command does."""
    Message.objects.bulk_create([
        Message(conversation=conversation, role="user" if i % 2 == 0 else "assistant", content=text,
                token_count=len(text) // 4 + 4, char_count=len(text))
        for i, text in enumerate(texts)
    ])
    conversation_index_rebuild(conversation=conversation)
    return list(Message.objects.filter(conversation=conversation).order_by("id").values_list("id", flat=True))


def _message_ids(page) -> list[int]:
    return [h.message_id for h in page.hits if h.kind == "message"]


# --- matching and ranking ------------------------------------------------------------------------------


def test_more_occurrences_rank_first_whatever_the_order(user):
    chat = _chat(user)
    many, once = _say(chat, f"bicycle bicycle bicycle notes {FILLER}", f"bicycle shop notes here {FILLER}")
    assert _message_ids(message_search(owner=user, query="bicycle")) == [many.pk, once.pk]
    # the newer message first on a tie, and the better one first whichever is newer
    newer_once, newer_many = _say(chat, f"bicycle shop notes here {FILLER}", f"bicycle bicycle bicycle notes {FILLER}")
    ids = _message_ids(message_search(owner=user, query="bicycle"))
    assert ids == [newer_many.pk, many.pk, newer_once.pk, once.pk]


def test_a_rarer_word_weighs_more(user):
    chat = _chat(user)
    _say(chat, *[f"garden weeding day {i} {FILLER}" for i in range(12)])
    rare_heavy, common_heavy = _say(
        chat,
        f"garden orchid orchid orchid {FILLER}",
        f"garden garden garden orchid {FILLER}",
    )
    hits = message_search(owner=user, query="garden orchid").hits
    assert [h.message_id for h in hits] == [rare_heavy.pk, common_heavy.pk]
    assert hits[0].score > hits[1].score > 0


def test_stemming_finds_other_forms(user):
    chat = _chat(user)
    (runs,) = _say(chat, "She runs along the canal every morning before work.")
    for query in ("running", "runs", "RUN", "canals"):
        assert _message_ids(message_search(owner=user, query=query)) == [runs.pk], query
    hit = message_search(owner=user, query="running").hits[0]
    assert "<mark>runs</mark>" in hit.snippet_html


def test_case_and_accents_are_folded_both_ways(user):
    chat = _chat(user)
    street, cafe, plain, school = _say(
        chat,
        "The office moved to the Königstraße, next to the old station.",
        "We met at the Café Müller; the crème brûlée was perfect.",
        "Strasse is how the street sign was spelt on the older map.",
        "Une école près de Zürich.",
    )
    assert _message_ids(message_search(owner=user, query="konigstrasse")) == [street.pk]
    assert _message_ids(message_search(owner=user, query="KÖNIGSTRASSE")) == [street.pk]
    assert _message_ids(message_search(owner=user, query="cafe muller")) == [cafe.pk]
    assert _message_ids(message_search(owner=user, query="creme brul")) == [cafe.pk]  # a prefix, unaccented
    assert _message_ids(message_search(owner=user, query="Straße")) == [plain.pk]
    # The snippet marks the words as written, accents and all, also where they open differently.
    (hit,) = message_search(owner=user, query="cafe muller").hits
    assert "<mark>Café</mark> <mark>Müller</mark>" in str(hit.snippet_html)
    (hit,) = message_search(owner=user, query="Ecole zurich").hits
    assert hit.message_id == school.pk
    assert str(hit.snippet_html) == "Une <mark>école</mark> près de <mark>Zürich</mark>."


def test_a_word_written_decomposed_is_marked_as_it_is_found(user):
    # As pasted from macOS: a letter, then its accent as a combining mark. The tilde, the dot below, the
    # macron below and the overline are also used with Thai, Lao or Myanmar letters (their script
    # extensions): the highlighter took each for a run of such a script and cut its word there.
    chat = _chat(user)
    year, viet = _say(chat, "Feliz an\u0303o nuevo a todos", "Tho\u031bi tie\u0302\u0301t Vie\u0323t Nam")
    (hit,) = message_search(owner=user, query="año").hits
    assert hit.message_id == year.pk and "Feliz <mark>an\u0303o</mark> nuevo" in str(hit.snippet_html)
    (hit,) = message_search(owner=user, query="viet nam").hits
    assert hit.message_id == viet.pk and "<mark>Vie\u0323t</mark> <mark>Nam</mark>" in str(hit.snippet_html)


@pytest.mark.parametrize(("query", "marked"), [
    ("co2", "the <mark>CO₂</mark> output"),
    ("CO₂ output", "the <mark>CO₂</mark> <mark>output</mark>"),
    ("m2 kg", "a room of 12 <mark>m²</mark> for 3 <mark>㎏</mark> of tea"),
])
def test_a_word_with_a_superscript_or_a_symbol_that_folds_to_letters_is_marked(user, query, marked):
    # The index folds "CO₂" to "co2", "m²" to "m2", "㎏" to "kg" (compatibility forms): such a message was
    # found, but the highlighter read its words as written, where "₂" or "㎏" is no word character, and
    # marked nothing: the snippet of a long message then showed its start, without the match.
    _say(_chat(user), f"{FILLER} {FILLER} {FILLER} the CO₂ output rose", "a room of 12 m² for 3 ㎏ of tea")
    (hit,) = message_search(owner=user, query=query).hits
    assert marked in str(hit.snippet_html)


def test_a_word_with_the_modifier_apostrophe_is_found_by_any_apostrophe(user):
    # Ukrainian writes its apostrophe as U+02BC (a letter to Unicode, and one whose script extensions
    # name Thai): "м", U+02BC, "ясо" was cut into the apostrophe and "ясо", so "м'ясо" as typed on a
    # keyboard found nothing.
    chat = _chat(user)
    meat, typed, _ = _say(chat, "Це м\u02bcясо дуже смачне", "П\u02bcять хвилин, don't wait",  # noqa: RUF001 - Cyrillic on purpose
                          "Свіжа м\u02bcята в саду")  # noqa: RUF001 - Cyrillic on purpose
    for query in ("м'ясо", "м\u2019ясо", "м\u02bcясо", "мясо", "М\u02bcЯСО"):  # noqa: RUF001 - Cyrillic on purpose
        assert _message_ids(message_search(owner=user, query=query)) == [meat.pk], query
    (hit,) = message_search(owner=user, query="м'ясо").hits
    assert str(hit.snippet_html) == "Це <mark>м\u02bcясо</mark> дуже смачне"  # noqa: RUF001 - Cyrillic on purpose
    assert _message_ids(message_search(owner=user, query="п'ять")) == [typed.pk]
    # Nor does a word lose its first letter to it: "п", U+02BC, "ята" (a heel) was the apostrophe and "ята",
    # as "м", U+02BC, "ята" (mint) was.
    assert _message_ids(message_search(owner=user, query="п\u02bcята")) == []  # noqa: RUF001 - Cyrillic on purpose


def test_letters_with_a_stroke_are_found_as_typed_without_it(user):
    chat = _chat(user)
    (north,) = _say(chat, "The ferry to Tromsø leaves at nine; bring the æbleskiver for Łukasz.")
    for query in ("tromso", "Tromsø", "TROMSO", "aebleskiver", "lukasz"):
        assert _message_ids(message_search(owner=user, query=query)) == [north.pk], query
    (hit,) = message_search(owner=user, query="tromso").hits
    assert "<mark>Tromsø</mark>" in str(hit.snippet_html)


def test_words_written_with_combining_marks_are_found_whole(user):
    # Devanagari's and Tamil's vowel signs are combining marks: the words must be indexed whole, and
    # SQLite's FTS5 tables must not cut them again (a cut term became a phrase, which they refuse).
    chat = _chat(user)
    delhi, tamil, _ = _say(
        chat,
        "कल हम दिल्ली जाएंगे और वहाँ लाल किला देखेंगे।",
        "தமிழ் மொழியில் பேசலாம்",
        "मौसम आज बहुत अच्छा है।",
    )
    assert _message_ids(message_search(owner=user, query="दिल्ली")) == [delhi.pk]
    assert _message_ids(message_search(owner=user, query="लाल किला")) == [delhi.pk]
    assert _message_ids(message_search(owner=user, query="दिल्")) == [delhi.pk]  # a prefix, cut at a virama
    assert _message_ids(message_search(owner=user, query="மொழியில்")) == [tamil.pk]
    (hit,) = message_search(owner=user, query="लाल किला").hits
    assert "<mark>लाल</mark> <mark>किला</mark>" in str(hit.snippet_html)


# Japanese, Chinese and Thai leave no space between words, Korean joins particles to its nouns.
UNSPACED = ["私は来月東京に引っ越します。", "我们明天去北京开会", "서울에서 친구를 만났어요", "พรุ่งนี้ไปเชียงใหม่",
            "Fine today"]


@pytest.mark.parametrize(("query", "found", "marked"), [
    ("東京", 0, "私は来月<mark>東京</mark>に引っ越します。"),
    ("引っ越し", 0, "来月東京に<mark>引っ越し</mark>ます"),
    ("北京", 1, "我们明天去<mark>北京</mark>开会"),
    ("서울", 2, "<mark>서울</mark>에서 친구를"),
    ("เชียงใหม่", 3, "พรุ่งนี้ไป<mark>เชียงใหม่</mark>"),
    ("大阪", None, ""),
    # One character is a word there: found inside a run and at its end, and marked alone.
    ("東", 0, "私は来月<mark>東</mark>京に"),
    ("会", 1, "北京开<mark>会</mark>"),
    ("요", 2, "만났어<mark>요</mark>"),
    ("猫", None, ""),
])
def test_a_word_inside_a_run_without_spaces_is_found_and_marked_alone(user, query, found, marked):
    """A word typed alone finds the run it stands in, and only that word is marked."""
    messages = _say(_chat(user), *UNSPACED)
    page = message_search(owner=user, query=query)
    assert _message_ids(page) == [messages[i].pk for i in [found] if i is not None]
    assert [marked in str(hit.snippet_html) for hit in page.hits] == [True for i in [found] if i is not None]


def test_every_word_must_match_and_only_the_last_is_a_prefix(user):
    chat = _chat(user)
    (aquarium,) = _say(chat, "Rosalind starts at the Lisbon aquarium in March.")
    _say(chat, "Lisbon trams are yellow.")
    assert _message_ids(message_search(owner=user, query="aquar")) == [aquarium.pk]
    assert _message_ids(message_search(owner=user, query="lisbon aqua")) == [aquarium.pk]
    assert _message_ids(message_search(owner=user, query="aquar lisbon")) == []  # "aquar" is not a word
    assert _message_ids(message_search(owner=user, query="lisbon penguin")) == []
    hit = message_search(owner=user, query="lisbon aqua").hits[0]
    assert "<mark>Lisbon</mark>" in hit.snippet_html and "<mark>aquarium</mark>" in hit.snippet_html


def test_a_word_typed_past_its_stem_still_finds_it(user, client):
    """The index stores stems, and a stem may be shorter than the word typed so far: "decorator" is
    stored as "decor", so the prefix "decora" found nothing while "decor" did."""
    chat = _chat(user)
    (decorator,) = _say(chat, "Wrap the view in a decorator that caches its result.")
    (generator,) = _say(chat, "The generator yields one row at a time.")
    _say(chat, "Both genes come from the mother.", "A decent cache would help.")
    for typed in ("decor", "decora", "decorat", "decorato", "decorator", "DECORAT"):
        assert _message_ids(message_search(owner=user, query=typed)) == [decorator.pk], typed
    for typed in ("genera", "generato", "yields generato"):
        # "genes" shares the first letters but is no word "generato" can become
        assert _message_ids(message_search(owner=user, query=typed)) == [generator.pk], typed
    assert _message_ids(message_search(owner=user, query="caches generato")) == []  # every word must match
    hit = message_search(owner=user, query="decorato").hits[0]
    assert "<mark>decorator</mark>" in hit.snippet_html
    # Only the prefix has them: a last word that repeats an earlier one is no prefix, and every
    # word must still match.
    _say(chat, "A decora, then the decor.")
    assert _message_ids(message_search(owner=user, query="decora yields decora")) == []
    assert list(Conversation.objects.filter(pk__in=conversation_ids_matching(owner=user, text="decorat"))) == [chat]
    client.force_login(user)
    assert "decorator" in client.get(reverse("chat-sidebar"), {"q": "decorato"}).content.decode()


def test_a_stem_the_typed_word_may_become_ranks_below_what_starts_with_it(user):
    chat = _chat(user)
    (ration,) = _say(chat, "The rations ran out on the third day of the long crossing.")
    (ratio,) = _say(chat, "The ratio is two.")  # shorter and newer: first if it weighed the same
    _say(chat, "Une maison au bord de la mer.")
    # "ration" may be on its way to no word stored as "ratio" ("rationess" is none), yet the stemmer
    # says so: such a stem is found, ranked below the words that start with what was typed.
    assert _message_ids(message_search(owner=user, query="ration")) == [ration.pk, ratio.pk]
    # and a stemmer's rewrite ("uni" + "ing" gives "une") is no word "uni" can become
    assert _message_ids(message_search(owner=user, query="uni")) == []


def test_short_and_stop_word_queries(user):
    chat = _chat(user, title="The weekly plan")
    _say(chat, "the plan for the week")
    assert message_search(owner=user, query="").hits == []
    assert message_search(owner=user, query=" p ").hits == []
    only_stop_words = message_search(owner=user, query="the")
    assert [h.kind for h in only_stop_words.hits] == ["title"]  # no content word: titles only
    # one character of a script written without spaces is a word: searched, titles included
    cats = _chat(user, title="猫の写真")
    assert [(h.kind, h.conversation_id) for h in message_search(owner=user, query="猫").hits] == [("title", cats.pk)]


def test_one_letter_written_decomposed_is_as_short_as_written_whole(user):
    # "é" typed as "e" and a combining acute (pasted from a file name on macOS) is one letter too: it
    # passed as two characters and searched "e", every title holding an "e" and every word opening with it.
    chat = _chat(user, title="Weekly plan")
    _say(chat, "every evening")
    assert message_search(owner=user, query="\u00e9").hits == []
    assert message_search(owner=user, query="e\u0301").hits == []


# --- snippets ---------------------------------------------------------------------------------------------


def test_snippet_escapes_the_message_and_marks_matches(user):
    chat = _chat(user)
    _say(chat, "<script>alert('marmalade')</script> & my <b>marmalade</b> recipe \"quoted\"")
    for query, tag in (("marmalade", "&lt;script&gt;"), ("script", "&lt;<mark>script</mark>&gt;")):
        (hit,) = message_search(owner=user, query=query).hits
        html = str(hit.snippet_html)
        assert "<script" not in html and "<b>" not in html
        assert html.startswith(tag)
        assert html.replace("<mark>", "").replace("</mark>", "").count("<") == 0
        assert "&amp;" in html and "&quot;quoted&quot;" in html
    (hit,) = message_search(owner=user, query="marmalade").hits
    assert str(hit.snippet_html).count("<mark>marmalade</mark>") == 2
    assert hit.snippet_text.startswith("<script>alert(")  # the plain text is the text as written


def test_a_replys_snippet_shows_its_markdown_as_read_and_the_users_text_as_typed(user):
    _say(_chat(user), "What does **total** mean in `wc -c`?", "- **Total:** the characters, [see the manual](https://x.org/wc)")
    user_hit, reply_hit = sorted(message_search(owner=user, query="total").hits, key=lambda h: h.message_id)
    assert str(user_hit.snippet_html) == "What does **<mark>total</mark>** mean in `wc -c`?"
    assert str(reply_hit.snippet_html) == "<mark>Total</mark>: the characters, see the manual"


def test_a_replys_character_references_show_as_the_reply_reads(user):
    """A reply's `&amp;` reads "&" in the chat (Markdown decodes character references and backslash
    escapes), and its snippet showed "&amp;" (escaped once more: `&amp;amp;`); a user's text is shown
    as typed, and a reply's code as written."""
    _say(_chat(user), "Tom &amp; Jerry, AT\\&T", "Tom &amp; Jerry &lt;b&gt; caf&eacute; \\*not slanted\\* `&amp; tom`")
    user_hit, reply_hit = sorted(message_search(owner=user, query="tom").hits, key=lambda h: h.message_id)
    assert str(user_hit.snippet_html) == "<mark>Tom</mark> &amp;amp; Jerry, AT\\&amp;T"
    assert reply_hit.snippet_text == "Tom & Jerry <b> café *not slanted* &amp; tom"
    assert str(reply_hit.snippet_html) == (
        "<mark>Tom</mark> &amp; Jerry &lt;b&gt; café *not slanted* &amp;amp; <mark>tom</mark>"
    )


def test_snippet_is_a_window_around_the_first_match_of_a_long_message(user):
    chat = _chat(user)
    words = [f"w{i}" for i in range(5000)]
    words[3000] = "zeppelin"
    _say(chat, "\n".join(" ".join(words[i : i + 10]) for i in range(0, 5000, 10)))
    (hit,) = message_search(owner=user, query="zeppelin").hits
    text = hit.snippet_text
    assert text.startswith("… ") and text.endswith(" …")
    assert "\n" not in text
    assert "w2990" in text and "w3019" in text and "w2980" not in text and "w3040" not in text
    assert str(hit.snippet_html).count("<mark>") == 1
    assert len(text.split()) <= search_snippets.SNIPPET_WORDS + 2


def test_a_long_message_in_another_script_is_found_and_marked_at_its_end(user):
    # Outside ASCII the snippet reads the text in stretches, skipping those that cannot hold a match
    # (search_snippets._stretches): the match at the end of a long message is still found and marked.
    # Its time, once 0.4 s of CPU a hit, is bench/render_worst.py's "snippet" rows.
    rng = random.Random(7)
    letters = "абвгдежзийклмнопрстуфхцчшщыэюя"
    vocabulary = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(5000)]
    russian = " ".join(rng.choices(vocabulary, weights=[1 / (i + 1) for i in range(5000)], k=25_000))
    japanese = "東京に行きます。猫が好きです、" * 6000
    chat = _chat(user)
    far = _say(chat, f"{russian} велосипед.", f"{japanese}自転車を買った", f"{russian}\n\nКупил велосипед")  # noqa: RUF001 - Cyrillic on purpose
    hits = message_search(owner=user, query="велосипед").hits + message_search(owner=user, query="自転車").hits
    assert sorted(h.message_id for h in hits) == sorted(m.pk for m in far)
    assert all("<mark>" in str(h.snippet_html) for h in hits)


def test_a_snippet_in_japanese_shows_its_match_within_the_first_lines(user):
    # A run of Japanese is one "word" per sentence, so only the display width (two columns a
    # character) keeps the sidebar's three clamped lines from hiding the match.
    chat = _chat(user)
    _say(chat, "今日はとても良い天気でした。" * 40 + "私は来月東京に引っ越します。" + "明日も晴れるでしょう。" * 40)
    (hit,) = message_search(owner=user, query="東京").hits
    text = hit.snippet_text
    assert text.startswith("… ") and text.endswith(" …")
    before = text[2 : text.index("東京")]
    assert before == "今日はとても良い天気でした。私は来月"  # the sentence before, whole
    assert 2 * len(text) <= 2 * search_snippets.SNIPPET_COLUMNS + 8
    assert str(hit.snippet_html).count("<mark>") == 1


def test_title_hits_come_first_on_page_one_only(user):
    titled = [_chat(user, title=f"Quince jam batch {i}") for i in range(7)]
    other = _chat(user)
    (message,) = _say(other, "quince jelly needs pectin")
    first = message_search(owner=user, query="quince")
    kinds = [h.kind for h in first.hits]
    assert kinds == ["title"] * search_selectors.TITLE_HITS + ["message"]
    assert {h.conversation_id for h in first.hits[:5]} <= {c.pk for c in titled}
    assert "<mark>Quince</mark> jam" in str(first.hits[0].snippet_html)
    assert first.hits[-1].message_id == message.pk and first.hits[-1].conversation_id == other.pk


# --- owners and pages ---------------------------------------------------------------------------------


def test_another_owners_messages_never_appear(user, other_user, client):
    mine = _chat(user, title="Mine")
    theirs = _chat(other_user, title="Theirs pumpernickel")
    (own,) = _say(mine, "pumpernickel bread for the cat")
    _say(theirs, "pumpernickel pumpernickel secret of the intruder")
    page = message_search(owner=user, query="pumpernickel")
    assert _message_ids(page) == [own.pk] and {h.conversation_id for h in page.hits} == {mine.pk}

    api = APIClient()
    api.force_authenticate(user)
    body = api.get("/api/search/", {"q": "pumpernickel"}).json()
    assert [r["message_id"] for r in body["results"]] == [own.pk]
    assert "intruder" not in str(body) and "Theirs" not in str(body)

    client.force_login(user)
    html = client.get(reverse("chat-sidebar"), {"q": "pumpernickel"}).content.decode()
    assert f"#m-{own.pk}" in html and "intruder" not in html and "Theirs" not in html


def test_pages_are_disjoint_and_say_whether_more_follow(user):
    chat = _chat(user)
    ids = _bulk(chat, [f"invoice number {i} {'invoice ' * (i % 5)}{FILLER}" for i in range(45)])
    pages = [message_search(owner=user, query="invoice", page=n) for n in (1, 2, 3)]
    got = [_message_ids(p) for p in pages]
    assert [len(g) for g in got] == [20, 20, 5]
    assert [p.has_more for p in pages] == [True, True, False]
    assert sorted(got[0] + got[1] + got[2]) == ids  # disjoint, and every match once
    assert pages[0].ranked == 45 and not pages[0].window_full
    scores = [h.score for p in pages for h in p.hits]
    assert scores == sorted(scores, reverse=True)
    assert message_search(owner=user, query="invoice", page=4).hits == []
    with pytest.raises(ValueError):
        message_search(owner=user, query="invoice", page=search_selectors.MAX_PAGE + 1)


def test_ranking_covers_the_newest_window_of_matches(user, monkeypatch):
    monkeypatch.setattr(search_selectors, "RANK_WINDOW", 10)
    chat = _chat(user)
    ids = _bulk(chat, [f"ledger entry {i} {FILLER}" for i in range(25)])
    page = message_search(owner=user, query="ledger", page_size=50)
    assert sorted(_message_ids(page)) == ids[-10:]
    assert page.ranked == 10 and page.window_full and not page.has_more


def test_a_short_word_gives_the_same_window_scanned_or_looked_up(user, monkeypatch):
    """A query of one short word is first tested on the newest messages' stored terms; when they hold
    too few matches the index is asked. Either way the ranked hits are the index's."""
    monkeypatch.setattr(search_selectors, "RANK_WINDOW", 6)
    monkeypatch.setattr(search_selectors, "SCAN_ROWS", 12)
    chat = _chat(user)
    _bulk(chat, [f"zqx ledger entry {i}" for i in range(4)] + [f"ledger entry {i} {FILLER}" for i in range(30)]
          + [f"leaflet drop {i}" for i in range(3)])

    def ranked(query: str) -> list[tuple[int | None, float | None]]:
        page = message_search(owner=user, query=query, page_size=50)
        return [(h.message_id, h.score) for h in page.hits if h.kind == "message"]

    queries = ["zq", "le", "ent", "dro", "ledger zq", "entry le", "drop le"]
    scanned_first = {q: ranked(q) for q in queries}
    monkeypatch.setattr(search_selectors, "SHORT_PREFIX", 0)  # always through the index
    assert {q: ranked(q) for q in queries} == scanned_first
    assert len(scanned_first["zq"]) == 4  # older than the scanned rows: found through the index
    assert len(scanned_first["le"]) == 6 and len(scanned_first["dro"]) == 3 and len(scanned_first["drop le"]) == 3


# --- API and sidebar ------------------------------------------------------------------------------------


def test_api_answers_hits_with_snippets_and_links(user):
    chat = _chat(user, title="Trip")
    user_message, _ = _say(chat, "Book the <ferry> to Naxos", "The ferry to Naxos leaves at nine.")
    api = token_client(user)
    response = api.get("/api/search/", {"q": "naxos ferr"})
    assert response.status_code == 200
    body = response.json()
    assert body["page"] == 1 and body["page_size"] == 20 and body["has_more"] is False and body["ranked"] == 2
    hit = next(r for r in body["results"] if r["message_id"] == user_message.pk)
    assert hit["kind"] == "message" and hit["role"] == "user" and hit["conversation_id"] == chat.pk
    assert hit["conversation_title"] == "Trip" and hit["created_at"]
    assert hit["snippet"] == "Book the &lt;<mark>ferry</mark>&gt; to <mark>Naxos</mark>"
    assert hit["snippet_text"] == "Book the <ferry> to Naxos"
    assert hit["url"] == f"/c/{chat.pk}/#m-{user_message.pk}"


def test_api_hits_say_whether_their_chat_is_archived(user):
    # Archived chats stay searchable (README: Archived chats); a hit says so, as the sidebar marks them.
    kept, archived = _chat(user, title="Ferry plans"), _chat(user, title="Ferry tickets")
    _say(kept, "The ferry to Naxos")
    _say(archived, "The ferry to Paros")
    Conversation.objects.filter(pk=archived.pk).update(archived_at=archived.created_at)
    results = token_client(user).get("/api/search/", {"q": "ferry"}).json()["results"]
    marks = {(r["kind"], r["conversation_id"]): r["conversation_archived"] for r in results}
    assert marks == {("title", kept.pk): False, ("title", archived.pk): True,
                     ("message", kept.pk): False, ("message", archived.pk): True}


def test_api_validates_the_page_and_answers_short_queries_empty(user):
    api = APIClient()
    assert api.get("/api/search/", {"q": "ferry"}).status_code == 401
    api.force_authenticate(user)
    for bad in ("0", "51", "two", "-1", "1.5"):
        response = api.get("/api/search/", {"q": "ferry", "page": bad})
        assert response.status_code == 400, bad
        assert "page" in response.json()
    assert api.get("/api/search/", {"q": "ferry", "page": "50"}).status_code == 200
    for short in ("", "f", "  "):
        response = api.get("/api/search/", {"q": short})
        assert response.status_code == 200
        assert response.json()["results"] == [] and response.json()["has_more"] is False


def test_sidebar_shows_snippets_under_their_conversation(user, client):
    chat = _chat(user, title="Kitchen")
    other = _chat(user, title="Garage <b>tools</b>")
    first, second = _say(chat, "The <img src=x onerror=alert(1)> saffron risotto", "Saffron is expensive.")
    _say(other, "nothing to see")
    client.force_login(user)
    html = client.get(reverse("chat-sidebar"), {"q": "saffron"}).content.decode()
    assert "Best matches" in html
    # The links keep the search, so the chat opened shows the same hits beside it.
    assert f'href="/c/{chat.pk}/?q=saffron#m-{first.pk}"' in html
    assert f'href="/c/{chat.pk}/?q=saffron#m-{second.pk}"' in html and f'href="/c/{chat.pk}/?q=saffron"' in html
    assert "&lt;img src=x onerror=alert(1)&gt; <mark>saffron</mark>" in html
    opened = client.get(f"/c/{chat.pk}/", {"q": "saffron"}).content.decode()
    assert 'value="saffron"' in opened and "Garage" not in opened
    assert "<img" not in html
    assert "Garage" not in html  # not a match
    # without a query the list is the plain conversation list
    html = client.get(reverse("chat-sidebar")).content.decode()
    assert "Best matches" not in html and "<mark>" not in html and "Garage &lt;b&gt;tools&lt;/b&gt;" in html
    assert "?q=" not in html


def test_a_long_search_text_is_refused_by_the_api_and_cut_by_the_pages(user, client):
    chat = _chat(user, title="Saffron notes")
    _say(chat, "The saffron risotto")
    api = APIClient()
    api.force_authenticate(user)
    for path in ("/api/conversations/", "/api/search/"):
        refused = api.get(path, {"q": "saffron" + "a" * MAX_QUERY_CHARS})
        assert refused.status_code == 400 and "q" in refused.json(), path
        assert api.get(path, {"q": "saffron"}).status_code == 200
    client.force_login(user)
    # 50,001 characters: past what SQLite's LIKE takes; the pages read the first MAX_QUERY_CHARS.
    long_text = "saffron " + "a" * 50_000
    for path in ("/", f"/c/{chat.pk}/", reverse("chat-sidebar")):
        response = client.get(path, {"q": long_text})
        assert response.status_code == 200, path
    page = client.get("/", {"q": long_text}).content.decode()
    assert f'maxlength="{MAX_QUERY_CHARS}"' in page
    assert f'value="saffron {"a" * (MAX_QUERY_CHARS - 8)}"' in page


@pytest.mark.parametrize("current", ["", "x", "\u00b2", "\u0663", "-4", "1" * 19, "1" * 5_000])
def test_the_sidebar_reads_an_odd_current_chat_as_none(user, client, current):
    _chat(user, title="Kitchen")
    client.force_login(user)
    response = client.get(reverse("chat-sidebar"), {"current": current})
    assert response.status_code == 200 and "Kitchen" in response.content.decode()


def test_another_branchs_messages_find_neither_a_message_nor_their_chat(user):
    chat = _chat(user)
    kept = _say(chat, *(f"zebra kept {i}" for i in range(4)))
    hidden = _say(chat, *(f"zebra walrus {i}" for i in range(25)))
    with transaction.atomic():
        branch_hide(conversation_id=chat.pk, start_id=hidden[0].pk)  # an edit or regenerate before them

    page = message_search(owner=user, query="zebra")
    assert sorted(_message_ids(page)) == [m.pk for m in kept] and page.ranked == 4 and not page.has_more
    matching = conversation_ids_matching(owner=user, text="walrus")
    assert isinstance(matching, RawSQL) and list(Conversation.objects.filter(pk__in=matching)) == []
    assert message_search(owner=user, query="walrus").hits == []

    with transaction.atomic():
        branch_show(conversation_id=chat.pk, start_id=hidden[0].pk)  # switched back to
    assert message_search(owner=user, query="walrus", page_size=50).ranked == 25
    assert list(Conversation.objects.filter(pk__in=conversation_ids_matching(owner=user, text="walrus"))) == [chat]
