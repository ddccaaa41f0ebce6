"""OpenAPI schema and docs."""

from __future__ import annotations

import jsonschema
import pytest
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

from chatapp.chat.models import Conversation
from tests.support.accounts import PASSWORD

pytestmark = pytest.mark.django_db

EXPECTED_PATHS = {
    "/api/auth/token/": {"post"},
    "/api/conversations/": {"get", "post"},
    "/api/conversations/{id}/": {"get", "patch", "delete"},
    "/api/conversations/{id}/messages/": {"get"},
    "/api/conversations/{id}/context/": {"get"},
    "/api/conversations/{id}/records/": {"get"},
    "/api/messages/{id}/pin/": {"post"},
    "/api/folders/": {"get", "post"},
    "/api/folders/{id}/": {"patch", "delete"},
    "/api/configs/": {"get", "post"},
    "/api/configs/{id}/": {"get", "patch", "delete"},
    "/api/configs/{id}/default/": {"post"},
    "/api/configs/{id}/test/": {"post"},
    "/api/configs/model-info/": {"get"},
    "/api/settings/": {"get", "patch"},
    # Served by the streaming, summary and dashboard views, documented in the same schema.
    "/api/messages/{id}/stop/": {"post"},
    "/api/messages/{id}/regenerate/": {"post"},
    "/api/messages/{id}/retry/": {"post"},
    "/api/messages/{id}/edit/": {"post"},
    "/api/messages/{id}/branch/": {"post"},
    "/api/conversations/{id}/compact/": {"post"},
    "/api/conversations/{id}/summary-jobs/": {"get"},
    "/api/summaries/{id}/": {"patch", "delete"},
    "/api/dashboard/overview/": {"get"},
}


@pytest.fixture
def schema(api) -> dict:
    response = api.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def test_schema_is_valid_openapi_with_every_path(schema):
    validate_schema(schema)
    assert schema["openapi"].startswith("3.")
    for path, methods in EXPECTED_PATHS.items():
        assert path in schema["paths"], path
        assert methods <= set(schema["paths"][path]), (path, set(schema["paths"][path]))


def test_schema_documents_write_only_key_and_pagination(schema):
    components = schema["components"]["schemas"]
    config_out = components["LLMConfigOutput"]["properties"]
    assert "api_key" not in config_out and "has_api_key" in config_out
    request_body = schema["paths"]["/api/configs/"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    request_props = components[request_body["$ref"].rsplit("/", 1)[1]]["properties"]
    assert request_props["api_key"]["writeOnly"] is True

    messages = schema["paths"]["/api/conversations/{id}/messages/"]["get"]
    assert {p["name"] for p in messages["parameters"]} >= {"id", "before", "limit"}
    page_ref = messages["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    page = components[page_ref.rsplit("/", 1)[1]]
    assert {"results", "has_more", "next_before"} <= set(page["properties"])

    conversations = schema["paths"]["/api/conversations/"]["get"]
    assert {p["name"] for p in conversations["parameters"]} >= {"q", "limit", "offset"}


def test_the_summary_jobs_page_documents_every_key_it_answers(api, user, schema):
    conversation = Conversation.objects.create(owner=user, title="Jobs")
    body = api.get(f"/api/conversations/{conversation.pk}/summary-jobs/").json()
    ok = schema["paths"]["/api/conversations/{id}/summary-jobs/"]["get"]["responses"]["200"]
    ref = ok["content"]["application/json"]["schema"]["$ref"]
    page = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]

    assert set(body) == set(page["properties"])  # quota_remaining was missing
    assert page["properties"]["quota_remaining"]["type"] == "integer"


def test_nested_serializers_get_distinct_component_names(schema):
    names = set(schema["components"]["schemas"])
    assert {"ConversationListInput", "LLMConfigListInput", "PatchedLLMConfigDetailInput", "MessagePinInput"} <= names
    assert not names & {"Input", "Output", "PatchedInput"}
    # A generated client names its types after these: the saved prompts' body was "_PromptInput".
    assert "PromptInput" in names and not [name for name in names if not name[0].isalpha()]
    assert {"FolderInput", "FolderOutput"} <= names


def test_docs_page(api):
    response = api.get("/api/docs/")
    assert response.status_code == 200
    assert b"swagger" in response.content.lower()


def test_schema_yaml_default(api):
    response = api.get("/api/schema/")
    assert response.status_code == 200
    assert b"openapi:" in response.content


def test_schema_generates_without_warnings():
    # Warnings mean a guessed or ambiguous schema (e.g. two components with one name): keep it at zero.
    GENERATOR_STATS.reset()
    SchemaGenerator().get_schema(request=None, public=True)
    assert not GENERATOR_STATS, dict(GENERATOR_STATS._warn_cache) | dict(GENERATOR_STATS._error_cache)


def _documented_body(schema: dict, path: str, method: str, status: int) -> dict:
    responses = schema["paths"][path][method]["responses"]
    assert str(status) in responses, (method, path, status, sorted(responses))
    ref = responses[str(status)]["content"]["application/json"]["schema"]["$ref"]
    return schema["components"]["schemas"][ref.rsplit("/", 1)[1]]


def test_error_answers_are_documented_with_their_bodies(api, user, schema):
    # Only the successes were documented: no 401 anywhere, no 404 for an id in a path, no 400 on a
    # body's field errors, and the views that named a 400 or 404 gave it no body.
    conversation = Conversation.objects.create(owner=user, title="Errors")
    message = conversation.messages.create(role="user", content="hello")
    c, m = f"/api/conversations/{conversation.pk}/", f"/api/messages/{message.pk}/"
    answers = [
        ("/api/conversations/", "get", APIClient().get("/api/conversations/")),
        ("/api/conversations/{id}/", "get", api.get("/api/conversations/999999/")),
        ("/api/conversations/{id}/", "patch", api.patch(c, {}, format="json")),
        ("/api/settings/", "patch", api.patch("/api/settings/", {"preference": "turbo"}, format="json")),
        ("/api/messages/{id}/pin/", "post", api.post(f"{m}pin/", {"pinned": "x"}, format="json")),
        ("/api/messages/{id}/branch/", "post", api.post(f"{m}branch/", {"index": 7}, format="json")),
        ("/api/search/", "get", api.get("/api/search/", {"q": "hello", "page": "x"})),
        ("/api/conversations/{id}/export/", "get", api.get(f"{c}export/", {"format": "x"})),
        ("/api/conversations/{id}/messages/", "get", api.get(f"{c}messages/", {"limit": "x"})),
        ("/api/configs/model-info/", "get", api.get("/api/configs/model-info/")),
        ("/api/imports/", "post", api.post("/api/imports/", {"file": "x"}, format="json")),  # multipart only
    ]
    for path, method, response in answers:
        assert 400 <= response.status_code < 500, (path, response.status_code)
        body = _documented_body(schema, path, method, response.status_code)
        jsonschema.validate(response.json(), body)
    token = schema["paths"]["/api/auth/token/"]["post"]["responses"]
    assert "401" not in token and "403" not in token  # no credentials asked, no CSRF: its 400 is the refusal
    assert "429" in token and "429" in schema["paths"]["/api/configs/{id}/test/"]["post"]["responses"]


def test_a_discarded_summary_and_a_refused_dismiss_are_documented_as_answered(schema):
    # DELETE /api/summaries/<id>/ answers 200 with the discarded summary (the page shows it), and the
    # schema said 204 with no body; "Not now" on a job no longer waiting answers a 400 it did not name.
    discard = schema["paths"]["/api/summaries/{id}/"]["delete"]["responses"]
    assert "204" not in discard
    assert discard["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/MessageOutput")
    dismiss = schema["paths"]["/api/conversations/{id}/summary-jobs/{job_pk}/dismiss/"]["post"]["responses"]
    assert dismiss["400"]["content"]["application/json"]["schema"]["$ref"].endswith("/ValidationError")


def test_the_token_answer_is_documented_with_its_expiry(user, schema):
    # The schema gave the token endpoint's input serializer ({token}) as its answer: no expires_at.
    answer = APIClient().post("/api/auth/token/", {"username": user.username, "password": PASSWORD}, format="json")
    assert answer.status_code == 200
    body = _documented_body(schema, "/api/auth/token/", "post", 200)
    assert set(answer.json()) == set(body["properties"]) == {"token", "expires_at"}
    jsonschema.validate(answer.json(), body)


def test_the_streaming_answers_name_every_event_they_send(schema):
    # A client that reads only the schema must learn of the reasoning events (a reasoning model's
    # thinking), or it drops them, or takes them for an unknown error.
    for path in ("/api/conversations/{id}/messages/", "/api/messages/{id}/regenerate/",
                 "/api/messages/{id}/retry/", "/api/messages/{id}/edit/"):
        described = schema["paths"][path]["post"]["responses"]["200"]["description"]
        for event in ("accepted", "start", "reasoning", "delta", "done", "error"):
            assert f"`{event}`" in described, (path, event)


def test_the_account_deletions_body_is_documented(schema):
    # DELETE /api/account/ reads the password from its body: drf-spectacular documents no body on a
    # DELETE, so a client generated from the schema had no way to send it (and no 413 or 415).
    operation = schema["paths"]["/api/account/"]["delete"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body["$ref"].endswith("/AccountInput")
    assert "password" in schema["components"]["schemas"]["AccountInput"]["required"]
    assert {"413", "415"} <= set(operation["responses"])
