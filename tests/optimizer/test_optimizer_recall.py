"""Recall: lexical analysis, BM25 ranking, the recall block's rules, and recall inside pack()."""

import datetime as dt
import random

import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from optkit import MODEL, msg, source_of

from optimizer import Msg, count_message, pack
from optimizer.bm25 import MAX_QUERY_TERMS, LexicalIndex, bm25, bm25_of_term_texts, idf, strongest_terms
from optimizer.lexical import (
    Query,
    analyze,
    build_query,
    document_terms,
    fold,
    index_text,
    prefix_stems,
    term_spans,
    words,
)
from optimizer.packing import REFILLED_REASON
from optimizer.recall import (
    HEADER,
    NEIGHBOUR_WEIGHT,
    READ_CHUNK,
    RECALL_CAP,
    SEARCH_LIMIT,
    MemorySource,
    RecallItem,
    rank_passages,
    recall,
    recall_cap,
)
from optimizer.types import DEFAULT_CONFIG

DAY0 = dt.datetime(2024, 3, 4, 10, 30)
FILLER = ["we", "talked", "about", "weather", "coffee", "music", "weekend", "plans", "movies", "books", "lunch",
          "traffic", "garden", "football", "holiday", "cooking", "podcast", "running", "painting", "jazz"]


def dated(m: Msg, day: int) -> Msg:
    return Msg(id=m.id, role=m.role, content=m.content, pinned=m.pinned, tokens=m.tokens,
               created_at=DAY0 + dt.timedelta(days=day))


def chat(rounds: int, *, fact_at: int | None = None, seed: int = 1) -> list[Msg]:
    """system + `rounds` rounds of small talk, one day apart, with a fact planted in round `fact_at`."""
    rng = random.Random(seed)
    out = [msg("sys", "system", "You are a helpful assistant.")]
    for r in range(rounds):
        user = " ".join(rng.choices(FILLER, k=25))
        reply = " ".join(rng.choices(FILLER, k=35))
        if r == fact_at:
            user = "Which bike should I pick for the commute?"
            reply = "Take the Brompton folding bike; its serial number is QX-7741 and it fits on the train."
        out.append(dated(msg(f"u{r}", "user", user), r))
        out.append(dated(msg(f"a{r}", "assistant", reply), r))
    return out


def packed_with_recall(msgs: list[Msg], *, budget: int, preference: str = "fast"):
    return pack(msgs, budget=budget, preference=preference, model=MODEL, recall_source=source_of(msgs))


# --- analysis and ranking ----------------------------------------------------------------------------

def test_analyze_stems_and_drops_stop_words():
    assert analyze("Thanks! We were adopting; the adoption went well") == ["adopt", "adopt"]
    assert analyze("Room 8443, in 2023") == ["room", "8443", "2023"]
    assert index_text("Don't forget the painting") == "forget paint"


def test_a_possessive_is_its_word():
    # The stemmer keeps an "s" after an "s" or a "u": with the apostrophe taken out first, "Paris's" was
    # "pariss", and a question about Paris never found it; in any script, with any apostrophe typed.
    for word, possessive in [("Paris", "Paris's"), ("James", "James\u2019s"), ("boss", "boss's"), ("gnu", "GNU's"),
                             ("John", "John's"), ("O'Brien", "O'Brien's"), ("Jürgen", "Jürgen\u02bcs")]:
        assert analyze(possessive) == analyze(word), word
    assert analyze("O'Brien") == ["obrien"]
    assert analyze("straight A's") == ["straight", "as"]  # one letter is no term
    sources = [msg("0", "user", "We toured Paris's old museum on Sunday."), msg("1", "assistant", "Lovely."),
               msg("2", "user", "Now the weather.")]
    block = recall(text="What did we see in Paris?", source=source_of(sources), room=500, exclude_ids=frozenset(),
                   model=MODEL)
    assert block is not None and "0" in block.hit_ids


def test_case_accents_and_compatibility_forms_are_folded():
    assert analyze("Königstraße") == analyze("KONIGSTRASSE") == ["konigstrass"]
    assert analyze("Crème BRÛLÉE at the café") == analyze("creme brulee at the cafe")
    assert analyze("\uff26\uff55\uff4c\uff4c \ufb01nal") == ["full", "final"]  # full-width letters, a ligature
    assert fold("Don\u2019t") == "don't"
    # Letters whose stroke or ligature no decomposition takes off are written as people type them.
    assert [fold(w) for w in ("Tromsø", "ÆBLEGRØD", "Łódź", "Đakovo", "Þórshöfn", "Œuvre", "İstanbul")] == [
        "tromso", "aeblegrod", "lodz", "dakovo", "thorshofn", "oeuvre", "istanbul"]
    # Other scripts keep the marks that make their letters; Cyrillic's accents go like Latin's.
    assert fold("नमस्ते") == "नमस्ते" and fold("Ёлка") == "елка"


@given(st.text(max_size=60))
def test_folding_is_idempotent_and_analysis_sees_only_the_folded_text(text):
    assert fold(fold(text)) == fold(text)
    assert analyze(fold(text)) == analyze(text)
    if text.isascii():
        assert fold(text) == text.lower()


def test_words_of_scripts_written_with_marks_are_whole():
    # Vowel signs and viramas are combining marks inside the word: the standard library's word
    # pattern cut "हिन्दी" into single letters, which were then dropped.
    assert analyze("हिन्दी भाषा सीखना") == ["हिन्दी", "भाषा", "सीखना"]
    assert analyze("தமிழ் மொழி") == ["தமிழ்", "மொழி"]
    assert analyze("আমি বাংলায় গান গাই") == ["আমি", "বাংলায়", "গান", "গাই"]
    # A zero-width joiner or non-joiner shapes the word it stands in and stays inside it.
    assert words("\u0915\u094d\u200d\u0937") == ["\u0915\u094d\u200d\u0937"]  # ksha with a joiner
    index = LexicalIndex([analyze("कल हम दिल्ली जाएंगे"), analyze("मौसम अच्छा है")])
    assert [doc for doc, _ in index.search(build_query("दिल्ली कब?"), limit=5)] == [0]


def test_runs_of_scripts_written_without_spaces_are_pairs_of_characters():
    # Japanese: kanji and kana in one run; a word inside it is found by its own pairs.
    assert analyze("私は東京に行きました。") == ["私は", "は東", "東京", "京に", "に行", "行き", "きま", "まし", "した"]
    assert analyze("東京") == ["東京"] and analyze("猫 is cute") == ["猫", "cute"]
    # Korean particles join the noun: "서울" still meets "서울에서".
    assert analyze("서울에서 만나요") == ["서울", "울에", "에서", "만나", "나요"]
    # Thai vowel signs are marks on their consonant: a character is a grapheme, never a lone mark.
    assert analyze("สวัสดีครับ") == ["สวั", "วัส", "สดี", "ดีค", "ครั", "รับ"]
    # A run inside a Latin word is split from it; half-width kana are folded to full-width first.
    assert analyze("iPhone用のケース") == ["iphon", "用の", "のケ", "ケー", "ース"]
    assert analyze("ｶﾞｲﾄﾞ") == ["ガイ", "イド"]
    assert prefix_stems("東京") == []
    index = LexicalIndex([analyze("明日は京都で会議があります"), analyze("私は東京に行きました"),
                          analyze("The Tokyo office")])
    assert [doc for doc, _ in index.search(build_query("東京はどうでしたか?"), limit=5)][:1] == [1]


# Kana, common kanji, Hangul syllables, Thai (its marks included) and half-width katakana.
_UNSPACED_LETTERS = st.one_of(*(st.characters(min_codepoint=lo, max_codepoint=hi, categories=["L", "M"]) for lo, hi in [
    (0x3041, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x0E01, 0x0E4E), (0xFF66, 0xFF9F),
]))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_UNSPACED_LETTERS, min_size=2, max_size=20), st.data())
def test_a_word_inside_a_run_is_found_by_its_pairs(run, data):
    """Whatever run of such a script, any stretch of two or more of its characters typed alone gives
    pairs that the run's own terms hold; term_spans gives the terms analyze gives, word by word, each
    pointing at the text it stands for."""
    graphemes = regex.findall(r"\X", fold(run))
    if len(graphemes) >= 2:
        a = data.draw(st.integers(0, len(graphemes) - 2))
        b = data.draw(st.integers(a + 2, len(graphemes)))
        assert set(analyze("".join(graphemes[a:b]))) <= set(analyze(run))
    spans = [s for m in regex.finditer(r"[^\W_]+", run) for s in term_spans(m.group())]
    assert [term for term, _, _ in spans] == analyze(run)
    stored = [s for m in regex.finditer(r"[^\W_]+", run) for s in term_spans(m.group(), document=True)]
    assert [term for term, _, _ in stored] == document_terms(run)
    assert set(analyze(run)) <= set(document_terms(run))
    # one character typed alone (a prefix) finds the run wherever it stands in it, its end included
    assert all(any(t.startswith(g) for t in document_terms(run)) for g in graphemes)
    # a span covers whole characters of the text: one that folds to two may hold more than its term
    assert all(start < end and term in fold(m[start:end])
               for m in [m.group() for m in regex.finditer(r"[^\W_]+", run)] for term, start, end in term_spans(m))


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_ascii_text_splits_into_the_same_words_as_unicode_word_characters_give(text):
    # words() takes the standard library's pattern on ASCII text (its fast path) and the `regex`
    # module's elsewhere: on ASCII the two must agree.
    assert words(text) == regex.findall(r"[^\W_]+(?:'[^\W_]+)*", text.lower())


def test_filler_message_has_no_query():
    assert not build_query("thanks!")
    assert not build_query("Ok, cool. Sounds good to me.")


def test_follow_up_borrows_the_turn_it_answers():
    q = build_query("why?", context="The Brompton bike folds small")
    assert q.weights["brompton"] < 1
    standalone = build_query("Which bike did I pick for the daily commute?", context="The Brompton bike folds")
    assert "brompton" not in standalone.weights


def test_bm25_prefers_the_rare_term_and_saturates_repeats():
    idx = LexicalIndex([["bike", "train"], ["bike"] * 8, ["train"], ["brompton", "bike"]])
    ranked = idx.search(build_query("brompton bike"), limit=4)
    assert ranked[0][0] == 3
    assert [d for d, _ in ranked].index(1) > 0  # eight repeats of a common term do not win


# --- the block ---------------------------------------------------------------------------------------

def test_recall_quotes_the_fact_whole_with_date_speaker_and_neighbours():
    msgs = chat(60, fact_at=5)
    msgs.append(dated(msg("q", "user", "What was the serial number of my folding bike?"), 70))
    result = packed_with_recall(msgs, budget=2048)
    block = next(p for p in result.messages if p.origin == "recall")
    assert result.messages[-1].source_ids == ("q",)
    assert result.messages[-2] is block  # right before the newest message: the prefix stays put
    assert block.role == "system"
    assert block.content.startswith(HEADER)
    fact = msgs[12]  # a5
    assert fact.id == "a5" and "a5" in block.source_ids
    assert f"assistant: {fact.content}" in block.content
    assert "Sat 9 March 2024" in block.content  # the date line of day 5
    assert "u5" in block.source_ids  # the question it answered comes along
    assert result.stats["recall_ids"] == list(block.source_ids)
    assert result.stats["recall_hit_ids"][0] == "a5"
    assert "serial" in result.stats["recall_terms"]
    assert sum(p.tokens for p in result.messages) + 3 <= 2048


def test_thanks_recalls_nothing_and_unknown_words_recall_nothing():
    msgs = chat(60, fact_at=5)
    for text in ("thanks!", "zebra quantum xylophone?"):
        result = packed_with_recall([*msgs, msg("q", "user", text)], budget=2048)
        assert all(p.origin != "recall" for p in result.messages)
        assert result.stats["recall_ids"] == []


def test_nothing_is_recalled_while_everything_fits():
    msgs = [*chat(3, fact_at=1), msg("q", "user", "What was the serial number of my bike?")]
    result = packed_with_recall(msgs, budget=8192)
    assert not result.stats["optimization_applied"]
    assert all(p.origin != "recall" for p in result.messages)


def test_a_cut_whose_quotes_would_refill_it_sends_the_history_and_says_why():
    # Over the trigger, under the budget: the first cut's quotes would take back all it frees.
    msgs = [*chat(6, fact_at=2), msg("q", "user", "Remind me about the podcast and jazz and the garden plans")]
    result = packed_with_recall(msgs, budget=448)
    assert result.stats["trigger_tokens"] <= result.stats["tokens_before"] <= 448
    assert not result.stats["optimization_applied"] and len(result.messages) == len(msgs)
    assert result.stats["strategy_reason"] == REFILLED_REASON


def test_stateless_request_fills_the_budget_when_history_is_relevant():
    msgs = chat(120, fact_at=5)
    msgs.append(msg("q", "user", "Remind me about the podcast and jazz and the garden plans"))
    # below fast's recall cap (4,096 tokens) the block takes whatever room the window leaves
    for budget, preference in ((2048, "fast"), (4096, "fast"), (8192, "balanced")):
        result = packed_with_recall(msgs, budget=budget, preference=preference)
        assert result.stats["tokens_after"] <= budget
        assert result.stats["tokens_after"] >= 0.9 * budget


def test_cap_per_preference_bounds_the_block():
    msgs = chat(900, fact_at=5)
    msgs.append(msg("q", "user", "Remind me about the podcast and jazz and the garden plans"))
    result = packed_with_recall(msgs, budget=40_000, preference="fast")
    assert 0 < result.stats["recall_tokens"] <= RECALL_CAP["fast"]
    assert result.stats["tokens_after"] < 40_000 - 8_000  # the cap binds, not the budget


def test_turn_with_window_state_holds_the_block_to_its_share_of_the_budget():
    msgs = chat(400, fact_at=5)
    msgs.append(msg("q", "user", "Remind me about the podcast and jazz and the garden plans"))
    first = pack(msgs, budget=8192, preference="balanced", model=MODEL, recall_source=source_of(msgs))
    assert first.stats["recall_tokens"] > 0.2 * 8192  # no window state: recall fills the budget
    turn = pack(msgs, budget=8192, preference="balanced", model=MODEL, recall_source=source_of(msgs),
                window_start=first.window_start)
    assert 0 < turn.stats["recall_tokens"] <= recall_cap("balanced", budget=8192, stateful=True)
    assert recall_cap("balanced", budget=8192, stateful=True) == int(8192 * 0.2)


def test_recall_never_quotes_what_the_request_shows():
    items = [RecallItem(id=str(k), role="user" if k % 2 == 0 else "assistant", content=f"bike {k}", position=k)
             for k in range(10)]
    block = recall(text="bike", source=MemorySource(items), room=2000, exclude_ids=frozenset({"3", "4"}), model=MODEL)
    assert block is not None
    assert not {"3", "4"} & set(block.source_ids)


@settings(max_examples=150, deadline=None)
@given(
    # skewed term frequencies (t0 commonest), so that rarer terms prune commoner ones
    st.lists(st.lists(st.builds(lambda a, b: f"t{min(a, b)}", st.integers(0, 7), st.integers(0, 7)), max_size=12),
             min_size=1, max_size=40),
    st.dictionaries(st.sampled_from([f"t{k}" for k in range(9)]), st.sampled_from([0.35, 1.0, 1.5]),
                    min_size=1),
    st.integers(1, 12),
    st.sets(st.integers(0, 39), max_size=5),
)
def test_pruned_search_equals_scoring_every_document(docs, weights, limit, exclude):
    """MaxScore pruning returns exactly the top `limit` of a plain pass that scores every document."""
    idx = LexicalIndex(docs)
    full = {}
    for doc in range(len(docs)):
        if doc in exclude:
            continue
        score = 0.0
        for term, weight in weights.items():
            df = sum(term in d for d in docs)
            tf = docs[doc].count(term)
            if tf:
                score += bm25(tf, len(docs[doc]), idx.avg_len, idf(df, len(docs)) * weight)
        if score:
            full[doc] = score
    expected = sorted(full.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    assert idx.search(Query(weights=weights), limit=limit, exclude=exclude) == expected


def _plain_scores(docs: list[list[str]], weights: list[tuple[str, float]], avg_len: float) -> list[tuple[int, float]]:
    """Each document's score by a plain pass over every query term, in the query's order."""
    out = []
    for key, doc in enumerate(docs):
        score = 0.0
        for term, weight in weights:
            if doc.count(term):
                score += bm25(doc.count(term), len(doc), avg_len, weight)
        out.append((key, score))
    return out


@given(
    # terms that prefix one another (t1, t10) and repeats side by side, as stored term texts hold them
    st.lists(st.lists(st.sampled_from(["t1", "t10", "t2", "x", "t1t"]), max_size=15), min_size=1, max_size=20),
    st.lists(st.tuples(st.sampled_from(["t1", "t10", "t2", "zz"]), st.floats(0.01, 20.0)), max_size=4),
    st.floats(0.5, 30.0),
)
def test_scores_of_term_texts_are_the_floats_bm25_gives(docs, weights, avg_len):
    """The database's stored terms are scored to the same floats as the in-memory index's term lists:
    whole terms only, repeats counted, summed in the query's order."""
    rows = [(key, len(doc), " ".join(doc)) for key, doc in enumerate(docs)]
    expected = _plain_scores(docs, weights, avg_len)
    assert list(bm25_of_term_texts(rows, avg_len=avg_len, weights=weights)) == expected


_MANY_TERMS = [f"w{k}" for k in range(80)]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(_MANY_TERMS), max_size=30), min_size=1, max_size=60),
    st.lists(st.sampled_from(_MANY_TERMS), min_size=17, max_size=200),
    st.integers(1, 12),
    st.sets(st.integers(0, 59), max_size=5),
    st.floats(0.5, 30.0),
)
def test_a_query_of_many_terms_scores_and_ranks_as_a_short_one(docs, query_terms, limit, exclude, avg_len):
    """A pasted document as the newest message: hundreds of query terms, repeats among them. Scores
    and ranking are the floats a plain pass over every query term for every document gives (both
    paths count differently past a few query terms: bench/recall_long_query.py)."""
    weights = [(t, 1.0 + (k % 3) / 2) for k, t in enumerate(query_terms)]  # repeats: the scan counts each
    rows = [(key, len(doc), " ".join(doc)) for key, doc in enumerate(docs)]
    expected = _plain_scores(docs, weights, avg_len)
    assert list(bm25_of_term_texts(rows, avg_len=avg_len, weights=weights)) == expected

    idx = LexicalIndex(docs)
    query = Query(weights=dict(weights))
    full = {}
    for doc in range(len(docs)):
        if doc in exclude:
            continue
        score = 0.0
        for term, weight in query.weights.items():
            tf = docs[doc].count(term)
            if tf:
                score += bm25(tf, len(docs[doc]), idx.avg_len, idf(sum(term in d for d in docs), len(docs)) * weight)
        if score:
            full[doc] = score
    best = sorted(full.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    assert idx.search(query, limit=limit, exclude=exclude) == best


def test_a_hit_whose_exchange_no_block_can_hold_is_quoted_with_the_neighbours_that_fit():
    # The answer sits next to a pasted file far larger than the block: quoting the exchange whole is
    # impossible at any fill, and leaving the answer out for it quoted nothing at all.
    pasted = " ".join(f"line {k} of the pasted configuration file" for k in range(400))
    msgs = [msg("0", "user", "Hello, a new project today."), msg("1", "assistant", "Happy to help with it."),
            msg("2", "user", pasted), msg("3", "assistant", "The frobnicator timeout is set to 45 seconds there."),
            msg("4", "user", "Thanks, now lunch plans."), msg("5", "assistant", "Pasta sounds good.")]
    assert msgs[2].tokens > 1000
    block = recall(text="What was the frobnicator timeout?", source=source_of(msgs), room=300,
                   exclude_ids=frozenset(), model=MODEL)
    assert block is not None and block.hit_ids == ("3",) and block.source_ids == ("3", "4")
    assert block.tokens <= 300


def test_an_exchange_that_matches_outranks_a_lone_match():
    """The answer whose question and follow-up match too comes first, though alone it scores lower
    than an exclamation that only repeats the name and the place."""
    texts = ["Lena! Lena, the lake!", "Ha, hello to you too.", "Which kayak should I buy?",
             "Buy the red kayak for the lake trip.", "Lena says the trip was great.", "Sounds like a plan.",
             "We talked about the weather and coffee.", "Music and books, mostly."]
    items = [RecallItem(id=str(k), role="user" if k % 2 == 0 else "assistant", content=t, position=k)
             for k, t in enumerate(texts)]
    source = MemorySource(items)
    hits = source.search(build_query("Which kayak did Lena buy for the lake trip?"), limit=10, exclude_ids=frozenset())
    assert hits[0][0] == "0"  # by itself the exclamation scores highest
    ranked = rank_passages(hits, source.neighbours([i for i, _ in hits]))
    assert sorted(i for i, _ in ranked) == sorted(i for i, _ in hits)  # the same hits
    assert ranked[0][0] == "3" and ranked[-1][0] == "0"


@given(st.lists(st.floats(0.1, 10), min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_rank_passages_orders_by_the_exchange_score(scores, rng):
    n = len(scores)
    links = {str(k): (str(k - 1) if k else None, str(k + 1) if k + 1 < n else None) for k in range(n)}
    hits = [(str(k), s) for k, s in enumerate(scores) if rng.random() < 0.7] or [("0", scores[0])]
    by_id = dict(hits)
    ranked = rank_passages(hits, links)
    assert sorted(i for i, _ in ranked) == sorted(by_id)

    def exchange(i: str) -> float:
        k = int(i)
        return by_id[i] + NEIGHBOUR_WEIGHT * (by_id.get(str(k - 1), 0.0) + by_id.get(str(k + 1), 0.0))

    assert [s for _, s in ranked] == [exchange(i) for i, _ in ranked]
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)


class CountingSource(MemorySource):
    """MemorySource that records which messages recall read."""

    def __init__(self, items):
        super().__init__(items)
        self.asked: list[str] = []

    def messages(self, ids):
        self.asked.extend(ids)
        return super().messages(ids)


def test_messages_are_read_only_as_far_as_the_room_needs():
    # every third message is a hit, so exchanges do not overlap
    items = [RecallItem(id=str(k), role="user" if k % 2 == 0 else "assistant", position=k,
                        content=f"The bike trip number {k} went along the river" if k % 3 == 0 else "Sounds good.")
             for k in range(600)]
    query = build_query("bike trip river")
    hits = MemorySource(items).search(query, limit=SEARCH_LIMIT, exclude_ids=frozenset())
    assert len(hits) == SEARCH_LIMIT
    small = CountingSource(items)
    block = recall(text="bike trip river", source=small, room=400, exclude_ids=frozenset(), model=MODEL)
    assert block is not None
    # one chunk of exchanges fills 400 tokens: the hits of one chunk and their neighbours are read
    assert len({i for i, _ in hits} & set(small.asked)) == READ_CHUNK and len(small.asked) <= 3 * READ_CHUNK
    assert len(set(small.asked)) == len(small.asked)  # and no message is read twice
    large = CountingSource(items)
    block = recall(text="bike trip river", source=large, room=20_000, exclude_ids=frozenset(), model=MODEL)
    assert len(block.hit_ids) == SEARCH_LIMIT  # a large room reads every exchange, once each
    assert sorted(large.asked) == sorted(set(large.asked)) and {i for i, _ in hits} <= set(large.asked)


# --- properties --------------------------------------------------------------------------------------

@st.composite
def dated_chats(draw):
    rng = random.Random(draw(st.integers(0, 2**16)))
    vocab = [*FILLER, "Brompton", "QX-7741", "Lisbon", "2023", "deadline"]
    out = [msg("sys", "system", "Be brief.")]
    for r in range(draw(st.integers(1, 80))):
        for role in ("user", "assistant"):
            words = rng.choices(vocab, k=rng.randint(1, 80 if role == "assistant" else 40))
            out.append(dated(msg(f"{role[0]}{r}", role, " ".join(words), pinned=rng.random() < 0.03), r // 3))
    out.append(msg("q", "user", " ".join(rng.choices(vocab, k=draw(st.integers(1, 12))))))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(dated_chats(), st.sampled_from([300, 700, 1500, 4000]), st.sampled_from(["fast", "balanced", "quality"]))
def test_recall_rules_hold(msgs, budget, preference):
    try:
        result = packed_with_recall(msgs, budget=budget, preference=preference)
    except ValueError:  # must-keeps that cannot fit: pack() reports it; nothing to check here
        return
    total = sum(p.tokens for p in result.messages) + 3
    assert total <= budget
    blocks = [k for k, p in enumerate(result.messages) if p.origin == "recall"]
    assert len(blocks) <= 1
    if not blocks:
        return
    k = blocks[0]
    block = result.messages[k]
    assert result.messages[k + 1].source_ids == ("q",)  # right before the newest message
    assert block.tokens == count_message({"role": "system", "content": block.content}, model=MODEL)
    by_id = {m.id: (i, m) for i, m in enumerate(msgs)}
    positions = [by_id[i][0] for i in block.source_ids]
    assert positions == sorted(positions)  # time order
    shown = {i for p in result.messages if p.origin in ("verbatim", "pinned", "compressed") for i in p.source_ids}
    assert not shown & set(block.source_ids)  # never repeats what the request carries
    for i in block.source_ids:  # quotes are whole messages, verbatim
        m = by_id[i][1]
        assert f"{m.role}: {m.content}" in block.content


# --- the command line --------------------------------------------------------------------------------

def _cli(capsys, monkeypatch, request: dict) -> tuple[int, str, str]:
    import io
    import json

    from optimizer.cli import main

    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(request) + "\n"))
    code = main(["pack"])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_reads_dates_and_quotes_them(capsys, monkeypatch):
    import json

    msgs = chat(60, fact_at=5)
    raw = [{"id": m.id, "role": m.role, "content": m.content,
            **({"created_at": m.created_at.isoformat()} if m.created_at else {})} for m in msgs]
    raw.append({"id": "q", "role": "user", "content": "What was the serial number of my folding bike?"})
    code, out, _ = _cli(capsys, monkeypatch, {"id": "r1", "budget": 2048, "messages": raw})
    assert code == 0
    packed = json.loads(out)["messages"]
    block = packed[-2]
    assert "a5" in block["source_ids"] and "Sat 9 March 2024" in block["content"]


def test_cli_refuses_a_bad_date(capsys, monkeypatch):
    request = {"id": "r2", "budget": 2048,
               "messages": [{"id": "u", "role": "user", "content": "hi", "created_at": "last Tuesday"}]}
    code, out, err = _cli(capsys, monkeypatch, request)
    assert code == 2 and out == ""
    assert "r2" in err and "created_at 'last Tuesday' is not an ISO 8601 date" in err


def test_with_no_cached_prefix_the_window_leaves_the_room_to_recall():
    """A stateless request (no window start) keeps a recent window of at most fill_window_ratio of the
    budget, whatever the preference, and recall takes the room; with a stored window, the preference's
    target holds (a cached prefix is worth keeping)."""
    msgs = chat(200, fact_at=5)
    msgs.append(msg("q", "user", "Remind me about the podcast and jazz and the garden plans"))
    budget = 4096
    for preference in ("fast", "balanced", "quality"):
        result = packed_with_recall(msgs, budget=budget, preference=preference)
        window = sum(p.tokens for p in result.messages if p.origin in ("verbatim", "pinned", "compressed"))
        newest = result.messages[-1].tokens
        assert window <= DEFAULT_CONFIG.fill_window_ratio * budget + newest
        assert any(p.origin == "recall" for p in result.messages)
    without = pack(msgs, budget=budget, preference="balanced", model=MODEL)  # no source: no recall to fill
    window = sum(p.tokens for p in without.messages if p.origin in ("verbatim", "pinned", "compressed"))
    assert window > DEFAULT_CONFIG.fill_window_ratio * budget


def test_a_window_yields_to_recall_only_when_recall_uses_the_room():
    """With nothing relevant to quote ("thanks!"), a stateless request keeps the preference's own
    window: never less than truncation would send."""
    msgs = chat(200, fact_at=5)
    msgs.append(msg("q", "user", "thanks!"))
    with_source = packed_with_recall(msgs, budget=4096, preference="balanced")
    without = pack(msgs, budget=4096, preference="balanced", model=MODEL)
    assert not any(p.origin == "recall" for p in with_source.messages)
    assert [p.source_ids for p in with_source.messages] == [p.source_ids for p in without.messages]


def test_with_no_cached_prefix_quotes_come_before_the_summary():
    """A stateless request: the summary (written inline, or passed) takes only the room the quotes
    leave, so a question about the past gets as many quotes as with no summary at all; with window
    state the summary keeps its place and the block its share."""
    from optimizer import Summary, extractive_summary

    msgs = chat(200, fact_at=5)
    msgs.append(msg("q", "user", "Remind me about the podcast and jazz and the garden plans"))
    plain = pack(msgs, budget=4096, preference="quality", model=MODEL, recall_source=source_of(msgs))
    inline = pack(msgs, budget=4096, preference="quality", model=MODEL, recall_source=source_of(msgs),
                  summarize_now=extractive_summary)
    passed = pack(msgs, budget=4096, preference="quality", model=MODEL, recall_source=source_of(msgs),
                  summary=Summary(id="s", content="[Conversation summary]\n" + "facts " * 300, through_id="a60"))
    for result in (inline, passed):
        assert result.stats["recall_tokens"] == plain.stats["recall_tokens"] > 0
        assert result.stats["tokens_after"] <= 4096
    # the quotes left no room that holds a summary: none is sent, what it covers stays quotable, and
    # the span is reported (a worker writes the summary for the turns that follow)
    assert not inline.stats["summary_used"] and not passed.stats["summary_used"]
    assert inline.summary_span is not None
    # a turn with window state: the summary first, the block held to its share
    turn = pack(msgs, budget=4096, preference="quality", model=MODEL, recall_source=source_of(msgs),
                summary=Summary(id="s", content="[Conversation summary]\n" + "facts " * 300, through_id="a60"),
                window_start=plain.window_start)
    assert turn.stats["summary_used"] and 0 < turn.stats["recall_tokens"] <= recall_cap("quality", budget=4096,
                                                                                        stateful=True)


def test_with_little_to_quote_the_summary_keeps_its_place():
    """When the quotes use less than the window gave them, the preference's own layout is packed:
    the summary before the window, the few quotes after it."""
    from optimizer import extractive_summary

    msgs = chat(200, fact_at=5)
    msgs.append(msg("q", "user", "What was the serial number of the Brompton?"))
    result = pack(msgs, budget=4096, preference="quality", model=MODEL, recall_source=source_of(msgs),
                  summarize_now=extractive_summary)
    kinds = [p.origin for p in result.messages]
    assert result.stats["summary_generated"] and result.summary_span is None
    assert kinds.index("summary") < kinds.index("recall") == len(kinds) - 2
    assert "QX-7741" in result.messages[-2].content and result.stats["tokens_after"] <= 4096


def test_a_summary_written_after_the_quotes_never_drops_the_passed_one():
    """With a passed summary that the quotes left no room for, nothing is written inline (a new one
    would have to roll it in): the span is reported from the passed summary's end, for a worker."""
    from optimizer import Summary, extractive_summary

    msgs = chat(400, fact_at=5)
    msgs.append(msg("q", "user", "Remind me about the podcast and jazz and the garden plans"))
    result = pack(msgs, budget=8192, preference="quality", model=MODEL, recall_source=source_of(msgs),
                  summarize_now=extractive_summary,
                  summary=Summary(id="s", content="[Conversation summary]\n" + "facts " * 1500, through_id="a60"))
    assert result.new_summary is None and not result.stats["summary_generated"]
    assert result.summary_span is not None and result.summary_span.after_id == "a60"


def test_a_first_cut_that_would_send_more_than_the_history_sends_the_history():
    """Over the trigger, within the budget: the cut keeps 0.4 of the budget and quotes fill the rest,
    which here comes to more than the whole history. The history itself is sent instead."""
    msgs = []
    for r in range(7):
        said = f"Round {r}: we moved the server to Lisbon and the port is 8443, topic {r}. "
        msgs.append(msg(f"u{r}", "user", said * 3))
        msgs.append(msg(f"a{r}", "assistant", f"Noted round {r}: Lisbon server on port 8443, detail {r}. " * 3))
    msgs.append(msg("q", "user", "Which port did the Lisbon server use?"))

    result = packed_with_recall(msgs, budget=1000, preference="balanced")

    stats = result.stats
    assert stats["trigger_tokens"] < stats["tokens_before"] <= 1000
    assert not stats["optimization_applied"] and stats["tokens_after"] == stats["tokens_before"]
    assert [p.source_ids[0] for p in result.messages] == [m.id for m in msgs]
    assert "fits the budget" in stats["strategy_reason"]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["decorator", "generator", "nationalization", "hopefulness", "conditional", "running",
                        "relational", "computation", "organizations", "happiness", "invoices", "aquarium"]),
       st.data())
def test_a_typed_prefix_reaches_the_stem_of_the_word_it_begins(word, data):
    """Whatever part of a word has been typed (three letters or more), the word's stem either starts
    with the prefix's own stem, or is among `prefix_stems`: a search as you type does not lose the
    word midway, as "decora" lost "decorator" (stored as "decor")."""
    typed = word[: data.draw(st.integers(min_value=3, max_value=len(word)))]
    stem = analyze(word)[0]
    assert stem.startswith(analyze(typed)[0]) or stem in prefix_stems(typed)


def test_prefix_stems_are_only_the_stems_a_word_can_become():
    assert prefix_stems("decora") == ["decor"]
    assert "gene" not in prefix_stems("generato")  # "genes" is no word "generato" begins
    assert prefix_stems("decorator") == [] and prefix_stems("bike") == []
    assert prefix_stems("uni") == []  # the stemmer rewrites "uning" to "une": no word "uni" becomes


def test_render_marks_a_gap_only_between_quotes_the_conversation_does_not_have_together():
    from optimizer.recall import GAP, RecallItem, render

    q = RecallItem(id="10", role="user", content="Which port?", position=10)
    a = RecallItem(id="14", role="assistant", content="Port 8443.", position=14)  # ids 11-13: elsewhere
    later = RecallItem(id="40", role="user", content="And the host?", position=40)
    shown = render([q, a, later], {"10": (None, "14"), "40": ("30", None)}).splitlines()
    assert shown[2:] == ["user: Which port?", "assistant: Port 8443.", GAP, "user: And the host?"]
    assert GAP in render([q, a])  # without the source's links, ids far apart are a gap


def test_a_long_query_is_searched_by_its_strongest_terms_that_other_messages_hold():
    """A pasted document's hundreds of terms were each a lookup (seconds on PostgreSQL). It is searched
    by MAX_QUERY_TERMS of them, the strongest, except that a term only the newest message holds (df 1:
    recall never returns that message) comes last: kept by strength alone, those would be all."""
    pasted = [f"zeta{k}" for k in range(MAX_QUERY_TERMS + 40)] + ["pumpernickel", "lisbon", "aquarium"]
    docs = [["pumpernickel", "cat", "shelter"], ["rosalind", "lisbon", "aquarium", "march"], ["weather", "rain"],
            pasted]
    index = LexicalIndex(docs)
    query = Query(weights=dict.fromkeys(pasted, 1.0))
    got = index.search(query, limit=5, exclude=[3])
    assert [doc for doc, _ in got] == [1, 0]
    # the same as the search of those terms alone
    df = {t: sum(t in d for d in docs) for t in pasted}
    kept = strongest_terms({t: idf(df[t], len(docs)) for t in pasted}, df)
    assert len(kept) == MAX_QUERY_TERMS and {"pumpernickel", "lisbon", "aquarium"} <= set(kept)
    assert got == index.search(Query(weights=dict.fromkeys(kept, 1.0)), limit=5, exclude=[3])


@given(st.lists(st.sampled_from([f"w{k}" for k in range(150)]), min_size=1, max_size=400), st.integers(0, 2**32))
@settings(max_examples=40, deadline=None)
def test_a_query_up_to_max_query_terms_is_searched_whole_and_a_longer_one_in_its_order(words, seed):
    rnd = random.Random(seed)
    vocab = sorted(set(words))
    docs = [rnd.sample(vocab, min(len(vocab), rnd.randint(1, 8))) for _ in range(30)]
    weighted = {t: idf(sum(t in d for d in docs), len(docs)) for t in vocab if any(t in d for d in docs)}
    df = {t: sum(t in d for d in docs) for t in weighted}
    kept = strongest_terms(weighted, df)
    assert list(kept) == [t for t in weighted if t in kept]  # query order kept
    assert len(kept) == min(len(weighted), MAX_QUERY_TERMS)
    assert (kept == weighted) == (len(weighted) <= MAX_QUERY_TERMS)
