"""The README and docs/ as a newcomer uses them: Python 3.11 said up front, no link out of the repository, and
shell blocks that paste into bash as they are (no `<placeholder>`, every variable set before it is used, the
import example creating nothing that fails at once)."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.waiting import scaled

ROOT = Path(settings.BASE_DIR)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = re.compile(r"```(?:sh|bash|shell)\n(.*?)```", re.S)
# Names a reader's shell already has, or that a block documents as the server's own environment.
GIVEN = {"PWD", "HOME", "PATH", "TOOLHUB_RUNNER_SECRET", "TOOLHUB_METRICS_TOKEN", "PPID", "TOKEN_FILE"}


def shell_blocks(page: Path) -> list[str]:
    return SHELL.findall(page.read_text())


def code_of(line: str) -> str:
    """The line without its trailing comment (a `#` after two spaces, or a whole comment line)."""
    return "" if line.lstrip().startswith("#") else line.split("  #", 1)[0]


def test_the_supported_pythons_are_stated_up_front_and_match_the_project() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "Python 3.11, 3.12 or 3.13" in "\n".join(readme.splitlines()[:6])  # before anything else is asked
    assert readme.index("## Prerequisites") < readme.index("## Two commands")
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.11,<3.14"
    makefile = (ROOT / "Makefile").read_text()
    assert "for v in 3.11 3.12 3.13" in makefile and "(3, 11) <= sys.version_info[:2] <= (3, 13)" in makefile


def test_no_page_points_outside_the_repository() -> None:
    for page in PAGES:
        text = page.read_text()
        assert "../shared" not in text and "DESIGN.md" not in text, page.name
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            resolved = (page.parent / target).resolve()
            assert resolved.is_relative_to(ROOT) and resolved.exists(), (page.name, target)


def test_shell_blocks_have_no_placeholders_to_replace() -> None:
    found = []
    for page in PAGES:
        for block in shell_blocks(page):
            found += [(page.name, line) for line in block.splitlines() if re.search(r"<[A-Za-z][^<>]*>", code_of(line))]
    assert found == []


@pytest.mark.parametrize("page", ["README.md", "docs/api.md"], ids=["README", "api"])
def test_every_variable_is_set_before_a_block_uses_it(page: str) -> None:
    # Pasted in order, a block may use what it or an earlier block set ($H, $INV, id_of ...), nothing else.
    known = set(GIVEN)
    for block in shell_blocks(ROOT / page):
        for line in block.splitlines():
            code = code_of(line)
            known |= set(re.findall(r"\b([A-Z][A-Z0-9_]*)=", code))
            known |= set(re.findall(r'\bread\s+(?:-\w+\s+)*(?:"[^"]*"\s+)?([A-Z][A-Z0-9_]*)', code))  # read -rsp "..." X
            known |= set(re.findall(r"^\s*([a-z_]+)\(\)\s*\{", code))
            used = set(re.findall(r"\$\{?([A-Z][A-Z0-9_]*)", code))
            assert used <= known, (page, line, used - known)
            calls = set(re.findall(r"\$\(\s*([a-z_]+)\b", code)) | set(re.findall(r"\|\s*([a-z_]+)\b", code))
            helpers = {c for c in calls if c in {"jid", "field", "id_of"}}
            assert helpers <= known, (page, line, helpers - known)


def test_the_import_example_creates_nothing_that_fails_at_once(api: Any) -> None:
    """Run the walk-through's import as bash would build it: the working demo server arrives enabled, the one that
    cannot start offline arrives DISABLED (so no health check trips its breaker before it was tried)."""
    text = (ROOT / "docs" / "api.md").read_text()
    command = next(c for c in re.findall(r"^(curl [^\n]*?/tools/import/ -d '\{\"mcpServers\".*?\}\}\}')$", text,
                                          re.S | re.M))
    fake_curl = 'curl() { while [ $# -gt 0 ]; do if [ "$1" = -d ]; then printf "%s" "$2"; fi; shift; done; }\n'
    body = subprocess.run(["bash", "-c", fake_curl + 'H=(); ' + command], cwd=ROOT, capture_output=True, text=True,
                          check=True, timeout=scaled(30)).stdout
    resp = api.post("/api/v1/tools/import/", body, content_type="application/json")
    assert resp.status_code in (200, 201), resp.content
    from tools_app.models import Tool

    status = dict(Tool.objects.filter(name__in=["stock", "files"]).values_list("name", "status"))
    assert status == {"stock": "ENABLED", "files": "DISABLED"}
    stock = Tool.objects.get(name="stock")
    assert Path(stock.config["args"][0]) == ROOT / "toolhub_demo" / "inventory_server.py"
