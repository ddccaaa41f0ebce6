"""OpenAPI generation tweaks (settings.REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"])."""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema


class AutoSchema(SpectacularAutoSchema):
    """Names a view's nested serializers after the view.

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
