"""docs/errors.md's tables, generated from core/codes.py: every code with the `#:` comment that describes it."""

from __future__ import annotations

import re
from pathlib import Path

from core.codes import REASON_FAMILY, ApiCode, Reason, ResultCode

MARKER = "<!-- generated from core/codes.py by `manage.py toolhub_codes`: edit the code, then `make docs-errors` -->"
_MEMBER = re.compile(r'^    ([A-Z][A-Z0-9_]*) = "[^"]*"(?:\s+#:?\s*(.*))?$')


def _rows(source: list[str], enum_name: str) -> list[tuple[str, str]]:
    """(member name, its description) and ("", a group note) rows of one enum class, in source order."""
    start = source.index(next(line for line in source if line.startswith(f"class {enum_name}(")))
    rows: list[tuple[str, str]] = []
    doc: list[str] = []
    for line in source[start + 1:]:
        if line and not line.startswith(" "):
            break  # the next top-level statement: the class is over
        text = line.strip()
        if text.startswith("#:"):
            doc.append(text[2:].strip())
        elif text.startswith("#"):
            rows.append(("", text[1:].strip()))
        elif match := _MEMBER.match(line):
            rows.append((match[1], " ".join([*doc, match[2] or ""]).strip()))
            doc = []
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def page(codes_py: Path) -> str:
    """The generated part of docs/errors.md: one table per vocabulary."""
    source = codes_py.read_text().splitlines()
    out = [MARKER, ""]
    for enum, title, column in ((ApiCode, "API errors (`ApiCode`)", "`code`"),
                                (ResultCode, "Call results (`ResultCode`)", "`error_code`"),
                                (Reason, "Refusal causes (`Reason`)", "`error_reason`")):
        out += [f"## {title}", ""]
        reasons = enum is Reason
        out.append(f"| {column} | {'family (`error_code`) | ' if reasons else ''}meaning |")
        out.append("|---|---|---|" if reasons else "|---|---|")
        for name, text in _rows(source, enum.__name__):
            if not name:
                out.append(f"| **{_cell(text)}** | {'| ' if reasons else ''}|")
                continue
            value = enum[name]
            family = f"`{REASON_FAMILY[Reason(value)]}` | " if reasons else ""
            out.append(f"| `{value}` | {family}{_cell(text)} |")
        out.append("")
    return "\n".join(out)
