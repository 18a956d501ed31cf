"""The console's browser tests: a real headless Chromium (Debian's, /usr/bin/chromium) driven by
Playwright against a private runaii stack (tests/runaii_stack.py: the real gateway and worker binaries,
a fresh Postgres database, Redis).

Fixtures:
  stack       the Stack
  chromium    one browser for the session (never a Playwright-downloaded one)
  open_console(credential=None, viewport=DESKTOP): a new browser context (its own cookies) on the
              console, signed in with `credential` when given; returns a Console
  shots       the folder screenshots go to, printed at the end of the run
              (~/.cache/runaii/console-screenshots/<time>, or $RUNAII_SCREENSHOTS/<time>)
"""

from __future__ import annotations

import datetime
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from runaii_stack import Stack, StackUnavailable, start_stack  # noqa: E402

CHROMIUM = os.environ.get("RUNAII_CHROMIUM", "/usr/bin/chromium")
# Headless, no sandbox (tests run as root in CI), and nothing that reaches the network by itself.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}

_SHOTS: list[Path] = []


@pytest.fixture(scope="session")
def stack(tmp_path_factory) -> Stack:
    try:
        with start_stack(tmp_path_factory.mktemp("runaii-logs")) as stack:
            yield stack
    except StackUnavailable as e:
        pytest.exit(str(e), returncode=2)


@pytest.fixture(scope="session")
def shots() -> Path:
    root = Path(os.environ.get("RUNAII_SCREENSHOTS") or Path.home() / ".cache" / "runaii" / "console-screenshots")
    folder = root / datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder.mkdir(parents=True, exist_ok=True)
    _SHOTS.append(folder)
    return folder


def pytest_terminal_summary(terminalreporter) -> None:
    for folder in _SHOTS:
        count = len(list(folder.glob("*.png")))
        terminalreporter.write_line(f"console screenshots ({count}): {folder}")


@pytest.fixture(scope="session")
def chromium():
    if not Path(CHROMIUM).exists():
        pytest.exit(f"{CHROMIUM} is missing: apt-get install -y chromium (scripts/test.sh does)", returncode=2)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Console:
    """One browser context on the console: its own cookies, its page, the CSP reports it saw."""

    def __init__(self, context, stack: Stack, shots: Path, label: str):
        self.context = context
        self.page = context.new_page()
        self.stack = stack
        self.shots = shots
        self.label = label
        self.problems: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.problems.append(f"script error: {e}"))
        # Dialogs come from the console's data-confirm forms: accept them (a test checks they appear).
        self.dialogs: list[str] = []
        self.page.on("dialog", self._dialog)

    def _console(self, message) -> None:
        text = message.text
        if "Content Security Policy" in text or "Refused to" in text:
            self.problems.append(text)

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.accept()

    def url(self, path: str) -> str:
        return f"{self.stack.base_url}{path}"

    def goto(self, path: str):
        return self.page.goto(self.url(path))

    def sign_in(self, credential: str) -> None:
        self.goto("/console/sign-in")
        self.page.fill("#credential", credential)
        with self.page.expect_navigation():
            self.page.click("form.sign-in button[type=submit]")
        assert "/console/sign-in" not in self.page.url, self.page.inner_text("main")

    def shot(self, name: str) -> Path:
        path = self.shots / f"{self.label}-{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def text(self, selector: str) -> str:
        return self.page.inner_text(selector).strip()

    def fits_the_viewport(self) -> bool:
        """No page-wide horizontal scrolling (wide tables scroll inside their own box)."""
        return self.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")

    def shows_whole(self, selector: str) -> bool:
        """The table `selector` needs no scrolling of its own box in this window."""
        return self.page.evaluate(
            "(s) => { const box = document.querySelector(s).closest('.table-scroll'); return box.scrollWidth <= box.clientWidth + 1; }", selector
        )

    def widest(self) -> list[str]:
        """The elements that stick out of the viewport, for a failure's message."""
        return self.page.evaluate(
            """() => [...document.querySelectorAll('body *')]
                .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
                .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))"""
        )


@pytest.fixture
def open_console(chromium, stack, shots):
    opened: list[Console] = []

    def make(credential: str | None = None, viewport=DESKTOP, label: str = "page") -> Console:
        context = chromium.new_context(viewport=viewport, accept_downloads=True)
        console = Console(context, stack, shots, label)
        opened.append(console)
        if credential:
            console.sign_in(credential)
        return console

    yield make
    problems = [p for c in opened for p in c.problems]
    for console in opened:
        console.context.close()
    assert not problems, f"the browser reported: {problems}"
