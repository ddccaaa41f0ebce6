"""Every address that names an object by id, walked from the URL resolver itself: another user's object
answers exactly as a missing one does (a 404, or the 405 of a method the address never takes), for
every method, signed in by session or by API token, and nothing of the owner's changes; signed out,
the API answers 401 and the pages send to the sign-in page; a write riding the owner's session without
the CSRF token is refused. A new address with an id fails
`test_every_address_with_an_id_is_swept` until it is added to ADDRESSES below, so none is left out."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from chatapp.chat.folder_models import Folder
from chatapp.chat.folder_services import folder_create
from chatapp.chat.image_models import MessageImage
from chatapp.chat.import_models import ImportJob
from chatapp.chat.models import Conversation, Message, SummaryJob
from chatapp.chat.prompt_models import SavedPrompt
from chatapp.chat.prompt_services import prompt_create
from chatapp.chat.share_models import ConversationShare
from chatapp.chat.share_services import conversation_share_create
from chatapp.chat.token_models import ApiToken
from chatapp.chat.token_services import api_token_create
from chatapp.providers.models import LLMConfig
from chatapp.providers.services import llm_config_create
from tests.dashboard.factories import make_record, make_summary
from tests.support.accounts import token_client
from tests.support.chat import seed_messages

pytestmark = pytest.mark.django_db

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
MISSING = 987_654_321
# What a write sends: a field each endpoint would act on, so a missed ownership check would show.
BODY = {"content": "from eve", "title": "eve was here", "index": 1, "pinned": True, "archived": True,
        "name": "eve", "command": "eve", "instructions": "eve", "model": "eve", "base_url": "https://eve.example/v1"}

# Addresses with an id that are not one user's object: the admin (staff only, Django's own checks) and
# the public share page, whose token is the credential (tests/chat/test_share.py).
NOT_OWNED = ("admin/", "s/<slug:token>/")


@dataclass(frozen=True)
class World:
    """One of each object of ada's that an address names by id."""

    conversation: Conversation
    question: Message
    reply: Message
    summary: Message
    share: ConversationShare
    prompt: int
    config: LLMConfig
    token: ApiToken
    record: int
    summary_job: int
    import_job: int
    folder: int
    image: int
    # eve's own chat, for the addresses naming a chat and an object in it: ada's object under eve's chat.
    eves_conversation: Conversation

    def snapshot(self) -> dict[str, Any]:
        """What an address could change of ada's: compared before and after the sweep."""
        ada = self.conversation.owner_id
        return {
            "conversations": list(Conversation.objects.filter(owner_id=ada).values_list(
                "id", "title", "pinned_at", "archived_at", "system_prompt", "llm_config_id", "offline", "folder_id")),
            "messages": list(Message.objects.filter(conversation=self.conversation)
                             .values_list("id", "content", "pinned", "status", "off_path_by").order_by("id")),
            "shares": list(ConversationShare.objects.filter(owner_id=ada).values_list("id", "revoked_at")),
            "prompts": list(SavedPrompt.objects.filter(owner_id=ada).values_list("id", "command", "title", "content")),
            "configs": list(LLMConfig.objects.filter(owner_id=ada).values_list(
                "id", "name", "model", "base_url", "is_default")),
            "tokens": list(ApiToken.objects.filter(user_id=ada).values_list("id", "name")),
            "summary_jobs": list(SummaryJob.objects.values_list("id", "status")),
            "import_jobs": list(ImportJob.objects.filter(owner_id=ada).values_list("id", "status")),
            "folders": list(Folder.objects.filter(owner_id=ada).values_list("id", "name")),
        }


def _world(ada, eve) -> World:
    config = llm_config_create(owner=ada, name="Ada's", base_url="https://api.openai.com/v1", model="gpt-4o")
    conversation = Conversation.objects.create(owner=ada, title="Ada's chat", llm_config=config)
    question_id, reply_id = seed_messages(conversation, 2)
    Message.objects.filter(pk=reply_id).update(parent_id=question_id)
    question, reply = Message.objects.get(pk=question_id), Message.objects.get(pk=reply_id)
    summary = make_summary(conversation=conversation, covers=(question, reply), covered=2,
                           content="[Conversation summary — covers messages 1-2]\n\nhello")
    return World(
        conversation=conversation, question=question, reply=reply, summary=summary,
        share=conversation_share_create(owner=ada, conversation=conversation).share,
        prompt=prompt_create(owner=ada, command="review", content="Review this.").pk,
        config=config,
        token=api_token_create(user=get_user_model().objects.get(pk=ada.pk), name="ada's script",
                               made_in="settings").token,
        record=make_record(conversation=conversation, tokens_full=100, tokens_sent=50).pk,
        summary_job=SummaryJob.objects.create(conversation=conversation, status=SummaryJob.Status.FAILED).pk,
        import_job=ImportJob.objects.create(owner=ada, filename="ada.json").pk,
        folder=folder_create(owner=ada, name="Ada's folder").pk,
        image=MessageImage.objects.create(message=question, mime="image/gif", width=1, height=1, byte_count=16,
                                          data=b"GIF89a\x01\x00\x01\x00\x00\x00\x00;").pk,
        eves_conversation=Conversation.objects.create(owner=eve, title="Eve's chat", offline=True),
    )


# URL name → the World field holding ada's object it names by `pk`. The API's and the pages' addresses alike.
ADDRESSES: dict[str, str] = {
    **dict.fromkeys([
        "chat-detail", "chat-messages-before", "archived-restore", "archived-delete", "dashboard-conversation",
        "dashboard-export-csv", "dashboard-export-json", "api-conversation", "api-messages", "api-export",
        "api-context", "api-records", "api-compact", "api-summary-jobs", "api-conversation-share",
        "api-dashboard-headline", "api-dashboard-series", "api-dashboard-map", "api-dashboard-records",
        "api-dashboard-summaries", "api-summary-job-dismiss", "api-dashboard-record"], "conversation"),
    **dict.fromkeys(["api-token-revoke"], "token"),
    **dict.fromkeys(["share-revoke", "api-share"], "share"),
    **dict.fromkeys(["prompt-edit", "prompt-remove", "api-prompt"], "prompt"),
    **dict.fromkeys(["config-update", "config-delete", "config-default", "api-config", "api-config-default",
                     "api-config-test"], "config"),
    **dict.fromkeys(["api-summary"], "summary"),
    **dict.fromkeys(["api-message-pin", "api-message-edit", "api-message-branch", "api-message-fork"], "question"),
    **dict.fromkeys(["api-message-stop", "api-message-regenerate", "api-message-retry"], "reply"),
    **dict.fromkeys(["api-import"], "import_job"),
    **dict.fromkeys(["api-folder"], "folder"),
    **dict.fromkeys(["api-image"], "image"),
}
# Addresses naming an object inside the chat `pk`: (its argument, the World field). They are swept in eve's
# own chat too ("+eve's chat"): the object must be looked up in the chat named, not by its id alone.
NESTED: dict[str, tuple[str, str]] = {
    "api-summary-job-dismiss": ("job_pk", "summary_job"),
    "api-dashboard-record": ("record_pk", "record"),
}


def _ids(name: str, world: World, *, in_eves_chat: bool = False) -> dict[str, int]:
    """The arguments of address `name` naming ada's objects (the chat `pk` eve's, `in_eves_chat`)."""
    def pk(field: str) -> int:
        found = getattr(world, field)
        return found if isinstance(found, int) else found.pk

    ids = {"pk": world.eves_conversation.pk if in_eves_chat else pk(ADDRESSES[name])}
    if name in NESTED:
        argument, field = NESTED[name]
        ids[argument] = pk(field)
    return ids


# What an address needs besides its ids to answer its owner (the 404 of a missing parameter is no test).
QUERIES: dict[str, Callable[[World], str]] = {
    "chat-messages-before": lambda w: f"?before={w.reply.pk}",
}


def _path(name: str, world: World, ids: dict[str, int]) -> str:
    return reverse(name, kwargs=ids) + QUERIES.get(name, lambda w: "")(world)


def _routes(patterns: list, prefix: str = "", takes: bool = False) -> Iterator[tuple[str, str | None, bool]]:
    """(route, URL name, whether it takes an argument) of every address the resolver knows: an argument
    of an include's prefix (`conversations/<int:pk>/` before the dashboard's `series/`) counts too."""
    for entry in patterns:
        route = prefix + str(entry.pattern)
        here = takes or bool(entry.pattern.converters) or "(?P<" in str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _routes(entry.url_patterns, route, here)
        elif isinstance(entry, URLPattern):
            yield route, entry.name, here


def test_every_address_with_an_id_is_swept():
    with_ids = {(route, name) for route, name, takes in _routes(get_resolver().url_patterns)
                if takes and not route.startswith(NOT_OWNED)}

    assert with_ids, "the resolver walk found no address with an id"
    assert sorted(name or route for route, name in with_ids if name not in ADDRESSES) == []


def _read(response: Any) -> bytes:
    if not getattr(response, "streaming", False):
        return response.content
    assert not response.is_async, "a stream began for another user's object"
    return b"".join(response.streaming_content)


def _send(client: Client, method: str, path: str, *, api: bool) -> Any:
    if api:
        return client.generic(method, path, json.dumps(BODY), content_type="application/json")
    form = "&".join(f"{key}={value}" for key, value in BODY.items() if not isinstance(value, bool))
    return client.generic(method, path, form, content_type="application/x-www-form-urlencoded")


def _answers(client: Client, path: str, *, api: bool) -> dict[str, int]:
    answers = {}
    cache.clear()  # the throttles count per user, the refused requests too (/compact: 10 a minute)
    for method in METHODS:
        response = _send(client, method, path, api=api)
        _read(response)
        answers[method] = response.status_code
    return answers


def _clients(eve, *, api: bool) -> dict[str, Client]:
    session = Client()
    session.force_login(eve)
    return {"token": token_client(eve), "session": session} if api else {"session": session}


@pytest.mark.parametrize("name", sorted(ADDRESSES) + [f"{name}+eve's chat" for name in sorted(NESTED)])
def test_another_users_object_answers_as_a_missing_one(user, other_user, name):
    world = _world(user, other_user)
    url_name, nested = name.removesuffix("+eve's chat"), name.endswith("+eve's chat")
    ids = _ids(url_name, world, in_eves_chat=nested)
    path = _path(url_name, world, ids)
    missing = _path(url_name, world, {**ids, **{key: MISSING for key in ids if not nested or key != "pk"}})
    api = path.startswith("/api/")
    before = world.snapshot()

    for how, client in _clients(other_user, api=api).items():
        theirs, none = _answers(client, path, api=api), _answers(client, missing, api=api)
        assert theirs == none, f"{how}: {path} answers {theirs}, a missing id {none}"
        assert set(theirs.values()) <= {404, 405} and 404 in theirs.values(), f"{how}: {path} {theirs}"

    assert world.snapshot() == before


@pytest.mark.parametrize("name", sorted(ADDRESSES))
def test_signed_out_the_api_answers_401_and_a_page_sends_to_sign_in(user, other_user, name):
    world = _world(user, other_user)
    path = _path(name, world, _ids(name, world))
    before = world.snapshot()

    for method in METHODS:
        response = _send(Client(), method, path, api=path.startswith("/api/"))
        if path.startswith("/api/"):
            assert response.status_code == 401, f"{method} {path}: {response.status_code}"
            assert json.loads(response.content)["detail"]
        else:
            assert response.status_code == 302, f"{method} {path}: {response.status_code}"
            assert response["Location"].startswith(reverse("login"))

    assert world.snapshot() == before


# Addresses without an id that open without an account: the sign-in pages, the API's token endpoint and
# its schema and docs, the code highlighting's stylesheet.
PUBLIC = {"api-token", "api-schema", "api-docs", "code-css", "signup", "login", "logout"}


def test_signed_out_every_other_address_answers_401_or_sends_to_sign_in():
    """The lists, settings and every address to come, walked from the resolver as the sweep's are."""
    names = sorted(name for route, name, takes in _routes(get_resolver().url_patterns)
                   if name and not takes and not route.startswith(NOT_OWNED) and name not in PUBLIC)
    refused = {}
    for name in names:
        path = reverse(name)
        for method in ("GET", "POST"):
            response = Client().generic(method, path)
            page = response.status_code == 302 and response["Location"].startswith(reverse("login") + "?next=")
            if (response.status_code != 401) if path.startswith("/api/") else not page:
                refused[f"{method} {path}"] = response.status_code

    assert len(names) > 20 and refused == {}


@pytest.mark.parametrize("name", sorted(name for name in ADDRESSES if not name.startswith("api-")))
def test_an_api_token_opens_no_page(user, name):
    """Pages take the session only: a token (its header) is no way into them, the owner's own included."""
    world = _world(user, get_user_model().objects.create_user(username="mallory", password="a long password 3"))
    path = _path(name, world, _ids(name, world))

    response = token_client(user).get(path)

    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("name", sorted(ADDRESSES))
def test_the_owner_reaches_each_address(user, other_user, name):
    """The control: the sweep's objects are ones their owner reaches, so its 404s are about ownership."""
    world = _world(user, other_user)
    path = _path(name, world, _ids(name, world))
    api = path.startswith("/api/")
    owner = _clients(user, api=api)["session"]

    answers = {method: _send(owner, method, path, api=api).status_code for method in ("GET",)}

    assert answers["GET"] in {200, 405}, f"{path}: {answers}"


@pytest.mark.parametrize("name", sorted(ADDRESSES))
def test_a_write_by_session_without_the_csrf_token_is_refused(user, other_user, name):
    """The owner's own object, from a page of another site riding the owner's session cookie: 403."""
    world = _world(user, other_user)
    path = _path(name, world, _ids(name, world))
    owner = Client(enforce_csrf_checks=True)
    owner.force_login(user)
    before = world.snapshot()

    answers = {method: _send(owner, method, path, api=path.startswith("/api/")).status_code for method in METHODS[1:]}

    assert set(answers.values()) == {403}, f"{path}: {answers}"
    assert world.snapshot() == before
