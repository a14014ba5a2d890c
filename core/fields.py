"""EncryptedJSONField: a JSON value stored as one Fernet token; plaintext never reaches the column."""

from __future__ import annotations

from typing import Any

from django.db import models

from core import crypto

# Field is generic in its set and get types (django_stubs_ext.monkeypatch() in the settings makes it subscriptable).
_TextField = models.TextField[Any, Any]


class EncryptedJSONField(_TextField):
    """Python side: any JSON value. Database side: Fernet ciphertext text."""

    # django-stubs reads these to type model attributes (any JSON value, not str).
    _pyi_private_set_type: Any
    _pyi_private_get_type: Any

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        if value is None or value == "":
            return None
        return crypto.decrypt_json(value)

    def to_python(self, value: Any) -> Any:
        return value

    def get_prep_value(self, value: Any) -> str | None:
        if value is None:
            return None
        return crypto.encrypt_json(value)

    def value_to_string(self, obj: Any) -> str:
        # dumpdata/serialization must not write plaintext either.
        return self.get_prep_value(self.value_from_object(obj)) or ""
