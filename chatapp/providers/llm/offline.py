"""The built-in offline demo model: it streams a description of the context it received, so the
optimizer, the gauge and the dashboard can be explored before any key is added.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from django.conf import settings

import optimizer
from chatapp.providers.llm.types import (
    OFFLINE_CONTEXT_WINDOW,
    OFFLINE_LABEL,
    OFFLINE_MAX_OUTPUT,
    OFFLINE_MODEL,
    SUMMARY_PREFIX,
    Delta,
    LLMEvent,
    LLMTarget,
    Usage,
)


def offline_target() -> LLMTarget:
    """The demo model as a target: what `llm_target_for` resolves a missing config to."""
    return LLMTarget(
        base_url="",
        model=OFFLINE_MODEL,
        api_key="",
        temperature=0.0,
        max_output_tokens=OFFLINE_MAX_OUTPUT,
        context_window=OFFLINE_CONTEXT_WINDOW,
        offline=True,
        label=OFFLINE_LABEL,
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def offline_reply(*, messages: Sequence[dict], model: str = OFFLINE_MODEL, context_note: str | None = None) -> str:
    """The offline model's answer: a description of the context it was sent."""
    roles: dict[str, int] = {}
    for m in messages:
        roles[str(m.get("role"))] = roles.get(str(m.get("role")), 0) + 1
    tokens = optimizer.count_messages(list(messages), model=model)
    estimated = " (estimated with a generic tokenizer)" if optimizer.is_estimated(model) else ""
    # the summary rides in the leading system message (optimizer.shape), after the system prompt
    summary = next(
        (_text_of(m.get("content"))[k:] for m in messages
         if m.get("role") == "system" and (k := _text_of(m.get("content")).find(SUMMARY_PREFIX)) >= 0),
        None,
    )
    last_user = next((_text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    snippet = " ".join(last_user.split()[:24])
    if len(last_user.split()) > 24:
        snippet += " …"

    role_text = ", ".join(f"{n} {role}" for role, n in sorted(roles.items()))
    if summary is not None:
        summary_line = f"- **Summary:** yes — {summary.splitlines()[0].strip()}"
    else:
        summary_line = "- **Summary:** none in this context."
    trim_line = (
        f"- **Optimizer:** {context_note.strip()}"
        if context_note and context_note.strip()
        else "- **Optimizer:** no note from the app; the context gauge shows whether older messages were left out."
    )
    lines = [
        f"**{OFFLINE_LABEL}** — a built-in stand-in that answers without any network call. It describes the "
        "context the optimizer sent it, so you can explore the app without a key.",
        "",
        f"- **Messages received:** {len(messages)} ({role_text or 'none'})",
        f"- **Context size:** {tokens:,} tokens{estimated}",
        summary_line,
        trim_line,
        f"- **Your last message:** {len(last_user):,} character{'' if len(last_user) == 1 else 's'}"
        + (f", starting “{snippet}”" if snippet else ""),
        "",
        # A chat keeps the model it began with: one added later answers here once picked in the header.
        "For real answers, add an OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, …) in Settings, "
        "then pick it in this chat's model menu (in its header): a chat keeps the model it began with.",
    ]
    return "\n".join(lines)


async def _offline_stream(
    *, target: LLMTarget, messages: list[dict], context_note: str | None
) -> AsyncIterator[LLMEvent]:
    text = offline_reply(messages=messages, model=target.model, context_note=context_note)
    delay = max(0, int(getattr(settings, "OFFLINE_MODEL_DELAY_MS", 12))) / 1000
    for piece in re.findall(r"\S+\s*|\s+", text):
        # Even with no delay, yield control so the stream behaves like a network one (Stop works).
        await asyncio.sleep(delay)
        yield Delta(piece)
    yield Usage(
        prompt_tokens=optimizer.count_messages(messages, model=target.model),
        completion_tokens=optimizer.count_text(text, model=target.model),
        cached_tokens=0,
    )
