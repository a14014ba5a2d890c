"""Secrets at rest: MultiFernet over TOOLHUB_SECRET_KEYS (newest first) or a generated dev key file."""

from __future__ import annotations

import functools
import json
import os
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


def _dev_key() -> str:
    path = settings.TOOLHUB_DEV_KEY_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_EXCL: two processes starting together agree on one key.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as fh:
                fh.write(Fernet.generate_key().decode())
    return path.read_text().strip()


def key_ring() -> list[str]:
    """TOOLHUB_SECRET_KEYS (newest first), or the generated dev key: the root of every key Toolhub derives."""
    return list(settings.TOOLHUB_SECRET_KEYS) or [_dev_key()]


@functools.cache
def fernet() -> MultiFernet:
    return MultiFernet([Fernet(k.encode()) for k in key_ring()])


def reset_keys() -> None:
    """Forget cached keys (after settings change, e.g. in rotation tests)."""
    fernet.cache_clear()


class SecretDecryptError(Exception):
    """Stored ciphertext matches none of the configured keys."""


def encrypt_json(value: Any) -> str:
    return fernet().encrypt(json.dumps(value, sort_keys=True).encode()).decode()


def decrypt_json(token: str) -> Any:
    try:
        return json.loads(fernet().decrypt(token.encode()))
    except InvalidToken:
        raise SecretDecryptError("stored secret cannot be decrypted with TOOLHUB_SECRET_KEYS") from None


def rotate_token(token: str) -> str:
    return fernet().rotate(token.encode()).decode()
