"""Calls whose caller never came back: a 2026-07-28 server's questions were handed to the caller (the call's one
audit row `awaiting_input`, tools_app.services.invoke `continuing`), and no round answering them arrived before the
caller's sealed requestState expired (TOOLHUB_MCP_REQUEST_STATE_TTL_S after the questions were handed back, or after
the last answering round began). No retry can continue such a call any more (the gateway refuses the expired state),
so its row is ended here: status `error`, code TIMEOUT, the reason in its error.

What such a row held: its quota minute and day were counted when the call began and stay counted (the call was made);
its concurrent slot was released when its round ended (quotas.admitted); the claim of its rounds expires on its own
(agents_app.gateway.relay.continued_call). Ending the row is what the audit trail, the usage report, the audit stream
and the metrics see: one call that ended in an error, counted once, when it is swept (a row awaiting input is counted
by none of them).

Run from Celery beat (`tools.sweep_abandoned_input`); idempotent: a swept row is no longer awaiting input, and a round
that begins while the sweep runs either takes the row first (renewing its time: not swept) or finds it ended and is a
new call (tools_app.services.audit.resumed).
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.codes import ResultCode
from tools_app.models import CallStatus, ToolCall

BATCH = 500  # rows ended per transaction


def _due(cutoff: object) -> Q:
    return Q(status=CallStatus.AWAITING_INPUT) & (Q(input_asked_at__lt=cutoff)
                                                  | Q(input_asked_at__isnull=True, created_at__lt=cutoff))


def sweep_abandoned_input() -> int:
    """End every call still awaiting input after its requestState expired. Returns how many were ended."""
    ttl = float(settings.TOOLHUB_MCP_REQUEST_STATE_TTL_S)
    ended = 0
    while True:
        cutoff = timezone.now() - timedelta(seconds=ttl)
        with transaction.atomic():
            rows = list(ToolCall.objects.filter(_due(cutoff)).select_for_update(skip_locked=True)
                        .order_by("id")[:BATCH])
            for row in rows:
                row.status, row.error_code = CallStatus.ERROR, ResultCode.TIMEOUT
                row.error = (f"abandoned: the server asked for input and the caller never answered within "
                             f"{ttl:g} s (its requestState expired)")
                row.input_asked_at = None
                row.save()  # saved whole: the metrics and the audit stream see the outcome once, now
        ended += len(rows)
        if len(rows) < BATCH:
            return ended
