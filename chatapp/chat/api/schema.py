"""OpenAPI generation tweaks (settings.REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"])."""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import IsAuthenticated

from chatapp.chat.api.pagination import BeforeIdPagination, CheckedLimitOffsetPagination

# Every error body leads with a `detail` message (api.errors): a client shows it and needs no other
# rule. Extra keys say more: a 400's field errors (each field: its messages), 429: retry_after,
# 413: limit, malformed JSON: parse_error.
_ERROR = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
    "additionalProperties": True,
}
_VALIDATION_ERROR = {
    "type": "object",
    "description": "`detail`: every message in words (a serializer's prefixed with its field). Beside it, "
    "each field's messages under the field's name (nested as the body is), `non_field_errors` for the "
    "body as a whole; `parse_error` for malformed JSON.",
    "properties": {
        "detail": {"type": "string"},
        "parse_error": {"type": "string"},
        "non_field_errors": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["detail"],
    "additionalProperties": True,
}
_ERROR_DESCRIPTIONS = {
    "400": "Invalid input (field errors), or malformed JSON.",
    "401": "No credentials, or an invalid or expired token.",
    "403": "A session request without its CSRF token.",
    "404": "No such object of yours.",
    "413": "The request body is larger than the configured limit.",
    "415": "The body is not in a media type this endpoint reads.",
    "429": "Too many requests; `Retry-After` says when to try again.",
}


class AutoSchema(SpectacularAutoSchema):
    """Names a view's nested serializers after the view, and documents the error answers.

    Every view nests its own `InputSerializer` / `OutputSerializer`, so the default (the class name)
    would give many different components the same name "Input" and a wrong schema. A nested class
    becomes `<View without "Api"><Input|Output|...>`, e.g. ConversationListInput.
    """

    def get_serializer_name(self, serializer, direction: str) -> str:
        cls = serializer.__class__
        outer, _, _ = cls.__qualname__.rpartition(".")
        if not outer or "<locals>" in outer:
            return cls.__name__
        owner = outer.rpartition(".")[2].removesuffix("Api")
        return owner + cls.__name__

    def get_request_serializer(self) -> Any:
        # Reached when no extend_schema(request=...) names a body: a DELETE then reads none (guessed,
        # drf-spectacular would report it cannot guess one for each APIView).
        return None if self.method == "DELETE" else super().get_request_serializer()

    def _get_request_body(self, direction: str = "request") -> Any:
        # drf-spectacular documents a body for PUT, PATCH and POST only; a DELETE that reads one
        # (DELETE /api/account/: the password) names it with extend_schema(request=...), and a client
        # generated from the schema could not send it. Documented as a POST's would be.
        if self.method != "DELETE" or self.get_request_serializer() is None:
            return super()._get_request_body(direction)
        self.method = "POST"
        try:
            return super()._get_request_body(direction)
        finally:
            self.method = "DELETE"

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        # drf-spectacular documents only the success: a client generated from the schema knew nothing
        # of the 401 every endpoint answers without credentials, the 404 of every id in a path, or the
        # shape of a 400, and the views that named their errors gave them no body.
        responses = super()._get_response_bodies(direction)
        declared = [code for code in responses if code.startswith("4")]  # e.g. a 409, named by its view
        for code in sorted(set(self._error_codes()) | set(declared)):
            schema = self._error_component(code).ref
            response = responses.setdefault(code, {"description": _ERROR_DESCRIPTIONS.get(code, "")})
            response.setdefault("content", {"application/json": {"schema": schema}})
        return dict(sorted(responses.items()))

    def _error_codes(self) -> list[str]:
        codes = []
        has_body = self.method in ("POST", "PUT", "PATCH", "DELETE") and self.get_request_serializer() is not None
        # A read refuses its query where the view checks it (a filter, or pages that refuse a bad
        # limit or offset); views whose checks are elsewhere declare their 400 themselves.
        pages = getattr(self.view, "pagination_class", None)
        checks_query = hasattr(self.view, "FilterSerializer") or (
            isinstance(pages, type) and issubclass(pages, (BeforeIdPagination, CheckedLimitOffsetPagination)))
        if has_body or checks_query:
            codes.append("400")
        if any(isinstance(p, IsAuthenticated) for p in self.view.get_permissions()):
            codes.append("401")
        writes = self.method not in ("GET", "HEAD", "OPTIONS")
        if writes and any(isinstance(a, SessionAuthentication) for a in self.view.get_authenticators()):
            codes.append("403")  # SessionAuthentication's CSRF check (token requests have none)
        if "{" in self.path:
            codes.append("404")
        if has_body:
            # 415: a body in a media type the view does not parse (the import takes multipart only).
            codes += ["413", "415"]
        if self.view.get_throttles():
            codes.append("429")
        return codes

    def _error_component(self, code: str) -> ResolvedComponent:
        name, schema = ("ValidationError", _VALIDATION_ERROR) if code == "400" else ("Error", _ERROR)
        component = ResolvedComponent(name=name, type=ResolvedComponent.SCHEMA, object=name, schema=schema)
        self.registry.register_on_missing(component)
        return component
