"""Read-only share links (issue 13): the public snapshot page, its API and Settings' list.

The page is read without an account, shows the conversation up to the message it was shared at, as the
chat renders it (sanitized), and nothing of its owner; revoked and unknown links answer 404.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from chatapp.chat.models import Conversation, ConversationShare, Message
from chatapp.chat.reply_stream import INTERRUPTED_WORDS
from chatapp.chat.share_selectors import SHARE_PAGE, _ancestors, share_messages
from chatapp.chat.share_services import IssuedShare, conversation_share_create, conversation_share_revoke
from chatapp.chat.share_views import SHARE_CSP
from chatapp.providers.services import llm_config_create

pytestmark = pytest.mark.django_db

# Distinctive values of the owner's account: none may appear on the public page.
OWNER_NAME = "zelda-owner-7Q"
API_KEY = "sk-share-SECRETKEY-9f8e7d"
CONFIG_NAME = "Config-Nimbus-42"
MODEL_NAME = "gpt-share-model-xq"
BASE_URL = "https://llm.share-secret.example/v1"

XSS = "<script>alert(1)</script> and [x](javascript:alert(1)) and <img src=x onerror=alert(2)>"


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user(username=OWNER_NAME, password="a long test password 1")


@pytest.fixture
def stranger(db):
    return get_user_model().objects.create_user(username="mallory", password="a long test password 2")


def _api(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


def _msg(conversation: Conversation, role: str, content: str, **fields) -> Message:
    return Message.objects.create(conversation=conversation, role=role, content=content, **fields)


@pytest.fixture
def chat(owner) -> Conversation:
    config = llm_config_create(owner=owner, name=CONFIG_NAME, base_url=BASE_URL, model=MODEL_NAME, api_key=API_KEY)
    conversation = Conversation.objects.create(owner=owner, title="Trip to Lisbon", llm_config=config)
    _msg(conversation, "user", "Where should we eat? " + XSS)
    _msg(conversation, "assistant", "Try **Taberna** first.\n\n" + XSS, model=MODEL_NAME)
    return conversation


class _TagCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append((tag, attrs))


def _tags(body: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    collector = _TagCollector()
    collector.feed(body)
    return collector.tags


def _path(issued: IssuedShare) -> str:
    return f"/s/{issued.token}/"


# --- the public page ---------------------------------------------------------------------------------


def test_public_page_works_logged_out_rendered_and_sanitized(chat, owner):
    issued = conversation_share_create(owner=owner, conversation=chat)
    response = Client().get(_path(issued))
    assert response.status_code == 200
    body = response.content.decode()
    assert "Shared conversation" in body and "Trip to Lisbon" in body
    assert "Where should we eat?" in body
    assert "<strong>Taberna</strong>" in body  # the reply's markdown, rendered as the chat renders it
    # Inert: no script element, no javascript: URL, no event handler, no image, from either message.
    tags = _tags(body)
    assert "script" not in {tag for tag, _ in tags} and "img" not in {tag for tag, _ in tags}
    for tag, attrs in tags:
        assert not any(name.startswith("on") for name, _ in attrs), (tag, attrs)
        assert not any((value or "").strip().lower().startswith("javascript:") for _, value in attrs), (tag, attrs)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body  # the user's text, shown as typed
    reply = body[body.index("<strong>Taberna</strong>"):]
    # In the reply too the markup is text: markdown-it escapes raw HTML and leaves the javascript: link
    # unlinked, and nh3 would strip either if it got through.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in reply[: reply.index("</article>")]

def test_public_page_names_each_message_and_keeps_reply_headings_under_it(chat, owner):
    """As in the chat: the page's h1 is the title, each message an article named by its h2 (a screen reader
    moving by articles or headings hears whose it is), and a reply's `#` an h3 below it, not a second h1."""
    _msg(chat, "assistant", "# Plan\n\nWalk.", model=MODEL_NAME)
    body = Client().get(_path(conversation_share_create(owner=owner, conversation=chat))).content.decode()
    tags = _tags(body)
    articles = [dict(attrs) for tag, attrs in tags if tag == "article"]
    names = {dict(attrs)["id"]: dict(attrs) for tag, attrs in tags if tag == "h2"}
    assert len(articles) == 3
    assert all(names[a["aria-labelledby"]]["class"] == "visually-hidden msg-name" for a in articles)
    labels = re.findall(r'<h2 class="visually-hidden msg-name" id="[^"]+">([^<]*)</h2>', body)
    assert labels == ["User", "Assistant", "Assistant"]  # the model is the owner's: never named here
    assert [tag for tag, _ in tags if re.fullmatch(r"h[1-6]", tag)] == ["h1", "h2", "h2", "h2", "h3"]


def test_public_page_keeps_search_engines_out_and_sends_no_referrer(chat, owner):
    issued = conversation_share_create(owner=owner, conversation=chat)
    response = Client().get(_path(issued))
    body = response.content.decode()
    assert '<meta name="robots" content="noindex, nofollow">' in body
    assert response["X-Robots-Tag"] == "noindex, nofollow"
    assert response["Referrer-Policy"] == "no-referrer"
    # The app's pages' policy less what a page without script needs: no script runs, no form posts.
    assert response["Content-Security-Policy"] == SHARE_CSP
    assert "default-src 'none'" in SHARE_CSP and "script-src" not in SHARE_CSP
    assert "form-action 'none'" in SHARE_CSP and "frame-ancestors 'none'" in SHARE_CSP
    assert Client().get("/s/no-such-link/")["Content-Security-Policy"] == SHARE_CSP
    assert "no-store" in response["Cache-Control"]  # a revoked link must not live on in a cache
    # No script at all, and no CSRF cookie handed to anonymous readers.
    assert "<script" not in body
    assert "csrftoken" not in response.cookies


def test_public_page_shows_nothing_of_the_owner(chat, owner):
    issued = conversation_share_create(owner=owner, conversation=chat)
    _msg(chat, "assistant", "failed here", status=Message.Status.ERROR, error=f"{BASE_URL} refused {API_KEY[-4:]}")
    body = Client().get(_path(issued)).content.decode()
    for secret in (OWNER_NAME, API_KEY, API_KEY[-4:], CONFIG_NAME, MODEL_NAME, BASE_URL, "share-secret"):
        assert secret not in body, secret


def test_messages_after_the_snapshot_are_not_shown(chat, owner):
    issued = conversation_share_create(owner=owner, conversation=chat)
    _msg(chat, "user", "LATER-QUESTION after sharing")
    _msg(chat, "assistant", "LATER-ANSWER after sharing")
    Conversation.objects.filter(pk=chat.pk).update(title="Renamed afterwards")
    body = Client().get(_path(issued)).content.decode()
    assert "LATER-" not in body
    assert "Renamed afterwards" not in body and "Trip to Lisbon" in body


def test_a_reply_still_streaming_is_not_part_of_the_snapshot(chat, owner):
    question = _msg(chat, "user", "And the PRIVATE plan?")
    reply = _msg(chat, "assistant", "", status=Message.Status.STREAMING, reply_to=question, parent=question)
    issued = conversation_share_create(owner=owner, conversation=chat)
    share = issued.share
    assert share.through_message_id == question.pk
    # The reply ends after the link was made (reply_store's final write): what it says is not published.
    Message.objects.filter(pk=reply.pk).update(content="WRITTEN-AFTER sharing", status=Message.Status.COMPLETE)
    body = Client().get(_path(issued)).content.decode()
    assert "And the PRIVATE plan?" in body
    assert "WRITTEN-AFTER" not in body


def test_a_reply_the_sweep_took_for_dead_is_not_part_of_the_snapshot(chat, owner):
    question = _msg(chat, "user", "And the PRIVATE plan?")
    reply = _msg(chat, "assistant", "Part of it", status=Message.Status.ERROR, error=INTERRUPTED_WORDS,
                 reply_to=question, parent=question)
    issued = conversation_share_create(owner=owner, conversation=chat)
    share = issued.share
    assert share.through_message_id == question.pk
    # Its stream was only stalled: it finishes after the link was made and reply_store stores it complete
    # in the same row (checked end to end against a live stream too): the link must not publish it.
    Message.objects.filter(pk=reply.pk, status=Message.Status.ERROR, error=INTERRUPTED_WORDS).update(
        content="WRITTEN-AFTER sharing", status=Message.Status.COMPLETE, error="")
    body = Client().get(_path(issued)).content.decode()
    assert "And the PRIVATE plan?" in body
    assert "WRITTEN-AFTER" not in body


@pytest.mark.parametrize("ends", ["complete", "stopped"])
def test_an_older_reply_the_sweep_took_for_dead_stays_out_of_the_snapshot(chat, owner, ends):
    # The owner saw the older reply interrupted, went on with another question and shared: the link
    # showed that reply whole once its stalled stream finished (or stopped) in the same row.
    question = _msg(chat, "user", "And the PRIVATE plan?")
    reply = _msg(chat, "assistant", "Part of it", status=Message.Status.ERROR, error=INTERRUPTED_WORDS,
                 reply_to=question, parent=question)
    later = _msg(chat, "user", "Never mind: the museums?", parent=reply)
    _msg(chat, "assistant", "The tiles museum.", reply_to=later, parent=later)
    issued = conversation_share_create(owner=owner, conversation=chat)
    share = issued.share
    before = Client().get(_path(issued)).content.decode()
    assert "Part of it" not in before and "The tiles museum." in before
    # reply_store's revival of a swept reply (or message_stop's stop of one): the same row, shown now.
    Message.objects.filter(pk=reply.pk, status=Message.Status.ERROR, error=INTERRUPTED_WORDS).update(
        content="WRITTEN-AFTER sharing", status=ends, error="")
    body = Client().get(_path(issued)).content.decode()
    assert "Never mind: the museums?" in body and "The tiles museum." in body
    assert "WRITTEN-AFTER" not in body
    # Shared again now, the owner publishes what the chat shows now: a new link, with the reply.
    again = conversation_share_create(owner=owner, conversation=chat)
    assert again.share.pk != share.pk
    assert "WRITTEN-AFTER" in Client().get(_path(again)).content.decode()


def test_only_the_live_conversation_is_shown(chat, owner):
    question = _msg(chat, "user", "What about dessert?")
    _msg(chat, "assistant", "SUPERSEDED-REPLY pastel", superseded=True, reply_to=question)
    _msg(chat, "assistant", "FAILED-REPLY", status=Message.Status.ERROR, error="boom")
    _msg(chat, "assistant", "STOPPED-REPLY pastel de nata", status=Message.Status.STOPPED, reply_to=question)
    _msg(chat, "system", "SUMMARY-TEXT of the chat", kind=Message.Kind.SUMMARY)
    _msg(chat, "system", "SYSTEM-CHAT message")
    _msg(chat, "assistant", "STREAMING-REPLY", status=Message.Status.STREAMING)
    issued = conversation_share_create(owner=owner, conversation=chat)
    body = Client().get(_path(issued)).content.decode()
    assert "STOPPED-REPLY" in body and "Stopped" in body  # a stopped reply is what the reader saw
    for hidden in ("SUPERSEDED-REPLY", "FAILED-REPLY", "boom", "SUMMARY-TEXT", "SYSTEM-CHAT", "STREAMING-REPLY"):
        assert hidden not in body, hidden


def test_unknown_and_revoked_links_are_404(chat, owner):
    missing = Client().get("/s/not-a-real-token-at-all/")
    assert missing.status_code == 404
    assert missing["X-Robots-Tag"] == "noindex, nofollow"
    assert "Trip to Lisbon" not in missing.content.decode()
    issued = conversation_share_create(owner=owner, conversation=chat)
    share = issued.share
    conversation_share_revoke(owner=owner, share=share)
    revoked = Client().get(_path(issued))
    assert revoked.status_code == 404
    assert revoked.content == missing.content  # the same answer: a revoked link says nothing more


def test_deleting_the_conversation_ends_its_links(chat, owner):
    issued = conversation_share_create(owner=owner, conversation=chat)
    share = issued.share
    chat.delete()
    assert Client().get(_path(issued)).status_code == 404
    assert not ConversationShare.objects.filter(pk=share.pk).exists()


def test_a_deactivated_accounts_links_stop_opening_and_come_back_with_it(chat, owner):
    """An admin turns an account off (the admin's Active box, Django's way to close one without deleting
    it): its sessions and tokens stop at once, and so do the chats it published, until it is back on."""
    issued = conversation_share_create(owner=owner, conversation=chat)
    missing = Client().get("/s/not-a-real-token-at-all/")
    owner.is_active = False
    owner.save(update_fields=["is_active"])

    off = Client().get(_path(issued))

    assert off.status_code == 404 and off.content == missing.content
    assert Client().get(_path(issued), {"after": chat.messages.first().pk}).status_code == 404
    owner.is_active = True
    owner.save(update_fields=["is_active"])
    assert Client().get(_path(issued)).status_code == 200


def test_a_long_snapshot_is_read_a_bounded_page_at_a_time(owner, django_assert_max_num_queries):
    conversation = Conversation.objects.create(owner=owner, title="Long one")
    Message.objects.bulk_create(
        Message(conversation=conversation, role="user" if i % 2 == 0 else "assistant", content=f"line-{i:04d}.")
        for i in range(2 * SHARE_PAGE + 50)
    )
    issued = conversation_share_create(owner=owner, conversation=conversation)
    client = Client()
    with django_assert_max_num_queries(3):
        first = client.get(_path(issued)).content.decode()
    assert first.count('<article class="msg') == SHARE_PAGE
    assert "line-0000." in first and f"line-{SHARE_PAGE - 1:04d}." in first and f"line-{SHARE_PAGE:04d}." not in first
    next_url = re.search(r'href="(/s/[^"]+\?after=\d+)"', first).group(1)
    second = client.get(next_url).content.decode()
    assert f"line-{SHARE_PAGE:04d}." in second and "From the start" in second
    third = client.get(re.search(r'href="(/s/[^"]+\?after=\d+)"', second).group(1)).content.decode()
    assert third.count('<article class="msg') == 50
    assert "Continue reading" not in third


@pytest.mark.parametrize("after", ["\u00b2", "x", "-1", "", "\u0663", "1" * 19, "1" * 5_000])
def test_an_odd_page_mark_reads_from_the_start(chat, owner, after):
    issued = conversation_share_create(owner=owner, conversation=chat)
    response = Client().get(_path(issued), {"after": after})
    assert response.status_code == 200 and "Where" in response.content.decode()


def test_share_messages_never_reads_past_the_snapshot(chat, owner):
    issued = conversation_share_create(owner=owner, conversation=chat)
    share = issued.share
    _msg(chat, "user", "after")
    page = share_messages(share=share)
    assert [m.content.split()[0] for m in page.messages] == ["Where", "Try"]
    assert page.next_after is None


# --- the services ------------------------------------------------------------------------------------


def test_tokens_are_long_random_and_unique(chat, owner):
    first = conversation_share_create(owner=owner, conversation=chat)
    _msg(chat, "user", "one more")
    second = conversation_share_create(owner=owner, conversation=chat)
    assert first.share.pk != second.share.pk and first.token != second.token
    assert len(first.token) >= 32 and re.fullmatch(r"[A-Za-z0-9_-]+", first.token)


def test_a_revoked_link_stays_revoked_when_the_chat_is_shared_again(chat, owner):
    first = conversation_share_create(owner=owner, conversation=chat)
    conversation_share_revoke(owner=owner, share=first.share)
    again = conversation_share_create(owner=owner, conversation=chat)
    assert again.share.pk != first.share.pk and again.token != first.token
    assert Client().get(_path(first)).status_code == 404 and Client().get(_path(again)).status_code == 200


# --- the API -----------------------------------------------------------------------------------------


def test_api_creates_lists_and_revokes(chat, owner):
    api = _api(owner)
    created = api.post(f"/api/conversations/{chat.pk}/share/")
    assert created.status_code == 201
    data = created.json()
    assert {"id", "url", "created_at"} <= set(data)
    share = ConversationShare.objects.get(pk=data["id"])
    assert data["url"].startswith("http://testserver/s/")
    path = data["url"].removeprefix("http://testserver")
    assert Client().get(path).status_code == 200

    listed = api.get("/api/shares/").json()
    assert [s["id"] for s in listed["results"]] == [share.pk]
    assert listed["results"][0]["title"] == "Trip to Lisbon"

    assert api.delete(f"/api/shares/{share.pk}/").status_code == 204
    assert api.get("/api/shares/").json()["results"] == []
    assert Client().get(path).status_code == 404
    assert api.delete(f"/api/shares/{share.pk}/").status_code == 404  # already revoked


def test_api_another_users_conversation_cannot_be_shared_nor_their_link_revoked(chat, owner, stranger):
    theirs = _api(stranger)
    assert theirs.post(f"/api/conversations/{chat.pk}/share/").status_code == 404
    assert not ConversationShare.objects.exists()
    issued = conversation_share_create(owner=owner, conversation=chat)
    share = issued.share
    assert theirs.delete(f"/api/shares/{share.pk}/").status_code == 404
    assert theirs.get("/api/shares/").json()["results"] == []
    share.refresh_from_db()
    assert share.revoked_at is None


def test_api_requires_authentication(chat, owner):
    issued = conversation_share_create(owner=owner, conversation=chat)
    share = issued.share
    anonymous = APIClient()
    assert anonymous.post(f"/api/conversations/{chat.pk}/share/").status_code in {401, 403}
    assert anonymous.get("/api/shares/").status_code in {401, 403}
    assert anonymous.delete(f"/api/shares/{share.pk}/").status_code in {401, 403}


def test_api_schema_documents_the_share_endpoints(owner):
    schema = _api(owner).get("/api/schema/", {"format": "json"}).json()
    assert "post" in schema["paths"]["/api/conversations/{id}/share/"]
    assert "get" in schema["paths"]["/api/shares/"]
    assert "delete" in schema["paths"]["/api/shares/{id}/"]


# --- Settings ----------------------------------------------------------------------------------------


def test_settings_lists_live_links_and_revokes_one(chat, owner):
    issued = conversation_share_create(owner=owner, conversation=chat)
    share = issued.share
    page = Client()
    page.force_login(owner)
    body = page.get("/settings/").content.decode()
    assert "Shared links" in body
    section = body[body.index('id="shares-h"'):]
    assert "Trip to Lisbon" in section and issued.token not in section  # shown only when made
    assert f'action="/settings/shares/{share.pk}/revoke/"' in section
    assert "csrfmiddlewaretoken" in section

    response = page.post(f"/settings/shares/{share.pk}/revoke/")
    assert response.status_code == 302 and response["Location"].endswith("/settings/#shares-h")
    assert Client().get(_path(issued)).status_code == 404
    body = page.get("/settings/").content.decode()
    assert f"/s/{issued.token}/" not in body and "No shared links." in body


def _share_card(page: Client, share: ConversationShare) -> str:
    """The link's card in Settings -> Shared links, as HTML."""
    body = page.get("/settings/").content.decode()
    card = body[body.index(f'id="share-{share.pk}"'):]
    return card[:card.index("</li>")]


def test_links_of_an_archived_chat_are_marked_archived(chat, owner):
    # An archived chat's links still open (archiving changes nothing in the chat); the list says whose
    # chat is out of the sidebar, as Settings -> Archived chats and a sidebar search mark it.
    issued = conversation_share_create(owner=owner, conversation=chat)
    share = issued.share
    page = Client()
    page.force_login(owner)
    api = _api(owner)
    listed = api.get("/api/shares/").json()["results"]
    assert [row["conversation_archived"] for row in listed] == [False]
    assert "Archived chat" not in _share_card(page, share)

    Conversation.objects.filter(pk=chat.pk).update(archived_at=chat.created_at)
    listed = api.get("/api/shares/").json()["results"]
    assert [row["conversation_archived"] for row in listed] == [True]
    assert "Archived chat" in _share_card(page, share)
    assert Client().get(_path(issued)).status_code == 200


def test_settings_revoke_is_owner_scoped_post_only_and_csrf_checked(chat, owner, stranger):
    issued = conversation_share_create(owner=owner, conversation=chat)
    share = issued.share
    theirs = Client()
    theirs.force_login(stranger)
    assert theirs.post(f"/settings/shares/{share.pk}/revoke/").status_code == 404
    assert f"/s/{issued.token}/" not in theirs.get("/settings/").content.decode()
    mine = Client()
    mine.force_login(owner)
    assert mine.get(f"/settings/shares/{share.pk}/revoke/").status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(owner)
    assert strict.post(f"/settings/shares/{share.pk}/revoke/").status_code == 403
    share.refresh_from_db()
    assert share.revoked_at is None


def test_chat_page_offers_share_in_the_header_menu(chat, owner):
    page = Client()
    page.force_login(owner)
    body = page.get(f"/c/{chat.pk}/").content.decode()
    assert 'data-action="share-conversation"' in body
    assert 'id="share-dialog"' in body


def test_the_snapshots_walk_up_the_tree_ends_even_where_parents_loop(db):
    """The walk from a switched-away snapshot's last message to its root stops at a message it has
    already met: a loop (rows no writer of the app makes) cannot keep the public page's query going."""
    owner = get_user_model().objects.create_user(username="looper", password="a long test password 3")
    conversation = Conversation.objects.create(owner=owner, title="Loop")
    first = Message.objects.create(conversation=conversation, role="user", content="q")
    second = Message.objects.create(conversation=conversation, role="assistant", content="a", parent=first)
    Message.objects.filter(pk=first.pk).update(parent=second)
    walk = _ancestors(message_id=second.pk)

    with connection.cursor() as cursor:
        # Bounded here so that a walk that does not stop fails the test instead of hanging it.
        cursor.execute(f"SELECT id FROM ({walk.sql}) walk LIMIT 50", walk.params)  # noqa: S608
        ids = [row[0] for row in cursor.fetchall()]

    assert sorted(ids) == sorted([first.pk, second.pk])


def test_a_reply_cut_at_the_output_limit_is_marked_as_in_the_chat(chat, owner):
    # It ends mid-sentence: the reader is told why, as for a stopped reply (and as the chat and both exports do).
    question = _msg(chat, "user", "Tell me everything.")
    _msg(chat, "assistant", "CUT-REPLY The bikes are in", reply_to=question, parent=question, finish_reason="length")
    issued = conversation_share_create(owner=owner, conversation=chat)
    body = Client().get(_path(issued)).content.decode()
    assert "CUT-REPLY" in body and "Cut at output limit" in body
    assert body.count("Cut at output limit") == 1  # the replies that ended on their own are not marked
