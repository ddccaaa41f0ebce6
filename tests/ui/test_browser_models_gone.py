"""A model deleted in another tab, on a page drawn before: its Settings card and the chat's model menu
say so in plain words."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from chatapp.providers.models import LLMConfig
from tests.ui.test_browser import _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_testing_a_model_deleted_in_another_tab_says_it_is_gone(asgi_server, browser, fake_openai):
    user, _ = _sign_up_with_model(browser, asgi_server.url, "gone-test", fake_url=fake_openai.base_url,
                                  model="fake-echo", name="Echo")
    gone = LLMConfig.objects.create(owner=user, name="Gone", base_url=fake_openai.base_url, model="fake-echo",
                                    context_window=16_000, max_output_tokens=500)
    browser.get(f"{asgi_server.url}/settings/")
    LLMConfig.objects.filter(pk=gone.pk).delete()

    browser.find_element(By.CSS_SELECTOR, f'[data-action="test-config"][data-id="{gone.pk}"]').click()

    result = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f"#test-result-{gone.pk}.is-fail"))[0]
    # it read "No LLMConfig matches the given query."
    assert result.text == "✗ This model no longer exists: it was deleted (in another tab or device?)."
