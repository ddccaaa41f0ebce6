"""Token counts shortened for the cards (the server's) and the charts and lists (static/dashboard/js/
util.js's `fmt`, run by Node on the module itself; skipped without Node, as the browser tests are
without Chromium): a count just below a unit's next step rounds up into the next unit, not to 1000 of
this one."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.dashboard.factories import make_conversation, make_record

UTIL = Path(__file__).resolve().parents[2] / "static/dashboard/js/util.js"
NODE = shutil.which("node")

SHORTENED = [
    (999_999, "1.0M", "1M"),
    (999_499, "999k", "999k"),
    (99_960, "100k", "100k"),
    (12_345, "12.3k", "12.3k"),
    (999_999_999, "1.0B", "1B"),
    (99_960_000, "100M", "100M"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("tokens", "card", "_"), SHORTENED)
def test_the_cards_round_a_count_into_the_next_unit(owner_client, user, tokens, card, _):
    c = make_conversation(owner=user)
    make_record(conversation=c, tokens_full=tokens, tokens_sent=0, strategy="truncate", triggered=True)
    page = owner_client.get(f"/c/{c.pk}/dashboard/").content.decode()
    assert f"of {card} full-history tokens" in page


@pytest.mark.skipif(NODE is None, reason="needs Node")
def test_the_charts_round_a_count_into_the_next_unit():
    # util.js reads the page's element and common.js's global when loaded: stand-ins for both.
    script = (
        "globalThis.document = { getElementById: () => null }; globalThis.Longchat = {};\n"
        f"const {{ fmt }} = await import({json.dumps(UTIL.as_uri())});\n"
        f"console.log(JSON.stringify({json.dumps([n for n, _, _ in SHORTENED])}.map(fmt)));\n"
    )
    done = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=30,
                          check=True)
    assert json.loads(done.stdout) == [shown for _, _, shown in SHORTENED]
