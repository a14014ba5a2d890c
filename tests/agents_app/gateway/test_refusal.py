"""The gateway's refusal is the house's typed error: a DomainError with a listed code, answered as JSON-RPC."""

from __future__ import annotations

from agents_app.gateway import service
from agents_app.gateway.server import Refused
from core.codes import ApiCode
from core.errors import DomainError


def test_a_gateway_refusal_is_a_domain_error_and_its_json_rpc_error_carries_the_code_and_details() -> None:
    refusal = service.Refusal(ApiCode.THROTTLED, "too many calls", retry_after_s=3)
    assert isinstance(refusal, DomainError)
    assert (refusal.code, refusal.message, refusal.details) == (ApiCode.THROTTLED, "too many calls",
                                                                {"retry_after_s": 3})
    error = Refused(refusal).error
    assert (error.code, error.message) == (Refused.CODE, "too many calls")
    assert error.data == {"code": "throttled", "retry_after_s": 3}
