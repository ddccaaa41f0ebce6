"""Settings' switches show their state to a low-vision user, in both themes (WCAG 1.4.11, non-text
contrast: 3:1 for what tells a control's state). A switch turned off was a light grey track (#d4d4da on
white, 1.5:1; #3a3b44 on the dark theme's #212227, 1.4:1): the thumb's side, which is its state, could
not be told, light thumb on a track hardly drawn; on, the dark theme's white thumb was 2.95:1 on its
lavender track. axe checks text only."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.support.browser import console_errors
from tests.ui.test_a11y import _login, _set_theme

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The contrast ratio of two elements' backgrounds (`arguments[0]`, `arguments[1]`: CSS selectors); a
# transparent one takes the colour of the nearest ancestor that has one.
CONTRAST = """
const colour = (node) => {
  for (; node; node = node.parentElement) {
    const c = getComputedStyle(node).backgroundColor.match(/[\\d.]+/g).map(Number);
    if (c.length < 4 || c[3] === 1) return c.slice(0, 3);
  }
  return [255, 255, 255];
};
const lum = (rgb) => {
  const [r, g, b] = rgb.map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
};
const [a, b] = [lum(colour(document.querySelector(arguments[0]))), lum(colour(document.querySelector(arguments[1])))];
return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_a_switch_s_state_stands_out_in_both_themes(live_server, browser, scheme):
    user = get_user_model().objects.create_user(username=f"switch-{scheme}", password="A-long-enough-pass-42")
    _set_theme(browser, live_server.url, scheme, None)
    _login(browser, live_server.url, user)
    browser.get(f"{live_server.url}/settings/")
    on, off = "#id_auto_optimize + .switch-track", "#id_confirm_compaction + .switch-track"
    for track in (on, off):
        # The track against the section it sits in, and the thumb against the track.
        assert browser.execute_script(CONTRAST, track, ".switch-list") >= 3, track
        assert browser.execute_script(CONTRAST, f"{track} .switch-thumb", track) >= 3, track
    assert console_errors(browser) == []
