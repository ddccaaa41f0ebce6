"""Recall as a packing step: a block of quotes right before the newest user message.

It runs on the assembled context, in the room the budget leaves (capped per preference, see
`recall_cap`), so the
cacheable prefix (static layer, summary, window) does not move. The mechanics (query, ranking,
quoting) are in `optimizer.recall`.
"""

from __future__ import annotations

from ..recall import recall, recall_cap
from ..tokens import REPLY_PRIMING, content_text
from ..types import PackedMessage
from .base import PackState


class RecallStrategy:
    """Sets `recalled` and inserts its block into `out` (needs a recall source and `config.recall`)."""

    name = "recall"

    def apply(self, state: PackState) -> None:
        if state.recall_source is None or not state.config.recall:
            return
        out = state.out
        newest = next((k for k in range(len(out) - 1, -1, -1) if out[k].role == "user"), -1)
        if newest < 0:
            return
        # with window state the prompt's prefix is cached turn to turn and the block is paid in full
        # every turn, so it is held to a share of the budget; without it, it fills what is left
        cap = recall_cap(state.preference, budget=state.budget, stateful=not state.recall_fill)
        room = min(cap, state.budget - sum(p.tokens for p in out) - REPLY_PRIMING)
        context = next((out[k] for k in range(newest - 1, -1, -1) if out[k].role == "assistant"), None)
        # a summary's covered messages are not in front of the model verbatim: they may be quoted
        shown = frozenset(i for p in out if p.origin != "summary" for i in p.source_ids)
        block = recall(
            text=content_text(out[newest].content),
            context=content_text(context.content) if context is not None else None,
            source=state.recall_source,
            room=room,
            exclude_ids=shown,
            model=state.model,
        )
        if block is not None:
            out.insert(newest, PackedMessage("system", block.content, block.source_ids, "recall", block.tokens))
            state.recalled = block
