"""Time to the first streamed byte of a chat reply, for conversations of 100, 1,000 and 10,000 messages.

One uvicorn process serves the app (as in production); the model is the local fake OpenAI endpoint
(tests/support/fake_openai.py, `fake-echo`: answers at once), so the figure is the server's own work:
authentication, storing the user message, loading the context (static layer + window, stored
counts), packing, the optimization record, and the first SSE event. Each request is timed from
sending it to the first byte of the body, and read to the end before the next one.

Conversations are seeded with bulk_create and stored token counts (questions ~35 tokens, answers
~150). The model config uses a 16,384-token window (a local model's size, like the built-in offline
model): a 100-message chat fits and is sent whole; past the trigger the verbatim window stays the
same size whatever the length of the history, which is what the target (10,000 <= 1.5 x 100) checks.

The database is a fresh SQLite file in a temporary directory, or DATABASE_URL when set (the bench
migrates it and deletes its own user afterwards).

    .venv/bin/python bench/web_ttfb.py [--requests 40] [--sizes 100,1000,10000]

Targets: median <= 30 ms for every size; median(10,000) <= 1.5 x median(100).
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

WINDOW = 16_384
MAX_OUTPUT = 1_024


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[index]


def bench_environment(tmp: Path) -> dict[str, str]:
    """Environment shared by this process (seeding) and the uvicorn child."""
    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "chatapp.settings",
            "CHATAPP_VAR_DIR": str(tmp),
            "SEND_RATE_LIMIT_PER_MINUTE": "1000000",
            "ALLOW_PRIVATE_LLM_URLS": "true",
            "DEBUG": "false",
            "LOG_LEVEL": "WARNING",
        }
    )
    return env


def django_setup(env: dict[str, str]) -> None:
    os.environ.update(env)
    import django

    from chatapp.instance import instance_prepare

    instance_prepare()

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc), to report server CPU per request."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def uvicorn_process(env: dict[str, str], tmp: Path):
    """`uvicorn chatapp.asgi:application` on a free port; yields (base URL, pid)."""
    import httpx

    port = free_port()
    log = open(tmp / "uvicorn.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [PYTHON, "-m", "uvicorn", "chatapp.asgi:application", "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "warning", "--no-access-log", "--lifespan", "off"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"uvicorn exited: {(tmp / 'uvicorn.log').read_text()[-2000:]}")
            try:
                httpx.get(url + "/api/schema/", timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError("uvicorn did not start in 30 s") from None
                time.sleep(0.1)
        yield url, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def seed_user(*, username: str, base_url: str, model: str) -> tuple[Any, str, Any]:
    """A user with an API token and a default config on the fake endpoint."""
    from django.contrib.auth import get_user_model

    from chatapp.chat.token_services import api_token_create
    from chatapp.providers.crypto import secret_encrypt
    from chatapp.providers.models import LLMConfig

    user = get_user_model().objects.create_user(username=username, password=secrets.token_urlsafe(16))
    key = api_token_create(user=user, name="bench", made_in="api").key
    config = LLMConfig.objects.create(
        owner=user, name="bench", base_url=base_url, model=model, api_key_encrypted=secret_encrypt("sk-bench-0000"),
        api_key_last4="0000", context_window=WINDOW, max_output_tokens=MAX_OUTPUT, temperature=0.0, is_default=True,
    )
    return user, key, config


_WORDS = ("index", "query", "cache", "replica", "window", "budget", "summary", "token", "deploy", "worker",
    "queue", "retry", "latency", "schema", "migration", "backup", "vacuum", "plan", "cost", "stream", "reply",
    "model", "prompt", "context", "history",)


def seed_conversation(*, owner: Any, config: Any, messages: int) -> Any:
    """A conversation of `messages` alternating user/assistant messages with stored counts, bulk-created."""
    import optimizer
    from chatapp.chat.models import Conversation, Message

    conversation = Conversation.objects.create(owner=owner, llm_config=config, title=f"{messages} messages")
    rows = []
    for i in range(messages):
        role = "user" if i % 2 == 0 else "assistant"
        # Short questions, longer answers (about 35 and 150 tokens): a 100-message chat is then about
        # two thirds of the budget, so it is sent whole, and longer ones are cut to the window.
        length = 15 + (i * 37) % 30 if role == "user" else 80 + (i * 53) % 90
        content = f"#{i} " + " ".join(_WORDS[(i * 7 + j * 3) % len(_WORDS)] for j in range(length))
        rows.append(Message(
            conversation=conversation, role=role, content=content, char_count=len(content),
            token_count=optimizer.count_message({"role": role, "content": content}, model=config.model),
        ))
    Message.objects.bulk_create(rows, batch_size=2000)
    Conversation.objects.filter(pk=conversation.pk).update(
        live_message_count=len(rows),
        live_char_count=sum(r.char_count for r in rows),
        live_token_count=sum(r.token_count for r in rows),
    )
    return conversation


def timed_send(client: Any, conversation_id: int, text: str) -> tuple[float, str]:
    """(milliseconds to the first body byte, the whole SSE body) of one send."""
    started = time.perf_counter()
    with client.stream("POST", f"/api/conversations/{conversation_id}/messages/", json={"content": text}) as response:
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {response.read()[:300]!r}")
        chunks = response.iter_raw()
        first = next(chunks)
        ttfb = (time.perf_counter() - started) * 1000
        body = first + b"".join(chunks)
    return ttfb, body.decode()


def sends_timed(client: Any, conversation_id: int, texts: Iterable[str]) -> list[float]:
    """Time to first byte of each send of `texts`, one after another, each read to its `done`."""
    samples = []
    for text in texts:
        ttfb, body = timed_send(client, conversation_id, text)
        if "event: done" not in body:
            raise RuntimeError(f"reply did not complete: {body[-300:]}")
        samples.append(ttfb)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=40, help="timed requests per size (after 3 warm-ups)")
    parser.add_argument("--sizes", default="100,1000,10000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    import httpx

    from tests.support.fake_openai import FakeOpenAI

    with tempfile.TemporaryDirectory(prefix="web-ttfb-") as tmpdir, FakeOpenAI() as fake:
        tmp = Path(tmpdir)
        env = bench_environment(tmp)
        django_setup(env)
        from chatapp.chat.models import OptimizationRecord

        db = "DATABASE_URL" if os.environ.get("DATABASE_URL") else "SQLite (temp dir)"
        user, token, config = seed_user(username=f"bench-ttfb-{secrets.token_hex(4)}", base_url=fake.base_url,
                                        model="fake-echo")
        try:
            started = time.perf_counter()
            conversations = {n: seed_conversation(owner=user, config=config, messages=n) for n in sizes}
            print(f"seeded {sum(sizes):,} messages in {time.perf_counter() - started:.1f} s; database: {db}")
            results: dict[int, list[float]] = {}
            cpu_ms: dict[int, float] = {}
            with uvicorn_process(env, tmp) as (url, pid), httpx.Client(
                base_url=url, headers={"Authorization": f"Token {token}"}, timeout=60
            ) as client:
                for n, conversation in conversations.items():
                    for i in range(3):
                        timed_send(client, conversation.pk, f"warm-up {i}")
                    samples = []
                    cpu_before = cpu_seconds(pid)
                    for i in range(args.requests):
                        ttfb, body = timed_send(client, conversation.pk, f"question {i} about the plan")
                        if "event: done" not in body:
                            raise RuntimeError(f"reply did not complete: {body[-300:]}")
                        samples.append(ttfb)
                    results[n] = samples
                    cpu_ms[n] = (cpu_seconds(pid) - cpu_before) * 1000 / args.requests
            print(f"\nTime to first byte, {args.requests} requests per size, one uvicorn process, "
                  f"model fake-echo (instant), window {WINDOW:,}:")
            print(f"{'messages':>10} {'median ms':>10} {'p95 ms':>8} {'sent msgs':>10} {'pack ms':>8} {'strategy':>9} "
                  f"{'server CPU ms/request':>22}")
            for n, samples in results.items():
                records = list(OptimizationRecord.objects.filter(conversation=conversations[n]).order_by("-id")
                               .values("messages_after", "pack_ms", "strategy")[: args.requests])
                print(f"{n:>10,} {statistics.median(samples):>10.1f} {percentile(samples, 0.95):>8.1f} "
                      f"{statistics.median(r['messages_after'] for r in records):>10.0f} "
                      f"{statistics.median(r['pack_ms'] for r in records):>8.2f} {records[0]['strategy']:>9} "
                      f"{cpu_ms[n]:>22.1f}")
            small, large = statistics.median(results[sizes[0]]), statistics.median(results[sizes[-1]])
            worst = max(statistics.median(s) for s in results.values())
            ok_abs, ok_ratio = worst <= 30, large <= 1.5 * small
            print(f"\nmedian <= 30 ms for every size: {'PASS' if ok_abs else 'FAIL'} (worst {worst:.1f} ms)")
            print(f"median({sizes[-1]:,}) <= 1.5 x median({sizes[0]:,}): {'PASS' if ok_ratio else 'FAIL'} "
                  f"(ratio {large / small:.2f})")
            print(f"(load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; the CPU "
                  "column is the whole request — stream and reply storage included)")
            return 0 if ok_abs and ok_ratio else 1
        finally:
            user.delete()


if __name__ == "__main__":
    sys.exit(main())
