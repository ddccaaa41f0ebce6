"""SSRF guard for user-supplied model base URLs.

In a shared deployment the server makes requests to whatever URL a user saves, so a URL that points
into the server's own network (cloud metadata at 169.254.169.254, databases on 10.x, the host itself)
is refused unless ALLOW_PRIVATE_LLM_URLS is on. Every address the host name resolves to is checked,
since one public and one private record would otherwise slip through.

`base_url_validate` checks at save time, where a host that does not resolve yet (a Docker Compose
service not started) is let through by the services, with `base_url_unresolved`'s words. Connections
are held to the same rule later by `host_addresses` (llm/addresses.py): each one goes to an address
of a lookup checked here, never to what a second lookup answers, so a record changed afterwards (DNS
rebinding) is refused too.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

from .endpoint_url import EndpointURLValidator

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def _resolve(host: str, port: int) -> list[str]:
    """Addresses `host` resolves to (a seam for tests: they replace it to avoid real DNS)."""
    infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    return sorted({str(info[4][0]) for info in infos})


def _refusal_reason(ip: IPAddress) -> str | None:
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is not None:
            return _refusal_reason(embedded)
        if ip in ipaddress.ip_network("64:ff9b::/96"):  # NAT64 carries an IPv4 address in the low bits
            return _refusal_reason(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local:
        # fec0::/10: deprecated, yet routed inside networks still numbered so, and not in Python's
        # private list (is_global is True for it), so the checks below would let it through.
        return "a site-local address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_private:
        return "a private-network address"
    if ip.is_reserved or not ip.is_global:
        return "a reserved address"
    return None


def base_url_validate(url: str, *, allow_private: bool) -> None:
    """Raise ValidationError (plain words) unless `url` is an http(s) URL of the settings form's shape
    (endpoint_url) whose host resolves and, when `allow_private` is False, resolves only to public addresses."""
    url = (url or "").strip()
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in url):
        # A line break or tab pasted inside, or another ASCII control character: the model client
        # refuses such a URL at every request, and urlsplit drops tabs and line breaks unseen, so the
        # checks below would read another URL than the one stored.
        raise ValidationError(
            "The URL contains a line break, a tab or another control character: remove it.", code="invalid"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValidationError("Enter a valid URL, such as https://api.openai.com/v1.", code="invalid") from None
    if parts.scheme not in {"http", "https"}:
        raise ValidationError("The URL must start with http:// or https://.", code="scheme")
    host = parts.hostname
    if not host:
        raise ValidationError("The URL has no host name, e.g. https://api.openai.com/v1.", code="invalid")
    if parts.username is not None or parts.password is not None:
        raise ValidationError("Put credentials in the API key field, not in the URL.", code="credentials")
    try:
        # What the settings form refuses (a space in the host, a label starting with "-"), the API refuses too.
        EndpointURLValidator()(url)
    except ValidationError:
        raise ValidationError("Enter a valid URL, such as https://api.openai.com/v1.", code="invalid") from None
    if port == 0:
        raise ValidationError("The URL names port 0, where no server listens: give the server's port, "
                              "or none for 80 (http) or 443 (https).", code="invalid")
    port = port or (443 if parts.scheme == "https" else 80)
    host_addresses(host, port, allow_private=allow_private)


def base_url_unresolved(url: str) -> str | None:
    """Words for a saved base URL whose host does not resolve (yet), or None when it does."""
    try:
        base_url_validate(url, allow_private=True)
    except ValidationError as exc:
        if exc.code == "dns":
            host = urlsplit(url.strip()).hostname
            return (f"Saved, but the host “{host}” does not resolve (yet): check its spelling. A service that "
                    "is not up yet is fine: chats with this model fail until the host resolves.")
    return None


def host_addresses(host: str, port: int, *, allow_private: bool) -> list[str]:
    """The addresses `host` (a name or an IP literal) resolves to; when `allow_private` is False, only
    if every one is public. Raises ValidationError: code "dns" (unresolvable) or "private_address"."""
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [str(literal)]
    else:
        try:
            addresses = _resolve(host, port)
        except (OSError, UnicodeError):
            raise ValidationError(f"The host “{host}” could not be resolved. Check the spelling.", code="dns") from None
        if not addresses:
            raise ValidationError(f"The host “{host}” could not be resolved. Check the spelling.", code="dns")
    if allow_private:
        return addresses
    for address in addresses:
        reason = _refusal_reason(ipaddress.ip_address(address.split("%", 1)[0]))
        if reason is not None:
            shown = host if literal is not None else f"{host} ({address})"
            raise ValidationError(
                f"The URL points to {reason}: {shown}. Private, loopback and link-local addresses are not "
                "allowed on this server.",
                code="private_address",
            )
    return addresses
