"""chatapp.redis_cache: the cache objects Django makes per thread (so per ASGI request) share one
connection pool, on a real Redis server (REDIS_URL, as in CI; skipped when none answers)."""

from __future__ import annotations

import os
import secrets
import threading

import pytest

redis = pytest.importorskip("redis")

from chatapp.redis_cache import RedisCache  # noqa: E402

URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
def server():
    probe = redis.Redis.from_url(URL)
    try:
        probe.ping()
    except redis.ConnectionError:
        pytest.skip(f"no Redis at {URL}")
    yield probe
    probe.close()


def _connections(server, name: str) -> int:
    return sum(1 for c in server.client_list() if c.get("name") == name)


def test_requests_in_threads_of_their_own_share_one_connection(server):
    name = f"cache-test-{secrets.token_hex(4)}"
    params = {"OPTIONS": {"client_name": name}, "KEY_PREFIX": name}
    caches = []

    def request(i: int) -> None:
        cache = RedisCache(URL, params)  # what Django builds in each request's thread
        caches.append(cache)
        cache.add(f"rate:{i}", 0, timeout=30)
        assert cache.incr(f"rate:{i}") == 1
        assert cache.get(f"rate:{i}") == 1

    for i in range(5):
        thread = threading.Thread(target=request, args=(i,))
        thread.start()
        thread.join()
    assert len({id(c._cache) for c in caches}) == 1
    assert _connections(server, name) == 1


def test_other_locations_or_options_get_clients_of_their_own(server):
    name = f"cache-test-{secrets.token_hex(4)}"
    one = RedisCache(URL, {"OPTIONS": {"client_name": name}})
    other_name = RedisCache(URL, {"OPTIONS": {"client_name": name + "-b"}})
    assert one._cache is not other_name._cache
    assert one._cache is RedisCache([URL], {"OPTIONS": {"client_name": name}})._cache


def test_concurrent_commands_are_served(server):
    name = f"cache-test-{secrets.token_hex(4)}"
    params = {"OPTIONS": {"client_name": name}, "KEY_PREFIX": name}
    key = "counter"
    RedisCache(URL, params).set(key, 0, timeout=30)
    errors = []

    def bump() -> None:
        try:
            cache = RedisCache(URL, params)
            for _ in range(50):
                cache.incr(key)
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=bump) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert RedisCache(URL, params).get(key) == 400
    assert 1 <= _connections(server, name) <= 8


def test_a_window_count_increments_reads_the_previous_count_and_expires(server):
    name = f"cache-test-{secrets.token_hex(4)}"
    cache = RedisCache(URL, {"OPTIONS": {"client_name": name}, "KEY_PREFIX": name})
    assert cache.window_count("now", "before", timeout=130) == (1, 0)
    cache.set("before", 7, timeout=30)
    assert cache.window_count("now", "before", timeout=130) == (2, 7)
    # Django's own calls read and change the same counter (the limit takes a refused send back).
    assert cache.get("now") == 2
    assert cache.decr("now") == 1
    assert cache.window_count("now", "before", timeout=130) == (2, 7)
    ttl = server.ttl(cache.make_and_validate_key("now"))
    assert 0 < ttl <= 130  # made with its expiry, which later counts leave alone


def test_window_counts_racing_in_threads_are_each_counted_once(server):
    name = f"cache-test-{secrets.token_hex(4)}"
    params = {"OPTIONS": {"client_name": name}, "KEY_PREFIX": name}
    seen: list[int] = []

    def count() -> None:
        cache = RedisCache(URL, params)
        for _ in range(25):
            seen.append(cache.window_count("now", "before", timeout=130)[0])

    threads = [threading.Thread(target=count) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(seen) == list(range(1, 201))
