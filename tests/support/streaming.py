"""Reading a streamed response in a sync test."""

from __future__ import annotations

import json

from asgiref.sync import async_to_sync


def streamed_body(response) -> bytes:
    """The whole body of a StreamingHttpResponse, whether its iterator is sync or async.

    Django's test client hands an async iterator over as is (iterating it synchronously would only
    warn and buffer it); its database reads then run on this thread, inside the test's transaction.
    """
    if not response.is_async:
        return b"".join(response.streaming_content)

    async def read() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(read)()


def sse_events(raw: bytes) -> list[tuple[str, dict]]:
    """A recorded SSE body as (event, data) pairs, in order."""
    events = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        events.append((fields["event"], json.loads(fields["data"])))
    return events
