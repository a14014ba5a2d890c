"""When an OAuth client last called through its token: the authorizations pages' "last used".

A call through an access token marks the token's `updated`, at most once a minute per token and process, so
the gateway's warm path adds no write per call."""

from __future__ import annotations

import threading
import time

from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from core.process_state import PerProcess

EVERY_S = 60.0


class _Marks:
    """When this process last marked each token, keyed by the row and its expiry (a row id a test database hands
    out again is another token); made anew in a forked child, lock included."""

    def __init__(self) -> None:
        self.at: dict[tuple[int, float | None], float] = {}
        self.lock = threading.Lock()


_marks: PerProcess[_Marks] = PerProcess(_Marks)


def note_use(token_id: int | None, expires_at: float | None = None) -> None:
    if token_id is None:
        return
    now = time.monotonic()
    marks = _marks.get()
    marked = marks.at
    with marks.lock:
        key = (token_id, expires_at)
        if now - marked.get(key, -EVERY_S) < EVERY_S:
            return
        if len(marked) > 10_000:  # tokens expire: forget the old marks rather than grow
            marked.clear()
        marked[key] = now
    # `updated` is auto_now, which a queryset update does not set by itself.
    get_access_token_model().objects.filter(pk=token_id).update(updated=timezone.now())
