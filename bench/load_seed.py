"""bench/load.py's servers, fake model process and seeding: a private PostgreSQL database and Redis
database number, and the users with histories sized so each one's trigger fires at a chosen turn."""

from __future__ import annotations

import os
import re
import secrets
import select
import signal
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from web_ttfb import (
    _WORDS,
    PYTHON,
    ROOT,
)

WINDOW, MAX_OUTPUT = 4_000, 500  # budget 3,500: trigger 2,800 (fast 2,450)
TRIGGER = {"quality": 2_800, "balanced": 2_800, "fast": 2_450}
PREFERENCES = ("quality", "quality", "balanced", "fast")  # user i: PREFERENCES[i % 4]
ASK_WORDS = 30  # words per message sent: the fake model echoes them (reply ~44 chunks)
ACTIVE = ("pending", "awaiting", "queued", "running")


# --- the servers: a private PostgreSQL database and Redis database number ---------------------------------

def postgres_server(option: str | None) -> str:
    url = option or os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        url = "postgres://postgres@127.0.0.1:5432"
    parsed = urlparse(url)
    return f"{parsed.scheme}://{parsed.netloc}"


@contextmanager
def private_redis_db(server: str, wanted: int | None):
    """A Redis database number of this run's own (never 0): --redis-db, or the first empty one of 15..1,
    claimed with a marker key (SET NX) so two runs cannot take the same; flushed before and after."""
    import redis

    base = server.rstrip("/")
    if wanted == 0:
        raise SystemExit("--redis-db 0 is not allowed: the bench flushes its database")
    chosen = None
    for number in [wanted] if wanted is not None else range(15, 0, -1):
        client = redis.Redis.from_url(f"{base}/{number}")
        if wanted is not None:
            chosen = number
            break
        if client.dbsize() == 0 and client.set("bench-load:owner", os.getpid(), nx=True):
            if client.dbsize() == 1:
                chosen = number
                break
            client.delete("bench-load:owner")  # someone else began writing there meanwhile
        client.close()
    if chosen is None:
        raise SystemExit("no empty Redis database among 1..15: pass --redis-db N")
    client.flushdb()
    try:
        yield f"{base}/{chosen}", chosen
    finally:
        client.flushdb()
        client.close()


# --- processes ------------------------------------------------------------------------------------------

class FakeModel:
    """tests/support/fake_openai.py as a process of its own (its threads then take no CPU from the
    load generator's event loop)."""

    def __init__(self, tmp: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([PYTHON, str(ROOT / "tests" / "support" / "fake_openai.py")], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=(tmp / "fake-model.log").open("wb"), text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else ""
        match = re.search(r"(http://\S+/v1)", line)
        if match is None:
            self.stop()
            raise RuntimeError(f"fake model server did not start: {line!r}")
        self.base_url = match.group(1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


# --- seeding --------------------------------------------------------------------------------------------

@dataclass
class UserPlan:
    index: int
    token: str
    conversation_id: int
    preference: str
    trigger_turn: int  # the turn whose request should pass the trigger (planned; the run reports the actual)
    seed_last_id: int = 0


def ask_text(user: int, turn: int) -> str:
    words = " ".join(_WORDS[(user * 11 + turn * 5 + j * 3) % len(_WORDS)] for j in range(ASK_WORDS - 4))
    return f"u{user} turn {turn + 1} about {words}"


def _history(target_tokens: int, model: str) -> list[tuple[str, str, int]]:
    """(role, content, token count) rows, user first, ending with a reply, totalling ~target_tokens."""
    import optimizer

    def row(i: int, role: str, length: int) -> tuple[str, str, int]:
        content = f"#{i} " + " ".join(_WORDS[(i * 7 + j * 3) % len(_WORDS)] for j in range(max(1, length)))
        return role, content, optimizer.count_message({"role": role, "content": content}, model=model)

    rows: list[tuple[str, str, int]] = []
    total, i = 0, 0
    while True:  # whole rounds while a round of the largest size still fits, then one round sized to the rest
        question = row(i, "user", 15 + (i * 37) % 30)
        answer = row(i + 1, "assistant", 80 + (i * 53) % 90)
        if total + question[2] + answer[2] + 200 > target_tokens:
            break
        rows += [question, answer]
        total += question[2] + answer[2]
        i += 2
    question = row(i, "user", 15)
    rows.append(question)
    total += question[2]
    answer = row(i + 1, "assistant", target_tokens - total - 6)  # the words are one token each
    while total + answer[2] > target_tokens and len(answer[1].split()) > 2:
        answer = row(i + 1, "assistant", len(answer[1].split()) - 1 - (total + answer[2] - target_tokens))
    rows.append(answer)
    return rows


def seed(n: int, *, fake_url: str, chat_model: str, summary_model: str, turns: int) -> list[UserPlan]:
    """n users (token, settings, a chat and a summary config), one conversation each, histories by bulk insert."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password

    import optimizer
    from chatapp.chat.models import Conversation, Message, UserSettings
    from chatapp.chat.token_models import HINT_CHARS, ApiToken, key_digest
    from chatapp.providers.crypto import secret_encrypt
    from chatapp.providers.models import LLMConfig
    from tests.support.fake_openai import echo_reply

    user_model = get_user_model()
    unusable = make_password(None)
    users = user_model.objects.bulk_create(
        [user_model(username=f"load-{i:04d}", password=unusable) for i in range(n)])
    keys = [secrets.token_hex(20) for _ in users]
    ApiToken.objects.bulk_create([
        ApiToken(user=u, digest=key_digest(key), hint=key[:HINT_CHARS], name="load bench", made_in="api")
        for u, key in zip(users, keys, strict=True)
    ])
    key = secret_encrypt("sk-bench-0000")

    def config(user, name: str, model: str, default: bool) -> LLMConfig:
        return LLMConfig(owner=user, name=name, base_url=fake_url, model=model, api_key_encrypted=key,
                         api_key_last4="0000", context_window=WINDOW, max_output_tokens=MAX_OUTPUT, temperature=0.0,
                         is_default=default)

    chats = LLMConfig.objects.bulk_create([config(u, "chat", chat_model, True) for u in users])
    summaries = LLMConfig.objects.bulk_create([config(u, "summaries", summary_model, False) for u in users])
    UserSettings.objects.bulk_create([
        UserSettings(user=u, preference=PREFERENCES[i % len(PREFERENCES)], summary_config=summaries[i])
        for i, u in enumerate(users)])
    conversations = Conversation.objects.bulk_create(
        [Conversation(owner=u, llm_config=chats[i], title=f"load {i}") for i, u in enumerate(users)])
    # Growth of one turn: the message sent and the fake model's echo of it.
    ask = optimizer.count_message({"role": "user", "content": ask_text(0, 0)}, model=chat_model)
    sample = [{"role": "user" if n % 2 == 0 else "assistant", "content": ask_text(0, 0)} for n in range(31)]
    growth = ask + optimizer.count_message({"role": "assistant", "content": echo_reply(sample)}, model=chat_model)
    plans, rows = [], []
    for i, conversation in enumerate(conversations):
        preference = PREFERENCES[i % len(PREFERENCES)]
        k = 1 + i % min(5, turns)
        # turn j's request holds history + ask + (j-1) * growth: past the trigger first at turn k
        history = _history(TRIGGER[preference] - ask - (k - 1) * growth + growth // 2, chat_model)
        rows.extend(Message(conversation=conversation, role=r, content=c, char_count=len(c), token_count=t)
                    for r, c, t in history)
        conversation.live_message_count = len(history)
        conversation.live_char_count = sum(len(c) for _, c, _ in history)
        conversation.live_token_count = sum(t for _, _, t in history)
        plans.append(UserPlan(i, keys[i], conversation.pk, preference, k))
    created = Message.objects.bulk_create(rows, batch_size=5000)
    Conversation.objects.bulk_update(conversations, ["live_message_count", "live_char_count", "live_token_count"])
    last = {}
    for m in created:
        last[m.conversation_id] = max(last.get(m.conversation_id, 0), m.pk)
    for p in plans:
        p.seed_last_id = last[p.conversation_id]
    return plans
