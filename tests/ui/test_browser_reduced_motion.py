"""With reduced motion asked for (the system's setting, `prefers-reduced-motion: reduce`), nothing on the
chat page keeps moving. The page's rule cut every animation to 0.01 ms but let the endless ones (the
streaming reply's blinking caret, the typing dots, a summary job's spinner) repeat forever: each frame
then drew them at whatever phase the clock fell on, so the caret flickered on and off at random, faster
than it blinks without the setting."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.support.browser import console_errors
from tests.ui.test_browser import _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The animations running in the page that never end (an infinite iteration count), by name.
ENDLESS = """return document.getAnimations()
  .filter((a) => a.playState === 'running' && a.effect.getComputedTiming().endTime === Infinity)
  .map((a) => a.animationName || String(a));"""


def _reduced_motion(browser, value: str) -> None:
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [
        {"name": "prefers-reduced-motion", "value": value}]})


def test_a_streaming_reply_moves_nothing_with_reduced_motion(asgi_server, browser, fake_openai):
    _sign_up_with_model(browser, asgi_server.url, "still-reader", fake_url=fake_openai.base_url,
                        model="slow-400", name="Slow")
    browser.find_element(By.ID, "composer-input").send_keys("Tell me slowly.", Keys.ENTER)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant.is-streaming .msg-content"))
    # The page's spinners as drawn meanwhile: the typing dots of a reply not begun, a job's spinner.
    browser.execute_script(
        "const t = document.createElement('span'); t.className = 'typing'; t.id = 'still-dots';"
        "t.innerHTML = '<span></span><span></span><span></span>';"
        "const b = document.createElement('div'); b.className = 'job-banner'; b.id = 'still-banner';"
        "b.innerHTML = '<span class=\"spinner\"></span>';"
        "document.getElementById('timeline-inner').append(t, b);")
    try:
        # Without the setting the caret blinks and the spinners turn, for as long as they are shown.
        _wait(browser, lambda d: {"blink", "bounce", "spin"} <= set(d.execute_script(ENDLESS)), timeout=10)
        _reduced_motion(browser, "reduce")
        assert browser.execute_script(ENDLESS) == []
    finally:
        _reduced_motion(browser, "no-preference")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--assistant")[-1].get_attribute("data-status")
          == "complete")
    assert console_errors(browser) == []
