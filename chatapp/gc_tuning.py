"""The web process's garbage-collector settings.

CPython collects its youngest generation whenever tracked objects outnumber freed ones by 700: about
once a chat turn (1,371 young collections in 1,200 turns), each walking whatever the turn still held
and promoting it, so that the survivors brought on full collections that walk the whole heap (about
100 ms each with the tokenizers and the model registry loaded). Timed with gc.callbacks over those
1,200 turns on PostgreSQL (the /proc CPU clock is too noisy for this): 656 ms of collection at the
default, 229 ms at 5,000, 117 ms at 10,000 (no full collection) — 0.55 against 0.10 ms a turn — for
some 8 MiB more resident memory.

What the process imported before its first request lives as long as the process: `gc.freeze()` takes
it out of every later collection, so a full one walks only what the requests have left behind.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000


def gc_tune_for_serving() -> None:
    """Call once, after the application is imported and before it serves."""
    gc.collect()  # what the imports left as garbage is not frozen with the rest
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
