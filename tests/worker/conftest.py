"""Fixtures for summary jobs: an owner, a config, long conversations, and a REAL Celery worker subprocess
per broker (helpers and the worker itself: tests/support/worker.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth import get_user_model

from chatapp.celery import app as celery_app
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation, Message
from chatapp.providers.crypto import secret_encrypt
from chatapp.providers.models import LLMConfig
from tests.support.worker import BROKERS, Broker, PrivateRedis, Worker, celery_use_broker, redis_forget_queue


@pytest.fixture
def owner(transactional_db):
    return get_user_model().objects.create_user(username="sam", password="a long enough password")


@pytest.fixture
def make_config(owner, fake_openai) -> Callable[..., LLMConfig]:
    def make(model: str = "fake-echo", *, name: str | None = None, default: bool = True) -> LLMConfig:
        return LLMConfig.objects.create(
            owner=owner,
            name=name or model,
            base_url=fake_openai.base_url,
            model=model,
            api_key_encrypted=secret_encrypt("sk-test-worker-key"),
            api_key_last4="-key",
            context_window=32_000,
            max_output_tokens=1_000,
            is_default=default,
        )

    return make


@pytest.fixture
def long_conversation(owner) -> Callable[..., Conversation]:
    """A conversation of `rounds` exchanges whose verbatim window starts at the last `window_rounds`."""

    def make(*, config: LLMConfig | None, rounds: int = 12, window_rounds: int = 3) -> Conversation:
        conversation = Conversation.objects.create(owner=owner, title="Long", llm_config=config)
        model = config.model if config is not None else None
        user_ids = []
        for i in range(rounds):
            user = message_append(
                conversation=conversation,
                role=Message.Role.USER,
                content=f"Question {i}: the invoice number is INV-{1000 + i} and the table is orders_{i}.",
                token_model=model or "gpt-4o-mini",
            )
            user_ids.append(user.pk)
            message_append(
                conversation=conversation,
                role=Message.Role.ASSISTANT,
                content=f"Answer {i}: we decided to index orders_{i} by customer_id. SELECT * FROM orders_{i};",  # noqa: S608
                token_model=model or "gpt-4o-mini",
            )
        conversation.window_start_id = user_ids[-window_rounds]
        conversation.save(update_fields=["window_start_id"])
        return conversation

    return make


@pytest.fixture(params=BROKERS)
def broker(request, tmp_path, settings) -> Iterator[Broker]:
    """The broker of one test: the filesystem one, the shared Redis (REDIS_URL, a private queue), or
    with `@pytest.mark.parametrize("broker", [PRIVATE_REDIS], indirect=True)` a private redis-server."""
    private = PrivateRedis(tmp_path / "redis").start() if request.param == "private-redis" else None
    broker = Broker(request.param, tmp_path, private_redis=private)
    settings.CELERY_SUMMARY_QUEUE = broker.queue
    saved = (celery_app.conf.broker_url, dict(celery_app.conf.broker_transport_options or {}))
    celery_use_broker(url=broker.url, options=broker.options)
    yield broker
    celery_use_broker(url=saved[0], options=saved[1])
    if private is not None:
        private.stop()
    elif broker.kind == "redis":
        redis_forget_queue(broker)


@pytest.fixture
def worker(broker, tmp_path, transactional_db) -> Iterator[Callable[..., Worker]]:
    """Factory: `worker()` starts a worker (not started until asked, so a test can enqueue first)."""
    started: list[Worker] = []

    def make(**env: str) -> Worker:
        w = Worker(broker, tmp_path, **env)
        started.append(w)
        return w.start()

    yield make
    for w in started:
        w.stop()
        # Shown by pytest only when the test failed (captured output): what the worker did.
        print(f"--- {w.log_path} ---\n{w.log()[-20000:]}")
