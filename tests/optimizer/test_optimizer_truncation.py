"""`compress_text` (optimizer/truncation.py): what a shortened text may hold at its cuts."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from optkit import MODEL

from optimizer import compress_text, count_text

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
