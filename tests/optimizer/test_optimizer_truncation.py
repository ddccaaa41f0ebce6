"""`compress_text` (optimizer/truncation.py): what a shortened text may hold at its cuts."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from optkit import MODEL, msg

from optimizer import compress_text, count_text, pack

_CUT = re.compile(r"(?P<head>.*?)\n?\[\.\.\. [\d,]+ tokens omitted \.\.\.\]\n?(?P<tail>.*)", re.S)
# Characters of one to four UTF-8 bytes, several of which tokenizers split across tokens: accented
# Latin, CJK, emoji with a skin-tone modifier and a joiner, Devanagari with its vowel signs.
_MULTIBYTE = list("aé ñüßçœ東京都に行く한국어🙂🎉👍🏽\u200d👩ह\u093fन\u094dदी")


@settings(max_examples=100, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(_MULTIBYTE), min_size=120, max_size=600),
       limit=st.integers(min_value=24, max_value=120))
def test_a_cut_inside_a_character_sends_no_replacement_character(text, limit):
    # A cut by tokens used to decode the kept tokens as they were: a character whose bytes two
    # tokens share came out as U+FFFD at the cut ("🙂🎉👍\n[... omitted ...]\n�👍🏽").
    out = compress_text(text, limit=limit, model=MODEL)
    assert "\ufffd" not in out
    assert count_text(out, model=MODEL) <= limit
    if out != text:  # what is kept is the text's own beginning and end, whole characters only
        cut = _CUT.fullmatch(out)
        assert cut is not None
        assert text.startswith(cut["head"]) and text.endswith(cut["tail"])


_MARKER = re.compile(r"\[\.\.\. [\d,]+ (?:lines?, [\d,]+ )?tokens omitted \.\.\.\]")


@settings(max_examples=60, deadline=None)
@given(limit=st.integers(min_value=0, max_value=30),
       text=st.sampled_from(["Because of Rayleigh scattering, " * 40, "line of a log\n" * 300, "東京🙂" * 400]))
def test_a_limit_too_small_for_the_text_sends_a_whole_marker_never_a_piece_of_one(limit, text):
    # Below 24 tokens the marker was cut to `limit` characters: "[... 1", "[... 181 to".
    out = compress_text(text, limit=limit, model=MODEL)
    assert count_text(out, model=MODEL) <= limit
    if _MARKER.search(out) is None:
        # no room for the whole marker: the shortest one, "[...]" (one token); nothing at all at 0
        assert out == ("[...]" if limit else "")
    elif limit < 24:
        assert _MARKER.fullmatch(out)


def test_an_oversized_reply_in_a_small_budget_is_sent_as_a_marker_not_a_fragment():
    msgs = [msg("u0", "user", "hi"), msg("a0", "assistant", "hello " * 5), msg("q", "user", "Why is the sky blue?"),
            msg("a1", "assistant", "Because of Rayleigh scattering, " * 30)]
    for budget in (40, 60, 80, 100):
        r = pack(msgs, budget=budget, model=MODEL)
        reply = next(p for p in r.messages if p.source_ids == ("a1",))
        assert reply.origin == "compressed"
        assert _MARKER.fullmatch(reply.content) or reply.content == "[...]", (budget, reply.content)
        assert r.info.tokens_after <= budget
