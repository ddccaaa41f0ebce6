"""Server URLs in settings (DATABASE_URL, REDIS_URL, CACHE_URL): a refused one is named in the error
with its password masked, since start-up errors land in logs and terminals others read."""

from __future__ import annotations

import pytest

from tests.support.settings_start import SETTINGS_LOAD, settings_start


@pytest.mark.parametrize(("name", "value", "words"), [
    ("REDIS_URL", "http://:hunter2secret@broker.internal:6379/0", "http://:***@broker.internal:6379/0"),
    ("REDIS_URL", "redis://:hunter2secret@broker.internal:6379/zero", "redis://:***@broker.internal:6379/zero"),
    ("CACHE_URL", "memcached://cacheuser:hunter2secret@cache.internal:11211", "memcached://cacheuser:***@cache.internal:11211"),
    ("DATABASE_URL", "foo://chat:hunter2secret@db.internal/chat", "foo://chat:***@db.internal/chat"),
    ("DATABASE_URL", "postgres://chat:hunter2secret@db.internal:port/chat", "postgres://chat:***@db.internal:port/chat"),
    # redis-py read these as database 0 (a path that is no number is dropped) or 12 ("/1/2": its
    # slashes removed), on the cache's first use; kombu refused them with a ValueError at the first enqueue
    ("CACHE_URL", "redis://:hunter2@cache.internal:6379/abc", "database must be a whole number"),
    ("CACHE_URL", "redis://:hunter2@cache.internal:6379/1/2", "database must be a whole number"),
    ("REDIS_URL", "redis://:hunter2@broker.internal:6379/0/extra", "database must be a whole number"),
    ("REDIS_URL", "redis://:hunter2@broker.internal:6379/3/", "database must be a whole number"),
    ("REDIS_URL", "redis://:hunter2@broker.internal:6379/-1", "database must be a whole number"),
    # kombu's Connection took ?db= as an argument it does not have (TypeError at the first enqueue)
    ("REDIS_URL", "redis://:hunter2@broker.internal:6379/0?db=3", "database as the path"),
    # redis-py's ?db= wins over the path: the cache was in database 3, not the 0 the URL shows first
    ("CACHE_URL", "redis://:hunter2@cache.internal:6379/0?db=3", "disagrees with its path"),
    ("CACHE_URL", "redis://:hunter2@cache.internal:6379?db=x", "database must be a whole number"),
])
def test_a_refused_url_is_named_with_its_password_masked(tmp_path, name, value, words):
    """Each stops start-up; a Redis database the client would refuse or read as another one too."""
    started = settings_start(tmp_path, **{name: value})
    assert started.returncode != 0
    assert "ImproperlyConfigured" in started.stderr and name in started.stderr and words in started.stderr
    assert ":***@" in started.stderr
    assert "hunter2" not in started.stderr + started.stdout


def test_a_password_with_an_unencoded_slash_is_not_shown_in_part():
    from chatapp.env_urls import url_redacted

    # urlparse ends the host at the first "/": the password's tail would read as the database number.
    assert url_redacted("redis://:hun/ter2@broker.internal:6379/x") == "redis://:***@broker.internal:6379/x"
    assert url_redacted("redis://broker.internal:6379/0") == "redis://broker.internal:6379/0"
    assert url_redacted("redis://user@broker.internal/0") == "redis://user@broker.internal/0"


def test_a_library_error_quoting_the_url_or_its_decoded_password_is_masked():
    from chatapp.env_urls import text_redacted

    url = "postgres://chat:hun%40ter2@db.internal/chat"
    said = f"cannot parse {url!r}; password 'hun@ter2' rejected"
    assert text_redacted(said, url) == "cannot parse 'postgres://chat:***@db.internal/chat'; password '***' rejected"
    assert text_redacted("Scheme 'foo://' is unknown", "foo://db.internal/x") == "Scheme 'foo://' is unknown"


_DATABASE = SETTINGS_LOAD + "; from django.conf import settings as s; print(s.DATABASES['default']['NAME'])"


@pytest.mark.parametrize("blank", ["", " ", "\t"])
def test_a_blank_database_url_is_the_default_sqlite_file(tmp_path, blank):
    """`DATABASE_URL=` was the default but `DATABASE_URL= ` failed on an unknown scheme "://"."""
    started = settings_start(tmp_path, _DATABASE, DATABASE_URL=blank)
    assert started.returncode == 0, started.stderr[-2000:]
    assert started.stdout.strip().splitlines()[-1] == str(tmp_path / "chatapp.sqlite3")


def test_a_relative_sqlite_path_is_refused_asking_for_an_absolute_one(tmp_path):
    """sqlite:///chat.sqlite3 opened chat.sqlite3 in each process's working directory: a web server and
    a worker started from different folders each had a database of their own."""
    started = settings_start(tmp_path, DATABASE_URL="sqlite:///chat.sqlite3")
    assert started.returncode != 0
    assert "ImproperlyConfigured" in started.stderr and "absolute path" in started.stderr
    assert "sqlite:////" in started.stderr


def test_an_absolute_sqlite_path_is_taken(tmp_path):
    started = settings_start(tmp_path, _DATABASE, DATABASE_URL=f"sqlite:///{tmp_path / 'other.sqlite3'}")
    assert started.returncode == 0, started.stderr[-2000:]
    assert started.stdout.strip().splitlines()[-1] == str(tmp_path / "other.sqlite3")


# What the worker and the web process would connect with, built without connecting: the broker's
# certificate check (kombu's Connection) and the cache's (redis-py's connection pool).
_TLS = SETTINGS_LOAD + """
from django.core.cache import caches
from chatapp.celery import app
ssl = app.connection_for_write().ssl
pool = caches['default']._cache._get_connection_pool(False)
print(int(ssl['ssl_cert_reqs']) if ssl else None, pool.connection_class.__name__,
      pool.connection_kwargs.get('ssl_cert_reqs', 'default'))
"""


@pytest.mark.parametrize(("query", "broker_reqs", "cache_reqs"), [
    # kombu's default for rediss:// without options was CERT_NONE: a TLS broker taken on any certificate
    ("", 2, "default"),  # redis-py's default for the cache is "required"
    ("?ssl_cert_reqs=required", 2, "required"),
    ("?ssl_cert_reqs=optional", 1, "optional"),
    ("?ssl_cert_reqs=none", 0, "none"),
])
def test_a_tls_redis_verifies_certificates_unless_its_url_says_otherwise(tmp_path, query, broker_reqs, cache_reqs):
    started = settings_start(tmp_path, _TLS, REDIS_URL=f"rediss://:pw@broker.internal:6380/0{query}")
    assert started.returncode == 0, started.stderr[-2000:]
    assert started.stdout.strip().splitlines()[-1] == f"{broker_reqs} SSLConnection {cache_reqs}"


def test_plain_redis_stays_plain(tmp_path):
    started = settings_start(tmp_path, _TLS, REDIS_URL="redis://broker.internal:6379/0")
    assert started.returncode == 0, started.stderr[-2000:]
    assert started.stdout.strip().splitlines()[-1] == "None Connection default"


@pytest.mark.parametrize("name", ["REDIS_URL", "CACHE_URL"])
def test_an_unknown_certificate_requirement_stops_start_up(tmp_path, name):
    """It failed only at the first connection (a KeyError in kombu, a RedisError in redis-py)."""
    started = settings_start(tmp_path, **{name: "rediss://:hunter2@broker.internal:6380/0?ssl_cert_reqs=strict"})
    assert started.returncode != 0
    assert "ImproperlyConfigured" in started.stderr
    assert "ssl_cert_reqs must be none, optional or required" in started.stderr
    assert "hunter2" not in started.stderr


_DATABASES = SETTINGS_LOAD + """
from django.core.cache import caches
print(caches['default']._cache._get_connection_pool(False).connection_kwargs.get('db', 0))
"""


@pytest.mark.parametrize(("env", "cache_db"), [
    ({"REDIS_URL": "redis://broker.internal:6379"}, 1),  # no path: database 0, the cache in 1
    ({"REDIS_URL": "redis://broker.internal:6379/"}, 1),
    ({"REDIS_URL": "redis://broker.internal:6379/15"}, 0),
    # past Redis's default 16: a server configured with more databases serves them
    ({"REDIS_URL": "redis://broker.internal:6379/20"}, 21),
    ({"REDIS_URL": "redis://broker.internal:6379/0", "CACHE_URL": "redis://cache.internal:6379/31"}, 31),
    ({"REDIS_URL": "redis://broker.internal:6379/0", "CACHE_URL": "redis://cache.internal:6379/7"}, 7),
    ({"REDIS_URL": "redis://broker.internal:6379/0", "CACHE_URL": "redis://cache.internal:6379?db=7"}, 7),
    ({"REDIS_URL": "redis://broker.internal:6379/0", "CACHE_URL": "redis://cache.internal:6379/7?db=7"}, 7),
])
def test_a_redis_database_given_plainly_is_taken(tmp_path, env, cache_db):
    started = settings_start(tmp_path, _DATABASES, **env)
    assert started.returncode == 0, started.stderr[-2000:]
    assert started.stdout.strip().splitlines()[-1] == str(cache_db)
