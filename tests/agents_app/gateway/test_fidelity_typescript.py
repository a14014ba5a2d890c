"""The TypeScript SDK's view of the fidelity fixture server, direct (stdio) and through the gateway, compared field by
field: listing, structured and error results, progress, elicitation and sampling (answered by the TS client).

What Toolhub adds, and so may differ (as for the Python client in test_fidelity.py): names prefixed `<tool>__`,
Toolhub's effective readOnly/destructive hints, a title where the server gave none.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tenants_app.services import token_for_user
from tests.agents_app.gateway.node_clients import ensure_installed, node_available
from tests.agents_app.gateway.test_fidelity import FIDELITY, TOOLHUB_HINTS, weather  # noqa: F401 - the fixture
from tests.waiting import PROCESS_BOUND_S

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.real_clients,
    pytest.mark.skipif(not node_available(), reason="node and npm are not installed on this machine"),
]


def _run(folder: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(["node", str(folder / "fidelity.mjs"), *args], cwd=folder, capture_output=True, text=True,
                          timeout=PROCESS_BOUND_S)
    assert done.returncode == 0, done.stderr[-2000:]
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
def test_a_typescript_client_sees_through_the_gateway_what_it_sees_directly(served: Any, weather: Any,  # noqa: F811
                                                                            transport: str) -> None:
    api, _tool_id, agent_id = weather
    folder = ensure_installed()
    direct = _run(folder, "stdio", sys.executable, str(FIDELITY))
    via = _run(folder, transport, served.endpoint("acme", agent_id), token_for_user(user=api.user), "weather__")

    mine = {t["name"].removeprefix("weather__"): t for t in via["tools"]}
    assert sorted(mine) == sorted(t["name"] for t in direct["tools"])
    for theirs in direct["tools"]:
        tool = mine[theirs["name"]]
        for key in ("description", "inputSchema", "outputSchema", "_meta", "icons"):
            assert tool.get(key) == theirs.get(key), (theirs["name"], key)
        assert tool["title"] == theirs.get("title", f"weather: {theirs['name']}")
        stated = theirs.get("annotations", {})
        assert {k: tool["annotations"][k] for k in stated} == stated, theirs["name"]
        assert set(tool["annotations"]) - set(stated) <= TOOLHUB_HINTS | {"title"}

    # content, structuredContent, isError, _meta; ask and think included. The gateway's SDK always states
    # `isError` (false by default) where this fixture leaves it out: the same value.
    assert {n: {"isError": False, **r} for n, r in via["results"].items()} == \
        {n: {"isError": False, **r} for n, r in direct["results"].items()}
    assert "Lyon (Which city?)" in via["results"]["ask"]["content"][0]["text"]
    assert "Bonjour! (Say hello in French.)" in via["results"]["think"]["content"][0]["text"]
    assert via["progress"] == direct["progress"] == [[1, 3, "three"], [2, 3, "two"], [3, 3, "one"]]
