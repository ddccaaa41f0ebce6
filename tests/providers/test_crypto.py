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


@pytest.mark.django_db
def test_secret_rotate_lets_the_old_key_be_removed(settings, user, other_user):
    """README: FIELD_ENCRYPTION_KEY is comma-separated to rotate. Stored keys stayed under the old key
    (nothing ran secret_rotate over them), so removing it made every key not saved since unreadable."""
    from io import StringIO

    from django.core.management import call_command

    from chatapp.providers import services
    from chatapp.providers.llm import llm_target_for

    settings.FIELD_ENCRYPTION_KEYS = [OLD]
    config = services.llm_config_create(owner=user, name="A", base_url="https://api.example.com/v1", model="m",
                                        api_key=PLAIN)
    lost = services.llm_config_create(owner=other_user, name="B", base_url="https://api.example.com/v1", model="m",
                                      api_key=PLAIN)
    settings.FIELD_ENCRYPTION_KEYS = [_key(3)]
    services.llm_config_update(config=lost, api_key=PLAIN)  # under a key about to be lost
    keyless = services.llm_config_create(owner=user, name="C", base_url="https://api.example.com/v1", model="m")

    settings.FIELD_ENCRYPTION_KEYS = [NEW, OLD]
    out, err = StringIO(), StringIO()
    call_command("secret_rotate", stdout=out, stderr=err)
    settings.FIELD_ENCRYPTION_KEYS = [NEW]

    assert "1 API keys encrypted" in out.getvalue() and "1 API keys could not be read" in err.getvalue()
    config.refresh_from_db()
    assert llm_target_for(config=config).api_key == PLAIN
    lost.refresh_from_db()
    assert llm_target_for(config=lost).key_unreadable  # left as it was
    keyless.refresh_from_db()
    assert keyless.api_key_encrypted == ""
    assert PLAIN not in out.getvalue() + err.getvalue()
