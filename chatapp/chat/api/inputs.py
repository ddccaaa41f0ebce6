"""Reading a request's input through the view's input serializer."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.utils import html


def validated(serializer_class: type[serializers.Serializer], data: Any, *, partial: bool = False) -> dict[str, Any]:
    """`data` (a body or query parameters) as `serializer_class` checks it: a 400 with its field errors
    when it does not pass (DRF's ValidationError, answered by api.errors)."""
    serializer = serializer_class(data=data, partial=partial)
    if html.is_html_input(data):
        # A form-encoded or multipart body means what the same fields in JSON mean: one it leaves out is
        # absent. DRF reads a boolean missing from form input as false (an unticked HTML checkbox sends
        # nothing), so `preference=fast` sent to PATCH /api/settings/ turned auto_optimize off, and a
        # rename took a chat off the offline model. `fields` is this instance's own copy of each field.
        for field in serializer.fields.values():
            field.default_empty_html = empty
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class ChangesSomething(serializers.Serializer):
    """The input of a PATCH whose fields are each optional: a body that sets none of them is refused,
    naming them. Left to pass, a misspelt field (`preferences`, `nme`) changed nothing and answered
    200 with the unchanged object, which reads as a save."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            names = ", ".join(name for name, field in self.fields.items() if not field.read_only)
            raise serializers.ValidationError(f"Send at least one of: {names}.")
        return super().validate(attrs)
