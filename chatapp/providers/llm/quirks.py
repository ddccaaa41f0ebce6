"""Endpoint quirks learned from their refusals (`max_completion_tokens`, no `stream_options`, no
temperature): the request is sent again with the quirk, and the quirk is remembered per endpoint and model.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import openai

from chatapp.providers.llm.errors import _llm_error, _provider_message
from chatapp.providers.llm.types import LLMError, LLMTarget

# Endpoint quirks are at most three (see _quirk_for), so one more attempt than that always ends.
_QUIRK_ATTEMPTS = 4


_quirks: OrderedDict[tuple[str, str], frozenset[str]] = OrderedDict()


_quirks_lock = threading.Lock()


def _known_quirks(target: LLMTarget) -> frozenset[str]:
    with _quirks_lock:
        return _quirks.get((target.base_url, target.model), frozenset())


def _learn_quirk(target: LLMTarget, quirk: str) -> None:
    with _quirks_lock:
        key = (target.base_url, target.model)
        _quirks[key] = _quirks.get(key, frozenset()) | {quirk}
        _quirks.move_to_end(key)
        while len(_quirks) > 256:
            _quirks.popitem(last=False)


def _quirk_for(exc: Exception, quirks: frozenset[str]) -> str | None:
    if not isinstance(exc, openai.BadRequestError):
        return None
    text = _provider_message(exc).lower()
    if "max_completion_tokens" in text and "max_completion_tokens" not in quirks:
        return "max_completion_tokens"
    if "stream_options" in text and "no_stream_options" not in quirks:
        return "no_stream_options"
    unsupported = re.search(r"unsupported|not support|only the default", text)
    if "temperature" in text and "no_temperature" not in quirks and unsupported:
        return "no_temperature"
    return None


class _QuirkAttempts:
    """The attempts of one request, each with the endpoint quirks known so far.

    Iterating yields the quirks to send the next attempt with; `failed(exc)` is called from the SDK
    exception's handler and either learns a quirk (the loop goes on) or keeps the LLMError, which
    `raise_failure()` raises after the loop, outside that handler (see the module docstring).
    """

    def __init__(self, target: LLMTarget, *, timeout: float) -> None:
        self.target = target
        self.timeout = timeout
        self.quirks = _known_quirks(target)
        self.error: LLMError | None = None

    def __iter__(self) -> Iterator[frozenset[str]]:
        for _attempt in range(_QUIRK_ATTEMPTS):
            yield self.quirks
            if self.error is not None:
                return

    def failed(self, exc: Exception) -> None:
        quirk = _quirk_for(exc, self.quirks)
        if quirk is None:
            self.error = _llm_error(exc, self.target, started=False, timeout=self.timeout)
            return
        self.quirks = self.quirks | {quirk}
        _learn_quirk(self.target, quirk)

    def raise_failure(self) -> None:
        if self.error is not None:
            raise self.error


def _request_params(
    target: LLMTarget, messages: list[dict], *, stream: bool, max_tokens: int | None, quirks: frozenset[str]
) -> dict[str, Any]:
    params: dict[str, Any] = {"model": target.model, "messages": messages}
    if "no_temperature" not in quirks:
        params["temperature"] = target.temperature
    limit = max_tokens if max_tokens is not None else target.max_output_tokens
    params["max_completion_tokens" if "max_completion_tokens" in quirks else "max_tokens"] = limit
    if stream:
        params["stream"] = True
        if "no_stream_options" not in quirks:
            params["stream_options"] = {"include_usage": True}
    return params
