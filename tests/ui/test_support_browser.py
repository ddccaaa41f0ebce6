"""The shared browser helper: a missing Chromium skips locally and fails under REQUIRE_BROWSER=1 (CI)."""

from __future__ import annotations

import pytest

from tests.support.browser import chromium_require


def test_a_missing_browser_skips_by_default(monkeypatch, tmp_path):
    monkeypatch.delenv("REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium-driver"):
        chromium_require(chromium=str(tmp_path / "chromium"))


def test_a_missing_browser_fails_when_required(monkeypatch, tmp_path):
    monkeypatch.setenv("REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="REQUIRE_BROWSER=1"):
        chromium_require(chromedriver=str(tmp_path / "chromedriver"))


def test_an_installed_browser_is_used(monkeypatch, tmp_path):
    monkeypatch.setenv("REQUIRE_BROWSER", "1")
    chromium, driver = tmp_path / "chromium", tmp_path / "chromedriver"
    chromium.touch()
    driver.touch()
    assert chromium_require(chromium=str(chromium), chromedriver=str(driver)) is None
