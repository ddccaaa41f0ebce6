"""One place that turns errors into API answers, in one shape: every 4xx body leads with `detail`.

A client shows `detail` and needs no other rule; a 400 adds each field's messages under the field's
name (`non_field_errors` for the body as a whole) for a client that marks the fields. Services raise
Django's ValidationError (they also serve the HTML pages), whose messages are sentences written for
the user, so its `detail` is those sentences; a serializer's own messages ("This field is required.")
say nothing without the field, so there `detail` names it. Malformed JSON says so in plain words.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions, status
from rest_framework.exceptions import ErrorDetail
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.views import exception_handler

from chatapp.chat.body_limit import body_too_large_words
from chatapp.chat.textsafe import text_storable

NON_FIELD = "non_field_errors"


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF EXCEPTION_HANDLER (settings.REST_FRAMEWORK)."""
    if isinstance(exc, RequestDataTooBig):
        # Django's own answer is a bare HTML 400: a client of the API gets JSON, and the right status.
        limit = getattr(exc, "limit", settings.DATA_UPLOAD_MAX_MEMORY_SIZE)  # a send's own (SendJSONParser)
        return Response({"detail": body_too_large_words(limit), "limit": limit},
                        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, TooManyFieldsSent | TooManyFilesSent):
        # Django's own answer is its HTML "Bad Request (400)" page, as for a body too large.
        what = "files" if isinstance(exc, TooManyFilesSent) else "fields"
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FILES if what == "files" else settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        return Response({"detail": f"The request sent too many {what}: at most {limit:,}.", "limit": limit},
                        status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, DjangoValidationError):
        return Response(validation_error_body(exc), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, exceptions.ValidationError):
        return Response(_serializer_error_body(exc.detail), status=exc.status_code)
    if isinstance(exc, exceptions.ParseError) and str(exc.detail).startswith("JSON parse error"):
        # DRF's own text ("JSON parse error - Expecting value: line 1 column 1 (char 0)") is accurate
        # but reads like a traceback; keep it as the detail for developers, lead with plain words.
        exc = exceptions.ParseError({"detail": "The request body is not valid JSON.", "parse_error": str(exc.detail)})
    response = exception_handler(exc, context)
    if isinstance(exc, exceptions.Throttled) and response is not None and "Retry-After" in response:
        # In the body too, as the send limit's 429 has it: a client reading `retry_after` found none here.
        response.data["retry_after"] = int(response["Retry-After"])
    limit = getattr(exc, "limit", None)
    if response is not None and isinstance(limit, int) and isinstance(response.data, dict):
        # A refusal over a size limit (an import file) says the limit in bytes, as every 413 does.
        response.data["limit"] = limit
    return response


def validation_error_body(exc: DjangoValidationError) -> dict[str, Any]:
    """A service's refusal as a 400 body: its sentences as `detail`, beside each field's messages."""
    fields = _encodable(as_serializer_error(exc))
    return {"detail": " ".join(m for messages in fields.values() for m in messages), **fields}


def _encodable(errors: Any) -> Any:
    """`errors` with each message made encodable (textsafe.text_storable): a refusal may quote the value
    sent ('"…" is not a valid choice.'), and JSON carries an unpaired surrogate ("\\ud800") that UTF-8
    cannot, so rendering the 400 failed (a 500). Each message keeps its code."""
    if isinstance(errors, dict):
        return {key: _encodable(value) for key, value in errors.items()}
    if isinstance(errors, list):
        return [_encodable(value) for value in errors]
    if isinstance(errors, str):
        return ErrorDetail(text_storable(errors), code=getattr(errors, "code", None))
    return errors


def _serializer_error_body(detail: Any) -> dict[str, Any]:
    detail = _encodable(detail)
    if not isinstance(detail, dict):  # serializers.ValidationError("...") raised outside a field
        detail = {NON_FIELD: detail if isinstance(detail, list) else [detail]}
    if isinstance(detail.get("detail"), str):  # a view that wrote its own `detail` (e.g. the JSON one)
        return dict(detail)
    words = [f"{path}: {m}" if path != NON_FIELD else str(m) for path, m in _messages(detail)]
    return {"detail": " ".join(words), **detail}


def _messages(errors: Any, path: str = "") -> list[tuple[str, str]]:
    """(field path, message) of every message in DRF's nested error structure, in order: a nested
    serializer's field is `outer.inner`, a list item's `items.2`."""
    if isinstance(errors, dict):  # a nested serializer's own non-field errors are its field's
        return [pair for key, value in errors.items()
                for pair in _messages(value, key if not path else path if key == NON_FIELD else f"{path}.{key}")]
    if isinstance(errors, list):
        if all(not isinstance(e, dict | list) for e in errors):
            return [(path or NON_FIELD, str(e)) for e in errors]
        return [pair for i, e in enumerate(errors) for pair in _messages(e, f"{path}.{i}" if path else str(i))]
    return [(path or NON_FIELD, str(errors))]
