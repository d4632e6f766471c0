"""The web console in a real browser: headless Chromium (Debian's ``chromium``, driven by
Playwright's driver from its wheel) against real gnomon servers. Every page a test opens
records the URL of each request it makes and each console message it logs, so a test can
check that the page asked nothing of any other server, logged no error and fits its window.
Screenshots go to ``$GNOMON_CONSOLE_SCREENSHOTS`` when set, else to a temporary directory."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Playwright, sync_playwright

#: Debian's chromium (the Makefile's test target installs it).
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: Headless, and nothing sent anywhere on the browser's own account.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: The size the console must be usable at.
VIEWPORT = {"width": 1280, "height": 800}


# Module-scoped: Playwright's sync API keeps an asyncio loop running on the main thread while
# it is open, which the later tests of a run, running loops of their own there, cannot bear.
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as running:
        yield running


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    launched = playwright.chromium.launch(
        executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
    )
    yield launched
    launched.close()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("GNOMON_CONSOLE_SCREENSHOTS")
    path = Path(where) if where else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class Watched:
    """A browser page and what it did: every request's URL, every console message."""

    page: Page
    origin: str
    requests: list[str] = field(default_factory=list)
    console: list[ConsoleMessage] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    def errors(self) -> list[str]:
        return [m.text for m in self.console if m.type == "error"] + self.page_errors

    def elsewhere(self) -> list[str]:
        """The requests to anywhere but the server under test (``data:`` URLs go nowhere)."""
        return [
            url
            for url in self.requests
            if not url.startswith("data:") and _origin(url) != self.origin
        ]

    def check_clean(self) -> None:
        assert self.requests, "the page made no request at all"
        assert self.elsewhere() == []
        assert self.errors() == []
        assert self.overflowing() == []

    def overflowing(self) -> list[str]:
        """What keeps the page from being usable at its window's size: the page scrolling
        sideways, or a control shown outside the window."""
        return self.page.evaluate(_OVERFLOWING)  # type: ignore[no-any-return]


_OVERFLOWING = """() => {
    const width = window.innerWidth;
    const found = [];
    const page = document.documentElement.scrollWidth;
    if (page > width) found.push(`the page is ${page} px wide`);
    for (const el of document.querySelectorAll("button, input, select, textarea, a, label")) {
        const box = el.getBoundingClientRect();
        const shown = box.width > 0 && box.height > 0;
        if (shown && (box.left < 0 || box.right > width)) found.push(el.outerHTML.slice(0, 80));
    }
    return found;
}"""


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@pytest.fixture
def open_page(browser: Browser) -> Iterator[Callable[[str], Watched]]:
    """``open_page(origin)``: a new page in a fresh context (no credentials kept between
    tests), watched from its first request."""
    contexts = []

    def open_(origin: str) -> Watched:
        context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
        contexts.append(context)
        page = context.new_page()
        watched = Watched(page, origin)
        page.on("request", lambda request: watched.requests.append(request.url))
        page.on("console", lambda message: watched.console.append(message))
        page.on("pageerror", lambda error: watched.page_errors.append(str(error)))
        return watched

    yield open_
    for context in contexts:
        context.close()
