"""Search as you type: how often a word being typed loses the word it is on its way to.

The search index stores stems, and the last word of a query is a prefix. A stem can be shorter than
what has been typed ("decorator" is stored as "decor", so "decora" matched nothing): this bench
takes every word of a vocabulary and every prefix of it from three letters on, and counts, side by
side in one run:

  stem prefix   the prefix's own stem as a prefix of stored stems (the rule before prefix stems)
  + stems       that, or one of `optimizer.lexical.prefix_stems` matched whole (the search's rule)

  missing     prefixes that miss at least one vocabulary word they begin (lower is better)
  extra       prefixes that also match a vocabulary word they do not begin (a stem prefix does when
              the stemmer rewrites a letter, "sty" as "sti"; a prefix stem when a completion is no
              word, "ration" + "ness" as "ratio": the search ranks prefix stems at half weight)

The vocabulary is the English of this repository (README, docstrings and comments, templates) plus,
with --words FILE, a word list of your own (one or more words a line).

    .venv/bin/python bench/search_prefixes.py [--words /usr/share/dict/words]
"""

from __future__ import annotations

import argparse
import sys
from bisect import bisect_left
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from optimizer.lexical import _stem, content_words, prefix_stems  # noqa: E402

MIN_PREFIX = 3
SOURCES = ("*.md", "chatapp/**/*.py", "optimizer/**/*.py", "templates/**/*.html")


def vocabulary(extra: Path | None) -> set[str]:
    text = []
    for pattern in SOURCES:
        text += [p.read_text(errors="ignore") for p in ROOT.glob(pattern) if "migrations" not in p.parts]
    if extra is not None:
        text.append(extra.read_text(errors="ignore"))
    return {w for w in content_words("\n".join(text)) if w.isalpha() and len(w) >= MIN_PREFIX}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=Path, help="a word list to add to the vocabulary")
    args = parser.parse_args()
    words = vocabulary(args.words)
    stems = {w: _stem(w) for w in words}
    begun: dict[str, set[str]] = defaultdict(set)  # prefix -> the stems of the words it begins
    for w, s in stems.items():
        for k in range(MIN_PREFIX, len(w) + 1):
            begun[w[:k]].add(s)
    known = sorted(set(stems.values()))
    rows = {"stem prefix": [0, 0], "+ stems": [0, 0]}  # missing, extra
    for prefix, reached in begun.items():
        own = _stem(prefix)
        # the stored stems the prefix's own stem begins: a range of the sorted list
        start = bisect_left(known, own)
        by_prefix = set(known[start:bisect_left(known, own + "\uffff", start)])
        alternates = set(prefix_stems(prefix)) & set(stems.values())
        for rule, matched in (("stem prefix", by_prefix), ("+ stems", by_prefix | alternates)):
            rows[rule][0] += not reached <= matched
            rows[rule][1] += bool(matched - reached)
    n = len(begun)
    print(f"{len(words):,} words, {n:,} prefixes of {MIN_PREFIX}+ letters")
    print(f"{'rule':<14}{'missing':>18}{'extra':>18}")
    for rule, (missing, extra) in rows.items():
        print(f"{rule:<14}{missing:>9,} ({100 * missing / n:5.2f}%){extra:>9,} ({100 * extra / n:5.2f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
