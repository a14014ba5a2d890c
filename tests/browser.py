"""Headless Chromium for browser tests: launch, log in, and save a screenshot under var/screenshots/ (when asked)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.waiting import scaled_ms

CHROMIUM = Path("/usr/bin/chromium")
# Debian's chromium-headless-shell (the same Chromium built as the old headless mode, without the browser's UI layer;
# what Playwright runs by default when headless) does the tests' page loads for ~40 % less CPU than chromium's
# --headless=new. Used when installed (.ci/run installs both); chromium in --headless=new otherwise.
HEADLESS_SHELL = Path("/usr/lib/chromium/chromium-headless-shell")

# Pictures are taken only when asked (`make screenshots` asks; so may a contributor looking at the pages):
# a full-page screenshot is a render and a PNG encode in Chromium, ~15 % of a browser module's CPU, and no test
# reads one. What a test checks on the page runs either way.
SCREENSHOTS_ENV = "TOOLHUB_TEST_SCREENSHOTS"


def screenshots_wanted() -> bool:
    return os.environ.get(SCREENSHOTS_ENV) == "1"


def take(page: Any, path: Path, **options: Any) -> None:
    """`page.screenshot(path=path, **options)` when pictures are asked for (`SCREENSHOTS_ENV`), else nothing."""
    if screenshots_wanted():
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path), **options)

# Marks for every browser test module: real Chromium, a live server and a transactional database.
MARKS = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not (HEADLESS_SHELL.exists() or CHROMIUM.exists()),
                       reason="Debian's chromium is not installed at /usr/bin/chromium "
                              "(.ci/run installs it: apt-get install chromium chromium-headless-shell)"),
]


def launch_options() -> dict[str, Any]:
    """executable_path and args for Playwright's chromium.launch: the headless shell when installed."""
    args = ["--no-sandbox", "--disable-background-networking"]
    if HEADLESS_SHELL.exists():
        return {"executable_path": str(HEADLESS_SHELL), "args": args}
    return {"executable_path": str(CHROMIUM), "args": [*args, "--headless=new"]}


@contextmanager
def chromium(monkeypatch: Any) -> Iterator[Any]:
    """A headless browser; Playwright's sync API keeps an event loop in this thread, so the ORM must be told."""
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(**launch_options())
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def module_chromium() -> Iterator[Any]:
    """One headless Chromium for the browser tests of a module: its start (Playwright's driver and the browser
    process) is most of what a short browser test costs. Not longer-lived: while it runs, Playwright's event loop
    is this thread's running loop, which only browser modules are written for (the ORM told, no asyncio.run)."""
    with pytest.MonkeyPatch.context() as patch, chromium(patch) as browser:
        yield browser


@pytest.fixture
def browser(module_chromium: Any) -> Iterator[Any]:
    """The module's Chromium. Each `browser.new_page()` opens a context of its own (cookies, storage, cache, as a
    new browser profile would), and every context a test opened is closed when it ends."""
    yield module_chromium
    for context in list(module_chromium.contexts):
        context.close()


def login(page: Any, base_url: str, username: str, password: str, next_url: str = "/admin/") -> None:
    page.set_default_timeout(scaled_ms(20))
    page.goto(f"{base_url}/admin/login/?next={next_url}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_url(f"**{next_url}")


def signed_in_page(browser: Any, base_url: str, user: Any, *, width: int = 1280, height: int = 900) -> Any:
    """A page in a new context of `browser` (its own cookies, storage and cache), already signed in as `user`:
    the session Django's login() makes at the end of the admin's login form (django.test.Client.force_login: the
    first backend, the user_logged_in signal) handed to the context as its cookie, so no login page is loaded,
    posted and redirected in Chromium. For tests that are about what a signed-in admin sees, not the form."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    context = browser.new_context(viewport={"width": width, "height": height})
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie.value, "url": base_url}])
    page = context.new_page()
    page.set_default_timeout(scaled_ms(20))
    return page


def shot(page: Any, name: str, *, full_page: bool = True, docs: str = "") -> Path:
    """var/screenshots/<name>.png; with `docs`, also what the window shows (no taller than the viewport, so the
    picture stays small) as var/screenshots/docs/<docs>.png, which `make screenshots` copies into docs/screenshots/.
    Taken only when asked (`SCREENSHOTS_ENV`)."""
    folder = Path(settings.VAR_DIR) / "screenshots"
    path = folder / f"{name}.png"
    take(page, path, full_page=full_page)
    if docs:
        take(page, folder / "docs" / f"{docs}.png", full_page=False)
    return path


def overflows(page: Any) -> bool:
    """Whether the page is wider than the window (a horizontal scrollbar for the whole page)."""
    return bool(page.evaluate("document.documentElement.scrollWidth > window.innerWidth + 1"))


def viewer_client(page: Any) -> Any:
    """A django.test.Client with the cookies of `page`'s context (the same signed-in session): a page fetched
    through it is what this viewer would get, rendered by the same Django in this process, without a request
    through Playwright's driver and the live server's socket."""
    from django.test import Client

    client = Client()
    for cookie in page.context.cookies():
        client.cookies[cookie["name"]] = cookie["value"]
    return client


def dead_links(page: Any, seen: dict[str, int] | None = None) -> dict[str, int]:
    """Links in the page's content as Chromium has it (scripts have run: hrefs they set count) that do not open
    for this viewer (403, 404, 500... after redirects): href -> status. Each is fetched with the viewer's session
    through Django's test client (`viewer_client`), not rendered. With `seen` (href -> status, filled here), a link
    already opened by this viewer on an earlier page of a test that only reads is not opened again."""
    hrefs = page.eval_on_selector_all("#content-main a[href^='/']", "links => links.map(a => a.getAttribute('href'))")
    client = viewer_client(page)
    statuses = {} if seen is None else seen
    for href in set(hrefs) - statuses.keys():
        statuses[href] = client.get(href, follow=True).status_code
    return {href: statuses[href] for href in set(hrefs) if statuses[href] >= 400}
