"""The dashboard in headless Chromium: charts and message map drawn from the API's data; screenshots."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from chatapp.chat.management.commands.seed_long_conversation import conversation_seed_long
from chatapp.chat.models import Message, OptimizationRecord
from tests.dashboard.factories import make_conversation, make_recall_turns, make_record, make_summary
from tests.support.browser import SCREENSHOT_DIR as SCREENSHOTS
from tests.support.browser import browser, console_errors

__all__ = ["browser"]

pytestmark = [pytest.mark.browser]


def _login(driver, live_server, user) -> Client:
    client = Client()
    client.force_login(user)
    driver.get(live_server.url + "/accounts/login/")
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    driver.add_cookie({"name": settings.SESSION_COOKIE_NAME, "value": session, "path": "/"})
    return client


def _wait_ready(driver, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = driver.execute_script("return document.getElementById('dash').dataset.ready || ''")
        if ready == "1":
            return
        assert ready != "error", driver.find_element("css selector", "#main").text[:500]
        time.sleep(0.1)
    raise AssertionError("the dashboard did not finish drawing")


def _points(driver, series: str) -> int:
    return driver.execute_script(
        "const p = document.querySelector(`#dash polyline[data-series='${arguments[0]}']`);"
        "return p ? p.getAttribute('points').trim().split(/\\s+/).length : -1;",
        series,
    )


def _full_page_screenshot(driver, width: int, path: Path) -> None:
    driver.set_window_size(width, 900)
    time.sleep(0.4)  # the charts redraw on resize (debounced)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(height + 140, 7000))
    time.sleep(0.4)
    driver.save_screenshot(str(path))


def _wait_text(element, text: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while text not in element.text:
        assert time.monotonic() < deadline, f"{text!r} not shown; got {element.text[-300:]!r}"
        time.sleep(0.05)


def test_the_overview_on_a_phone_keeps_each_chats_title_readable(live_server, transactional_db, browser):
    user = get_user_model().objects.create_user(username="phone-overview")
    for title in ("Priced long chat about tents", "Another long priced chat"):
        conversation = make_conversation(owner=user, title=title)
        for turn in range(3):
            make_record(conversation=conversation, tokens_full=90_000 + turn, tokens_sent=4_000,
                        strategy="truncate", triggered=True)
    _login(browser, live_server, user)
    # a real 375 px viewport (a headless window does not shrink below 500)
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": 375, "height": 800, "deviceScaleFactor": 1, "mobile": True})
    try:
        browser.get(f"{live_server.url}/dashboard/")
        widths = browser.execute_script(
            "return [...document.querySelectorAll('#top-list a')].map(a => a.getBoundingClientRect().width)")
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    assert len(widths) == 2 and min(widths) > 150, widths  # the figures beside them left them 0 px


def test_a_short_conversation_draws_inside_its_charts(live_server, transactional_db, browser):
    """Six turns, the first and last of them cuts: each turn's mark is a wide cell, and the ones at
    either end stop at the plot's edges (the last ran past the card); the axis' "turn" stays clear
    of the first tick's label."""
    user = get_user_model().objects.create_user(username="short-viewer")
    conversation = make_conversation(owner=user, title="Six turns")
    for turn in range(6):
        cut = turn in (0, 5)
        make_record(conversation=conversation, tokens_full=900 + 100 * turn, tokens_sent=700 if cut else 900,
                    strategy="truncate" if cut else "none", triggered=cut)
    _login(browser, live_server, user)
    browser.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
    _wait_ready(browser)
    outside = browser.execute_script("""
        // the plot runs from the left margin (44 or 56 px) to 14 px before the right edge (util.chartFrame)
        const svg = document.querySelector('#chart-strategy svg'), right = svg.viewBox.baseVal.width - 14;
        const marks = [...svg.querySelectorAll('rect[data-strategy]')];
        return {marks: marks.length, over: marks.filter((r) => r.x.baseVal.value + r.width.baseVal.value
                  > right + 0.01 || r.x.baseVal.value < 44 - 0.01).length};
    """)
    assert outside == {"marks": 2, "over": 0}
    clear = browser.execute_script("""
        const texts = [...document.querySelectorAll('#chart-tokens g.axis text')];
        const label = texts.find((t) => t.textContent === 'turn').getBBox();
        return texts.filter((t) => t.textContent !== 'turn').every((t) => {
          const b = t.getBBox();
          return b.x > label.x + label.width || b.x + b.width < label.x || b.y > label.y + label.height
            || b.y + b.height < label.y;
        });
    """)
    assert clear
    # the turn box: 0 or less is the first turn, not the latest
    box = browser.find_element("id", "turn-input")
    for typed, shown in (("0", "1"), ("-3", "1"), ("4", "4")):
        browser.execute_script("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('change'))",
                               box, typed)
        WebDriverWait(browser, 10).until(lambda d, shown=shown: box.get_attribute("value") == shown)
    assert console_errors(browser) == []


def test_the_requests_table_pages_through_every_turn_once(live_server, transactional_db, browser):
    user = get_user_model().objects.create_user(username="pager")
    conversation = make_conversation(owner=user, title="Twenty turns")
    for turn in range(20):
        make_record(conversation=conversation, tokens_full=900 + turn, tokens_sent=900 + turn)
    _login(browser, live_server, user)
    browser.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
    _wait_ready(browser)

    def page(d) -> tuple[str, list[int]]:
        # label and rows read in one script: the table is redrawn whole between two reads otherwise
        label, turns = d.execute_script(
            "return [document.querySelector('[data-page-label]').textContent,"
            " [...document.querySelectorAll('#records-table tbody tr')].map((r) => Number(r.dataset.turn))]")
        return label.replace("\N{EN DASH}", "-"), sorted(turns)

    WebDriverWait(browser, 10).until(lambda d: page(d) == ("6-20 of 20", list(range(6, 21))))
    assert browser.find_element("css selector", "[data-page-label]").get_attribute("role") == "status"
    older = browser.find_element("css selector", "[data-page=older]")
    older.send_keys(Keys.ENTER)  # from the keyboard
    # what is left, not 1-15 again
    WebDriverWait(browser, 10).until(lambda d: page(d) == ("1-5 of 20", list(range(1, 6))))
    # the oldest page disabled the button pressed: focus went to the other, not to the page
    WebDriverWait(browser, 10).until(lambda d: d.switch_to.active_element.get_attribute("data-page") == "newer")
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    WebDriverWait(browser, 10).until(lambda d: page(d) == ("6-20 of 20", list(range(6, 21))))
    selected = browser.find_elements("css selector", "#records-table tbody tr[aria-current=true]")
    assert [int(tr.get_attribute("data-turn")) for tr in selected] == [20]  # the latest turn, as the box says
    assert console_errors(browser) == []


def test_editing_a_summary_from_the_keyboard_keeps_the_focus(live_server, transactional_db, browser):
    user = get_user_model().objects.create_user(username="summary-keys")
    conversation = make_conversation(owner=user, title="Summarized")
    chat = [Message.objects.create(conversation=conversation, role=r, content=f"{r} {i}")
            for i in range(3) for r in ("user", "assistant")]
    summary = make_summary(conversation=conversation, covers=(chat[0], chat[3]), covered=4,
                           content="[Conversation summary — covers messages 1-4]\n\nThe first part.")
    make_record(conversation=conversation, tokens_full=900, tokens_sent=600, strategy="summarize", triggered=True)
    _login(browser, live_server, user)
    browser.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
    _wait_ready(browser)
    item = WebDriverWait(browser, 10).until(lambda d: d.find_element("css selector", f"[data-summary='{summary.pk}']"))
    edit = item.find_element("xpath", ".//button[text()='Edit']")
    edit.send_keys(Keys.ENTER)
    # the editor's text has the focus (it stayed on a disabled Edit button: the page's)
    WebDriverWait(browser, 10).until(lambda d: d.switch_to.active_element.tag_name == "textarea")
    item.find_element("xpath", ".//button[text()='Cancel']").send_keys(Keys.ENTER)
    assert browser.switch_to.active_element == edit
    edit.send_keys(Keys.ENTER)
    area = WebDriverWait(browser, 10).until(lambda d: item.find_element("css selector", "textarea"))
    area.send_keys(" And a correction.")
    item.find_element("xpath", ".//button[text()='Save']").send_keys(Keys.ENTER)
    edited = WebDriverWait(browser, 10).until(lambda d: Message.objects.filter(edited_from=summary).first())
    WebDriverWait(browser, 10).until(
        lambda d: d.switch_to.active_element.get_attribute("data-summary") == str(edited.pk))
    assert console_errors(browser) == []


def test_dashboard_draws_charts_and_map_from_the_data(live_server, transactional_db, browser):
    driver = browser
    user = get_user_model().objects.create_user(username="viewer")
    conversation = conversation_seed_long(owner=user, messages=4000, seed=9)
    client = _login(driver, live_server, user)
    base = f"/api/dashboard/conversations/{conversation.pk}/"
    series = client.get(base + "series/").json()
    mp = client.get(base + "map/").json()
    assert series["count"] == 2000

    driver.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
    _wait_ready(driver)

    # Chart 1: one point per turn for the full history and the sent tokens; the start marker.
    assert _points(driver, "tokens_full") == series["count"]
    assert _points(driver, "tokens_sent") == series["count"]
    start = driver.execute_script("return document.querySelector('#chart-tokens .opt-start').dataset.turn")
    assert int(start) == series["first_optimized_index"] + 1
    label = driver.find_element("css selector", "#chart-tokens .opt-label").text
    assert label == f"Optimization starts · turn {series['first_optimized_index'] + 1}"

    # Chart 2: one mark per truncate/summarize turn, and the cumulative savings line.
    decisions = sum(1 for code in series["strategy"] if series["strategy_codes"][code] in ("truncate", "summarize"))
    assert decisions > 0
    assert driver.execute_script("return document.querySelectorAll('#chart-strategy rect[data-strategy]').length") \
        == decisions
    assert _points(driver, "saved_cumulative") == series["count"]

    # The money card adds the prompt-cache estimate computed with the series.
    cached = driver.find_element("css selector", "[data-card=money] [data-cache-estimate]")
    assert int(cached.get_attribute("data-cache-estimate")) == series["prompt_cache_estimate"]["cached_tokens"] > 0

    # The usage card adds the chat's gauge for the next request.
    gauge = client.get(f"/api/conversations/{conversation.pk}/context/").json()
    nxt = driver.find_element("css selector", "[data-card=usage] [data-next-tokens]")
    assert int(nxt.get_attribute("data-next-tokens")) == gauge["tokens"]

    # Message map: one cell per message, and each run's first cell painted in its status colour.
    canvas = driver.find_element("id", "message-map")
    assert int(canvas.get_attribute("data-cells")) == mp["count"]
    assert int(canvas.get_attribute("data-runs")) == len(mp["status_runs"])
    samples = []
    index = 0
    for code, length in mp["status_runs"]:
        samples.append((index, mp["statuses"][code]))
        index += length
    probes = driver.execute_script(
        """
        const c = document.getElementById('message-map');
        const size = +c.dataset.cellSize, gap = +c.dataset.gap, perRow = +c.dataset.perRow;
        const ctx = c.getContext('2d'), dpr = c.width / c.clientWidth;
        // the status colour as CSS resolves it in the dashboard (a palette colour is a light-dark())
        const probe = document.getElementById('dash').appendChild(document.createElement('span'));
        const found = arguments[0].map(([i, status]) => {
          const x = (i % perRow) * (size + gap) + size / 2, y = Math.floor(i / perRow) * (size + gap) + size / 2;
          const px = ctx.getImageData(Math.floor(x * dpr), Math.floor(y * dpr), 1, 1).data;
          probe.style.color = `var(--st-${status})`;
          return [status, getComputedStyle(probe).color, `rgb(${px[0]}, ${px[1]}, ${px[2]})`];
        });
        probe.remove();
        return found;
        """,
        samples[:40],
    )
    assert len(probes) >= 3
    for status, color, pixel in probes:
        assert pixel == color, status
    legend_counts = driver.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#map-legend li')]"
        ".map(li => [li.dataset.status, li.querySelector('[data-count]').textContent.replace(/\\D/g, '')]));"
    )
    for status, count in mp["status_counts"].items():
        if count:
            assert int(legend_counts[status]) == count

    # What the model saw: the latest turn's messages, in the record's order.
    latest = OptimizationRecord.objects.filter(conversation=conversation).order_by("-id").first()
    origins = driver.execute_script(
        "return [...document.querySelectorAll('#sent-list > li')].map(li => li.dataset.origin)"
    )
    assert origins == [e["origin"] for e in latest.sent]

    # Picking another turn from the requests table loads that record.
    rows = driver.find_elements("css selector", "#records-table tbody tr")
    assert len(rows) == 15
    target_turn = int(rows[3].get_attribute("data-turn"))
    target_record = int(rows[3].get_attribute("data-record"))
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", rows[3])
    rows[3].click()
    deadline = time.monotonic() + 10
    while driver.execute_script("return +document.getElementById('sent-list')?.dataset.record") != target_record:
        assert time.monotonic() < deadline, "the picked turn did not load"
        time.sleep(0.05)
    assert int(driver.find_element("id", "turn-input").get_attribute("value")) == target_turn
    picked = OptimizationRecord.objects.get(pk=target_record)
    assert driver.execute_script("return +document.getElementById('sent-list').dataset.count") == len(picked.sent)

    # Zooming to the start of optimization redraws the charts over that range only.
    button = driver.find_element("css selector", "[data-range=start]")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
    button.click()
    first = series["first_optimized_index"]
    span = max(60, first * 2)
    lo = max(0, first - span // 2)
    assert _points(driver, "tokens_sent") == min(series["count"], lo + span + 1) - lo
    driver.find_element("css selector", "[data-range=all]").click()
    assert _points(driver, "tokens_sent") == series["count"]

    # Summaries: edit the newest one's text, then discard it, through the summaries API.
    def discarded_on_card(d) -> int:
        return int(re.search(r"(\d+) discarded", d.find_element("css selector", "[data-card=summaries]").text)[1])

    discarded_before = discarded_on_card(driver)
    newest = Message.objects.filter(conversation=conversation, kind="summary").order_by("-id").first()
    item = driver.find_element("css selector", f"[data-summary='{newest.pk}']")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", item)
    item.find_element("xpath", ".//button[text()='Edit']").click()
    area = item.find_element("css selector", "textarea")
    area.clear()
    area.send_keys("Edited in the browser test: decisions so far.")
    item.find_element("xpath", ".//button[text()='Save']").click()
    # An edit is a new summary version; the old one is kept, discarded, for the records that sent it.
    deadline = time.monotonic() + 10
    while not Message.objects.filter(edited_from=newest).exists():
        assert time.monotonic() < deadline, "the edit was not saved"
        time.sleep(0.05)
    edited = Message.objects.get(edited_from=newest)
    # the text is the user's; the header line is rebuilt with its new character count
    assert edited.content.endswith("\n\nEdited in the browser test: decisions so far.")
    header = edited.content.split("\n", 1)[0]
    assert header.endswith(f" → {len('Edited in the browser test: decisions so far.')} characters]")
    newest.refresh_from_db()
    assert newest.discarded and "Edited in the browser test" not in newest.content
    # The list now shows the new version (in use) above the replaced one.
    item = WebDriverWait(driver, 10).until(
        lambda d: d.find_element("css selector", f"[data-summary='{edited.pk}']")
    )
    _wait_text(item, "Saved.")
    ordinal = Message.objects.filter(conversation=conversation, kind="summary", id__lte=newest.pk).count()
    assert "Edited in the browser test" in item.text and f"edit of summary {ordinal}" in item.text
    # one numbering and one character count: the card says what the summary's own header says
    covers = header.split("covers messages ", 1)[1].split(",", 1)[0]
    assert f"Covers messages {covers}" in item.text
    assert f"→ {len('Edited in the browser test: decisions so far.')} characters" in item.text
    assert "is-discarded" in driver.find_element("css selector", f"[data-summary='{newest.pk}']").get_attribute("class")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", item)
    item.find_element("xpath", ".//button[text()='Discard']").click()
    dialog = driver.find_element("id", "confirm-dialog")
    assert dialog.is_displayed()
    dialog.find_element("id", "confirm-ok").click()
    WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: "discarded" in d.find_element("css selector", f"[data-summary='{edited.pk}'] [data-state]").text
    )
    edited.refresh_from_db()
    assert edited.discarded
    # The headline cards follow without a reload: the summaries card counts the discarded ones as
    # the server does now.
    now = client.get(base).json()["summaries"]
    # the edited summary and its edit: two set aside (made - live counted none for the edit)
    assert now["discarded"] == discarded_before + 2
    assert now["discarded"] == Message.objects.filter(conversation=conversation, kind="summary", discarded=True).count()
    WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: discarded_on_card(d) == now["discarded"]
    )
    # The redrawn usage card asks for the next request's figure after the cards are in: waited for, as
    # the count above (a loaded machine answered it after the count was already there).
    WebDriverWait(driver, 10).until(lambda d: d.find_elements("css selector", "[data-card=usage] [data-next-tokens]"))

    # The page CSP allows everything the dashboard runs: nothing was refused.
    assert console_errors(driver) == []

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    _full_page_screenshot(driver, 1366, SCREENSHOTS / "dashboard-laptop.png")
    _full_page_screenshot(driver, 390, SCREENSHOTS / "dashboard-phone.png")
    # The map redraws for the phone width: still one cell per message.
    assert int(driver.find_element("id", "message-map").get_attribute("data-cells")) == mp["count"]
    dark = {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", dark)
    driver.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
    _wait_ready(driver)
    _full_page_screenshot(driver, 1366, SCREENSHOTS / "dashboard-laptop-dark.png")
    driver.get(f"{live_server.url}/dashboard/")
    assert conversation.title in driver.find_element("id", "top-list").text
    _full_page_screenshot(driver, 1366, SCREENSHOTS / "dashboard-overview-dark.png")
    assert console_errors(driver) == []
    for name in ("dashboard-laptop.png", "dashboard-phone.png", "dashboard-laptop-dark.png"):
        assert (SCREENSHOTS / name).stat().st_size > 10_000


def test_dashboard_shows_a_recall_block_apart(live_server, transactional_db, browser):
    """The latest turn sent a recall block: its own badge, its terms, its quotes linked into the chat;
    the map legend counts the quoted messages as recalled; the tokens chart draws the recall line."""
    driver = browser
    user = get_user_model().objects.create_user(username="recaller")
    turns = make_recall_turns(owner=user)
    _login(driver, live_server, user)

    driver.get(f"{live_server.url}/c/{turns.conversation.pk}/dashboard/")
    _wait_ready(driver)

    item = driver.find_element("css selector", "#sent-list li[data-origin=recall]")
    assert item.find_element("css selector", ".dash-badge").text == "recalled"
    terms = [t.text for t in item.find_elements("css selector", ".term")]
    assert terms == ["gin", "index", "build"]
    links = item.find_elements("css selector", "a[data-quote]")
    m = turns.m
    assert [int(a.get_attribute("data-quote")) for a in links] == [m[2].pk, m[3].pk, m[5].pk]
    assert [("is-hit" in (a.get_attribute("class") or "")) for a in links] == [False, True, True]
    assert links[1].get_attribute("href").endswith(f"/c/{turns.conversation.pk}/#m-{m[3].pk}")
    assert driver.execute_script("return arguments[0].querySelector('.dash-sent-body').textContent", item) \
        == turns.block
    assert "Recalled 3 earlier messages (61 tokens)" in driver.find_element("id", "turn-view").text
    foot = driver.find_element("css selector", ".dash-sent-foot").text
    # numbered as users see them (positions among the chat messages), never by database id
    assert "Recalled (quoted, not dropped): #3, #4, #6." in foot
    assert [a.text for a in links] == ["#3", "#4 (hit)", "#6 (hit)"]

    legend = driver.find_element("css selector", "#map-legend li[data-status=recalled]")
    assert legend.is_displayed() and legend.find_element("css selector", "[data-count]").text == "3"
    assert _points(driver, "recall_tokens") == 2
    assert driver.find_element("css selector", "[data-legend=recall_tokens]").is_displayed()
    assert console_errors(driver) == []

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.execute_script("document.getElementById('saw').scrollIntoView()")
    driver.save_screenshot(str(SCREENSHOTS / "dashboard-recall.png"))


def test_a_long_conversation_is_drawn_from_buckets_of_turns(live_server, transactional_db, browser):
    """3,000 turns: the series answers 1,500 points of two turns each; the charts draw one point per
    bucket, say which turns a point holds, pick a bucket's last turn on a click, load any turn typed
    in, and zoom to the latest 200 turns with one point per turn (the range asked of the API)."""
    from selenium.webdriver.common.action_chains import ActionChains

    driver = browser
    user = get_user_model().objects.create_user(username="long")
    conversation = conversation_seed_long(owner=user, messages=6000, seed=4)
    client = _login(driver, live_server, user)
    series = client.get(f"/api/dashboard/conversations/{conversation.pk}/series/").json()
    assert (series["count"], series["bucket_size"], series["points"]) == (3000, 2, 1500)
    ids = list(OptimizationRecord.objects.filter(conversation=conversation).order_by("id").values_list("id", flat=True))

    driver.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
    _wait_ready(driver)
    assert _points(driver, "tokens_full") == _points(driver, "saved_cumulative") == 1500
    marks = sum(1 for n in series["truncations"] if n) + sum(1 for n in series["summarizations"] if n)
    assert driver.execute_script("return document.querySelectorAll('#chart-strategy rect[data-strategy]').length") \
        == marks
    start = driver.execute_script("return document.querySelector('#chart-tokens .opt-start').dataset.turn")
    assert int(start) == series["first_optimized_turn"]

    # A bucket says which turns it holds; a click picks its last turn and loads that record.
    overlay = driver.find_element("css selector", "#chart-tokens rect.overlay")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", overlay)
    ActionChains(driver).move_to_element_with_offset(overlay, 40, 0).perform()
    tip = driver.find_element("css selector", "#chart-tokens .dash-tip")
    _wait_text(tip, "Turns ")
    first, last = (int(x.replace(",", "")) for x in tip.text.split("\n")[0].split(" ")[1].split("\u2013"))
    assert last == first + 1 and "sent over 2 requests" in tip.text
    ActionChains(driver).click().perform()
    deadline = time.monotonic() + 10
    while driver.execute_script("return +document.getElementById('sent-list')?.dataset.record") != ids[last - 1]:
        assert time.monotonic() < deadline, "the picked bucket's last turn did not load"
        time.sleep(0.05)
    assert int(driver.find_element("id", "turn-input").get_attribute("value")) == last

    # A turn inside a bucket (not a point of the series) is found through the records API.
    driver.execute_script(
        "const i = document.getElementById('turn-input'); i.value = '1501'; i.dispatchEvent(new Event('change'))"
    )
    deadline = time.monotonic() + 10
    while driver.execute_script("return +document.getElementById('sent-list')?.dataset.record") != ids[1500]:
        assert time.monotonic() < deadline, "turn 1,501 did not load"
        time.sleep(0.05)

    # The latest 200 turns: asked of the API, one point per turn.
    button = driver.find_element("css selector", "[data-range=latest]")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
    button.click()
    WebDriverWait(driver, 10).until(lambda d: d.execute_script("return document.getElementById('dash').dataset.drawn")
                                    == "latest")
    assert _points(driver, "tokens_sent") == 200
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.execute_script("document.getElementById('chart-tokens').scrollIntoView()")
    driver.save_screenshot(str(SCREENSHOTS / "dashboard-long-latest.png"))
    ActionChains(driver).move_to_element_with_offset(
        driver.find_element("css selector", "#chart-tokens rect.overlay"), 0, 0).perform()
    _wait_text(driver.find_element("css selector", "#chart-tokens .dash-tip"), "Turn 2,")
    button = driver.find_element("css selector", "[data-range=all]")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
    button.click()
    assert _points(driver, "tokens_sent") == 1500
    ActionChains(driver).move_to_element_with_offset(
        driver.find_element("css selector", "#chart-tokens rect.overlay"), 120, -40).perform()
    driver.save_screenshot(str(SCREENSHOTS / "dashboard-long.png"))
    assert console_errors(driver) == []


def test_a_first_request_says_it_sent_one_message(live_server, transactional_db, browser):
    """A chat's first request sends its one message: the foot of "What the model saw" says so in the
    singular ("1 messages" before)."""
    from tests.dashboard.factories import make_message, sent_entry

    user = get_user_model().objects.create_user(username="first-turn-viewer")
    conversation = make_conversation(owner=user, title="One question")
    question = make_message(conversation=conversation, role="user", content="Just one question", tokens=12)
    make_record(conversation=conversation, tokens_full=15, tokens_sent=15, sent=[sent_entry("verbatim", question)])
    _login(browser, live_server, user)
    browser.get(f"{live_server.url}/c/{conversation.pk}/dashboard/")
    _wait_ready(browser)
    foot = browser.find_element("css selector", ".dash-sent-foot")
    _wait_text(foot, "1 message, 12 tokens")
    assert "1 messages" not in foot.text
    assert console_errors(browser) == []
