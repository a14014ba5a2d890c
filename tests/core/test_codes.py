"""The one error vocabulary (core.codes): every code the product can answer with is listed there once."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path
from typing import Any

import pytest

from core.codes import REASON_FAMILY, ApiCode, Reason, ResultCode, error_body
from core.errors import DomainError, RuntimeToolError
from tools_app.runtime import call_rules
from tools_app.runtime.result import ERROR_CODES, ToolResult

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("core", "tenants_app", "tools_app", "agents_app", "market_app", "identity_app")


def _import_everything() -> None:
    """Import every product module so every error class is defined (subclasses are found by walking)."""
    for package in PRODUCT:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
            if ".migrations" in info.name or info.name.endswith(".asgi") or ".management.commands." in info.name:
                continue
            importlib.import_module(info.name)


def _subclasses(cls: type[Any]) -> list[Any]:
    out: list[Any] = []
    todo = [cls]
    while todo:
        for sub in todo.pop().__subclasses__():
            out.append(sub)
            todo.append(sub)
    return out


def test_every_domain_error_answers_with_a_listed_api_code() -> None:
    _import_everything()
    classes = _subclasses(DomainError)
    assert len(classes) > 30  # the walk found the apps' errors, not only core's
    unlisted = {f"{c.__module__}.{c.__qualname__}": c.code for c in classes if c.code not in set(ApiCode)}
    assert unlisted == {}


def test_every_runtime_error_has_a_listed_code_and_result_family() -> None:
    _import_everything()
    classes = [RuntimeToolError, *_subclasses(RuntimeToolError)]
    assert len(classes) > 15
    bad = {c.__qualname__: (c.code, c.result_code) for c in classes
           if c.code not in set(ApiCode) or c.result_code not in set(ResultCode)}
    assert bad == {}


# Literal codes written in product source: `code="x"`, `"code": "x"`, `code: str = "x"`, `getattr(e, "code", "x")`. They must be listed too,
# so a new code cannot appear in one module without joining the vocabulary.
_LITERAL = re.compile(
    r'''(?:\bcode(?:\s*:\s*str)?\s*=\s*|["']code["']\s*:\s*|getattr\([^()]*?["']code["']\s*,\s*)["']([a-z][a-z_]+)["']''')


def test_no_code_is_spelt_outside_the_vocabulary() -> None:
    found: dict[str, str] = {}
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for code in _LITERAL.findall(path.read_text()):
                found.setdefault(code, str(path.relative_to(ROOT)))
    unlisted = {code: where for code, where in found.items() if code not in set(ApiCode)}
    assert unlisted == {}


def test_every_reason_maps_to_one_result_family() -> None:
    assert set(REASON_FAMILY) == set(Reason)
    assert set(REASON_FAMILY.values()) <= set(ResultCode)
    assert ERROR_CODES == tuple(ResultCode)


def test_the_enums_do_not_repeat_a_value() -> None:
    for enum in (ApiCode, ResultCode, Reason):
        values = [m.value for m in enum]
        assert len(values) == len(set(values)), enum


@pytest.mark.parametrize("reason", list(Reason))
def test_a_refused_result_reports_the_family_and_the_cause(reason: Reason) -> None:
    result = ToolResult.refused(reason, "no")
    assert result.error_code == REASON_FAMILY[reason] and result.error_reason == reason
    body = result.as_dict()
    assert (body["error_code"], body["error_reason"]) == (str(REASON_FAMILY[reason]), str(reason))


def test_the_call_rules_give_distinct_reasons_for_what_used_to_be_one_disabled() -> None:
    from datetime import UTC, datetime, timedelta

    now = datetime.now(UTC)
    off = call_rules.tool_refusal(tool_name="t", status="DISABLED", disabled_until=None, now=now)
    paused = call_rules.tool_refusal(tool_name="t", status="ENABLED", disabled_until=now + timedelta(minutes=1),
                                     now=now, consecutive_failures=3)
    changed = call_rules.function_refusal(tool_name="t", function="f", state="CHANGED", enabled=True,
                                          unsupported_reason="")
    disabled = call_rules.function_refusal(tool_name="t", function="f", state="ACTIVE", enabled=False,
                                           unsupported_reason="")
    unsupported = call_rules.function_refusal(tool_name="t", function="f", state="ACTIVE", enabled=True,
                                              unsupported_reason="an MCP task")
    refusals = [off, paused, changed, disabled, unsupported]
    assert all(r is not None and r.code == ResultCode.DISABLED for r in refusals)
    assert [r.reason for r in refusals if r is not None] == [
        Reason.TOOL_DISABLED, Reason.TOOL_PAUSED, Reason.FUNCTION_CHANGED, Reason.FUNCTION_DISABLED,
        Reason.FUNCTION_UNSUPPORTED]


def test_error_body_is_the_envelope() -> None:
    assert error_body(ApiCode.NOT_FOUND, "Not found.") == {
        "error": {"code": "not_found", "message": "Not found.", "details": {}}}


def test_the_error_code_page_is_generated_from_the_vocabulary_and_current() -> None:
    from core import codes_page

    page = (ROOT / "docs" / "errors.md").read_text()
    assert page[page.index(codes_page.MARKER):] == codes_page.page(ROOT / "core" / "codes.py"), \
        "run `make docs-errors`"
    for code in [*ApiCode, *ResultCode]:
        assert f"| `{code}` |" in page, code
    for reason, family in REASON_FAMILY.items():
        assert f"| `{reason}` | `{family}` |" in page, reason


# A call result's code written in product source: a literal (`"error_code": "X"`, `error_code="X"`) or a bare name
# there that the module binds to a string (`X = "X"`). It must be a ResultCode, not a string of its own (DENIED was).
_RESULT_LITERAL = re.compile(r'''(?:["']error_code["']\s*:\s*|\berror_code\s*=\s*)(?:["']([A-Z][A-Z_]+)["']|([A-Z][A-Z_]+)\b)''')


def test_no_result_code_is_spelt_outside_the_vocabulary() -> None:
    found: dict[str, str] = {}
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            text = path.read_text()
            for literal, name in _RESULT_LITERAL.findall(text):
                bound = re.search(rf'''^{name} = ["']([^"']*)["']''', text, re.M) if name else None
                code = literal or (bound[1] if bound else "")
                if code:
                    found.setdefault(code, str(path.relative_to(ROOT)))
    assert {code: where for code, where in found.items() if code not in set(ResultCode)} == {}
