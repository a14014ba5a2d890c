"""The screen's numbers: findings per technique on the poisoned-server corpus, false positives on the clean servers
and on the real registry entries' descriptions (shared reference data). Target: every poisoned function held or
flagged as its severity says, no false positive anywhere.

Each corpus server (tests/fixtures/mcp_servers/poisoned.py) is started over stdio and listed with the MCP SDK's
client as Toolhub lists it (tools, prompts, resources, the `instructions` of its handshake); its texts go through
the screen Toolhub runs at discovery (tools_app.runtime.screen). The rug pull is listed at its second start;
`results` also reports the injected page through the result screen.

Run: .venv/bin/python bench/screen_corpus.py [--registry PATH]
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.fixtures.mcp_servers.poisoned import CORPUS, EXPECTED, POISONED_PAGE, SERVER_EXPECTED
from tools_app.runtime.mcp.discovery import instructions_of, list_server_texts
from tools_app.runtime.screen import (
    Finding,
    clean_result,
    function_texts,
    ruleset,
    screen,
    server_texts,
    worst,
)

POISONED = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "mcp_servers" / "poisoned.py"
REGISTRY = Path("/work/shared/reference/registry-excerpt.json")
REGISTRY_COPY = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "screen" / "registry-excerpt.json"
CLEAN = ("clean_long", "clean_intl")
# The tenant's other tool the shadowing server names (as in tests/tools_app/test_screen_discovery.py).
OTHERS = {"names": {"mailer", "send_email"}, "qualified": {"mailer__send_email"}}


def verdict(findings: list[Finding]) -> str:
    """The status under the default `hold` policy (tools_app.services.screening.verdict)."""
    level = worst([f for f in findings if f.severity in ("high", "medium")])
    return {"high": "held", "medium": "flagged"}.get(level or "", "clear")


async def listed(technique: str, state: Path) -> dict[str, Any]:
    args = [str(POISONED), "--technique", technique, "--state", str(state)]
    async with stdio_client(StdioServerParameters(command=sys.executable, args=args)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            prompts, resources = await list_server_texts(session)
            return {"tools": tools, "prompts": prompts, "resources": resources,
                    "instructions": instructions_of(session)}


async def server(technique: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "starts"
        found = await listed(technique, state)
        if technique == "rugpull":  # reviewed honest at the first start, listed again at the second
            found = await listed(technique, state)
    functions = {}
    for tool in found["tools"]:
        texts = function_texts(name=tool.name, title=tool.title or "", description=tool.description or "",
                               input_schema=tool.input_schema, output_schema=tool.output_schema)
        functions[tool.name] = screen(texts, other_names=OTHERS["names"], other_qualified=OTHERS["qualified"])
    others = screen(server_texts(instructions=found["instructions"], prompts=found["prompts"],
                                 resources=found["resources"]))
    return {"functions": functions, "server": others}


def registry_texts(path: Path) -> list[tuple[str, str]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    servers = data["servers"]
    servers = ast.literal_eval(servers) if isinstance(servers, str) else servers
    texts: list[tuple[str, str]] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for key, sub in value.items():
                if key in ("description", "title") and isinstance(sub, str):
                    texts.append((key, sub))
                else:
                    walk(sub)
        elif isinstance(value, list):
            for sub in value:
                walk(sub)

    for item in servers:
        walk(item.get("server", item))
    return texts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--registry", type=Path, default=REGISTRY if REGISTRY.exists() else REGISTRY_COPY)
    args = parser.parse_args()
    print(f"screen rules v{ruleset().version}: {len(ruleset().rules)} rules")
    print(f"{'technique':<14} {'fn':>3} {'held':>5} {'flag':>5} {'clear':>5} {'as expected':>12} {'findings':>8}  "
          "rules (high/medium)")
    mismatches = 0
    clean_fp = 0
    for technique in sorted(CORPUS):
        got = asyncio.run(server(technique))
        statuses = {name: verdict(found) for name, found in got["functions"].items()}
        expected = EXPECTED[technique]
        ok = sum(statuses.get(name) == status for name, status in expected.items())
        mismatches += len(expected) - ok
        every = [f for found in got["functions"].values() for f in found] + got["server"]
        raising = Counter(f.rule for f in every if f.severity != "low")
        counts = Counter(statuses.values())
        print(f"{technique:<14} {len(statuses):>3} {counts['held']:>5} {counts['flagged']:>5} {counts['clear']:>5} "
              f"{ok:>5}/{len(expected):<6} {len(every):>8}  {dict(sorted(raising.items()))}")
        server_status = verdict(got["server"])
        want = SERVER_EXPECTED.get(technique, ("clear", set(), set()))[0]
        if got["server"] or want != "clear":
            print(f"{'':<14} server texts (instructions, prompts, resources): {server_status} (expected {want})")
            mismatches += server_status != want
        if technique in CLEAN:
            clean_fp += len([f for f in every if f.severity != "low"])
    result = clean_result(POISONED_PAGE)
    print(f"{'results':<14} injected page: flagged={result.flagged} markers={result.markers()} "
          f"invisible characters stripped={result.removed}")
    texts = registry_texts(args.registry)
    found = screen(texts)
    registry_fp = [f for f in found if f.severity != "low"]
    print(f"clean servers: false positives (high/medium) = {clean_fp}")
    print(f"registry ({args.registry.name}): {len(texts)} descriptions/titles, false positives (high/medium) = "
          f"{len(registry_fp)}, low (shown for review) = {len(found) - len(registry_fp)}")
    for f in registry_fp:
        print(f"  FP {f.severity} {f.rule}: {f.excerpt}")
    print(f"poisoned functions not held/flagged as expected: {mismatches}")


if __name__ == "__main__":
    main()
