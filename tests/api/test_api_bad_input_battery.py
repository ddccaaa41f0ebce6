"""A battery of bad inputs on every JSON write endpoint (issue 11, finding 7): each answers a clear
4xx in JSON, never a 500 and never an HTML page, and changes nothing it should not."""

from __future__ import annotations

import json

import pytest

from chatapp.chat.models import Conversation, Message

pytestmark = pytest.mark.django_db

BAD_BODIES: list[str] = [
    "", "not json", "[", "null", "[]", "123", '"text"', "true", "[" * 5_000 + "]" * 5_000,
    '{"content": null}', '{"content": 123}', '{"content": ["a"]}', '{"content": {"a": 1}}',
    '{"content": "a\\u0000b"}', '{"content": "\\ud800"}', '{"content": ""}', '{"content": "   "}',
    '{"title": null}', '{"title": 5}', '{"title": "' + "t" * 1_000 + '"}',
    '{"llm_config": "abc"}', '{"llm_config": -1}', '{"llm_config": 1e400}', '{"llm_config": 99999999999999999999}',
    '{"offline": "maybe"}', '{"pinned": "yes"}', '{"pinned": null}', '{"instructions": {"a": 1}}',
    '{"instructions": "' + "i" * 5_000 + '"}', '{"preference": "turbo"}', '{"auto_optimize": "sometimes"}',
    '{"summary_config": "x"}', '{"context_window": -5}', '{"context_window": 1e308}', '{"max_output_tokens": "x"}',
    '{"temperature": "hot"}', '{"temperature": NaN}', '{"base_url": "javascript:alert(1)"}',
    '{"base_url": "http://169.254.169.254/latest"}', '{"name": ""}', '{"model": null}', '{"api_key": 5}',
    '{"client_key": 7}', '{"username": [], "password": {}}',
    # a refusal that repeats the value sent ('"…" is not a valid choice.'): an unpaired surrogate in it
    '{"preference": "\\ud800"}',
    # a good message with a key the database cannot hold, or that is not text: refused, not stored
    '{"content": "hi", "client_key": "a\\u0000b"}', '{"content": "hi", "client_key": "\\ud800"}',
    '{"content": "hi", "client_key": ["k"]}', '{"content": "hi", "client_key": {"k": 1}}',
]


def _leads_with_detail(response) -> bool:
    """The API's one error shape: an object whose `detail` says in words what was wrong."""
    body = json.loads(response.content)
    return isinstance(body, dict) and isinstance(body.get("detail"), str) and body["detail"].strip() != ""


def _endpoints(conversation: Conversation, message: Message, summary: Message, config_pk: int) -> list[tuple[str, str]]:
    return [
        ("post", "/api/conversations/"),
        ("patch", f"/api/conversations/{conversation.pk}/"),
        ("post", f"/api/conversations/{conversation.pk}/messages/"),
        ("post", f"/api/conversations/{conversation.pk}/compact/"),
        ("patch", f"/api/summaries/{summary.pk}/"),
        ("post", f"/api/messages/{message.pk}/pin/"),
        ("post", "/api/configs/"),
        ("patch", f"/api/configs/{config_pk}/"),
        ("patch", "/api/settings/"),
        ("post", "/api/auth/token/"),
    ]


def test_no_bad_body_gives_a_500_or_html(api, user, make_config):
    config = make_config(user)
    conversation = Conversation.objects.create(owner=user, title="Battery", llm_config=config)
    message = Message.objects.create(conversation=conversation, role="user", content="hello")
    Message.objects.create(conversation=conversation, role="assistant", content="hi")
    summary = Message.objects.create(conversation=conversation, role="system", kind="summary",
                                     content="[Conversation summary — covers 2 messages, 7 → 2 characters]\n\nhi")
    failures = []
    for method, path in _endpoints(conversation, message, summary, config.pk):
        for body in BAD_BODIES:
            response = getattr(api, method)(path, data=body, content_type="application/json")
            kind = response.get("Content-Type", "")
            if response.status_code >= 500 or "html" in kind:
                failures.append(f"{method.upper()} {path} {body[:40]!r} -> {response.status_code} {kind}")
            elif response.status_code >= 400 and not _leads_with_detail(response):
                failures.append(f"{method.upper()} {path} {body[:40]!r} -> {response.content[:80]!r}")
    assert failures == [], "\n".join(failures[:20])
    # nothing sent was stored as a message (a number as a title is DRF's usual coercion, not a failure)
    assert not Message.objects.filter(conversation=conversation, role="user").exclude(pk=message.pk).exists()
    assert json.loads(api.get("/api/settings/").content)["preference"] in {"fast", "balanced", "quality"}


def test_no_bad_query_gives_a_500(api, user, client):
    conversation = Conversation.objects.create(owner=user, title="Battery")
    Message.objects.create(conversation=conversation, role="user", content="hello")
    huge = "9223372036854775808"
    queries = [
        ("/api/conversations/", {"q": "a\x00b"}),
        ("/api/search/", {"q": "hel\x00lo"}),
        (f"/api/dashboard/conversations/{conversation.pk}/records/", {"offset": huge}),
        (f"/api/dashboard/conversations/{conversation.pk}/summaries/", {"offset": huge}),
    ]
    failures = []
    for path, params in queries:
        response = api.get(path, params)
        if response.status_code >= 500 or "html" in response.get("Content-Type", ""):
            failures.append(f"GET {path} {params} -> {response.status_code}")
        elif response.status_code >= 400 and not _leads_with_detail(response):
            failures.append(f"GET {path} {params} -> {response.status_code} {response.content[:80]!r}")
    assert failures == [], "\n".join(failures)
    assert api.get("/api/conversations/", {"q": "a\x00b"}).status_code == 400
    page = api.get(f"/api/dashboard/conversations/{conversation.pk}/records/", {"offset": huge})
    assert page.status_code == 200 and json.loads(page.content)["results"] == []
    # the pages read a NUL in the search box as a space
    client.force_login(user)
    for path in ("/", f"/c/{conversation.pk}/", "/c/sidebar/"):
        assert client.get(path, {"q": "hel\x00lo"}).status_code == 200, path
