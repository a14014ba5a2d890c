"""Serializer helpers shared by every app's API."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.ids import MAX_ID


class StrictInputSerializer(serializers.Serializer[Any]):
    """An input serializer that rejects unknown fields, naming them and the accepted ones."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError(
                {"non_field_errors": [f"expected a JSON object, got {type(data).__name__}"]}
            )
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            accepted = ", ".join(sorted(self.fields))
            raise serializers.ValidationError(
                {name: [f"unknown field {name!r}; accepted: {accepted}"] for name in unknown}
            )
        return super().to_internal_value(data)


class ChoiceField(serializers.ChoiceField):
    """A choice field whose error names the accepted values (`"NOPE" is not valid; accepted: A, B`)."""

    def to_internal_value(self, data: Any) -> Any:
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError:
            accepted = ", ".join(str(k) for k in self.choices)
            shown = str(data)[:64]
            raise serializers.ValidationError(f"{shown!r} is not a valid choice; accepted: {accepted}") from None


class AnyJSONField(serializers.JSONField):
    """A JSON value of any shape (object, string, ...), passed through as parsed.

    Its nesting was bounded by the request parser; tool configs have their own, tighter caps
    (tools_app.configs), checked on save.
    """


class IdField(serializers.IntegerField):
    """A row id: an integer from 1 to 2**63-1 (larger ones would overflow the database driver)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(**kwargs)
