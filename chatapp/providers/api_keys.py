"""An API key as typed or pasted into a model's settings, made into the key that is sent."""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ValidationError

MAX_API_KEY_CHARS = 1000
# A key copied from a .env file (OPENAI_API_KEY="sk-...") comes with its quotes, and one copied from a
# curl command or an HTTP client with the scheme before it (Authorization: Bearer sk-...). No provider's
# key holds a quote or a space, and the client writes "Bearer " itself: sent as pasted, every request
# was refused (401) with nothing on the page to say why.
_PASTED_AROUND = re.compile(r"""^(?:bearer\s+)?(["']?)(?P<key>.*?)\1$""", re.IGNORECASE | re.DOTALL)


def api_key_clean(api_key: Any) -> str:
    """The key to send: white space, quotes around it and a "Bearer " before it taken off. Refused
    (ValidationError on `api_key`) when too long, or holding what an HTTP header cannot carry."""
    key = str(api_key or "").strip()
    key = (match.group("key") if (match := _PASTED_AROUND.match(key)) else key).strip()
    if len(key) > MAX_API_KEY_CHARS:
        raise ValidationError({"api_key": [f"The API key must be at most {MAX_API_KEY_CHARS} characters."]})
    # It travels in an HTTP header: only printable ASCII without spaces can.
    if any(not (33 <= ord(ch) <= 126) for ch in key):
        raise ValidationError({"api_key": ["The API key contains spaces or characters that cannot be sent."]})
    return key
