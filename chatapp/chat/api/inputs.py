"""Reading a request's input through the view's input serializer."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


def validated(serializer_class: type[serializers.Serializer], data: Any, *, partial: bool = False) -> dict[str, Any]:
    """`data` (a body or query parameters) as `serializer_class` checks it: a 400 with its field errors
    when it does not pass (DRF's ValidationError, answered by api.errors)."""
    serializer = serializer_class(data=data, partial=partial)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
