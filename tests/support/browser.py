"""Headless Chromium for the browser tests (Debian's chromium + chromium-driver, never a download).

Without the browser the tests skip — unless REQUIRE_BROWSER=1 (set by .ci/run), where a missing
browser is a failure: CI must never pass by skipping them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOT_DIR = Path(settings.BASE_DIR) / "var" / "screenshots"
LAPTOP = (1366, 900)


def chromium_require(*, chromium: str = CHROMIUM, chromedriver: str = CHROMEDRIVER) -> None:
    """Skip the calling test when the browser is missing, or fail it under REQUIRE_BROWSER=1."""
    missing = [path for path in (chromium, chromedriver) if not Path(path).exists()]
    if not missing:
        return
    reason = f"{', '.join(missing)} missing: apt-get install -y chromium chromium-driver"
    if os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(f"REQUIRE_BROWSER=1 and {reason}")
    pytest.skip(reason)


@contextmanager
def headless_chromium(*, size: tuple[int, int] = LAPTOP, flags: tuple[str, ...] = ()) -> Iterator[Any]:
    """A Selenium Chrome driver on a throw-away profile, with the page console captured; `flags`: more
    command-line switches (a bench's --enable-precise-memory-info)."""
    chromium_require()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="test-chromium-")
    options = webdriver.ChromeOptions()
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
        f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}",
    ):
        options.add_argument(flag)
    for flag in flags:
        options.add_argument(flag)
    options.binary_location = CHROMIUM
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# Run in a page (or before it loads, from Page.addScriptToEvaluateOnNewDocument): records in `window.__heard`
# the live region (its id, else its class) each change of the page falls in, i.e. what a screen reader would
# read out, and in `window.__said` the text each change adds, with the page's loading state then ("loading":
# drawn with the page, which a screen reader does not read out).
HEAR_LIVE_REGIONS = """
window.__heard = [];
window.__said = [];
new MutationObserver((records) => {
  for (const r of records) {
    const node = r.target.nodeType === 1 ? r.target : r.target.parentElement;
    const region = node && node.closest('[aria-live]:not([aria-live="off"]), [role="status"], [role="alert"]');
    if (!region) continue;
    window.__heard.push(region.id || region.className);
    const text = [...r.addedNodes].map((n) => n.textContent).join(' ').trim();
    if (text) window.__said.push([document.readyState, text]);
  }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


def in_accessibility_tree(driver: Any, selector: str) -> bool:
    """Whether the element `selector` (CSS) is in the page's accessibility tree (rendered, not ignored): a
    live region must be there before its words change for a screen reader to read them out."""
    driver.execute_cdp_cmd("Accessibility.enable", {})
    root = driver.execute_cdp_cmd("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
    node = driver.execute_cdp_cmd("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
    tree = driver.execute_cdp_cmd("Accessibility.getPartialAXTree", {"nodeId": node, "fetchRelatives": False})
    return not tree["nodes"][0].get("ignored", False)


def console_errors(driver: Any) -> list[dict]:
    """The console errors logged since the last call (script errors, CSP violations, failed loads)."""
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def tabs_close_but(driver: Any, keep: str) -> None:
    """Close every tab but `keep` (a test's opened ones), and switch back to it: the session is the next
    test's browser."""
    for handle in driver.window_handles:
        if handle != keep:
            driver.switch_to.window(handle)
            driver.close()
    driver.switch_to.window(keep)


@pytest.fixture
def browser() -> Iterator[Any]:
    with headless_chromium() as driver:
        yield driver


@pytest.fixture
def screenshot_dir() -> Path:
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    return SCREENSHOT_DIR
