"""The chat page's DOM and JS heap while a long chat is read upwards, page by page, in headless Chromium.

A chat of `--messages` messages (every fourth one a reply with a list, a table and a code block, as a
technical chat's replies are) is opened at its end, then "Load earlier messages" is pressed `--pages`
times. After each `--every` pages the script prints the messages rendered, the page's element count and
the JS heap in use after a forced garbage collection (performance.memory, precise with
--enable-precise-memory-info). Run it on two commits to compare them (the page before the bounded window
kept every page read; after it, at most MAX_RENDERED messages, static/js/chat/window.js).

The app runs in this process (uvicorn in a thread, as the browser tests run it) over a fresh SQLite file
in a temporary directory.

    .venv/bin/python bench/dom_window.py [--messages 3000] [--pages 25] [--every 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from web_ttfb import bench_environment, django_setup  # noqa: E402  (bench/ is on sys.path when run)

REPLY = """Here is what to check, in order:

1. The **connection pool**: `max_connections` against the workers.
2. The logs around the failure.

| setting | value |
|---|---|
| timeout | 30 s |
| retries | 3 |

```python
def handler(event):
    for attempt in range(3):
        if send(event):
            return True
    return False
```
"""

MEASURE = """
if (window.gc) window.gc();
return {
  messages: document.querySelectorAll('#messages > .msg[data-id]').length,
  elements: document.getElementsByTagName('*').length,
  heap: performance.memory ? performance.memory.usedJSHeapSize : null,
};
"""


def wait(driver, condition, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while not (value := condition(driver)):
        if time.monotonic() > deadline:
            raise TimeoutError("the page did not get there")
        time.sleep(0.05)
    return value


def run(messages: int, pages: int, every: int) -> None:
    from django.contrib.auth import get_user_model
    from selenium.webdriver.common.by import By

    from chatapp.chat.models import Conversation, Message
    from tests.support.asgi_server import asgi_server_running
    from tests.support.browser import headless_chromium
    from tests.support.chat import seed_messages

    with (
        asgi_server_running() as live,
        headless_chromium(flags=("--enable-precise-memory-info", "--js-flags=--expose-gc")) as driver,
    ):
        driver.get(f"{live.url}/accounts/signup/")
        driver.find_element(By.NAME, "username").send_keys("dom-bench")
        driver.find_element(By.NAME, "password1").send_keys("Bench-pass-4242")
        driver.find_element(By.NAME, "password2").send_keys("Bench-pass-4242")
        driver.find_element(By.CSS_SELECTOR, ".auth-form button[type=submit]").click()
        wait(driver, lambda d: d.find_elements(By.ID, "composer-input"))
        user = get_user_model().objects.get(username="dom-bench")
        conversation = Conversation.objects.create(owner=user, title="DOM bench")
        ids = seed_messages(conversation, messages, words=40)
        Message.objects.filter(pk__in=ids[1::4]).update(content=REPLY)
        driver.get(f"{live.url}/c/{conversation.pk}/")
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-action="load-earlier"]'))
        print(f"{messages} messages; pages of 100; after N presses of Load earlier messages:")
        print(f"{'pages':>6} {'rendered':>9} {'elements':>9} {'DOM nodes':>10} {'JS heap MB':>11}")

        def show(page: int) -> None:
            figure = driver.execute_script(MEASURE)
            # Every node the renderer holds (text nodes too, and removed ones not yet collected: none after gc()).
            nodes = driver.execute_cdp_cmd("Memory.getDOMCounters", {})["nodes"]
            heap = figure["heap"] / 1e6
            print(f"{page:>6} {figure['messages']:>9} {figure['elements']:>9} {nodes:>10} {heap:>11.1f}")

        show(0)
        for page in range(1, pages + 1):
            oldest = driver.execute_script("return document.querySelector('#messages > .msg[data-id]').id")
            driver.execute_script("document.querySelector('[data-action=\"load-earlier\"]').click()")
            wait(
                driver,
                lambda d, oldest=oldest: d.execute_script(
                    "const b = document.querySelector('[data-action=\"load-earlier\"]');"
                    "const top = document.querySelector('#messages > .msg[data-id]');"
                    "return top.id !== arguments[0] && !(b && b.disabled)",
                    oldest,
                ),
            )
            if page % every == 0 or page == pages:
                show(page)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--pages", type=int, default=25)
    parser.add_argument("--every", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dom-bench-") as tmp:
        env = bench_environment(Path(tmp))
        env["DEBUG"] = "true"  # the app's static files served by the app itself, as in the browser tests
        django_setup(env)
        run(args.messages, args.pages, args.every)


if __name__ == "__main__":
    main()
