"""Typed environment variables: every setting read from the environment is declared, checked and documented here.

Each reader returns the typed value or raises ImproperlyConfigured naming the variable, what it got and what is
accepted, so a typo fails at startup instead of as a 500 on the first request that needs it. Each read is
recorded in DECLARED, from which `manage.py toolhub_settings` prints the configuration table of the docs
(docs/configuration.md; a test keeps the two the same).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class Var:
    name: str
    kind: str  # int, float, bool, str, choice, list, path
    default: str  # as an operator would write it
    accepted: str = ""


DECLARED: dict[str, Var] = {}


def _declare(name: str, kind: str, default: object, accepted: str = "") -> str | None:
    if isinstance(default, bool):
        shown = "1" if default else "0"
    elif isinstance(default, list | tuple):
        shown = ",".join(str(d) for d in default)
    else:
        shown = "" if default is None else str(default)
    DECLARED.setdefault(name, Var(name, kind, shown, accepted))
    return os.environ.get(name)


def _bad(name: str, raw: str, accepted: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"{name}={raw!r} is not valid; accepted: {accepted}")


def env_str(name: str, default: str = "") -> str:
    raw = _declare(name, "str", default)
    return default if raw is None else raw


def env_int(name: str, default: int, *, minimum: int | None = 0) -> int:
    accepted = "a whole number" + (f" >= {minimum}" if minimum is not None else "")
    raw = _declare(name, "int", default, accepted)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        raise _bad(name, raw, accepted) from None
    if minimum is not None and value < minimum:
        raise _bad(name, raw, accepted)
    return value


def env_float(name: str, default: float, *, minimum: float | None = 0.0) -> float:
    accepted = "a number" + (f" >= {minimum:g}" if minimum is not None else "")
    raw = _declare(name, "float", default, accepted)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise _bad(name, raw, accepted) from None
    if value != value or value in (float("inf"), float("-inf")) or (minimum is not None and value < minimum):
        raise _bad(name, raw, accepted)
    return value


def env_bool(name: str, default: bool = False) -> bool:
    accepted = "1/0, true/false, yes/no, on/off"
    raw = _declare(name, "bool", default, accepted)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise _bad(name, raw, accepted)


def env_choice(name: str, default: str, choices: Iterable[str]) -> str:
    options = tuple(choices)
    accepted = ", ".join(c if c else "(empty)" for c in options)
    raw = _declare(name, "choice", default, accepted)
    value = default if raw is None else raw.strip()
    value = value.upper() if all(c.isupper() for c in options if c) else value.lower()
    if value not in options:
        raise _bad(name, raw or "", accepted)
    return value


def env_list(name: str, default: str = "", *, sep: str = ",") -> list[str]:
    raw = _declare(name, "list", default, f"{sep!r}-separated")
    return [item.strip() for item in (default if raw is None else raw).split(sep) if item.strip()]


def env_path(name: str, default: Path) -> Path:
    raw = _declare(name, "path", default)
    return Path(raw) if raw else default


def table(base_dir: Path) -> str:
    """The configuration table (Markdown) of every declared variable, with the comment above its read in the
    settings as its description."""
    notes = _comments(base_dir / "config" / "settings")
    rows = ["| Variable | Type | Default | Accepted | What it does |", "|---|---|---|---|---|"]
    for var in sorted(DECLARED.values(), key=lambda v: v.name):
        default = f"`{var.default}`" if var.default else "(empty)"
        default = default.replace(str(base_dir), "<repo>")
        note = notes.get(var.name, "").replace("|", "\\|")
        rows.append(f"| `{var.name}` | {var.kind} | {default} | {var.accepted} | {note} |")
    return "\n".join(rows) + "\n"


def _comments(settings_dir: Path) -> dict[str, str]:
    """For each `env_*("NAME"` in the settings modules, the `#` comment lines right above its statement."""
    import re

    found: dict[str, str] = {}
    for path in sorted(settings_dir.glob("*.py")):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            for name in re.findall(r'env_\w+\(\s*"([A-Z0-9_]+)"', line):
                j, comment = i - 1, list[str]()
                while j >= 0 and lines[j].lstrip().startswith("#"):
                    comment.insert(0, lines[j].strip().lstrip("#").strip())
                    j -= 1
                if comment and name not in found:
                    found[name] = " ".join(comment)
    return found
