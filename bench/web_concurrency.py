"""50 concurrent streaming chats on one uvicorn process: all complete, 0 errors, p50 / p95 time to first byte.

Each chat is a different user with a conversation of --history messages (bulk-created, stored counts)
on the local fake OpenAI endpoint. All chats send at the same moment; the model streams its reply
with --chunk-ms between chunks (`slow-<ms>`), so the 50 streams are open together. A chat counts as
complete when its SSE body ends with a `done` event and the reply is stored as complete.

The database is a fresh SQLite file in a temporary directory, or DATABASE_URL when set.

    .venv/bin/python bench/web_concurrency.py [--chats 50] [--rounds 3] [--history 200] [--chunk-ms 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

from web_ttfb import (
    bench_environment,
    cpu_seconds,
    django_setup,
    percentile,
    seed_conversation,
    seed_user,
    uvicorn_process,
)


async def one_chat(client, *, token: str, conversation_id: int, text: str) -> tuple[float | None, str | None]:
    """(ms to the first body byte, error or None) of one streamed send."""
    started = time.perf_counter()
    ttfb = None
    body = b""
    try:
        async with client.stream(
            "POST", f"/api/conversations/{conversation_id}/messages/", json={"content": text},
            headers={"Authorization": f"Token {token}"},
        ) as response:
            if response.status_code != 200:
                return None, f"HTTP {response.status_code}: {(await response.aread())[:200]!r}"
            async for chunk in response.aiter_raw():
                if ttfb is None:
                    ttfb = (time.perf_counter() - started) * 1000
                body += chunk
    except Exception as exc:  # reported as an error of this chat
        return ttfb, f"{type(exc).__name__}: {exc}"
    text_body = body.decode()
    if "event: done" not in text_body:
        return ttfb, f"no done event: {text_body[-200:]!r}"
    return ttfb, None


async def run_round(url: str, chats: list[tuple[str, int]], round_no: int) -> tuple[list[float], list[str], float]:
    import httpx

    limits = httpx.Limits(max_connections=len(chats) + 10, max_keepalive_connections=len(chats) + 10)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        started = time.perf_counter()
        results = await asyncio.gather(*[
            one_chat(client, token=token, conversation_id=cid, text=f"round {round_no}: what is next?")
            for token, cid in chats
        ])
        wall = time.perf_counter() - started
    ttfbs = [t for t, _ in results if t is not None]
    errors = [e for _, e in results if e is not None]
    return ttfbs, errors, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --chats simultaneous sends (after a warm-up)")
    parser.add_argument("--history", type=int, default=200, help="messages already in each conversation")
    parser.add_argument("--chunk-ms", type=int, default=20, help="model delay between streamed chunks")
    args = parser.parse_args()

    from tests.support.fake_openai import FakeOpenAI

    with tempfile.TemporaryDirectory(prefix="web-conc-") as tmpdir, FakeOpenAI() as fake:
        tmp = Path(tmpdir)
        env = bench_environment(tmp)
        django_setup(env)
        from chatapp.chat.models import Message

        db = "DATABASE_URL" if os.environ.get("DATABASE_URL") else "SQLite (temp dir)"
        tag = secrets.token_hex(3)
        users, chats, conversations = [], [], []
        try:
            for i in range(args.chats):
                user, token, config = seed_user(username=f"bench-conc-{tag}-{i}", base_url=fake.base_url,
                                                model=f"slow-{args.chunk_ms}")
                conversation = seed_conversation(owner=user, config=config, messages=args.history)
                users.append(user)
                conversations.append(conversation)
                chats.append((token, conversation.pk))
            print(f"{args.chats} users, {args.history} messages each; model slow-{args.chunk_ms}; database: {db}")
            all_ttfb: list[float] = []
            all_errors: list[str] = []
            with uvicorn_process(env, tmp) as (url, pid):
                asyncio.run(run_round(url, chats[:5], 0))  # warm-up: imports, connections, caches
                cpu_before = cpu_seconds(pid)
                for r in range(1, args.rounds + 1):
                    ttfbs, errors, wall = asyncio.run(run_round(url, chats, r))
                    all_ttfb += ttfbs
                    all_errors += errors
                    print(f"round {r}: {len(ttfbs) - len(errors)}/{args.chats} complete, {len(errors)} errors, "
                          f"TTFB p50 {statistics.median(ttfbs):.1f} ms, p95 {percentile(ttfbs, 0.95):.1f} ms, "
                          f"all done in {wall:.2f} s")
                cpu_per_chat = (cpu_seconds(pid) - cpu_before) * 1000 / (args.chats * args.rounds)
            stored = Message.objects.filter(conversation__in=conversations, role="assistant",
                                            status="complete", model=f"slow-{args.chunk_ms}").count()
            expected = args.chats * args.rounds + 5
            print(f"\n{args.chats} concurrent streaming chats x {args.rounds} rounds on one uvicorn process:")
            done = len(all_ttfb) - len(all_errors)
            print(f"  complete: {done}/{args.chats * args.rounds}, errors: {len(all_errors)}, "
                  f"replies stored complete: {stored}/{expected}")
            print(f"  time to first byte: p50 {statistics.median(all_ttfb):.1f} ms, "
                  f"p95 {percentile(all_ttfb, 0.95):.1f} ms, max {max(all_ttfb):.1f} ms")
            print(f"  server CPU per chat: {cpu_per_chat:.1f} ms; load average {os.getloadavg()[0]:.1f} "
                  f"on {os.cpu_count()} CPUs")
            for error in all_errors[:5]:
                print("  error:", error)
            return 0 if not all_errors and stored == expected else 1
        finally:
            for user in users:
                user.delete()


if __name__ == "__main__":
    sys.exit(main())
