"""The desktop browser an MCP client opens for its person ($BROWSER for xdg-open): signs in to Toolhub as
$TOOLHUB_TEST_MEMBER, allows on the consent page, and follows the redirect to the client's own loopback callback.
Each consent page it answered is appended to $TOOLHUB_TEST_CONSENT_LOG, so the test sees the person was asked."""

from __future__ import annotations

import asyncio
import os
import sys

from tests.agents_app.gateway.oauth_support import Browser


async def _open(url: str) -> None:
    browser = Browser(os.environ["TOOLHUB_TEST_MEMBER"])
    try:
        resp = await browser.consent(url)
        with open(os.environ["TOOLHUB_TEST_CONSENT_LOG"], "a", encoding="utf-8") as log:
            log.write(f"{len(browser.consent_pages)} {resp.status_code}\n")
        if resp.status_code == 302:
            await browser.http.get(resp.headers["location"])  # the client's callback server takes the code
    finally:
        await browser.close()


if __name__ == "__main__":
    asyncio.run(_open(sys.argv[1]))
