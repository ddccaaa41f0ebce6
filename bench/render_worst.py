"""Rendering of texts that used to take a server thread for minutes: each beside its plain twin.

A reply is rendered (Markdown, math, sanitizing) on the page, in the stream's `markup` events and on
the public share page; its plain text is read for every search hit that shows it. Texts a model, an
import or a paste can hold made some of these paths quadratic (one rule looking back over every
token, or forward to the end of the text, for each of thousands of openings). For each such text this
prints the time to render it beside a twin of the same size made of the same number of ordinary tokens
(the peer), at half and at full size: linear work doubles with the size and stays near its twin.

    .venv/bin/python bench/render_worst.py [--scale 1.0] [--repeat 3]

Medians of `--repeat` runs, in seconds, uncached renderings (`markdown_render(..., cached=False)`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chatapp.chat.rendering import markdown_plain, markdown_render
from chatapp.chat.search_snippets import WordMatcher, snippet_parts
from optimizer.lexical import analyze


def _render(text: str) -> str:
    return markdown_render(text, cached=False)


def _snippet(word: str) -> Callable[[str], str]:
    """A search hit's snippet of a text whose match is its last word (the page shows 20 such hits)."""
    matcher = WordMatcher.for_terms(terms=analyze(word))  # the search box's terms (search_match)
    return lambda text: "".join(part.text for part in snippet_parts(content=f"{text} {word}", matcher=matcher))


def _words(letters: str, n: int) -> str:
    """n words of 3 to 9 of `letters`, always the same ones."""
    return " ".join(letters[i % 7:i % 7 + 3 + i % 7] for i in range(n))


# (what, its text of n units, its twin's, the function, n at full size)
CASES: list[tuple[str, Callable[[int], str], Callable[[int], str], Callable[[str], str], int]] = [
    ("images (links as twin)", lambda n: "![a](https://x.example/) " * n, lambda n: "[a](https://x.example/) " * n,
     _render, 12_000),
    ("unclosed \\[ lines", lambda n: "\\[ x\n" * n, lambda n: "( x\n" * n, _render, 4_000),
    ("unclosed \\( in a paragraph", lambda n: "a \\( b " * n, lambda n: "a \\{ b " * n, _render, 40_000),
    ("plain text: unclosed [", lambda n: "[a " * n, lambda n: "(a " * n, markdown_plain, 20_000),
    ("plain text: unclosed ](", lambda n: "![a](b " * n, lambda n: "(a " * n, markdown_plain, 20_000),
    # Bare addresses become links (autolinks.py); a scan back for a scheme at every ":" made a line of
    # "a:" quadratic in the GFM plugin. Twins: as many Markdown links; the line with "," for ":".
    ("bare addresses", lambda n: "see https://x.example/a " * n, lambda n: "see [x](https://x.example/a) " * n,
     _render, 12_000),
    ("one line of a: (scheme scan)", lambda n: "a:" * n, lambda n: "a," * n, _render, 40_000),
    # Outside ASCII each word was analysed on the way to the match: 0.4 s a hit at 25,000 words of
    # Russian. Its twin is as many English words.
    ("snippet: Russian, match last", lambda n: _words("абвгдежзийклмнопрс", n),
     lambda n: _words("abcdefghijklmnopqrs", n), _snippet("велосипед"), 25_000),
]


def _seconds(fn: Callable[[str], str], text: str, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn(text)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies each case's size")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'text':<30} {'units':>7} {'s':>8} {'twin s':>8} {'÷ twin':>7} {'x from half':>12}")
    for what, text_of, twin_of, fn, full in CASES:
        n = max(2, int(full * args.scale))
        half = _seconds(fn, text_of(n // 2), args.repeat)
        for units in (n // 2, n):
            own = half if units == n // 2 else _seconds(fn, text_of(units), args.repeat)
            twin = _seconds(fn, twin_of(units), args.repeat)
            growth = f"{own / half:.2f}" if units == n else ""
            print(f"{what:<30} {units:>7,} {own:>8.3f} {twin:>8.3f} {own / twin:>7.2f} {growth:>12}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
