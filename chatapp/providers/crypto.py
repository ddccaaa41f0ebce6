"""API keys at rest: Fernet tokens under settings.FIELD_ENCRYPTION_KEYS.

The first key encrypts; every key decrypts, so a key is rotated by putting the new one first, running
`manage.py secret_rotate` (secret_rotate over stored tokens), then removing the old one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class SecretDecryptError(Exception):
    """A stored token does not decrypt with any configured key (the key was removed or the token is damaged)."""


_cache: tuple[tuple[str, ...], MultiFernet] | None = None
_lock = threading.Lock()


def _fernet(keys: tuple[str, ...] | None = None) -> MultiFernet:
    """The cipher of `keys` (default: the configured ones)."""
    global _cache
    keys = tuple(settings.FIELD_ENCRYPTION_KEYS) if keys is None else keys
    with _lock:
        # Keyed by the key list so a settings override (tests, rotation) takes effect at once.
        if _cache is None or _cache[0] != keys:
            if not keys:
                raise SecretDecryptError("no FIELD_ENCRYPTION_KEY is configured")
            _cache = (keys, MultiFernet([Fernet(k.encode()) for k in keys]))
        return _cache[1]


def secret_encrypt(plain: str) -> str:
    """Encrypt a secret; the empty string stays empty (it means "no secret stored")."""
    if plain == "":
        return ""
    return _fernet().encrypt(plain.encode()).decode()


def _stored_token_apply(
    token: str, operation: Callable[[MultiFernet, bytes], bytes], keys: tuple[str, ...] | None = None
) -> str:
    """`operation` (decrypt, rotate) on a stored token under `keys` (default: the configured ones);
    "" stays "" (no secret stored). Raises SecretDecryptError."""
    if token == "":
        return ""
    try:
        return operation(_fernet(keys), token.encode()).decode()
    except (InvalidToken, ValueError):
        # Never include the token or plaintext in the message.
        raise SecretDecryptError("the stored secret cannot be decrypted with the configured keys") from None


def secret_decrypt(token: str) -> str:
    """Decrypt a token made by secret_encrypt; "" gives "". Raises SecretDecryptError."""
    return _decrypted(tuple(settings.FIELD_ENCRYPTION_KEYS), token)


# Every chat turn decrypts its model's key (about 1% of a turn's CPU). The plain keys stay in this
# process's memory, as they do in the model clients it keeps (llm.transport); keyed by the key list
# too, so a rotation or a removed key takes effect at once. A failure is not cached; 256 entries at most.
@lru_cache(maxsize=256)
def _decrypted(keys: tuple[str, ...], token: str) -> str:
    return _stored_token_apply(token, MultiFernet.decrypt, keys)  # the keys it is cached under


def secret_readable(token: str) -> bool:
    """Whether secret_decrypt can read `token` under the configured keys ("" is readable: no secret)."""
    try:
        secret_decrypt(token)
    except SecretDecryptError:
        return False
    return True


def secret_rotate(token: str) -> str:
    """Re-encrypt a token under the current first key (for key rotation)."""
    return _stored_token_apply(token, MultiFernet.rotate)
