"""Whether an endpoint that lists its models to anyone takes the key: the connection test's last check."""

from __future__ import annotations

import dataclasses

import openai

from chatapp.providers.llm.errors import _CALL_ERRORS, _llm_error
from chatapp.providers.llm.transport import _sync_client
from chatapp.providers.llm.types import LLMTarget


def key_refused(client: openai.OpenAI, target: LLMTarget, *, timeout: float) -> str | None:
    """Why the key (or its absence) is refused, by an endpoint whose model list proved nothing of it; else None.

    OpenRouter lists its models to any key, or none, and refuses every chat request of a wrong one:
    the listed model passed the test. Asked without a key, a list that wants one proves the key it took;
    one answering anyway leaves GET /key (OpenRouter's, free) to say. A server without that address
    (Ollama, LM Studio, a vLLM: they take any key) keeps the list's word."""
    if target.api_key:
        keyless = _sync_client(dataclasses.replace(target, api_key=""), timeout=timeout)
        try:
            keyless.models.list()
        except (*_CALL_ERRORS, AttributeError, TypeError, ValueError):
            return None
    try:
        client.get("/key", cast_to=object)
    except openai.APIStatusError as exc:
        if exc.status_code in {401, 403}:
            return _llm_error(exc, target, started=False, timeout=timeout).user_message
    except _CALL_ERRORS:
        pass
    return None
