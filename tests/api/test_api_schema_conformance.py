"""Every JSON answer the API gives, success or error, matches what /api/schema/ publishes for its
path, method and status: the status is declared, and the body validates against the declared schema
(types, nullability, enums, required fields). A generated client is only as good as this."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import resolve
from rest_framework.test import APIClient

from chatapp.chat.folder_services import folder_create
from chatapp.chat.import_models import ImportJob
from chatapp.chat.import_services import import_job_run
from chatapp.chat.models import Conversation, Message, SummaryJob
from chatapp.chat.prompt_services import prompt_create
from chatapp.chat.share_services import conversation_share_create
from tests.dashboard.factories import make_record, make_summary
from tests.support.chat import seed_messages
from tests.support.images import b64, png_bytes
from tests.support.streaming import sse_events

pytestmark = pytest.mark.django_db


def _openapi_to_jsonschema(node: Any) -> Any:
    """OpenAPI 3.0's `nullable` as JSON Schema's null type ($refs resolved by the caller's resolver)."""
    if isinstance(node, list):
        return [_openapi_to_jsonschema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: _openapi_to_jsonschema(value) for key, value in node.items() if key != "nullable"}
    if "properties" in converted and "additionalProperties" not in converted:
        # A key the schema does not name is one no generated client reads: undocumented.
        converted["additionalProperties"] = False
    if not node.get("nullable"):
        return converted
    if "enum" in converted and None not in converted["enum"]:
        converted["enum"] = [*converted["enum"], None]
    if "type" in converted:
        converted["type"] = [converted["type"], "null"]
        return converted
    return {"anyOf": [converted, {"type": "null"}]}


@pytest.fixture
def schema(api) -> dict:
    response = api.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return _openapi_to_jsonschema(response.json())


def _template(path: str) -> str:
    """The schema's path for a request path: its URL pattern with {name} for each argument."""
    match = resolve(path.split("?", 1)[0])
    route = "/" + str(match.route)
    for name in match.kwargs:
        # drf-spectacular names a primary key `id`, the other arguments as the pattern does.
        shown = "id" if name == "pk" else name
        route = route.replace(f"<int:{name}>", "{" + shown + "}").replace(f"<str:{name}>", "{" + shown + "}")
    return route


def _problems(schema: dict, method: str, path: str, response: Any) -> list[str]:
    template = _template(path)
    operation = schema["paths"][template][method]
    declared = operation["responses"]
    status = str(response.status_code)
    where = f"{method.upper()} {path} → {status}"
    if status not in declared:
        return [f"{where}: status not declared ({sorted(declared)})"]
    content = declared[status].get("content")
    raw = response.recorded_body if hasattr(response, "recorded_body") else response.content
    if not raw:
        return [] if not content else [f"{where}: empty body, schema declares one"]
    if response["Content-Type"].split(";")[0] != "application/json":
        return []
    if not content or "application/json" not in content:
        return [f"{where}: JSON body, no JSON body declared"]
    body_schema = {**content["application/json"]["schema"], "components": schema["components"]}
    validator = jsonschema.Draft202012Validator(body_schema)
    return [f"{where}: {error.json_path}: {error.message}" for error in validator.iter_errors(json.loads(raw))]


def _world(user, other_user, fake_url: str) -> dict[str, int]:
    conversation = Conversation.objects.create(owner=user, title="Walked")
    question_id, reply_id = seed_messages(conversation, 2)
    Message.objects.filter(pk=reply_id).update(parent_id=question_id)
    question, reply = Message.objects.get(pk=question_id), Message.objects.get(pk=reply_id)
    summary = make_summary(conversation=conversation, covers=(question, reply), covered=2,
                           content="[Conversation summary — covers messages 1-2]\n\nhello")
    make_record(conversation=conversation, tokens_full=100, tokens_sent=50)
    return {
        "c": conversation.pk, "q": question.pk, "r": reply.pk, "s": summary.pk,
        "share": conversation_share_create(owner=user, conversation=conversation).share.pk,
        "prompt": prompt_create(owner=user, command="review", content="Review this.").pk,
        "folder": folder_create(owner=user, name="Work").pk,
        "job": SummaryJob.objects.create(conversation=conversation, status=SummaryJob.Status.FAILED).pk,
        "import": ImportJob.objects.create(owner=user, filename="ada.json").pk,
        "theirs": Conversation.objects.create(owner=other_user, title="Eve's").pk,
    }


def _requests(w: dict[str, int], config: int) -> list[tuple[str, str, Any]]:
    """(method, path, JSON body or None): successes and refusals of every kind, per endpoint."""
    c, m = f"/api/conversations/{w['c']}/", f"/api/messages/{w['q']}/"
    return [
        ("get", "/api/conversations/", None),
        ("get", "/api/conversations/?archived=true&q=hello", None),
        ("get", "/api/conversations/?limit=0", None),
        ("get", "/api/conversations/?cursor=nope", None),
        ("post", "/api/conversations/", {"title": "New", "system_prompt": "Be brief."}),
        ("post", "/api/conversations/", {"title": 5 * "x" * 100}),
        ("post", "/api/conversations/", {"llm_config": 987654321}),
        ("get", c, None),
        ("patch", c, {"pinned": True, "folder": w["folder"]}),
        ("patch", c, {"llm_config": config}),
        ("patch", c, {"folder": 987654321}),
        ("patch", c, {"nothing": 1}),
        ("get", "/api/conversations/987654321/", None),
        ("get", f"/api/conversations/{w['theirs']}/", None),
        ("post", "/api/conversations/archive/", {"archived": False}),
        ("post", "/api/conversations/archive/", {}),
        ("get", f"{c}messages/", None),
        ("get", f"{c}messages/?limit=1", None),
        ("get", f"{c}messages/?before=x", None),
        ("get", f"{c}context/", None),
        ("get", f"{c}records/", None),
        ("get", f"{c}records/?offset=-1", None),
        ("get", f"{c}summary-jobs/", None),
        ("post", f"{c}summary-jobs/{w['job']}/dismiss/", None),
        ("get", f"{c}export/?format=json", None),
        ("get", f"{c}export/?format=nope", None),
        ("post", f"{c}share/", None),
        ("get", "/api/shares/", None),
        ("delete", f"/api/shares/{w['share']}/", None),
        ("delete", "/api/shares/987654321/", None),
        ("post", f"{m}pin/", {"pinned": True}),
        ("post", f"{m}pin/", {"pinned": "sure"}),
        ("post", f"{m}branch/", {"index": 1}),
        ("post", f"{m}branch/", {"index": 99}),
        ("post", f"{m}fork/", None),
        ("post", f"/api/messages/{w['r']}/stop/", None),
        ("patch", f"/api/summaries/{w['s']}/", {"content": "A shorter summary."}),
        ("patch", f"/api/summaries/{w['s']}/", {"content": ""}),
        ("get", "/api/settings/", None),
        ("patch", "/api/settings/", {"preference": "quality"}),
        ("patch", "/api/settings/", {"preference": "turbo"}),
        ("patch", "/api/settings/", {"summary_config": 987654321}),
        ("get", "/api/search/?q=hello", None),
        ("get", "/api/search/?q=", None),
        ("get", "/api/folders/", None),
        ("post", "/api/folders/", {"name": "Home"}),
        ("post", "/api/folders/", {"name": "work"}),
        ("patch", f"/api/folders/{w['folder']}/", {"name": "Work 2"}),
        ("get", "/api/prompts/", None),
        ("post", "/api/prompts/", {"command": "tldr", "content": "Summarize."}),
        ("post", "/api/prompts/", {"command": "bad command!", "content": ""}),
        ("get", f"/api/prompts/{w['prompt']}/", None),
        ("patch", f"/api/prompts/{w['prompt']}/", {"title": "Review"}),
        ("get", "/api/configs/", None),
        ("get", f"/api/configs/{config}/", None),
        ("patch", f"/api/configs/{config}/", {"context_window": 32000}),
        ("patch", f"/api/configs/{config}/", {"context_window": -5}),
        ("post", f"/api/configs/{config}/default/", None),
        ("post", f"/api/configs/{config}/test/", None),
        ("post", "/api/configs/", {"name": "x"}),
        ("get", "/api/configs/model-info/?model=gpt-4o-mini", None),
        ("get", "/api/imports/", None),
        ("get", f"/api/imports/{w['import']}/", None),
        ("get", "/api/imports/987654321/", None),
        ("get", "/api/dashboard/overview/", None),
        ("get", "/api/dashboard/conversations/", None),
        ("get", f"/api/dashboard/conversations/{w['c']}/", None),
        ("get", f"/api/dashboard/conversations/{w['c']}/series/", None),
        ("get", f"/api/dashboard/conversations/{w['c']}/series/?first=2&last=1", None),
        ("get", f"/api/dashboard/conversations/{w['c']}/map/", None),
        ("get", f"/api/dashboard/conversations/{w['c']}/records/", None),
        ("get", f"/api/dashboard/conversations/{w['c']}/summaries/", None),
        ("get", f"/api/dashboard/conversations/{w['c']}/summaries/?limit=1", None),
        ("get", f"/api/dashboard/conversations/{w['c']}/summaries/?before=x", None),
        ("get", "/api/conversations/export/", None),
        ("post", "/api/configs/", {"name": "Elsewhere", "base_url": "https://llm.invalid/v1", "model": "m"}),
        ("patch", f"/api/configs/{config}/", {"base_url": "https://llm.invalid/v1"}),  # its key cleared: said so
        ("delete", f"/api/prompts/{w['prompt']}/", None),
        ("delete", f"/api/folders/{w['folder']}/", None),
        ("delete", f"/api/summaries/{w['s']}/", None),
        ("delete", c, None),
    ]


def test_every_answer_matches_the_published_schema(api, user, other_user, schema, echo_config, fake_openai):
    world = _world(user, other_user, fake_openai.base_url)
    problems: list[str] = []
    for method, path, body in _requests(world, echo_config["id"]):
        response = getattr(api, method)(path, body, format="json") if body is not None else getattr(api, method)(path)
        assert response.status_code < 500, f"{method.upper()} {path}: {response.status_code}"
        problems += _problems(schema, method, path, response)
    assert problems == [], "\n".join(problems)


def test_signed_out_answers_match_the_published_schema(schema):
    problems = []
    for path in ("/api/conversations/", "/api/settings/", "/api/configs/", "/api/folders/"):
        problems += _problems(schema, "get", path, APIClient().get(path))
    assert problems == [], "\n".join(problems)


def test_refusals_of_every_kind_match_the_published_schema(api, user, other_user, schema, settings):
    # The turn views' refusals before a stream (the send limit's too), the token endpoint, imports, the
    # account, and the status a body's media type earns.
    world = _world(user, other_user, "http://127.0.0.1:9/v1")
    c, q, r = f"/api/conversations/{world['c']}/", f"/api/messages/{world['q']}/", f"/api/messages/{world['r']}/"
    signed_out = APIClient()
    answers = [
        ("post", f"{c}messages/", api.post(f"{c}messages/", {"content": ""}, format="json")),
        ("post", f"{c}messages/", api.post(f"{c}messages/", {"content": "hi", "parent": 1}, format="json")),
        ("post", f"{c}messages/", api.post(f"{c}messages/", "content=hi", content_type="text/plain")),
        ("post", "/api/conversations/987654321/messages/",
         api.post("/api/conversations/987654321/messages/", {"content": "hi"}, format="json")),
        ("post", f"{q}edit/", api.post(f"{q}edit/", {"content": 5}, format="json")),
        ("post", f"{r}edit/", api.post(f"{r}edit/", {"content": "not a user message"}, format="json")),
        ("post", f"{q}regenerate/", api.post(f"{q}regenerate/")),
        ("post", f"{r}retry/", api.post(f"{r}retry/")),
        ("post", f"{c}compact/", api.post(f"{c}compact/")),
        ("post", "/api/auth/token/", signed_out.post("/api/auth/token/", {"username": "ada"}, format="json")),
        ("post", "/api/auth/token/", signed_out.post("/api/auth/token/", {"username": "ada", "password": "no"},
                                                      format="json")),
        ("post", "/api/imports/", api.post("/api/imports/", {}, format="multipart")),
        ("delete", "/api/account/", api.delete("/api/account/", {"password": "wrong"}, format="json")),
        ("delete", "/api/account/", api.delete("/api/account/", {}, format="json")),
        ("delete", "/api/account/", api.delete("/api/account/", "password=x", content_type="text/plain")),
        ("get", "/api/search/", api.get("/api/search/", {"q": "a\x00b"})),
        ("patch", c, api.patch(c, b'{"title": "\xff"}', content_type="application/json")),
        ("patch", c, api.patch(c, '{"title": "a\\u0000b"}', content_type="application/json")),
    ]
    settings.SEND_RATE_LIMIT_PER_MINUTE = 1  # the send limit's 429, with its retry_after
    offline = api.post("/api/conversations/", {"offline": True}, format="json").json()["id"]
    for _ in range(2):
        sent = api.post(f"/api/conversations/{offline}/messages/", {"content": "hi"}, format="json")
    answers.append(("post", f"/api/conversations/{offline}/messages/", sent))
    assert sent.status_code == 429 and sent.json()["retry_after"] == int(sent["Retry-After"])
    problems: list[str] = []
    for method, path, response in answers:
        assert response.status_code < 500, f"{method.upper()} {path}: {response.status_code}"
        problems += _problems(schema, method, path, response)
    assert problems == [], "\n".join(problems)


def test_a_lived_in_accounts_answers_match_the_published_schema(api, user, schema, echo_config, fake_openai):
    # The states a fresh seed never reaches, where a nullable or an enum is told apart: replies
    # streamed, with images, failed, thought through, cut at the limit, edited into a branch; an import
    # done and a branch forked into a new chat.
    message_shape = jsonschema.Draft202012Validator(
        {"$ref": "#/components/schemas/MessageOutput", "components": schema["components"]})
    streamed: list[str] = []
    seen: list[str] = []

    def send(chat: int, content: str, **extra: Any) -> None:
        response = api.post(f"/api/conversations/{chat}/messages/", {"content": content, **extra}, format="json")
        # The README: the events' messages have the REST API's message shape (but start's reply just opened).
        for name, event in sse_events(response.recorded_body):
            for key in ("user_message", "message"):
                if isinstance(event.get(key), dict):
                    seen.append(f"{name}.{key}")
                    streamed.extend(f"{name}.{key}{e.json_path[1:]}: {e.message}"
                                    for e in message_shape.iter_errors(event[key]))

    chat = api.post("/api/conversations/", {"title": "Lived in"}, format="json").json()["id"]
    send(chat, "Look", images=[{"data": b64(png_bytes(32, 24)), "name": "map.png"}])
    send(chat, "More")
    first, _, second, _ = api.get(f"/api/conversations/{chat}/messages/").json()["results"]
    api.post(f"/api/messages/{second['id']}/edit/", {"content": "Other"}, format="json")
    for model in ("fail-500", "think-fields", "cut-stream"):
        config = api.post("/api/configs/", {"name": model, "base_url": fake_openai.base_url, "model": model},
                          format="json").json()["id"]
        other = api.post("/api/conversations/", {"llm_config": config}, format="json").json()["id"]
        send(other, "Hello")
    exported = api.get(f"/api/conversations/{chat}/export/").recorded_body
    writes: list[tuple[str, str, Any]] = []
    upload = api.post("/api/imports/", {"file": SimpleUploadedFile("x.json", exported)}, format="multipart")
    writes.append(("post", "/api/imports/", upload))
    job = upload.json()
    import_job_run(job_id=job["id"])
    writes.append(("post", f"/api/messages/{first['id']}/fork/", api.post(f"/api/messages/{first['id']}/fork/")))
    long_chat = Conversation.objects.create(owner=user, title="Long", llm_config_id=echo_config["id"])
    seed_messages(long_chat, 12)
    writes.append(("post", f"/api/conversations/{long_chat.pk}/compact/",
                   api.post(f"/api/conversations/{long_chat.pk}/compact/")))

    assert {"accepted.user_message", "done.message", "error.message"} <= set(seen)
    assert streamed == [], "\n".join(streamed)
    assert [response.status_code for _, _, response in writes] == [202, 201, 202]
    problems: list[str] = [p for method, path, response in writes for p in _problems(schema, method, path, response)]
    paths = ["/api/conversations/", "/api/imports/", f"/api/imports/{job['id']}/", "/api/search/?q=hello",
             "/api/dashboard/overview/", "/api/dashboard/conversations/", "/api/configs/", "/api/settings/"]
    for conversation in Conversation.objects.filter(owner=user):
        c = conversation.pk
        paths += [f"/api/conversations/{c}/", f"/api/conversations/{c}/messages/", f"/api/conversations/{c}/context/",
                  f"/api/conversations/{c}/records/", f"/api/conversations/{c}/summary-jobs/",
                  f"/api/conversations/{c}/export/", f"/api/dashboard/conversations/{c}/",
                  f"/api/dashboard/conversations/{c}/series/", f"/api/dashboard/conversations/{c}/map/",
                  f"/api/dashboard/conversations/{c}/records/", f"/api/dashboard/conversations/{c}/summaries/"]
        paths += [f"/api/dashboard/conversations/{c}/records/{r}/" for r in conversation.optimization_records
                  .values_list("id", flat=True)]
    for path in paths:
        response = api.get(path)
        assert response.status_code == 200, (path, response.status_code)
        problems += _problems(schema, "get", path, response)
    assert problems == [], "\n".join(problems)
