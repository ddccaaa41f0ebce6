"""What marks a state or the keyboard's place, in forced colours (Windows' contrast themes, which repaint
backgrounds in the system's colours and drop shadows) and out. Settings' switches are a drawn track and
thumb over an invisible checkbox, and its preference cards mark the one chosen by a filled check: both
were repainted the page's own colour, so a switch vanished (on and off alike) and every card showed the
same check, and their focus (a shadow only) was not drawn at all. The dashboard's legends lost their
colour swatches, the one link between a name and its line in the charts (which keep their colours), and
its range of turns shown and turn picked, marked by a fill, were marked no more."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from chatapp.chat.management.commands.seed_long_conversation import conversation_seed_long
from tests.support.browser import console_errors
from tests.ui.test_a11y import _login
from tests.ui.test_browser import _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BACKGROUND = "return getComputedStyle(document.querySelector(arguments[0])).backgroundColor"
OUTLINE = """const s = getComputedStyle(document.querySelector(arguments[0]));
return s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2;"""


def _forced_colours(browser, on: bool) -> None:
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [
        {"name": "forced-colors", "value": "active" if on else "none"}]})


def _colour(browser, selector: str) -> str:
    return browser.execute_script(BACKGROUND, selector)


def _tab_to(browser, element_id: str) -> None:
    """Focus the control before `element_id`'s, then Tab onto it: the keyboard's focus, as a user has it."""
    browser.execute_script(
        "const all = [...document.querySelectorAll('input, select, button, summary, a[href], textarea')];"
        "const i = all.indexOf(document.getElementById(arguments[0])); all[i - 1].focus();", element_id)
    ActionChains(browser).send_keys(Keys.TAB).perform()
    assert browser.switch_to.active_element.get_attribute("id") == element_id


@pytest.mark.parametrize("forced", [False, True], ids=["colours", "forced-colours"])
def test_settings_switches_and_preference_cards_show_their_state_and_focus(live_server, browser, forced):
    user = get_user_model().objects.create_user(username="contrast", password="A-long-enough-pass-42")
    _login(browser, live_server.url, user)
    browser.get(f"{live_server.url}/settings/")
    _forced_colours(browser, forced)
    try:
        on, off = "#id_auto_optimize + .switch-track", "#id_confirm_compaction + .switch-track"
        assert browser.find_element(By.ID, "id_auto_optimize").is_selected()
        assert not browser.find_element(By.ID, "id_confirm_compaction").is_selected()
        # Each switch's thumb stands out of its track, and on and off differ at a glance.
        for track in (on, off):
            assert _colour(browser, f"{track} .switch-thumb") != _colour(browser, track), track
        assert _colour(browser, on) != _colour(browser, off)
        # The preference chosen (Balanced, the default) is marked unlike the others.
        assert browser.find_element(By.ID, "pref-balanced").is_selected()
        chosen = _colour(browser, ".pref-card:has(#pref-balanced) .pref-card-check")
        assert chosen != _colour(browser, ".pref-card:has(#pref-fast) .pref-card-check")

        # The keyboard's place is an outline on what is drawn (the inputs themselves are invisible).
        _tab_to(browser, "id_confirm_compaction")
        _wait(browser, lambda d: d.execute_script(OUTLINE, off), timeout=5)
        _tab_to(browser, "pref-balanced")
        _wait(browser, lambda d: d.execute_script(OUTLINE, ".pref-card:has(#pref-balanced)"), timeout=5)
    finally:
        _forced_colours(browser, False)
    assert console_errors(browser) == []


def test_the_dashboard_s_legends_and_choices_show_in_forced_colours(live_server, browser):
    user = get_user_model().objects.create_user(username="legend", password="A-long-enough-pass-42")
    conversation = conversation_seed_long(owner=user, messages=20, seed=3, title="Legends")
    _login(browser, live_server.url, user)
    _forced_colours(browser, True)
    try:
        browser.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
        _wait(browser, lambda d: d.execute_script("return document.getElementById('dash').dataset.ready") == "1")
        swatches = browser.execute_script(
            "return [...document.querySelectorAll('.dash-legend li:not([hidden]) .dash-sw:not(.dash-sw--dash)')]"
            ".map((s) => getComputedStyle(s).backgroundColor);")
        page = browser.execute_script("return getComputedStyle(document.querySelector('.dash-panel')).backgroundColor")
        assert len(swatches) >= 8
        # Each line's swatch its own colour, as the charts draw it: none repainted the page's.
        assert page not in swatches and len(set(swatches)) >= 7, swatches
        # The range of turns shown (All turns, pressed) stands out of the others (its fill was repainted),
        # and so does the turn picked in the requests table.
        # (an unpressed one is transparent: the group's colour shows through it)
        assert _colour(browser, '.dash-seg-btn[aria-pressed="true"]') != _colour(browser, ".dash-seg")
        assert browser.execute_script(OUTLINE, "#records-table tr[aria-current]")
    finally:
        _forced_colours(browser, False)
    assert console_errors(browser) == []


@pytest.mark.parametrize("forced", [False, True], ids=["colours", "forced-colours"])
def test_the_slash_menu_s_chosen_option_is_outlined(live_server, browser, forced):
    """↑ ↓ choose in the "/" menu while the focus stays in the message box: the option chosen was marked by
    a pale fill only (1.1:1 on the menu, in both themes; nothing at all in forced colours), so which
    prompt Enter would put in the box could hardly be seen."""
    from chatapp.chat.prompt_services import prompt_create

    user = get_user_model().objects.create_user(username=f"slash-{int(forced)}", password="A-long-enough-pass-42")
    for command in ("review", "explain"):
        prompt_create(owner=user, command=command, content=f"Please {command}:")
    _login(browser, live_server.url, user)
    browser.get(f"{live_server.url}/c/new/")
    _forced_colours(browser, forced)
    try:
        box = browser.find_element(By.ID, "composer-input")
        box.send_keys("/")
        _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '.slash-option[aria-selected="true"]'))
        box.send_keys(Keys.ARROW_DOWN)
        chosen = '.slash-option[aria-selected="true"]'
        _wait(browser, lambda d: d.execute_script(OUTLINE, chosen), timeout=5)
        colour = browser.execute_script(f"return getComputedStyle(document.querySelector('{chosen}')).outlineColor")
        assert colour != browser.execute_script(BACKGROUND, ".slash-menu")
        # one option marked: the others carry no outline
        assert not browser.execute_script(OUTLINE, '.slash-option[aria-selected="false"]')
    finally:
        _forced_colours(browser, False)
    assert console_errors(browser) == []
