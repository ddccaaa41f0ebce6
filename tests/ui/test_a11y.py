"""Accessibility with axe-core (issue 13, item 5): every page, in both themes, has no violation of
the rules a screen-reader or low-vision user hits first (contrast, names of controls and links,
labels, image text, ARIA).

axe-core comes from npm, pinned in tests/a11y/package-lock.json (`npm ci --prefix tests/a11y`), and is
loaded into the page by Selenium (a debugging channel the page's CSP does not govern), never served
by the app. Without it the test skips, unless REQUIRE_BROWSER=1, where it fails.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from selenium.webdriver.common.keys import Keys

from chatapp.chat.branch_services import conversation_path_thread
from chatapp.chat.folder_services import conversation_folder_set, folder_create
from chatapp.chat.management.commands.seed_long_conversation import conversation_seed_long
from chatapp.chat.models import Message
from tests.support.browser import browser, console_errors

__all__ = ["browser"]

pytestmark = [pytest.mark.browser]

AXE = Path(settings.BASE_DIR) / "tests" / "a11y" / "node_modules" / "axe-core" / "axe.min.js"

# The rules this test holds every page to (axe rule ids; every `aria-*` rule too). label-content-name-mismatch:
# a control's name holds the words it shows, so that a voice-control user can say them to press it (the
# gauge showed "12.3k / 128k" and was named "Context: the next request uses 12,345 of 128,000 tokens").
RULES = {"color-contrast", "label", "button-name", "link-name", "image-alt", "scrollable-region-focusable",
         "label-content-name-mismatch"}

# The WCAG 2.0, 2.1 and 2.2 A and AA rules axe runs (2.1's Label in Name among them).
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]

# (OS colour scheme, the theme chosen in the page: None follows the OS).
THEMES = {
    "light": ("light", None),
    "dark": ("dark", None),
    "chosen-dark-on-light-os": ("light", "dark"),
    "chosen-light-on-dark-os": ("dark", "light"),
}


def _axe_source() -> str:
    if not AXE.exists():
        reason = f"{AXE} missing: run `npm ci --prefix tests/a11y`"
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 and {reason}")
        pytest.skip(reason)
    return AXE.read_text(encoding="utf-8")


def _held(rule: str) -> bool:
    return rule in RULES or rule.startswith("aria-")


def _wait(driver, condition, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition(driver):
        assert time.monotonic() < deadline, f"timed out on {driver.current_url}"
        time.sleep(0.1)


def _run_axe(driver, source: str) -> list[dict]:
    # Colours still changing (a page's theme applied as it loads, a hover) are read mid-way: contrast
    # then failed about one run in eight. Transitions end; a spinner's animation does not, and is left.
    _wait(driver, lambda d: d.execute_script(
        "return !document.getAnimations().some((a) => a instanceof CSSTransition)"))
    driver.execute_script(source)
    result = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {runOnly: arguments[0]})"
        ".then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,"
        "  nodes: v.nodes.map(n => ({target: n.target.join(' '), html: n.html.slice(0, 160),"
        "  why: n.failureSummary}))}))))"
        ".catch(e => done({error: String(e)}));",
        TAGS,
    )
    assert not isinstance(result, dict), result
    return result


def _login(driver, base: str, user) -> None:
    client = Client()
    client.force_login(user)
    driver.get(base + "/accounts/login/")
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    driver.add_cookie({"name": settings.SESSION_COOKIE_NAME, "value": session, "path": "/"})


def _set_theme(driver, base: str, os_scheme: str, chosen: str | None) -> None:
    driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": os_scheme}]}
    )
    driver.get(base + "/accounts/login/")
    if chosen is None:
        driver.execute_script("localStorage.removeItem('theme')")
    else:
        driver.execute_script("localStorage.setItem('theme', arguments[0])", chosen)


def _dashboard_ready(driver) -> bool:
    ready = driver.execute_script("const d = document.getElementById('dash'); return d ? d.dataset.ready || '' : ''")
    assert ready != "error"
    return ready == "1"


@pytest.mark.parametrize("theme", list(THEMES))
def test_every_page_passes_axe(live_server, transactional_db, browser, theme):
    source = _axe_source()
    driver = browser
    os_scheme, chosen = THEMES[theme]
    base = live_server.url
    user = get_user_model().objects.create_user(username="reader", password="A-long-enough-pass-42")
    conversation = conversation_seed_long(owner=user, messages=120, seed=5, title="Invoices and SQL")
    assert Message.objects.filter(conversation=conversation, kind=Message.Kind.SUMMARY).exists()
    # The newest reply holds a heading (an h3 under its message's h2), and a code block and a table wider
    # than the reply: they scroll sideways.
    wide = "x = " + " + ".join(f"value_{i}" for i in range(60))
    columns = [f"column {i}" for i in range(14)]
    for role, content in (("user", "Show me wide things"), ("assistant", (
            f"# Wide things\n\n```python\n{wide}\n```\n\n"
            f"| {' | '.join(columns)} |\n|{'---|' * 14}\n| {' | '.join(columns)} |"))):
        Message.objects.create(conversation=conversation, role=role, content=content, token_count=100,
                               char_count=len(content))
    conversation_path_thread(conversation_id=conversation.pk)
    # The sidebar's folders: one holding the chat, one empty.
    conversation_folder_set(conversation=conversation, folder=folder_create(owner=user, name="Accounts"))
    folder_create(owner=user, name="Empty one")
    _set_theme(driver, base, os_scheme, chosen)

    pages = {}
    driver.get(base + "/accounts/login/")
    _wait(driver, lambda d: d.find_elements("css selector", "form"))
    pages["login"] = _run_axe(driver, source)

    _login(driver, base, user)
    driver.get(f"{base}/c/{conversation.pk}/")
    _wait(driver, lambda d: "/" in d.find_element("id", "gauge-text").text)
    _wait(driver, lambda d: d.find_elements("css selector", ".summary-marker, [data-kind='summary']"))
    pages["chat"] = _run_axe(driver, source)
    driver.find_element("css selector", '.sidebar [data-action="shortcuts"]').click()
    _wait(driver, lambda d: d.find_element("id", "shortcuts-dialog").get_attribute("open") is not None)
    pages["chat-shortcuts"] = _run_axe(driver, source)
    driver.find_element("css selector", "body").send_keys(Keys.ESCAPE)
    _wait(driver, lambda d: d.find_element("id", "shortcuts-dialog").get_attribute("open") is None)
    # A danger button (the dark theme's white on light red was 2.78:1)
    driver.find_element("css selector", '.conv-item.is-current [data-action="delete-conversation"]').click()
    _wait(driver, lambda d: d.find_element("id", "confirm-dialog").get_attribute("open") is not None)
    pages["chat-delete-confirm"] = _run_axe(driver, source)
    driver.find_element("css selector", "#confirm-dialog [value=cancel], #confirm-dialog .btn--ghost").click()
    _wait(driver, lambda d: d.find_element("id", "confirm-dialog").get_attribute("open") is None)
    driver.find_element("id", "conv-menu-btn").click()
    driver.find_element("css selector", '[data-action="move-to-folder"]').click()
    _wait(driver, lambda d: d.find_elements("css selector", "#folder-move-dialog[open] .folder-choice"))
    pages["chat-move-to-folder"] = _run_axe(driver, source)
    driver.find_element("css selector", "body").send_keys(Keys.ESCAPE)

    driver.get(f"{base}/settings/")
    pages["settings"] = _run_axe(driver, source)

    driver.get(f"{base}/c/{conversation.pk}/dashboard/")
    _wait(driver, _dashboard_ready)
    pages["dashboard"] = _run_axe(driver, source)

    driver.get(f"{base}/dashboard/")  # drawn by the server
    _wait(driver, lambda d: d.find_elements("id", "main"))
    pages["overview"] = _run_axe(driver, source)

    driver.get(f"{base}/accounts/delete/")  # a danger button; a GET only asks for the password
    _wait(driver, lambda d: d.find_elements("css selector", "form"))
    pages["account-delete"] = _run_axe(driver, source)

    driver.get(f"{base}/accounts/logout/")  # a GET asks (a POST signs out)
    _wait(driver, lambda d: d.find_elements("css selector", "form"))
    pages["logout"] = _run_axe(driver, source)

    failures = {page: [v for v in found if _held(v["id"])] for page, found in pages.items()}
    counts = {page: len(found) for page, found in failures.items()}
    report = json.dumps({page: found for page, found in failures.items() if found}, indent=1)
    out = Path(settings.BASE_DIR) / "var" / "a11y"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{theme}.json").write_text(json.dumps(pages, indent=1), encoding="utf-8")
    print(f"axe ({theme}): held-rule violations per page {counts}; all WCAG A/AA violations "
          f"{ {page: [v['id'] for v in found] for page, found in pages.items()} }")
    assert not any(failures.values()), f"axe violations ({theme}), per page {counts}:\n{report}"
    # the theme in use: the one chosen, else the OS's
    assert driver.execute_script("return document.documentElement.dataset.theme") == (chosen or os_scheme)
    dark = driver.execute_script("return getComputedStyle(document.body).backgroundColor") == "rgb(23, 24, 28)"
    assert dark == ((chosen or os_scheme) == "dark")
    assert [e for e in console_errors(driver) if "favicon" not in e["message"]] == []


def _open(driver, opener: str, dialog: str) -> None:
    """Click `opener` (a CSS selector) and wait for the <dialog id=`dialog`> it opens."""
    driver.find_element("css selector", opener).click()
    _wait(driver, lambda d: d.find_element("id", dialog).get_attribute("open") is not None)


def _escape(driver) -> None:
    driver.switch_to.active_element.send_keys(Keys.ESCAPE)
    _wait(driver, lambda d: not d.find_elements("css selector", "dialog[open]"))


def _refused(driver, source: str, field: str, shown: str) -> list[dict]:
    """A wrong password typed in `field` and sent: the violations of the page refusing it (`shown` drawn)."""
    driver.find_element("id", field).send_keys("not the password", Keys.ENTER)
    _wait(driver, lambda d: d.find_elements("css selector", shown))
    return _run_axe(driver, source)


def _chat_states(driver, source: str, pages: dict, *, phone: bool) -> None:
    """The chat page's menus, dialogs and popovers, each open in turn (`pages` gets their violations)."""
    if phone:
        driver.find_element("css selector", '.topbar [data-action="toggle-sidebar"]').click()
        _wait(driver, lambda d: d.find_element("id", "sidebar").is_displayed())
        pages["chat-drawer"] = _run_axe(driver, source)
        driver.find_element("css selector", '.sidebar [data-action="close-sidebar"]').click()
        _wait(driver, lambda d: not d.find_element("id", "sidebar").is_displayed())
    driver.find_element("id", "conv-menu-btn").click()
    _wait(driver, lambda d: d.find_element("id", "conv-menu").is_displayed())
    pages["chat-menu"] = _run_axe(driver, source)
    _open(driver, '#conv-menu [data-action="share-conversation"]', "share-dialog")
    pages["share-dialog"] = _run_axe(driver, source)
    driver.find_element("css selector", '[data-action="create-share-link"]').click()
    _wait(driver, lambda d: d.find_element("id", "share-link").get_attribute("value"))
    pages["share-dialog-link"] = _run_axe(driver, source)
    _escape(driver)
    driver.find_element("id", "conv-menu-btn").click()
    _open(driver, '#conv-menu [data-action="edit-system-prompt"]', "system-prompt-dialog")
    pages["system-prompt"] = _run_axe(driver, source)
    _escape(driver)
    driver.find_element("id", "gauge").click()
    _wait(driver, lambda d: d.find_element("id", "gauge-pop").is_displayed())
    pages["gauge-details"] = _run_axe(driver, source)
    driver.find_element("id", "gauge").click()
    driver.find_element("css selector", '.msg--assistant:last-child [aria-haspopup="menu"]').click()
    _wait(driver, lambda d: d.find_elements("css selector", ".msg .menu:not([hidden])"))
    pages["message-menu"] = _run_axe(driver, source)
    driver.switch_to.active_element.send_keys(Keys.ESCAPE)
    box = driver.find_element("id", "composer-input")
    box.send_keys("/")
    _wait(driver, lambda d: d.find_element("id", "slash-menu").is_displayed())
    pages["slash-menu"] = _run_axe(driver, source)
    box.send_keys(Keys.BACKSPACE)
    if not phone:
        _open(driver, "#new-folder", "folder-name-dialog")
        pages["new-folder"] = _run_axe(driver, source)
        _escape(driver)
        driver.find_element("id", "chat-search").send_keys("budget")
        _wait(driver, lambda d: d.find_elements("css selector", ".conv-hit"))
        pages["search-hits"] = _run_axe(driver, source)


# (theme, window width): dark and light at a laptop's width, dark at a phone's.
STATES = {"light-laptop": ("light", 1366), "dark-laptop": ("dark", 1366), "dark-phone": ("dark", 390)}


@pytest.mark.parametrize("case", list(STATES))
def test_every_dialog_menu_error_and_public_page_passes_axe(live_server, transactional_db, case):
    """The pages and states the test above does not open: sign-up, refused forms, the public share page and
    the missing-link and 404 pages, a new chat, the chat's menus, dialogs and popovers, the prompt library,
    shares, archive and tokens in Settings, a refused model, the password pages; at a phone's width too."""
    from chatapp.chat.prompt_services import prompt_create
    from chatapp.chat.services import conversation_archive_set
    from chatapp.chat.share_services import conversation_share_create
    from chatapp.chat.token_services import api_token_create
    from chatapp.providers.models import LLMConfig
    from tests.support.browser import headless_chromium

    source = _axe_source()
    scheme, width = STATES[case]
    base = live_server.url
    user = get_user_model().objects.create_user(username="reader", password="A-long-enough-pass-42")
    conversation = conversation_seed_long(owner=user, messages=30, seed=5, title="Invoices and SQL")
    conversation_path_thread(conversation_id=conversation.pk)
    share = conversation_share_create(owner=user, conversation=conversation)
    prompt_create(owner=user, command="review", title="Review my code", content="Review {{CLIPBOARD}}")
    archived = conversation_seed_long(owner=user, messages=4, seed=6, title="Old plans")
    conversation_archive_set(conversation=archived, archived=True)
    api_token_create(user=get_user_model().objects.get(pk=user.pk), name="backup script", made_in="settings")
    LLMConfig.objects.create(owner=user, name="Local", base_url="http://127.0.0.1:9/v1", model="llama3",
                             context_window=8192, is_default=True)

    pages: dict[str, list[dict]] = {}
    with headless_chromium(size=(width, 900)) as driver:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600})
        _set_theme(driver, base, scheme, None)
        driver.get(base + "/accounts/signup/")
        pages["signup"] = _run_axe(driver, source)
        driver.find_element("css selector", ".auth-form button[type=submit]").click()
        _wait(driver, lambda d: d.find_elements("css selector", ".field.has-error"))
        pages["signup-refused"] = _run_axe(driver, source)
        driver.get(base + "/accounts/login/")
        driver.find_element("id", "id_username").send_keys("reader")
        pages["login-refused"] = _refused(driver, source, "id_password", ".form-errors")
        driver.get(f"{base}/s/{share.token}/")
        pages["share-page"] = _run_axe(driver, source)
        driver.get(f"{base}/s/no-such-link/")
        pages["share-missing"] = _run_axe(driver, source)
        driver.get(f"{base}/no/such/page/")
        pages["404"] = _run_axe(driver, source)

        _login(driver, base, user)
        driver.get(f"{base}/c/new/")
        _wait(driver, lambda d: d.find_element("id", "empty-state").is_displayed())
        pages["new-chat"] = _run_axe(driver, source)
        driver.get(f"{base}/c/{conversation.pk}/")
        _wait(driver, lambda d: "/" in d.find_element("id", "gauge-text").text)
        _chat_states(driver, source, pages, phone=width < 600)

        driver.get(f"{base}/settings/")
        driver.execute_script("document.querySelectorAll('details').forEach((d) => { d.open = true; })")
        pages["settings-everything-open"] = _run_axe(driver, source)
        driver.find_element("css selector", "#add-config button[type=submit]").click()
        _wait(driver, lambda d: d.find_elements("css selector", "#add-config .field.has-error"))
        pages["settings-model-refused"] = _run_axe(driver, source)
        driver.find_element("css selector", f'#archived-{archived.pk} [aria-label^="Delete"]').click()
        _wait(driver, lambda d: d.find_element("id", "confirm-dialog").get_attribute("open") is not None)
        pages["settings-confirm"] = _run_axe(driver, source)
        _escape(driver)
        driver.get(f"{base}/accounts/password/")
        pages["password-refused"] = _refused(driver, source, "id_old_password", ".field.has-error")
        driver.get(f"{base}/accounts/password/done/")
        pages["password-changed"] = _run_axe(driver, source)
        driver.get(f"{base}/dashboard/")
        _wait(driver, lambda d: d.find_elements("id", "main"))
        pages["overview"] = _run_axe(driver, source)
        errors = [e for e in console_errors(driver) if "favicon" not in e["message"] and " 40" not in e["message"]]

    failures = {page: [v for v in found if _held(v["id"])] for page, found in pages.items()}
    report = json.dumps({page: found for page, found in failures.items() if found}, indent=1)
    assert not any(failures.values()), f"axe violations ({case}):\n{report}"
    assert errors == []
