"""Failed sign-ins on the login page and on the API's token endpoint (it checks the same passwords),
counted per client address and per username in the cache (shared through Redis when configured):
past either limit both refuse (429) until its window ends, whatever the password. Each attempt is
counted before its password is checked (`login_attempt_start`), so guesses sent at once cannot all
pass. A success clears the username's count. Accounts made on the sign-up page are counted the same
way, per client address (`signup_attempt_start`). The address is the one the API's throttles use
(`NUM_PROXIES`: only a trusted proxy's X-Forwarded-For entry counts); an IPv6 one counts as its /64,
which one machine holds whole."""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import time

from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle

_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _rate(scope: str) -> tuple[int, int]:
    """(failures allowed, window seconds) of settings' rate `scope`, such as "20/hour"."""
    count, period = api_settings.DEFAULT_THROTTLE_RATES[scope].split("/")
    return int(count), _SECONDS[period[0]]


def _keys(*, request: HttpRequest, username: str) -> list[tuple[str, int, int]]:
    """(cache key, limit, window end) of each count this attempt falls under."""
    return [
        _key(scope="login_address", who=_client(request)),
        _key(scope="login_username", who=_username_digest(username)),
    ]


def _client(request: HttpRequest) -> str:
    """The client's address; for IPv6, its /64: a provider hands a whole /64 to one line or server, so
    each guess or sign-up could come from an address of its own and no address limit ever applied."""
    address = BaseThrottle().get_ident(request)
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is None:
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return address


def _username_digest(username: str) -> str:
    """The username as a key part: a digest, since Redis writes keys as UTF-8, which a name sent as JSON
    with an unpaired surrogate cannot be (a 500 before its password was checked), and a name of any
    length makes a key of one length."""
    folded = username.strip().lower().encode("utf-8", "surrogatepass")
    return hashlib.sha256(folded).hexdigest()


def _key(*, scope: str, who: str) -> tuple[str, int, int]:
    limit, window = _rate(scope)
    bucket = int(time.time() // window)
    return f"login-fail:{scope}:{who}:{bucket}", limit, (bucket + 1) * window


def login_attempt_start(*, request: HttpRequest, username: str) -> int:
    """Count this sign-in as a failure before its password is checked, and say how many seconds to wait
    when that passes a limit (0: go on). A password check takes a while (the hasher is slow on
    purpose): counted only once it failed, guesses sent together all found the count below the limit
    and were all checked. A refused attempt is taken back at once (it checked nothing); one that
    succeeds, or checks nothing, is taken back by `login_failures_clear` / `login_attempt_take_back`."""
    return _count(keys=_keys(request=request, username=username))


def _count(*, keys: list[tuple[str, int, int]]) -> int:
    """Count one attempt under each of `keys`; the seconds to wait when that passes a limit, the attempt
    then taken back (0: go on)."""
    over = []
    for key, limit, end in keys:
        # add then incr: atomic in every cache backend (Redis INCR), so parallel guesses all count.
        cache.add(key, 0, timeout=int(end - time.time()) + 1)
        try:
            count = cache.incr(key)
        except ValueError:  # expired between the two: a new window, this attempt its first
            cache.add(key, 1, timeout=int(end - time.time()) + 1)
            count = 1
        if count > limit:
            over.append(end)
    if not over:
        return 0
    _take_back(keys=[key for key, _, _ in keys])
    return max(1, int(max(over) - time.time()) + 1)


def signup_attempt_start(*, request: HttpRequest) -> int:
    """Count an account about to be made from this client address (settings' rate "signup_address"),
    and say how many seconds to wait when that passes the limit (0: go on; the account is not made).
    Counted before it is made, as a sign-in is, so that forms sent at once cannot all pass; a form
    refused for its fields is not counted (the caller counts only a valid one)."""
    return _count(keys=[_key(scope="signup_address", who=_client(request))])


def signup_attempt_take_back(*, request: HttpRequest) -> None:
    """A sign-up counted that made no account after all (its name was taken meanwhile) is not counted."""
    _take_back(keys=[_key(scope="signup_address", who=_client(request))[0]])


class TooManyFailures(Exception):
    """Past a failed sign-in limit: nothing was checked; `wait` is the seconds until the next try."""

    def __init__(self, *, wait: int) -> None:
        super().__init__(f"Too many failed sign-ins: try again in {wait} s.")
        self.wait = wait


def password_confirm(*, request: HttpRequest, user: User, password: str) -> None:
    """Check `user`'s password again before what cannot be undone (deleting the account), counted with
    the sign-ins of the same username: a session left open (a shared computer) must not guess it here
    without end. TooManyFailures past a limit; ValidationError (code "wrong_password") when wrong."""
    username = user.get_username()
    wait = login_attempt_start(request=request, username=username)
    if wait:
        raise TooManyFailures(wait=wait)
    if not user.check_password(password):
        raise ValidationError("That is not your password.", code="wrong_password")
    login_failures_clear(request=request, username=username)


def login_attempt_take_back(*, request: HttpRequest, username: str) -> None:
    """An attempt that checked no password (a blank one) is not a failure."""
    _take_back(keys=[key for key, _, _ in _keys(request=request, username=username)])


def login_failures_clear(*, request: HttpRequest, username: str) -> None:
    """A success clears the username's count (the address's keeps its earlier failures: it may be
    guessing at others; only this attempt, counted when it began, is taken back)."""
    (address_key, _, _), (username_key, _, _) = _keys(request=request, username=username)
    cache.delete(username_key)
    _take_back(keys=[address_key])


def _take_back(*, keys: list[str]) -> None:
    for key in keys:
        with contextlib.suppress(ValueError):  # expired meanwhile: nothing to take back
            cache.decr(key)
