"""One place that turns errors into API answers.

Services raise Django's ValidationError (they also serve the HTML pages); the API answers those as
DRF 400s with field errors. Malformed JSON gets a message that says so in plain words.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.views import exception_handler


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF EXCEPTION_HANDLER (settings.REST_FRAMEWORK)."""
    if isinstance(exc, RequestDataTooBig):
        # Django's own answer is a bare HTML 400: a client of the API gets JSON, and the right status.
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response({"detail": f"The request body is larger than {limit:,} bytes."},
                        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(as_serializer_error(exc))
    elif isinstance(exc, exceptions.ParseError) and str(exc.detail).startswith("JSON parse error"):
        # DRF's own text ("JSON parse error - Expecting value: line 1 column 1 (char 0)") is accurate
        # but reads like a traceback; keep it as the detail for developers, lead with plain words.
        exc = exceptions.ParseError({"detail": "The request body is not valid JSON.", "parse_error": str(exc.detail)})
    return exception_handler(exc, context)
