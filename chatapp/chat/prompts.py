"""The user's custom instructions and the chat's system prompt as the optimizer sees them.

They are no message rows: they open a request's list as system messages with the ids "instructions"
and "system-prompt", so the optimizer keeps them in the static layer and `optimizer.shape` sends them
first in the one leading system message (context.context_load puts them there).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache

import optimizer
from optimizer.types import Msg

# The ids of the two prompts in a `Msg` list, a record's `sent` entries and `stats`: never digits, so
# every reader that maps ids to message rows (`str.isdigit`) passes them by. The value is what a
# record's `sent` entry says in its `system_prompt` key.
PROMPT_IDS = {"instructions": "instructions", "system-prompt": "conversation"}


@lru_cache(maxsize=64)
def _prompt_tokens(text: str, model: str) -> int:
    # No row stores a prompt's count; counted once per text and model, not on every request and gauge.
    return optimizer.count_message({"role": "system", "content": text}, model=model)


def prompt_msgs(*, instructions: str, system_prompt: str, model: str) -> list[Msg]:
    """The user's custom instructions, then the chat's system prompt, as system messages (empty ones left out)."""
    texts = (("instructions", instructions), ("system-prompt", system_prompt))
    return [
        Msg(id=pid, role="system", content=text, tokens=_prompt_tokens(text, model), chars=len(text))
        for pid, text in texts
        if text
    ]


def prompts_hash(prompts: Sequence[Msg]) -> str:
    """A short fingerprint of the prompts' texts ("" without any), so records can tell when they changed."""
    if not prompts:
        return ""
    joined = "\x00".join(f"{m.id}\x00{m.content}" for m in prompts)
    return hashlib.sha256(joined.encode("utf-8", "surrogatepass")).hexdigest()[:16]
