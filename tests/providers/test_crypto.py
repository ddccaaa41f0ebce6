"""API keys at rest: Fernet round trip and key rotation."""

from __future__ import annotations

import base64

import pytest

from chatapp.providers.crypto import SecretDecryptError, secret_decrypt, secret_encrypt, secret_rotate


def _key(byte: int) -> str:
    return base64.urlsafe_b64encode(bytes([byte]) * 32).decode()


OLD, NEW = _key(1), _key(2)
PLAIN = "sk-live-abcdefghijklmnop1234"


def test_round_trip_hides_the_plaintext(settings):
    settings.FIELD_ENCRYPTION_KEYS = [NEW]
    token = secret_encrypt(PLAIN)
    assert PLAIN not in token
    assert secret_encrypt(PLAIN) != token  # random IV: equal keys do not give equal tokens
    assert secret_decrypt(token) == PLAIN


def test_empty_means_no_secret(settings):
    assert secret_encrypt("") == ""
    assert secret_decrypt("") == ""


def test_rotation_new_key_first_old_still_decrypts_then_rotate(settings):
    settings.FIELD_ENCRYPTION_KEYS = [OLD]
    token = secret_encrypt(PLAIN)

    settings.FIELD_ENCRYPTION_KEYS = [NEW, OLD]
    assert secret_decrypt(token) == PLAIN
    rotated = secret_rotate(token)

    settings.FIELD_ENCRYPTION_KEYS = [NEW]
    assert secret_decrypt(rotated) == PLAIN
    with pytest.raises(SecretDecryptError) as info:
        secret_decrypt(token)  # not rotated, old key gone
    assert PLAIN not in str(info.value) and token not in str(info.value)


def test_damaged_token_is_a_clear_error(settings):
    settings.FIELD_ENCRYPTION_KEYS = [NEW]
    with pytest.raises(SecretDecryptError):
        secret_decrypt("not-a-fernet-token")
