"""The dashboard's palettes in a real browser: every chart, strategy and status colour has a light and
a dark value, picked by the theme in use (the one chosen, else the OS's), in the CSS and in the
message map's canvas alike."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from chatapp.chat.management.commands.seed_long_conversation import conversation_seed_long
from tests.support.browser import browser, console_errors
from tests.ui.test_a11y import THEMES, _dashboard_ready, _login, _set_theme, _wait

__all__ = ["browser"]

pytestmark = [pytest.mark.browser]

CSS = Path(settings.BASE_DIR) / "static" / "dashboard" / "dashboard.css"
PALETTE = sorted(set(re.findall(r"(--(?:c|s|st)-[a-z-]+):", CSS.read_text(encoding="utf-8"))))

# Each palette colour as CSS resolves it inside the dashboard, and the colours of the map's cells.
RESOLVE = """
const dash = document.getElementById('dash');
const probe = dash.appendChild(document.createElement('span'));
const colors = {};
for (const name of arguments[0]) { probe.style.color = `var(${name})`; colors[name] = getComputedStyle(probe).color; }
probe.remove();
const canvas = document.getElementById('message-map');
const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
const cells = new Set();
for (let i = 0; i < data.length; i += 4) {
  if (data[i + 3] === 255) cells.add(`rgb(${data[i]}, ${data[i + 1]}, ${data[i + 2]})`);
}
return {colors, cells: [...cells]};
"""


def _palette(driver) -> tuple[dict[str, str], set[str]]:
    found = driver.execute_script(RESOLVE, PALETTE)
    cells = set(found["cells"])
    statuses = {color for name, color in found["colors"].items() if name.startswith("--st-")}
    assert cells and cells <= statuses, (cells, statuses)  # the map is drawn in the status palette
    return found["colors"], cells


def test_each_theme_gets_its_own_palette_in_css_and_canvas(live_server, transactional_db, browser):
    assert len(PALETTE) == 26, PALETTE
    base = live_server.url
    user = get_user_model().objects.create_user(username="palette", password="A-long-enough-pass-42")
    conversation = conversation_seed_long(owner=user, messages=60, seed=5, title="Palette")
    found = {}
    for theme, (os_scheme, chosen) in THEMES.items():
        _set_theme(browser, base, os_scheme, chosen)
        _login(browser, base, user)
        browser.get(f"{base}/c/{conversation.pk}/dashboard/")
        _wait(browser, _dashboard_ready)
        assert browser.execute_script("return document.documentElement.dataset.theme") == (chosen or os_scheme)
        found[theme] = _palette(browser)
    light, dark = found["light"], found["dark"]
    assert found["chosen-light-on-dark-os"] == light
    assert found["chosen-dark-on-light-os"] == dark
    # every colour has a dark value of its own
    assert [name for name in PALETTE if light[0][name] == dark[0][name]] == []
    assert light[1].isdisjoint(dark[1])
    assert (light[0]["--c-sent"], dark[0]["--c-sent"]) == ("rgb(91, 91, 214)", "rgb(155, 155, 255)")

    # Following the OS, live: the OS turning dark redraws the map in the dark palette.
    _set_theme(browser, base, "light", None)
    browser.get(f"{base}/c/{conversation.pk}/dashboard/")
    _wait(browser, _dashboard_ready)
    assert _palette(browser) == light
    browser.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    )
    _wait(browser, lambda d: _palette(d) == dark)
    assert console_errors(browser) == []
