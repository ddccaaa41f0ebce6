"""Event-loop CPU of reading a streamed reply: httpx's own transport (httpcore + h11) against the
aiohttp transport the app's async model client uses (chatapp/providers/llm/aio_transport.py).

Both through the real openai client, the same low-level `post` the app makes and the app's own SSE
reader (chatapp/providers/llm/sse.py), against the fake OpenAI-compatible server of the tests (one
HTTP chunk per streamed event, like real providers); the figure is this thread's CPU per reply
(time.thread_time), so the fake server's threads do not count. The two are alternated, round by
round, in one process.

    .venv/bin/python bench/stream_read.py [--replies 60] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


async def _reply_cpu_ms(client, replies: int) -> tuple[float, int]:
    import openai

    from chatapp.providers.llm.sse import sse_events

    messages = [{"role": "user", "content": "Tell me about context windows. " * 40}]
    events = 0
    started = time.thread_time()
    for _ in range(replies):
        body = {"model": "fake-echo", "messages": messages, "stream": True}
        stream = await client.post("/chat/completions", body=body, cast_to=object, stream=True,
                                   stream_cls=openai.AsyncStream[object])
        events = 0
        async for _ in sse_events(stream.response):
            events += 1
        await stream.close()
    return (time.thread_time() - started) * 1000 / replies, events


async def _compare(base_url: str, replies: int, rounds: int) -> None:
    import httpx
    import openai

    from chatapp.providers.llm.aio_transport import AiohttpTransport

    limits = openai.DEFAULT_CONNECTION_LIMITS
    transports = {"httpx (httpcore + h11)": httpx.AsyncHTTPTransport(limits=limits),
                  "aiohttp (the app's)": AiohttpTransport(limits=limits)}
    clients = {name: openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench",
                                        http_client=httpx.AsyncClient(transport=transport))
               for name, transport in transports.items()}
    figures: dict[str, list[float]] = {name: [] for name in clients}
    events = 0
    for client in clients.values():
        await _reply_cpu_ms(client, 5)  # warm: connections open, code paths imported
    for _ in range(rounds):
        for name, client in clients.items():
            ms, events = await _reply_cpu_ms(client, replies)
            figures[name].append(ms)
    for client in clients.values():
        await client.close()
    print(f"Event-loop CPU per streamed reply ({events} SSE events each), {replies} replies x {rounds} rounds, "
          f"alternated (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs):")
    print(f"{'transport':<26} {'median ms':>10} {'rounds':>24}")
    for name, values in figures.items():
        print(f"{name:<26} {statistics.median(values):>10.2f} {' / '.join(f'{v:.2f}' for v in values):>24}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replies", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")

    from tests.support.fake_openai import FakeOpenAI

    with FakeOpenAI() as fake:
        asyncio.run(_compare(fake.base_url, args.replies, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
