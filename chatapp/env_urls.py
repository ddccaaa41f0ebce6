"""Server URLs read by settings (DATABASE_URL, REDIS_URL, CACHE_URL): checks whose errors name the
URL, with its password masked — start-up errors end up in logs, terminals and bug reports."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured


def url_redacted(url: str) -> str:
    """The URL with the password of its user part replaced by ***."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    # The last "@", not urlparse's netloc: a password with an unencoded "/", "?" or "#" would otherwise
    # end the host early and be shown, in part, as the path.
    userinfo, host = rest.rsplit("@", 1)
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{host}"


def text_redacted(text: str, url: str) -> str:
    """A library's error text about `url`, with the URL's password masked wherever it is quoted."""
    _, _, rest = url.partition("://")
    password = rest.rsplit("@", 1)[0].partition(":")[2] if "@" in rest else ""
    text = text.replace(url, url_redacted(url))
    for secret in {password, unquote(password)} - {""}:
        text = text.replace(secret, "***")
    return text


def redis_url_checked(name: str, url: str) -> str:
    """The URL (blank: unset) if it is a Redis one."""
    if url and urlparse(url).scheme not in {"redis", "rediss"}:
        raise ImproperlyConfigured(f"{name} must start with redis:// or rediss://, got {url_redacted(url)!r}")
    # The values both kombu (broker) and redis-py (cache) read; either failed only at the first connection.
    for value in parse_qs(urlparse(url).query).get("ssl_cert_reqs", []):
        if value not in {"none", "optional", "required"}:
            raise ImproperlyConfigured(
                f"{name}'s ssl_cert_reqs must be none, optional or required, got {value!r} in {url_redacted(url)!r}"
            )
    if url:
        redis_database(name, url)
    return url


# Redis's default `databases 16`: the cache beside the broker's last one wraps to database 0.
REDIS_DATABASES = 16


def redis_database(name: str, url: str) -> int:
    """The database number a Redis URL selects. redis-py and kombu read a path each in their own way, and
    neither said so at start-up: redis-py dropped a path that is no number (database 0) and removed the
    slashes of one with several ("/1/2": 12), kombu failed at the first enqueue. Hence one plain form,
    "/N", or nothing (0). A number past the server's last database is left to the server to refuse, at
    the first connection: a server may be configured with more than Redis's default 16."""
    parts = urlparse(url)
    shown = url_redacted(url)
    wrong = f"{name}'s database must be a whole number (redis://host:6379/N), got {shown!r}"
    path = parts.path.removeprefix("/")
    if not re.fullmatch(r"[0-9]{0,9}", path):
        raise ImproperlyConfigured(wrong)
    number = int(path or 0)
    for value in parse_qs(parts.query).get("db", []):
        if name == "REDIS_URL":
            # kombu's Connection takes ?db= as a keyword it does not have: a TypeError at the first enqueue.
            raise ImproperlyConfigured(f"{name} must give its database as the path (redis://host:6379/N), not ?db=: "
                                       f"got {shown!r}")
        if not re.fullmatch(r"[0-9]{1,9}", value):
            raise ImproperlyConfigured(wrong)
        if path and int(value) != number:
            # redis-py's ?db= wins: the URL would read as one database and use another.
            raise ImproperlyConfigured(f"{name}'s ?db={value} disagrees with its path /{path}: give one, got {shown!r}")
        number = int(value)
    return number


def redis_next_database(url: str) -> str:
    """The URL with the database after its own, for the cache beside the broker: the last of Redis's
    default 16 wraps to 0 (a server configured with more serves the ones past it)."""
    parts = urlparse(url)
    number = redis_database("REDIS_URL", url)
    return parts._replace(path=f"/{0 if number == REDIS_DATABASES - 1 else number + 1}").geturl()


def sqlite_path_checked(name: str) -> None:
    """DATABASE_URL's SQLite file must be one file whichever process (web server, worker) opens it."""
    if name in {"", ":memory:"}:
        # Each process would open an empty database of its own.
        raise ImproperlyConfigured("DATABASE_URL names an in-memory SQLite database: give a file (sqlite:////path.sqlite3)")
    if not Path(name).is_absolute():
        # Opened relative to each process's working directory: a server and a worker started from
        # different folders would each have a database of their own.
        raise ImproperlyConfigured(
            f"DATABASE_URL names the SQLite file {name!r} by a relative path: give an absolute path "
            f"(sqlite:////absolute/path.sqlite3, four slashes)"
        )
