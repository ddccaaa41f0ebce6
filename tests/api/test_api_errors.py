"""The exception handler: Django ValidationError from services → DRF 400 field errors."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from rest_framework import exceptions

from chatapp.chat.api.errors import api_exception_handler


def test_field_errors_keep_their_fields():
    response = api_exception_handler(
        ValidationError({"name": ["Taken."], "base_url": ["Refused: a private address."]}), {}
    )
    assert response.status_code == 400
    assert response.data == {"name": ["Taken."], "base_url": ["Refused: a private address."]}


def test_plain_message_becomes_non_field_error():
    response = api_exception_handler(ValidationError("Only the latest exchange can be retried."), {})
    assert response.status_code == 400
    assert response.data == {"non_field_errors": ["Only the latest exchange can be retried."]}


def test_json_parse_error_reworded_other_parse_errors_untouched():
    json_error = api_exception_handler(exceptions.ParseError("JSON parse error - Expecting value"), {})
    assert json_error.status_code == 400
    assert json_error.data["detail"] == "The request body is not valid JSON."
    assert "Expecting value" in json_error.data["parse_error"]

    other = api_exception_handler(exceptions.ParseError("Multipart form parse error - bad boundary"), {})
    assert other.data == {"detail": "Multipart form parse error - bad boundary"}


def test_unhandled_exceptions_are_left_to_django():
    assert api_exception_handler(RuntimeError("boom"), {}) is None
