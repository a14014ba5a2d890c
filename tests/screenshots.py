"""`make screenshots`: regenerate docs/screenshots/ from the browser tests that take them.

The tests save what the window shows with `shot(..., docs="<name>")` (tests/browser.py) into
var/screenshots/docs/; this runs those tests in headless Chromium and copies each picture into docs/screenshots/.
It fails, copying nothing, when a test fails or a picture the docs use was not taken (a renamed or removed shot).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.browser import SCREENSHOTS_ENV

ROOT = Path(__file__).resolve().parent.parent
TAKEN = ROOT / "var" / "screenshots" / "docs"
DOCS = ROOT / "docs" / "screenshots"

# The tests that take the docs' pictures (whole modules would also do; these are the ones that matter).
TESTS = [
    "tests/tenants_app/test_admin_browser.py::test_dashboard_at_desktop_and_phone_width",
    "tests/tenants_app/test_admin_browser.py::test_a_refused_membership_save_keeps_what_was_typed",
    "tests/tools_app/test_admin_browser.py::test_decide_pending_approvals_from_the_queue",
    "tests/tools_app/test_admin_lists_browser.py::test_tools_list_shows_health_badges_and_mcp_tools_first",
    "tests/tools_app/test_admin_tool_pages_browser.py::test_market_load_then_update_shows_a_diff_before_applying",
    "tests/agents_app/test_admin_agent_browser.py::test_link_a_tool_with_the_function_picker",
    "tests/agents_app/test_admin_agent_browser.py::"
    "test_a_chat_held_destructive_call_approved_from_the_queue_links_call_conversation_and_agent",
    "tests/agents_app/test_playground_browser.py::test_conversations_persist_across_reloads_even_while_waiting_for_approval",
    "tests/agents_app/test_playground_browser.py::test_a_member_who_is_not_staff_signs_in_and_chats",
]


def main() -> int:
    shutil.rmtree(TAKEN, ignore_errors=True)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-m", "browser", *TESTS],
                         cwd=ROOT, check=False, env={**os.environ, SCREENSHOTS_ENV: "1"})
    if run.returncode != 0:
        print("screenshots: a browser test failed; docs/screenshots/ left as it was", file=sys.stderr)
        return run.returncode
    taken = sorted(TAKEN.glob("*.png"))
    missing = sorted(p.name for p in DOCS.glob("*.png") if not (TAKEN / p.name).exists())
    if missing:
        print(f"screenshots: no test took {', '.join(missing)} (shot(..., docs=...)); nothing copied",
              file=sys.stderr)
        return 1
    for picture in taken:
        shutil.copyfile(picture, DOCS / picture.name)
        print(f"docs/screenshots/{picture.name}: {picture.stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
