"""The web process's garbage-collector settings.

CPython collects its youngest generation whenever tracked objects outnumber freed ones by 700: on a
chat turn (a few hundred thousand short-lived objects: rows, packed messages, JSON, the model's
events) that is a collection every turn or two, each one walking whatever the turn still holds and
promoting it, so that the survivors make the occasional full collection walk the whole heap again
(about 100 ms with the tokenizer and model registry loaded). Measured over 1,200 turns on PostgreSQL
(/proc CPU is too noisy for this; gc.callbacks timed each collection): 656 ms of collection at the
default, 229 ms at 5,000, 117 ms at 10,000 — 0.55 against 0.10 ms a turn — for some 8 MiB more
resident memory.

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
