"""Where the cache lives: the send limit and the throttles count there, so web processes must share it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from chatapp.chat.rate_limit import RateLimited, send_rate_check

ROOT = Path(__file__).resolve().parents[2]

_PRINT_CACHE = (
    "import json, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'chatapp.settings');"
    "from chatapp.instance import instance_prepare; instance_prepare();"
    "from django.conf import settings; print(json.dumps(settings.CACHES['default']))"
)


def _cache_for(tmp_path: Path, **env: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "CACHE_URL", "DATABASE_URL"}}
    environ.update({"CHATAPP_VAR_DIR": str(tmp_path), **env})
    done = subprocess.run([sys.executable, "-c", _PRINT_CACHE], cwd=ROOT, env=environ, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_with_redis_the_cache_is_shared_in_the_next_database(tmp_path):
    cache = _cache_for(tmp_path, REDIS_URL="redis://broker.internal:6379/0")
    assert cache["BACKEND"].endswith("RedisCache")
    assert cache["LOCATION"] == "redis://broker.internal:6379/1"  # a cache clear never flushes the broker's queues


def test_cache_url_wins_and_without_redis_the_cache_is_the_process_memory(tmp_path):
    chosen = _cache_for(tmp_path, REDIS_URL="redis://broker.internal:6379/3", CACHE_URL="redis://cache.internal:6379/7")
    assert chosen["LOCATION"] == "redis://cache.internal:6379/7"
    assert _cache_for(tmp_path)["BACKEND"].endswith("LocMemCache")


def test_send_limit_holds_when_sends_race(settings, django_user_model):
    """Counted with an atomic increment: sends racing in threads (or processes, through Redis) never
    all read the same count and pass together."""
    settings.SEND_RATE_LIMIT_PER_MINUTE = 20
    user = django_user_model(pk=424242, username="racer")  # never saved: the limit keys on the id
    allowed: list[int] = []
    start = threading.Barrier(8)

    def sender() -> None:
        start.wait()
        for _ in range(6):
            try:
                send_rate_check(user=user)
                allowed.append(1)
            except RateLimited:
                pass

    threads = [threading.Thread(target=sender) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # 48 tries: exactly the limit passes (give or take the previous minute's decaying share, which
    # only ever lowers it, when the test runs across a minute boundary).
    assert 0 < len(allowed) <= 20
    with pytest.raises(RateLimited):
        send_rate_check(user=user)
