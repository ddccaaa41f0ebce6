"""static/js/chat/search_marks.js: the words a search hit's snippet marks, found again in the message
the hit opens (history.js marks them there), run by Node on the module itself (skipped without Node,
as the browser tests are without Chromium)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

MODULE = Path(__file__).resolve().parents[2] / "static/js/chat/search_marks.js"
NODE = shutil.which("node")


def _found(words: list[str], text: str) -> list[str]:
    """The parts of `text` the pattern of `words` finds, in order (the odd places of its split)."""
    script = (
        f"import {{ searchWordsPattern }} from {json.dumps(MODULE.as_uri())};\n"
        f"const parts = {json.dumps(text)}.split(searchWordsPattern({json.dumps(words)}));\n"
        "console.log(JSON.stringify(parts.filter((_, i) => i % 2)));\n"
    )
    done = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=30,
                          check=True)
    return json.loads(done.stdout)


pytestmark = pytest.mark.skipif(NODE is None, reason="needs Node")


def test_a_word_is_found_where_it_stands_alone_not_inside_another():
    assert _found(["quokka"], "A quokka, two Quokka! quokkas and aquokka") == ["quokka", "Quokka"]
    assert _found(["Café", "(x)"], "Café au lait at the café (x)") == ["Café", "café", "(x)"]  # any case


@pytest.mark.parametrize(("words", "text", "found"), [
    # A script written without spaces has no gap around a word: the snippet marked it, the message did not.
    (["東京"], "私は来月東京に引っ越します。", ["東京"]),
    (["猫"], "黒猫が好き", ["猫"]),
    (["서울"], "서울에서 친구를 만났어요", ["서울"]),
    (["เชียงใหม่"], "พรุ่งนี้ไปเชียงใหม่", ["เชียงใหม่"]),
    (["trip", "東京"], "a trip to 東京に, then a stripe", ["trip", "東京"]),
    (["東", "東京"], "東京と東", ["東京", "東"]),  # the longer first
    # A word holding a mark or an apostrophe some unspaced scripts share is still a word of its own.
    (["м\u02bcясо", "an\u0303o"], "м\u02bcясо, м\u02bcясом, an\u0303o", ["м\u02bcясо", "an\u0303o"]),  # noqa: RUF001
])
def test_a_word_of_a_script_written_without_spaces_is_found_inside_its_run(words, text, found):
    assert _found(words, text) == found
