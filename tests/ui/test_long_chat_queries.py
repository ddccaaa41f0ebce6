"""Opening a chat, paging it and reading it by the API cost as many queries at 3,000 messages as at
30: every read is a keyset page or a bounded lookup, never one that walks the history."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from chatapp.chat.models import Conversation, Message
from tests.support.chat import seed_messages


def _chat(owner, count: int) -> tuple[Conversation, list[int]]:
    conversation = Conversation.objects.create(owner=owner, title=f"{count} messages")
    ids = seed_messages(conversation, count, words=30)
    Message.objects.filter(pk__in=[ids[2], ids[count // 2]]).update(pinned=True)
    Message.objects.create(conversation=conversation, role="system", kind="summary", content="[Summary] facts.",
                           covers_from_id=ids[0], covers_through_id=ids[count // 2], covered_message_count=count // 2)
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=ids[-10])
    return conversation, ids


def _counts(client, conversation: Conversation, ids: list[int]) -> dict[str, int]:
    pk = conversation.pk
    urls = {
        "page": f"/c/{pk}/",
        "search page": f"/c/{pk}/?q=word7",
        "earlier": f"/c/{pk}/messages/?before={ids[-10]}",
        "earlier, far up": f"/c/{pk}/messages/?before={ids[5]}&limit=500",
        "since": f"/c/{pk}/messages/?since={ids[-3]}",
        "newer": f"/c/{pk}/messages/?after={ids[5]}",
        "newest page": f"/c/{pk}/messages/",
        "api messages": f"/api/conversations/{pk}/messages/",
        "api messages, earlier": f"/api/conversations/{pk}/messages/?before={ids[-10]}",
        "api conversation": f"/api/conversations/{pk}/",
        "api context": f"/api/conversations/{pk}/context/",
    }
    counts = {}
    for name, url in urls.items():
        client.get(url)  # caches filled by a first reading are not what a chat's length costs
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200, url
        counts[name] = len(queries)
    return counts


def test_a_long_chat_costs_the_queries_of_a_short_one(client, user):
    client.force_login(user)
    short = _counts(client, *_chat(user, 30))
    long = _counts(client, *_chat(user, 3000))
    assert long == short
