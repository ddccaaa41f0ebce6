"""What the model layer hands out: targets, stream events, completions and `LLMError` (plain words, retryable or not).
"""

from __future__ import annotations

from dataclasses import dataclass, field

OFFLINE_MODEL = "offline-demo"


OFFLINE_LABEL = "Offline demo model"


OFFLINE_CONTEXT_WINDOW = 16384


OFFLINE_MAX_OUTPUT = 1024


SUMMARY_PREFIX = "[Conversation summary"


# A placeholder keeps the SDK from falling back to the server's OPENAI_API_KEY environment variable
# (which must never be sent to a user-supplied URL); keyless local servers ignore it.
NO_KEY = "no-key"


@dataclass(frozen=True, slots=True)
class LLMTarget:
    base_url: str
    model: str
    api_key: str = field(repr=False)
    temperature: float
    max_output_tokens: int
    context_window: int
    offline: bool
    label: str
    # The stored key could not be decrypted (the server's encryption key changed): nothing is sent.
    key_unreadable: bool = False
    # The model is sent a message's images (LLMConfig.sees_images); else a text placeholder for each.
    sees_images: bool = False


@dataclass(frozen=True, slots=True)
class Delta:
    text: str


@dataclass(frozen=True, slots=True)
class Reasoning:
    """A piece of a reasoning model's thinking (providers.thinking): shown apart, never sent back."""

    text: str


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    # Prompt tokens served from the provider's prompt cache; None when the endpoint does not say.
    cached_tokens: int | None = 0


@dataclass(frozen=True, slots=True)
class Finish:
    """Why the model ended a reply that has an answer, as it said (`finish_reason`): "stop", or
    "length" when it reached its output limit mid-answer (the chat marks that reply as cut)."""

    reason: str


LLMEvent = Delta | Reasoning | Usage | Finish


# The longest model name stored (LLMConfig.model, and the model of the messages and jobs a call writes).
MODEL_NAME_MAX_CHARS = 200


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    model: str
    finish_reason: str | None = None

    @staticmethod
    def answered_model(name: object, *, asked: str) -> str:
        """The model an endpoint says answered (its response's `model`), as stored beside what it wrote:
        its own name when it is one, else the name asked for. The endpoint's word is unchecked text: a
        vLLM serving a model by a long path, or a NUL (which PostgreSQL refuses), made the summary's
        write fail after the call was paid for, and its job with it."""
        if isinstance(name, str) and name.strip() and len(name) <= MODEL_NAME_MAX_CHARS and name.isprintable():
            return name
        return asked


ERROR_KINDS = frozenset(
    {"auth", "not_found", "rate_limit", "server", "timeout", "connection", "bad_request", "stream_cut"}
)


_RETRYABLE = {"rate_limit", "server", "timeout", "connection", "stream_cut"}


class LLMError(Exception):
    """A model call failed. `str(error)` is the plain-words `user_message`; `detail` is the scrubbed
    provider text for logs."""

    def __init__(
        self,
        kind: str,
        user_message: str,
        *,
        status: int | None = None,
        retryable: bool | None = None,
        detail: str = "",
        retry_after: float | None = None,
    ) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown LLMError kind {kind!r}")
        super().__init__(user_message)
        self.kind = kind
        self.user_message = user_message
        self.status = status
        self.retryable = kind in _RETRYABLE if retryable is None else retryable
        self.detail = detail
        # Seconds the endpoint asked to wait before the next request (a 429's Retry-After), if it said.
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return f"LLMError(kind={self.kind!r}, status={self.status!r}, user_message={self.user_message!r})"
