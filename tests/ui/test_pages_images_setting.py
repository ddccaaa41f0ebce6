"""Settings → Models: "Accepts images", a config's word on images (null: the registry's)."""

from __future__ import annotations

import pytest

from chatapp.providers.models import LLMConfig
from tests.ui.test_pages import KEY

pytestmark = pytest.mark.django_db

NEW = {
    "new-name": "Mini",
    "new-base_url": "https://api.openai.com/v1",
    "new-model": "my-own-model",
    "new-api_key": KEY,
    "new-max_output_tokens": "1000",
    "new-temperature": "0.3",
}


def test_accepts_images_is_set_and_cleared_in_settings(page, user):
    assert page.post("/settings/configs/new/", {**NEW, "new-accepts_images": "yes"}).status_code == 302
    config = LLMConfig.objects.get(owner=user)
    assert (config.accepts_images, config.sees_images) == (True, True)
    assert 'value="yes" selected' in page.get("/settings/").content.decode()

    fields = {f"cfg{config.pk}-{k.removeprefix('new-')}": v for k, v in {**NEW, "is_default": "on"}.items()}
    assert (
        page.post(f"/settings/configs/{config.pk}/", {**fields, f"cfg{config.pk}-accepts_images": ""}).status_code
        == 302
    )
    config.refresh_from_db()
    assert (config.accepts_images, config.sees_images) == (None, False)  # the registry does not know it

    assert (
        page.post(f"/settings/configs/{config.pk}/", {**fields, f"cfg{config.pk}-accepts_images": "no"}).status_code
        == 302
    )
    config.refresh_from_db()
    assert config.accepts_images is False
