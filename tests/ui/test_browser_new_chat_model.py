"""A new chat's empty page says where its first message goes, and follows the model menu: picking the
offline demo there left it saying "Messages go to <the model>" and its window."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.select import Select

from tests.ui.test_browser import _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_empty_page_follows_the_model_picked_for_a_new_chat(asgi_server, browser, fake_openai):
    _, config = _sign_up_with_model(browser, asgi_server.url, "new-chat-model", fake_url=fake_openai.base_url,
                                    model="fake-echo", name="Fake echo")
    browser.get(f"{asgi_server.url}/c/new/")
    about = browser.find_element(By.ID, "empty-model")
    demo = browser.find_element(By.ID, "empty-offline")
    assert about.is_displayed() and not demo.is_displayed()
    assert about.text.startswith("Messages go to Fake echo (fake-echo)")
    menu = Select(browser.find_element(By.ID, "model-select"))

    menu.select_by_value("offline")
    _wait(browser, lambda d: demo.is_displayed() and not about.is_displayed())

    menu.select_by_value(str(config.pk))
    _wait(browser, lambda d: about.is_displayed() and not demo.is_displayed())
    assert f"{config.context_window:,}-token window" in about.text
