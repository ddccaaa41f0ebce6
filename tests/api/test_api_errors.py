"""The exception handler: every error body leads with `detail`; a 400 keeps its field errors beside it."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from rest_framework import exceptions

from chatapp.chat.api.errors import api_exception_handler


def test_field_errors_keep_their_fields():
    response = api_exception_handler(
        ValidationError({"name": ["Taken."], "base_url": ["Refused: a private address."]}), {}
    )
    assert response.status_code == 400
    assert response.data == {
        "detail": "Taken. Refused: a private address.",  # a service's messages are sentences for the user
        "name": ["Taken."],
        "base_url": ["Refused: a private address."],
    }


def test_plain_message_becomes_non_field_error():
    response = api_exception_handler(ValidationError("Only the latest exchange can be retried."), {})
    assert response.status_code == 400
    assert response.data == {
        "detail": "Only the latest exchange can be retried.",
        "non_field_errors": ["Only the latest exchange can be retried."],
    }


def test_serializer_errors_name_their_fields_in_detail():
    # DRF's own messages ("This field is required.") say nothing without the field they are about.
    nested = exceptions.ValidationError({
        "title": ["This field may not be null."],
        "options": {"size": ["A valid integer is required."], "non_field_errors": ["Give a size or none."]},
        "items": [{}, {"name": ["This field is required."]}],
        "non_field_errors": ["Send a title or a model."],
    })
    response = api_exception_handler(nested, {})
    assert response.status_code == 400
    assert response.data["detail"] == (
        "title: This field may not be null. options.size: A valid integer is required. options: Give a size "
        "or none. items.1.name: This field is required. Send a title or a model."
    )
    assert response.data["options"] == {
        "size": ["A valid integer is required."], "non_field_errors": ["Give a size or none."]
    }
    assert response.data["items"] == [{}, {"name": ["This field is required."]}]


def test_a_bare_serializer_error_becomes_a_non_field_error():
    for raised in ("Not a /compact command.", ["Not a /compact command."]):
        response = api_exception_handler(exceptions.ValidationError(raised), {})
        assert response.status_code == 400
        assert response.data == {"detail": "Not a /compact command.", "non_field_errors": ["Not a /compact command."]}


def test_other_errors_keep_their_detail():
    assert api_exception_handler(exceptions.NotFound(), {}).data == {"detail": "Not found."}
    throttled = api_exception_handler(exceptions.Throttled(wait=3), {})
    assert throttled.status_code == 429 and isinstance(throttled.data["detail"], str)


def test_json_parse_error_reworded_other_parse_errors_untouched():
    json_error = api_exception_handler(exceptions.ParseError("JSON parse error - Expecting value"), {})
    assert json_error.status_code == 400
    assert json_error.data["detail"] == "The request body is not valid JSON."
    assert "Expecting value" in json_error.data["parse_error"]

    other = api_exception_handler(exceptions.ParseError("Multipart form parse error - bad boundary"), {})
    assert other.data == {"detail": "Multipart form parse error - bad boundary"}


def test_unhandled_exceptions_are_left_to_django():
    assert api_exception_handler(RuntimeError("boom"), {}) is None


@pytest.mark.django_db
def test_a_refusal_repeating_an_unpaired_surrogate_is_a_json_400(api):
    """JSON may carry "\\ud800", which UTF-8 cannot: a refusal quoting it ('"…" is not a valid choice.')
    failed to render, an HTML 500. It answers a 400 with the character shown as U+FFFD."""
    response = api.patch("/api/settings/", data='{"preference": "\\ud800"}', content_type="application/json")

    assert response.status_code == 400
    body = json.loads(response.content)
    assert body["detail"] == 'preference: "\ufffd" is not a valid choice.'
    assert body["preference"] == ['"\ufffd" is not a valid choice.']
    assert json.loads(api.get("/api/settings/").content)["preference"] == "balanced"
