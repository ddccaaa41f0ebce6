"""The only place that talks to models: any OpenAI-compatible endpoint, or the built-in offline model.

Every failure leaves this module as an `LLMError` whose `user_message` is plain words for the chat
and whose text can never contain the API key: provider messages are scrubbed, and errors are raised
outside the handler of the SDK exception so no traceback chains back to a raw provider message.

The chat path uses `max_retries=0`: a failed reply is shown with a Retry button and the user decides.

Redirects are never followed (a public URL answering 307 to 169.254.169.254 would otherwise be an
SSRF way around the base-URL check): a redirect is reported as a failure naming where it pointed.
When private addresses are not allowed, every connection goes to an address of a lookup the SSRF
guard checked (cached a few seconds per host), never to a second lookup's answer: DNS rebinding
after the save-time check reaches nothing (`addresses`).

Modules: `types` (what callers get), `calls` (stream, complete, test connection, targets), `errors`,
`upstream` (a gateway's words of the provider behind it), `waits` (the wait a 429 or 503 names),
`usage` (a provider's usage figures as stored), `quirks`, `transport` (the clients),
`addresses` (where their connections may go), `key_check` (a key checked where the model list is open
to anyone), `offline` (the demo model and its target). A
reasoning model's thinking is told apart by `chatapp.providers.thinking` (pure Python, which the import
readers use too).
"""

from chatapp.providers.llm.addresses import EndpointAddressRefused
from chatapp.providers.llm.calls import llm_complete, llm_stream, llm_target_for, llm_test_connection
from chatapp.providers.llm.offline import offline_reply, offline_target
from chatapp.providers.llm.types import (
    ERROR_KINDS,
    NO_KEY,
    OFFLINE_CONTEXT_WINDOW,
    OFFLINE_LABEL,
    OFFLINE_MAX_OUTPUT,
    OFFLINE_MODEL,
    SUMMARY_PREFIX,
    Completion,
    Delta,
    Finish,
    LLMError,
    LLMEvent,
    LLMTarget,
    Reasoning,
    Usage,
)
from chatapp.providers.thinking import unopened_split

__all__ = [
    "ERROR_KINDS", "NO_KEY", "OFFLINE_CONTEXT_WINDOW", "OFFLINE_LABEL", "OFFLINE_MAX_OUTPUT", "OFFLINE_MODEL",
    "SUMMARY_PREFIX", "Completion", "Delta", "EndpointAddressRefused", "Finish", "LLMError", "LLMEvent", "LLMTarget",
    "Reasoning", "Usage", "llm_complete", "llm_stream", "llm_target_for", "llm_test_connection", "offline_reply",
    "offline_target", "unopened_split",
]
