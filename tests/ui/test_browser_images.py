"""Images in the browser: picked with the paperclip, shown above the box with a Remove button, sent
with the message to a model that sees them (content parts), shown in the timeline and after a reload."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.support.images import png_bytes
from tests.ui.test_browser import _sign_up_with_model, _wait

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _signed_up(asgi_server, browser, fake_openai, username, *, accepts_images):
    _sign_up_with_model(
        browser,
        asgi_server.url,
        username,
        fake_url=fake_openai.base_url,
        model="fake-echo",
        name="Echo",
        accepts_images=accepts_images,
    )
    browser.get(asgi_server.url + "/")  # drawn with the model's word on images


def _thumbs(driver):
    return driver.find_elements(By.CSS_SELECTOR, "#attach-list .attach-thumb img")


def _send_with_image(browser, tmp_path, text, *, name="cat.png", size=(30, 20)):
    """Attach a PNG of `size`, send it with `text`, and wait for the reply."""
    path = tmp_path / name
    path.write_bytes(png_bytes(*size))
    browser.find_element(By.ID, "attach-input").send_keys(str(path))
    _wait(browser, lambda d: len(_thumbs(d)) == 1)
    composer = browser.find_element(By.ID, "composer-input")
    composer.send_keys(text)
    composer.send_keys(Keys.ENTER)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]'))


def test_an_image_is_attached_sent_to_the_model_and_shown(asgi_server, browser, fake_openai, tmp_path):
    _signed_up(
        asgi_server, browser, fake_openai, "images-send", accepts_images=True
    )  # drawn with the model's word on images
    path = tmp_path / "cat.png"
    path.write_bytes(png_bytes(30, 20))
    browser.find_element(By.ID, "attach-input").send_keys(str(path))

    _wait(browser, lambda d: [i.get_attribute("alt") for i in _thumbs(d)] == ["cat.png (30x20)"])
    assert browser.find_element(By.ID, "attach-note").get_attribute("hidden") is not None  # this model sees images
    remove = browser.find_element(By.CSS_SELECTOR, ".attach-remove")
    assert remove.get_attribute("aria-label") == "Remove cat.png (30x20)"
    composer = browser.find_element(By.ID, "composer-input")
    composer.send_keys("What is in this picture?")
    composer.send_keys(Keys.ENTER)

    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]'))
    assert browser.find_element(By.ID, "attach-strip").get_attribute("hidden") is not None
    sent = fake_openai.completions[-1].messages[-1]
    assert sent["content"][0] == {"type": "text", "text": "What is in this picture?"}
    assert sent["content"][1]["type"] == "image_url"
    assert sent["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    shown = browser.find_element(By.CSS_SELECTOR, ".msg--user .msg-images img")
    assert shown.get_attribute("alt") == "cat.png (30x20)"
    _wait(
        browser,
        lambda d: "/api/images/" in d.find_element(By.CSS_SELECTOR, ".msg--user .msg-image").get_attribute("href"),
    )

    browser.refresh()  # drawn by the server, read from the owner's endpoint
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".msg--user .msg-images img"))
    img = browser.find_element(By.CSS_SELECTOR, ".msg--user .msg-images img")
    assert "/api/images/" in img.get_attribute("src") and img.get_attribute("alt") == "cat.png (30x20)"
    _wait(browser, lambda d: d.execute_script("return arguments[0].complete && arguments[0].naturalWidth", img) == 30)


def test_a_model_that_cannot_see_images_is_named_and_an_image_can_be_removed(
    asgi_server, browser, fake_openai, tmp_path
):
    _signed_up(asgi_server, browser, fake_openai, "images-blind", accepts_images=False)
    paths = []
    for name in ("one.png", "two.png"):
        paths.append(tmp_path / name)
        paths[-1].write_bytes(png_bytes(4, 4))
    browser.find_element(By.ID, "attach-input").send_keys("\n".join(str(p) for p in paths))
    _wait(browser, lambda d: len(_thumbs(d)) == 2)
    assert "can't see images" in browser.find_element(By.ID, "attach-note").text

    browser.find_element(By.CSS_SELECTOR, ".attach-remove").send_keys(Keys.ENTER)  # by keyboard
    _wait(browser, lambda d: [i.get_attribute("alt") for i in _thumbs(d)] == ["two.png (4x4)"])
    assert browser.switch_to.active_element.get_attribute("aria-label") == "Remove two.png (4x4)"

    composer = browser.find_element(By.ID, "composer-input")
    composer.send_keys("And this?")
    composer.send_keys(Keys.ENTER)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]'))
    assert fake_openai.completions[-1].messages[-1]["content"] == "And this?\n\n[image: 4x4]"


def test_an_edited_message_keeps_its_images(asgi_server, browser, fake_openai, tmp_path):
    _signed_up(asgi_server, browser, fake_openai, "images-edit", accepts_images=True)
    _send_with_image(browser, tmp_path, "First words")

    browser.find_element(By.CSS_SELECTOR, '.msg--user [data-action="edit-message"]').click()
    editor = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg--user textarea:not(.msg-source)"))
    editor.clear()
    editor.send_keys("Second words")
    editor.send_keys(Keys.ENTER)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg--user[data-sibling-count="2"]'))
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]'))
    assert browser.find_element(By.CSS_SELECTOR, ".msg--user .msg-images img").get_attribute("alt") == "cat.png (30x20)"
    sent = fake_openai.completions[-1].messages[-1]["content"]
    assert sent[0] == {"type": "text", "text": "Second words"} and sent[1]["type"] == "image_url"


def test_an_image_alone_is_sent_with_an_empty_box(asgi_server, browser, fake_openai, tmp_path):
    _signed_up(asgi_server, browser, fake_openai, "images-alone", accepts_images=True)
    composer = browser.find_element(By.ID, "composer-input")
    composer.send_keys(Keys.ENTER)  # neither text nor image: nothing is sent
    browser.find_element(By.ID, "send-btn").click()
    assert not browser.find_elements(By.CSS_SELECTOR, ".msg--user")

    path = tmp_path / "cat.png"
    path.write_bytes(png_bytes(30, 20))
    browser.find_element(By.ID, "attach-input").send_keys(str(path))
    _wait(browser, lambda d: len(_thumbs(d)) == 1)
    fake_openai.reset()
    composer.send_keys("  ")
    composer.send_keys(Keys.ENTER)  # white space and an image: the image alone

    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]'))
    assert not browser.find_elements(By.ID, "composer-error")
    [part] = fake_openai.completions[-1].messages[-1]["content"]
    assert part["type"] == "image_url" and part["image_url"]["url"].startswith("data:image/png;base64,")
    bubble = browser.find_element(By.CSS_SELECTOR, ".msg--user")
    assert bubble.find_element(By.CSS_SELECTOR, ".msg-images img").get_attribute("alt") == "cat.png (30x20)"
    assert not bubble.find_element(By.CSS_SELECTOR, ".msg-content").is_displayed()  # no empty text bubble
    _wait(browser, lambda d: d.find_element(By.ID, "chat-title").text == "Image: cat.png")

    browser.refresh()  # drawn by the server: the same
    bubble = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg--user"))
    assert bubble.find_element(By.CSS_SELECTOR, ".msg-images img").get_attribute("alt") == "cat.png (30x20)"
    assert not bubble.find_element(By.CSS_SELECTOR, ".msg-content").is_displayed()

    # Its edit may stay an image alone (the edit keeps the images): Enter in the empty editor sends it.
    browser.find_element(By.CSS_SELECTOR, '.msg--user [data-action="edit-message"]').click()
    editor = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, ".msg--user textarea:not(.msg-source)"))
    fake_openai.reset()
    editor.send_keys(Keys.ENTER)
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg--user[data-sibling-count="2"]'))
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '.msg--assistant[data-status="complete"]'))
    assert [p["type"] for p in fake_openai.completions[-1].messages[-1]["content"]] == ["image_url"]


def _link_and_image_boxes(driver):
    """(link width, picture width, link's right edge, the row's right edge) once the picture is drawn."""
    return driver.execute_script(
        "const row = document.querySelector('.msg--user .msg-images'), a = row.querySelector('.msg-image'),"
        " i = a.querySelector('img'), box = (e) => e.getBoundingClientRect();"
        "return i.complete && i.naturalWidth ? [box(a).width, box(i).width, box(a).right, box(row).right] : null;"
    )


def test_a_large_image_is_shown_scaled_down_with_its_link_no_wider(asgi_server, browser, fake_openai, tmp_path):
    """A picture wider than the timeline's thumbnail size is drawn at that size; its link (what a click
    opens) is the picture, not a box as wide as the file, which left a blank clickable strip beside it
    and the picture off the bubble's edge."""
    _signed_up(asgi_server, browser, fake_openai, "images-large", accepts_images=True)
    _send_with_image(browser, tmp_path, "And this one?", name="wide.png", size=(640, 400))

    for _ in ("sent", "reloaded"):
        link, image, link_right, row_right = _wait(browser, _link_and_image_boxes)
        assert image < 640  # scaled down
        assert link == image
        assert link_right == row_right  # at the row's edge, under the bubble
        browser.refresh()
