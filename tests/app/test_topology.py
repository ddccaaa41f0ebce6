"""Past one machine: limits counted in Redis are shared by every web process (issue 12, item 5).

Several uvicorn processes (on one machine or several) serve one PostgreSQL and one Redis. The per-user
send limit (chatapp/chat/rate_limit.py) and the DRF throttles (token endpoint, connection tests,
/compact) count in Django's default cache, which is Redis when CACHE_URL names one (REDIS_URL alone is
only the Celery broker: without CACHE_URL each process counts in its own memory).

Here two separate Django processes, configured from the environment as a web process is (CACHE_URL =
this run's Redis), take turns at the same user's limits: what the first one counted, the second one
sees, so together they allow exactly the limit. Skipped without REDIS_URL. The keys are a random user
id's, deleted afterwards; nothing else in that Redis database is touched.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not os.environ.get("REDIS_URL"), reason="REDIS_URL is not set: limits are shared through a Redis cache"
)

ROOT = Path(__file__).resolve().parents[2]
SEND_LIMIT = 5  # SEND_RATE_LIMIT_PER_MINUTE in the child processes
COMPACT_LIMIT = 3  # THROTTLE_COMPACT, per minute

# One web process's share of the traffic: `sends` sends and `compacts` /compact requests of one user,
# through the same functions the views call. Prints what was allowed, and the cache backend in use.
_CHILD = """
import json, sys
from types import SimpleNamespace

from chatapp.instance import instance_prepare

instance_prepare()
import django

django.setup()
from django.conf import settings
from rest_framework.throttling import ScopedRateThrottle

from chatapp.chat.rate_limit import RateLimited, send_rate_check

user_id, sends, compacts = (int(a) for a in sys.argv[1:4])
user = SimpleNamespace(pk=user_id, is_authenticated=True)
allowed_sends = 0
for _ in range(sends):
    try:
        send_rate_check(user=user)
        allowed_sends += 1
    except RateLimited:
        pass
request, view = SimpleNamespace(user=user, META={}), SimpleNamespace(throttle_scope="compact")
allowed_compacts = sum(1 for _ in range(compacts) if ScopedRateThrottle().allow_request(request, view))
print(json.dumps({"sends": allowed_sends, "compacts": allowed_compacts,
                  "backend": settings.CACHES["default"]["BACKEND"]}))
"""


def _cache_url() -> str:
    return os.environ.get("CACHE_URL") or os.environ["REDIS_URL"]


def _web_process(tmp_path: Path, *, user_id: int, sends: int, compacts: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CACHE_URL"}}
    env.update({
        "DJANGO_SETTINGS_MODULE": "chatapp.settings",
        "CHATAPP_VAR_DIR": str(tmp_path / "var"),  # secrets of its own; the database is never opened
        "CACHE_URL": _cache_url(),
        "SEND_RATE_LIMIT_PER_MINUTE": str(SEND_LIMIT),
        "THROTTLE_COMPACT": f"{COMPACT_LIMIT}/min",
    })
    done = subprocess.run([sys.executable, "-c", _CHILD, str(user_id), str(sends), str(compacts)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def user_id():
    """A user id no one else counts for, and its keys deleted afterwards."""
    import redis

    pk = 10**12 + secrets.randbelow(10**12)
    yield pk
    client = redis.Redis.from_url(_cache_url())
    try:
        keys = [*client.scan_iter(match=f":*:chat:send-rate:{pk}:*"), *client.scan_iter(match=f":*:throttle_*_{pk}")]
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def test_send_limit_and_throttles_are_shared_between_web_processes(tmp_path, user_id):
    # Both processes inside one clock minute: the send limit's window slides over minute buckets, and
    # the previous minute's share decays, which would let one more send through across the boundary.
    if time.time() % 60 > 48:  # two short child processes: a few seconds
        time.sleep(61 - time.time() % 60)

    first = _web_process(tmp_path, user_id=user_id, sends=3, compacts=2)
    second = _web_process(tmp_path, user_id=user_id, sends=SEND_LIMIT, compacts=COMPACT_LIMIT)

    assert first["backend"] == second["backend"] == "chatapp.redis_cache.RedisCache"
    assert (first["sends"], first["compacts"]) == (3, 2)
    # With a cache per process the second would allow SEND_LIMIT and COMPACT_LIMIT again.
    assert second["sends"] == SEND_LIMIT - 3
    assert second["compacts"] == COMPACT_LIMIT - 2
