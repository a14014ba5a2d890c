"""The one result shape every tool runtime returns (MCP, built-in, HTTP)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Error codes of DESIGN §4, shared by every runtime.
INVALID_PARAMS = "INVALID_PARAMS"
NOT_FOUND = "NOT_FOUND"
DISABLED = "DISABLED"
APPROVAL_REQUIRED = "APPROVAL_REQUIRED"
TIMEOUT = "TIMEOUT"
BUSINESS_ERROR = "BUSINESS_ERROR"
EXECUTION_ERROR = "EXECUTION_ERROR"

ERROR_CODES = (
    INVALID_PARAMS,
    NOT_FOUND,
    DISABLED,
    APPROVAL_REQUIRED,
    TIMEOUT,
    BUSINESS_ERROR,
    EXECUTION_ERROR,
)


@dataclass
class ToolResult:
    """Outcome of one call: structured `data`, joined `text`, or a typed error."""

    success: bool
    data: Any = None
    text: str = ""
    error_code: str | None = None
    error: str | None = None
    cost_ms: int = 0
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def ok(cls, *, data: Any = None, text: str = "", **meta: Any) -> ToolResult:
        return cls(success=True, data=data, text=text, meta=dict(meta))

    @classmethod
    def fail(cls, code: str, message: str, **meta: Any) -> ToolResult:
        assert code in ERROR_CODES, code
        return cls(success=False, error_code=code, error=message, meta=dict(meta))

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("meta", None)
        return out
