"""SSRF guard for user-supplied base URLs."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from chatapp.providers import netguard
from chatapp.providers.netguard import _resolve as real_resolve  # captured before the hermetic-DNS fixture patches it
from chatapp.providers.netguard import base_url_validate


def refusal(url: str, *, allow_private: bool) -> str:
    """The message `base_url_validate` refuses `url` with (the test fails when it accepts it)."""
    with pytest.raises(ValidationError) as info:
        base_url_validate(url, allow_private=allow_private)
    return info.value.messages[0]


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:11434/v1", "loopback"),
        ("http://localhost:8000/v1", "loopback"),
        ("http://10.1.2.3/v1", "private-network"),
        ("http://172.16.0.9/v1", "private-network"),
        ("https://192.168.1.20/v1", "private-network"),
        ("http://169.254.169.254/latest", "link-local"),
        ("http://[::1]:8000/v1", "loopback"),
        ("http://[fe80::1]/v1", "link-local"),
        ("http://[fd00::5]/v1", "private-network"),
        # Deprecated (RFC 3879) but still routed where a network numbers itself so; Python calls it global.
        ("http://[fec0::1]/v1", "site-local"),
        ("http://[fef0::a:1]:8000/v1", "site-local"),
        ("http://[::ffff:127.0.0.1]/v1", "loopback"),
        ("http://[::ffff:10.0.0.1]/v1", "private-network"),
        ("http://[64:ff9b::a00:1]/v1", "private-network"),
        ("http://0.0.0.0:8000/v1", "unspecified"),
        ("http://224.0.0.1/v1", "multicast"),
        ("http://100.64.0.1/v1", "reserved"),
    ],
)
def test_private_addresses_are_refused(url, reason):
    message = refusal(url, allow_private=False)
    assert reason in message
    assert "not allowed on this server" in message


@pytest.mark.parametrize("url", ["https://8.8.8.8/v1", "https://api.openai.com/v1", "http://[2606:4700::1111]/v1"])
def test_public_addresses_are_allowed(url):
    base_url_validate(url, allow_private=False)


def test_private_allowed_when_the_setting_says_so():
    base_url_validate("http://127.0.0.1:11434/v1", allow_private=True)
    base_url_validate("http://localhost:11434/v1", allow_private=True)


def test_every_resolved_address_is_checked(monkeypatch):
    monkeypatch.setattr(netguard, "_resolve", lambda host, port: ["93.184.215.14", "10.0.0.7"])
    assert "rebind.example.com (10.0.0.7)" in refusal("https://rebind.example.com/v1", allow_private=False)


def test_numeric_host_spellings_are_resolved_not_trusted(monkeypatch):
    # 2130706433 is 127.0.0.1 as one decimal number; the system resolver (no DNS needed) reveals it.
    monkeypatch.setattr(netguard, "_resolve", real_resolve)
    with pytest.raises(ValidationError, match="loopback"):
        base_url_validate("http://2130706433:8000/v1", allow_private=False)


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("ftp://example.com/v1", "http:// or https://"),
        ("api.openai.com/v1", "http:// or https://"),
        ("http:///v1", "no host name"),
        ("http://user:pass@example.com/v1", "credentials"),
        ("http://example.com:99999/v1", "valid URL"),
        # No server listens on port 0: every chat with it failed to connect, after it was saved.
        ("http://example.com:0/v1", "port 0"),
        ("https://no-such-host.invalid/v1", "could not be resolved"),
    ],
)
def test_malformed_urls_have_clear_messages(url, words):
    assert words in refusal(url, allow_private=True)
