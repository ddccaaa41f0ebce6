"""Server-rendered pages: access control, the chat timeline, the settings forms."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from chatapp.chat.models import Conversation, Message, UserSettings
from chatapp.chat.search_services import message_index_add
from chatapp.providers import services as config_services
from chatapp.providers.models import LLMConfig

KEY = "sk-live-THIS-IS-SECRET-wxyz"


def _conversation(owner, title="Chat", **fields) -> Conversation:
    return Conversation.objects.create(owner=owner, title=title, **fields)


def _message(conversation, role, content, **fields) -> Message:
    # written past the services, so indexed here as the services would (sidebar search reads the index)
    message = Message.objects.create(conversation=conversation, role=role, content=content, **fields)
    message_index_add(message=message)
    return message


def _config(owner, **overrides) -> LLMConfig:
    fields = {
        "owner": owner, "name": "Work", "base_url": "https://api.example.com/v1", "model": "gpt-4o-mini",
        "api_key": KEY,
    }
    fields.update(overrides)
    return config_services.llm_config_create(**fields)


# --- access -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/c/new/", "/c/1/", "/c/1/messages/?before=5", "/c/sidebar/", "/settings/"])
def test_pages_require_login(client, db, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_another_users_conversation_is_404(page, other_user):
    theirs = _conversation(other_user, title="Private plans")
    _message(theirs, "user", "secret content")
    assert page.get(f"/c/{theirs.pk}/").status_code == 404
    assert page.get(f"/c/{theirs.pk}/messages/?before=999999").status_code == 404
    assert page.get(f"/c/{theirs.pk}/messages/?since=1").status_code == 404
    assert page.get(f"/c/{theirs.pk}/messages/?after=1").status_code == 404
    assert page.get(f"/c/{theirs.pk}/messages/").status_code == 404


def test_another_users_config_cannot_be_edited_deleted_or_made_default(page, other_user):
    theirs = _config(other_user)
    data = {f"cfg{theirs.pk}-name": "Mine now", f"cfg{theirs.pk}-base_url": "https://x.example.com/v1",
            f"cfg{theirs.pk}-model": "gpt-4o", f"cfg{theirs.pk}-max_output_tokens": "100",
            f"cfg{theirs.pk}-temperature": "0.5"}
    assert page.post(f"/settings/configs/{theirs.pk}/", data).status_code == 404
    assert page.post(f"/settings/configs/{theirs.pk}/delete/").status_code == 404
    assert page.post(f"/settings/configs/{theirs.pk}/default/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.name == "Work"


def test_others_conversations_are_not_listed(page, user, other_user):
    _conversation(other_user, title="Their secret chat")
    _conversation(user, title="My chat")
    body = page.get("/c/new/").content.decode()
    assert "My chat" in body
    assert "Their secret chat" not in body


# --- accounts -----------------------------------------------------------------------------------


def test_signup_creates_the_account_and_logs_in(client, db):
    response = client.post(
        "/accounts/signup/",
        {"username": "grace", "password1": "Compilers-are-fun-1952", "password2": "Compilers-are-fun-1952"},
    )
    assert response.status_code == 302
    assert get_user_model().objects.filter(username="grace").exists()
    home = client.get("/")
    assert home.status_code == 200
    assert "Offline demo model" in home.content.decode()


def test_signup_shows_field_errors(client, db):
    response = client.post("/accounts/signup/", {"username": "grace", "password1": "abc", "password2": "abd"})
    assert response.status_code == 200
    assert "field-error" in response.content.decode()
    assert not get_user_model().objects.filter(username="grace").exists()


def test_signup_password_rules_stay_inside_the_help_the_field_points_at(client, db):
    html = client.get("/accounts/signup/").content.decode()
    # Django's password help is a list: inside a <p> the browser moves it out, leaving the field's
    # aria-describedby pointing at an empty paragraph.
    assert '<div class="field-help" id="id_password1_helptext"><ul>' in html
    assert '<p class="field-help" id="id_password1_helptext">' not in html


def test_login_logout_and_password_change(client, user):
    assert client.get("/accounts/login/").status_code == 200
    response = client.post("/accounts/login/", {"username": "ada", "password": "a long test password 1"})
    assert response.status_code == 302
    assert client.get("/settings/").status_code == 200
    response = client.post(
        "/accounts/password/",
        {"old_password": "a long test password 1", "new_password1": "Another-long-pass-77",
         "new_password2": "Another-long-pass-77"},
    )
    assert response.status_code == 302
    user.refresh_from_db()
    assert user.check_password("Another-long-pass-77")
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/settings/").status_code == 302


def test_logout_requires_post(page):
    """A GET (the address typed, an old bookmark) signs nobody out: a link or an image could. It answered
    a blank 405 page; it shows a page whose button signs out (a POST, with the CSRF token)."""
    asked = page.get("/accounts/logout/")

    assert asked.status_code == 200 and "_auth_user_id" in page.session
    html = asked.content.decode()
    assert re.search(r'<form method="post" action="/accounts/logout/"[^>]*>\s*<input type="hidden" '
                     r'name="csrfmiddlewaretoken"', html)
    assert ">Log out</button>" in html and "signed in as ada" in html
    assert page.post("/accounts/logout/")["Location"] == "/accounts/login/"
    assert page.get("/accounts/logout/")["Location"] == "/accounts/login/"  # signed out: nothing to ask


def _form_token(html: str) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)


def test_a_form_opened_before_signing_in_elsewhere_says_so_in_the_apps_page(user):
    """A sign-in page left open in one tab, the sign-in done in another (which renews the CSRF token): sent,
    it got Django's bare "403 Forbidden — CSRF verification failed. Request aborted." page."""
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    left_open = _form_token(browser.get("/accounts/login/").content.decode())
    other_tab = _form_token(browser.get("/accounts/login/").content.decode())
    signed_in = {"username": "ada", "password": "a long test password 1"}
    assert browser.post("/accounts/login/", {**signed_in, "csrfmiddlewaretoken": other_tab}).status_code == 302

    stale = browser.post("/accounts/login/", {**signed_in, "csrfmiddlewaretoken": left_open},
                         HTTP_REFERER="http://testserver/accounts/login/?next=/settings/")

    html = stale.content.decode()
    assert stale.status_code == 403 and "CSRF verification failed" not in html
    assert "This page had expired" in html and "nothing it sent was done" in html
    assert 'href="/accounts/login/?next=/settings/"' in html  # open it again
    assert stale["Content-Security-Policy"].startswith("default-src 'self'; script-src 'self';")
    elsewhere = browser.post("/settings/instructions/", {"instructions": "x"}, HTTP_REFERER="https://evil.example/")
    assert elsewhere.status_code == 403 and 'href="/"' in elsewhere.content.decode()  # not back to another site
    no_cookies = Client(enforce_csrf_checks=True).post("/accounts/login/", signed_in)  # none kept, none sent
    assert no_cookies.status_code == 403 and "did not send this site's cookies" in no_cookies.content.decode()


# --- chat pages ---------------------------------------------------------------------------------


def test_home_without_conversations_shows_the_empty_state(page):
    response = page.get("/")
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="composer-input"' in body
    assert "What can I help with?" in body


def test_home_is_a_new_chat_with_the_others_in_the_sidebar(page, user):
    _conversation(user, title="old")
    newest = _conversation(user, title="new")
    response = page.get("/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "What can I help with?" in body and 'id="composer-input"' in body
    assert f'href="/c/{newest.pk}/"' in body and ">old<" in body


def test_back_from_settings_and_the_overview_is_the_chat_last_active(page, user):
    assert 'class="back-link" href="/"' in page.get("/settings/").content.decode()  # no chat yet: a new one
    older = _conversation(user, title="older")
    _conversation(user, title="newer")
    Conversation.objects.filter(pk=older.pk).update(updated_at=timezone.now() + timedelta(minutes=1))
    assert f'class="back-link" href="/c/{older.pk}/"' in page.get("/settings/").content.decode()
    assert f'class="dash-back" href="/c/{older.pk}/"' in page.get("/dashboard/").content.decode()


def test_chat_page_renders_the_timeline(page, user):
    conv = _conversation(user, title="Rendering")
    asked = _message(conv, "user", "what is <script>window.__xss=1</script>?")
    replaced = _message(conv, "assistant", "an earlier version", reply_to=asked, parent=asked, model="m-1",
                        superseded=True)
    Message.objects.filter(pk=replaced.pk).update(off_path_by=replaced.pk)
    _message(conv, "assistant", "**Bold** answer\n\n```python\nx = 1\n```", reply_to=asked, parent=asked,
             status=Message.Status.STOPPED)
    body = page.get(f"/c/{conv.pk}/").content.decode()
    # User text is escaped, never interpreted.
    assert "what is &lt;script&gt;window.__xss=1&lt;/script&gt;?" in body
    assert "<script>window.__xss" not in body
    # Model text is rendered markdown with highlighted code.
    assert "<strong>Bold</strong>" in body
    assert re.search(r'<pre (?=[^>]*class="hl")(?=[^>]*data-lang="python")(?=[^>]*tabindex="0")', body)
    # Issue 13: a regenerated reply is another version ("< 2/2 >" on the one shown), not in the timeline.
    assert "an earlier version" not in body
    assert ">2/2<" in body and 'aria-label="Previous version (1 of 2)"' in body
    assert ">Stopped<" in body
    assert 'data-action="regenerate"' in body  # on the last reply only
    assert body.count('data-action="regenerate"') == 1


def test_failed_reply_shows_the_error_and_a_retry_button(page, user):
    conv = _conversation(user)
    asked = _message(conv, "user", "hello")
    _message(conv, "assistant", "", reply_to=asked, status=Message.Status.ERROR,
             error="The model endpoint rejected the API key.")
    body = page.get(f"/c/{conv.pk}/").content.decode()
    assert "The model endpoint rejected the API key." in body
    assert 'data-action="retry"' in body


def test_window_start_is_exposed_for_the_timeline_marker(page, user):
    conv = _conversation(user)
    first = _message(conv, "user", "one")
    _message(conv, "assistant", "two")
    third = _message(conv, "user", "three")
    Conversation.objects.filter(pk=conv.pk).update(window_start_id=third.pk)
    body = page.get(f"/c/{conv.pk}/").content.decode()
    assert f'data-window-start="{third.pk}"' in body
    # Server-side: messages before the window are marked (the first user message is always sent).
    assert f'id="m-{first.pk}" data-id="{first.pk}"' in body
    assert body.count("is-outside") == 1


def test_offline_label_without_config_and_model_name_with_one(page, user):
    conv = _conversation(user)
    assert "Offline demo model" in page.get(f"/c/{conv.pk}/").content.decode()
    config = _config(user, name="My OpenAI")
    body = page.get(f"/c/{conv.pk}/").content.decode()
    # a chat without a model of its own (its config deleted) uses the default; offline stays on offer
    assert re.search(rf'<option value="{config.pk}" [^>]*selected>My OpenAI</option>', body)
    assert '<option value="offline">Offline demo model</option>' in body


def test_dashboard_is_linked_from_the_chat_header(page, user):
    conv = _conversation(user)
    assert f'href="/c/{conv.pk}/dashboard/"' in page.get(f"/c/{conv.pk}/").content.decode()


def test_sidebar_search_matches_titles_and_message_content(page, user):
    fruit = _conversation(user, title="Groceries")
    _message(fruit, "user", "remember the pineapple")
    _conversation(user, title="Pineapple recipes")
    _conversation(user, title="Taxes")
    body = page.get("/c/sidebar/?q=pineapple").content.decode()
    assert "Groceries" in body and "Pineapple recipes" in body
    assert "Taxes" not in body
    assert "No chats match" in page.get("/c/sidebar/?q=zzzz").content.decode()


def test_a_sidebar_search_of_common_words_only_says_it_matched_titles_alone(page, user):
    """Message search passes over stop words and one-letter words: a search made of them alone
    matched titles only, and the list says so rather than let "No chats match" read as "no message
    says this"."""
    said = _conversation(user, title="Plans")
    _message(said, "user", "will this work")
    _conversation(user, title="Will this do")
    note = ("Titles only: message search looks up no word of “will this” (common and one-letter words, "
            "punctuation and emoji are not indexed).")
    body = page.get("/c/sidebar/?q=will+this").content.decode()
    assert note in body
    assert "Will this do" in body and "Plans" not in body
    assert note.replace("will this", "x") in page.get("/c/sidebar/?q=x").content.decode()
    assert note.replace("will this", "🎉") in page.get("/c/sidebar/?q=%F0%9F%8E%89").content.decode()
    assert "Titles only" not in page.get("/c/sidebar/?q=will+work").content.decode()
    assert "Titles only" not in page.get("/?q=work").content.decode()
    assert note in page.get("/?q=will+this").content.decode()


def _turns(conv, count):
    """`count` messages, user and assistant in turn, "msg-000" on; their ids in order."""
    return [_message(conv, "user" if i % 2 == 0 else "assistant", f"msg-{i:03d}").pk for i in range(count)]


def test_long_conversation_shows_the_newest_page_and_loads_earlier(page, user):
    conv = _conversation(user)
    ids = _turns(conv, 130)
    body = page.get(f"/c/{conv.pk}/").content.decode()
    assert "msg-129" in body and "msg-030" in body
    assert "msg-029" not in body
    assert f'data-before="{ids[30]}"' in body
    older = page.get(f"/c/{conv.pk}/messages/?before={ids[30]}")
    assert older.status_code == 200
    text = older.content.decode()
    assert "msg-000" in text and "msg-029" in text and "msg-030" not in text
    assert older["X-Has-Earlier"] == "0"


def test_earlier_messages_come_in_the_page_size_asked_up_to_the_bound(page, user):
    # A page opened at a message far up asks for the largest pages (history.js's SEEK_PAGE).
    conv = _conversation(user)
    ids = _turns(conv, 620)
    big = page.get(f"/c/{conv.pk}/messages/?before={ids[-1]}&limit=500")
    assert big.content.decode().count('class="msg ') == 499  # one row of the selector's 500 tells what is left
    assert big["X-Has-Earlier"] == "1" and big["X-Oldest-Id"] == str(ids[-500])
    rest = page.get(f"/c/{conv.pk}/messages/?before={ids[-500]}&limit=500")
    assert rest.content.decode().count('class="msg ') == 120 and rest["X-Has-Earlier"] == "0"
    assert page.get(f"/c/{conv.pk}/messages/?before={ids[-1]}&limit=x").status_code == 404


def test_newer_messages_come_after_an_id_in_pages_and_the_newest_page_without_one(page, user):
    # The bounded timeline (static/js/chat/window.js) drops the newest messages shown when read far up,
    # and reads them back page by page: `after=<id>`, oldest first, with X-Has-Newer / X-Newest-Id.
    conv = _conversation(user)
    ids = _turns(conv, 130)
    first = page.get(f"/c/{conv.pk}/messages/?after={ids[9]}")
    text = first.content.decode()
    assert text.count('class="msg ') == 100 and "msg-009" not in text and "msg-010" in text and "msg-109" in text
    assert first["X-Has-Newer"] == "1" and first["X-Newest-Id"] == str(ids[109])
    assert "is-last" not in text  # Regenerate only on the chat's newest reply
    last = page.get(f"/c/{conv.pk}/messages/?after={ids[109]}&limit=100")
    text = last.content.decode()
    assert text.count('class="msg ') == 20 and last["X-Has-Newer"] == "0" and last["X-Newest-Id"] == str(ids[129])
    assert text.count("is-last") == 1 and 'data-action="regenerate"' in text
    assert page.get(f"/c/{conv.pk}/messages/?after=x").status_code == 404
    # No id: the newest page, as the chat opens at it (a send from far up goes back to the chat's end).
    newest = page.get(f"/c/{conv.pk}/messages/")
    assert newest.content.decode().count('class="msg ') == 100 and newest.content.decode().count("is-last") == 1
    assert newest["X-Has-Earlier"] == "1" and newest["X-Oldest-Id"] == str(ids[30])


def test_messages_since_one_are_the_fragment_a_following_page_needs(page, user):
    conv = _conversation(user)
    ids = _turns(conv, 6)
    text = page.get(f"/c/{conv.pk}/messages/?since={ids[3]}").content.decode()
    assert "msg-002" not in text and all(f"msg-{i:03d}" in text for i in (3, 4, 5))
    assert page.get(f"/c/{conv.pk}/messages/?since=x").status_code == 404


def test_code_css_is_served(client, db):
    response = client.get("/assets/code.css")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/css")
    assert b".hl .k" in response.content


# --- settings -----------------------------------------------------------------------------------


def test_settings_page_never_shows_the_stored_key(page, user):
    _config(user)
    body = page.get("/settings/").content.decode()
    assert KEY not in body
    assert KEY[:-4] not in body
    assert "••••wxyz" in body


def test_preferences_are_saved(page, user):
    response = page.post("/settings/", {"preference": "quality", "auto_optimize": "on"})
    assert response.status_code == 302 and response["Location"] == "/settings/#opt-h"
    prefs = UserSettings.objects.get(user=user)
    assert prefs.preference == "quality"
    assert prefs.auto_optimize is True
    assert prefs.confirm_compaction is False
    assert 'value="quality" id="pref-quality" checked' in page.get("/settings/").content.decode()


def test_unknown_preference_is_a_field_error(page, user):
    response = page.post("/settings/", {"preference": "turbo"})
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()


def test_summary_model_must_be_ones_own(page, user, other_user):
    theirs = _config(other_user)
    response = page.post("/settings/", {"preference": "fast", "summary_config": str(theirs.pk)})
    assert response.status_code == 400
    assert UserSettings.objects.filter(user=user, summary_config=theirs).count() == 0


def test_add_config_fills_the_window_from_the_model_name(page, user):
    response = page.post(
        "/settings/configs/new/",
        {"new-name": "Mini", "new-base_url": "https://api.openai.com/v1", "new-model": "gpt-4o-mini",
         "new-api_key": KEY, "new-max_output_tokens": "1000", "new-temperature": "0.3"},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    config = LLMConfig.objects.get(owner=user)
    assert config.context_window == 128_000
    assert config.context_window_source == LLMConfig.WindowSource.REGISTRY
    assert config.is_default  # the first config becomes the default
    assert config.api_key_last4 == "wxyz"


def _error_report_post(client, url: str, data: dict) -> dict:
    """POST `data` to `url` whose saving fails with a server error (a database gone away), and the POST
    parameters the error report then shows (mailed to the ADMINS, the DEBUG page, an error tracker)."""
    from django.core.signals import got_request_exception
    from django.views.debug import SafeExceptionReporterFilter

    reported = []
    got_request_exception.connect(lambda sender, request, **kw: reported.append(request), weak=False,
                                  dispatch_uid="error-report")
    client.raise_request_exception = False
    try:
        response = client.post(url, data)
    finally:
        got_request_exception.disconnect(dispatch_uid="error-report")
    assert response.status_code == 500 and len(reported) == 1
    return dict(SafeExceptionReporterFilter().get_post_parameters(reported[0]))


def _broken(*_: object, **__: object) -> None:
    raise RuntimeError("database gone away")


@pytest.mark.parametrize("url", ["/settings/configs/new/", "config"])
def test_a_key_posted_in_a_model_form_is_kept_out_of_error_reports(page, user, url, monkeypatch):
    if url == "config":
        url = f"/settings/configs/{_config(user).pk}/"
    prefix = "new-" if "new" in url else f"cfg{url.split('/')[-2]}-"
    monkeypatch.setattr(config_services, "llm_config_create", _broken)
    monkeypatch.setattr(config_services, "llm_config_update", _broken)
    shown = _error_report_post(page, url, {
        f"{prefix}name": "Mini", f"{prefix}base_url": "https://api.openai.com/v1", f"{prefix}model": "gpt-4o-mini",
        f"{prefix}api_key": KEY, f"{prefix}max_output_tokens": "1000", f"{prefix}temperature": "0.3"})
    assert KEY not in str(shown) and shown.get(f"{prefix}name") != "Mini"


def test_a_password_posted_to_sign_up_is_kept_out_of_error_reports(client, db, monkeypatch):
    from chatapp.chat.forms import SignupForm

    monkeypatch.setattr(SignupForm, "save", _broken)
    secret = "A-long-passphrase-9931"
    shown = _error_report_post(client, "/accounts/signup/",
                               {"username": "newcomer", "password1": secret, "password2": secret})
    assert secret not in str(shown)


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"new-context_window": "1000", "new-max_output_tokens": "2000"}, "context_window", "must be larger"),
        ({"new-base_url": "not a url"}, "base_url", "Enter a valid URL"),
        ({"new-max_output_tokens": "-5"}, "max_output_tokens", "greater than or equal to 1"),
        ({"new-temperature": "3"}, "temperature", "less than or equal to 2"),
        ({"new-name": ""}, "name", "required"),
    ],
)
def test_config_validation_errors_are_shown_per_field(page, user, fields, field, words):
    data = {"new-name": "Mini", "new-base_url": "https://api.openai.com/v1", "new-model": "gpt-4o-mini",
            "new-max_output_tokens": "1000", "new-temperature": "0.3"}
    data.update(fields)
    response = page.post("/settings/configs/new/", data)
    assert response.status_code == 400
    body = response.content.decode()
    block = body.split(f'id="id_new-{field}_error"', 1)
    assert len(block) == 2, f"no error rendered for {field}"
    assert words in block[1][:300]
    assert not LLMConfig.objects.filter(owner=user).exists()


@pytest.mark.parametrize("base_url", [
    "http://ollama:11434/v1", "http://gpu-box:8000/v1", "http://local_llm:8000/v1", "http://gpu_box.lan:11434/v1",
])
def test_a_base_url_on_a_single_label_or_underscored_host_name_is_accepted(page, user, base_url):
    """A Docker service's or a LAN machine's name has no dot (README: `http://host:8000/v1` for vLLM), and
    Docker Compose resolves a service by its name as written, underscores and all (`local_llm:`), as
    hosts files do: the API took such base URLs, the page refused them as "Enter a valid URL"."""
    response = page.post(
        "/settings/configs/new/",
        {"new-name": "Local", "new-base_url": base_url, "new-model": "llama3.1", "new-max_output_tokens": "100",
         "new-temperature": "0.3"},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert LLMConfig.objects.get(owner=user).base_url == base_url


def test_private_base_url_is_refused_when_not_allowed(page, user, settings):
    settings.ALLOW_PRIVATE_LLM_URLS = False
    response = page.post(
        "/settings/configs/new/",
        {"new-name": "Local", "new-base_url": "http://127.0.0.1:11434/v1", "new-model": "llama3",
         "new-max_output_tokens": "100", "new-temperature": "0.3"},
    )
    assert response.status_code == 400
    assert 'id="id_new-base_url_error"' in response.content.decode()
    assert not LLMConfig.objects.filter(owner=user).exists()


def test_edit_keeps_the_key_when_the_field_is_empty_and_replaces_it_otherwise(page, user):
    config = _config(user)
    prefix = f"cfg{config.pk}"
    data = {f"{prefix}-name": "Renamed", f"{prefix}-base_url": config.base_url, f"{prefix}-model": config.model,
            f"{prefix}-max_output_tokens": "500", f"{prefix}-temperature": "0.2", f"{prefix}-is_default": "on"}
    assert page.post(f"/settings/configs/{config.pk}/", data).status_code == 302
    config.refresh_from_db()
    assert (config.name, config.api_key_last4, config.max_output_tokens) == ("Renamed", "wxyz", 500)
    data[f"{prefix}-api_key"] = "sk-new-key-abcdefgh-9876"
    assert page.post(f"/settings/configs/{config.pk}/", data).status_code == 302
    config.refresh_from_db()
    assert config.api_key_last4 == "9876"


def test_edit_with_an_override_window_then_back_to_auto(page, user):
    config = _config(user)
    prefix = f"cfg{config.pk}"
    data = {f"{prefix}-name": "Work", f"{prefix}-base_url": config.base_url, f"{prefix}-model": config.model,
            f"{prefix}-context_window": "32000", f"{prefix}-max_output_tokens": "500",
            f"{prefix}-temperature": "0.2", f"{prefix}-is_default": "on"}
    assert page.post(f"/settings/configs/{config.pk}/", data).status_code == 302
    config.refresh_from_db()
    assert (config.context_window, config.context_window_source) == (32000, "user")
    data[f"{prefix}-context_window"] = ""
    assert page.post(f"/settings/configs/{config.pk}/", data).status_code == 302
    config.refresh_from_db()
    assert (config.context_window, config.context_window_source) == (128_000, "registry")


def test_make_default_and_delete(page, user):
    first = _config(user, name="First")
    second = _config(user, name="Second")
    assert page.post(f"/settings/configs/{second.pk}/default/").status_code == 302
    first.refresh_from_db()
    second.refresh_from_db()
    assert second.is_default and not first.is_default
    assert page.post(f"/settings/configs/{second.pk}/delete/").status_code == 302
    assert not LLMConfig.objects.filter(pk=second.pk).exists()
    first.refresh_from_db()
    assert first.is_default
    # the default moved by itself: the page says which model new chats use now
    assert "Deleted “Second”. “First” is now used for new chats." in page.get("/settings/").content.decode()


def _delete_question(body: str, config: LLMConfig) -> str:
    form = re.search(rf'action="/settings/configs/{config.pk}/delete/" data-confirm="([^"]*)"', body)
    assert form is not None
    return form.group(1)


def test_deleting_a_model_asks_naming_where_its_chats_go(page, user):
    """It asked "Chats that use it switch to your default model." of the default itself (its chats and new
    ones go to the first other model) and of the only model (they go to the offline demo model)."""
    only = _config(user, name="Only")
    assert _delete_question(page.get("/settings/").content.decode(), only) == (
        "Delete “Only”? Its chats switch to the offline demo model, as new chats do.")

    second = _config(user, name="Beta")
    third = _config(user, name="Gamma")
    body = page.get("/settings/").content.decode()
    assert _delete_question(body, only) == (
        "Delete “Only”? Its chats switch to “Beta”, which becomes the default for new chats.")
    assert _delete_question(body, third) == "Delete “Gamma”? Its chats switch to your default model, “Only”."
    assert _delete_question(body, second) == "Delete “Beta”? Its chats switch to your default model, “Only”."


def test_each_models_buttons_name_the_model(page, user):
    """Every card had a "Test connection", a "Make default" and an "Edit" named alike (only Delete named its
    model): a screen reader's list of the page's buttons gave no way to tell whose was whose."""
    _config(user, name="Work")
    config = _config(user, name="Home lab")
    body = page.get("/settings/").content.decode()
    card = body.split(f'id="config-{config.pk}"', 1)[1].split('class="config-form"', 1)[0]
    controls = re.findall(r"<(button|summary)\b([^>]*)>(.*?)</\1>", card, re.S)
    assert len(controls) == 4
    for _, attributes, inner in controls:
        visible = re.sub(r"<[^>]+>", "", inner).strip()
        label = re.search(r'aria-label="([^"]*)"', attributes)
        assert label is not None, visible
        # the visible words first (WCAG 2.5.3, label in name), then the model's name
        assert label.group(1).startswith(visible) and "Home lab" in label.group(1)


def test_a_short_stored_key_is_said_to_be_set_without_an_empty_ending(page, user):
    config = _config(user, name="Short key")
    LLMConfig.objects.filter(pk=config.pk).update(api_key_last4="")  # a key too short to show any of
    body = page.get("/settings/").content.decode()
    assert "key set" in body and "ending in <span class=\"key-dots\">••••</span>" not in body


def test_config_forms_require_post(page, user):
    config = _config(user)
    assert page.get(f"/settings/configs/{config.pk}/delete/").status_code == 405
    assert LLMConfig.objects.filter(pk=config.pk).exists()


def test_settings_forms_enforce_csrf(user):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post("/settings/", {"preference": "fast"}).status_code == 403


def test_new_chat_offers_a_model_picker_once_there_is_a_config(page, user):
    assert 'id="model-select"' not in page.get("/c/new/").content.decode()
    first = _config(user, name="First")
    body = page.get("/c/new/").content.decode()
    # one config and the built-in offline model: already a choice
    assert re.search(rf'<option value="{first.pk}" [^>]*selected>First</option>', body)
    assert '<option value="offline">Offline demo model</option>' in body
    second = _config(user, name="Second", is_default=True)
    body = page.get("/c/new/").content.decode()
    assert 'id="model-select"' in body
    assert re.search(rf'<option value="{second.pk}" [^>]*selected>Second</option>', body)


def test_summaries_show_as_expandable_markers_with_their_actions(page, user):
    conv = _conversation(user)
    first = _message(conv, "user", "one")
    last = _message(conv, "assistant", "two")
    summary = _message(conv, "system", "[Conversation summary — covers messages 1-2]\n\n**Facts:** one, two",
                       kind="summary", covers_from_id=first.pk, covers_through_id=last.pk, covered_message_count=2)
    old = _message(conv, "system", "older summary", kind="summary", discarded=True)
    body = page.get(f"/c/{conv.pk}/").content.decode()
    marker = body.split(f'id="m-{summary.pk}"', 1)[1].split("</details>", 1)[0]
    assert f'data-covers-through="{last.pk}"' in marker
    assert "Summary takes over here" in marker and "covers 2 messages" in marker
    assert "<strong>Facts:</strong>" in marker
    assert 'data-action="edit-summary"' in marker and 'data-action="discard-summary"' in marker
    discarded = body.split(f'id="m-{old.pk}"', 1)[1].split("</details>", 1)[0]
    assert "Discarded summary" in discarded
    assert 'data-action="edit-summary"' not in discarded


@pytest.mark.parametrize("path", ["/c/new/", "/settings/", "/c/sidebar/"])
def test_pages_forbid_inline_script_with_a_content_security_policy(page, path):
    policy = page.get(path)["Content-Security-Policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy.split("script-src", 1)[1].split(";", 1)[0]
    assert "object-src 'none'" in policy


@pytest.mark.parametrize("path", ["/c/new/", "/settings/", "/accounts/login/"])
def test_pages_load_no_remote_images(page, path):
    # A remote image load is a request the page makes by itself: its URL can carry chat text away.
    directives = dict(d.strip().split(" ", 1) for d in page.get(path)["Content-Security-Policy"].split(";"))
    assert directives["img-src"] == "'self' data:"


def test_login_page_has_the_policy_too(client, db):
    assert "script-src 'self'" in client.get("/accounts/login/")["Content-Security-Policy"]


def _config_with_a_key(page, user) -> tuple[LLMConfig, str]:
    """A config added from the settings page with a key stored; its edit form's field prefix."""
    page.post("/settings/configs/new/", {
        "new-name": "Mini", "new-base_url": "https://api.openai.com/v1", "new-model": "gpt-4o-mini",
        "new-api_key": KEY, "new-max_output_tokens": "1000", "new-temperature": "0.3"})
    config = LLMConfig.objects.get(owner=user)
    return config, f"cfg{config.pk}"


def test_moving_a_config_to_another_host_clears_its_key_and_says_so(page, user):
    config, prefix = _config_with_a_key(page, user)
    response = page.post(f"/settings/configs/{config.pk}/", {
        f"{prefix}-name": "Mini", f"{prefix}-base_url": "https://llm.example.net/v1", f"{prefix}-model": "gpt-4o-mini",
        f"{prefix}-max_output_tokens": "1000", f"{prefix}-temperature": "0.3", f"{prefix}-is_default": "on"},
        follow=True)
    assert response.status_code == 200
    assert "the stored API key was cleared" in response.content.decode()
    config.refresh_from_db()
    assert config.base_url == "https://llm.example.net/v1" and not config.api_key_encrypted


def test_a_host_that_does_not_resolve_yet_is_saved_and_said_so(page, user):
    response = page.post("/settings/configs/new/", {
        "new-name": "Compose Ollama", "new-base_url": "http://ollama-later.invalid:11434/v1", "new-model": "llama3.1",
        "new-max_output_tokens": "1000", "new-temperature": "0.3"}, follow=True)
    assert response.status_code == 200
    assert "“ollama-later.invalid” does not resolve" in response.content.decode()
    assert LLMConfig.objects.get(owner=user).base_url == "http://ollama-later.invalid:11434/v1"


@pytest.mark.parametrize("typed, saved", [
    ("localhost:11434/v1", "http://localhost:11434/v1"),  # Ollama
    ("ollama:11434/v1", "http://ollama:11434/v1"),  # a Compose service
    ("host.docker.internal:11434/v1", "http://host.docker.internal:11434/v1"),
    ("127.0.0.1:1234/v1", "http://127.0.0.1:1234/v1"),  # LM Studio
    ("192.168.1.5:8000/v1", "http://192.168.1.5:8000/v1"),  # vLLM on the LAN
    ("api.openai.com/v1", "https://api.openai.com/v1"),
])
def test_a_base_url_typed_without_its_scheme_gets_the_one_its_host_speaks(page, user, typed, saved):
    """Typed without http://, a local server's address was "Enter a valid URL." (localhost:11434 read as
    a scheme) or saved as https://, which Ollama, LM Studio and vLLM do not speak."""
    page.post("/settings/configs/new/", {
        "new-name": "Local", "new-base_url": typed, "new-model": "llama3.1", "new-max_output_tokens": "1000",
        "new-temperature": "0.3"})
    assert LLMConfig.objects.get(owner=user).base_url == saved


def test_a_new_key_that_cannot_be_sent_is_a_field_error_not_a_500(page, user):
    config, prefix = _config_with_a_key(page, user)
    response = page.post(f"/settings/configs/{config.pk}/", {
        f"{prefix}-name": "Mini renamed", f"{prefix}-base_url": "https://api.openai.com/v1",
        f"{prefix}-model": "gpt-4o-mini", f"{prefix}-api_key": "sk-new kéy", f"{prefix}-max_output_tokens": "1000",
        f"{prefix}-temperature": "0.3"})

    assert response.status_code == 400  # the check for a key left behind raised: a 500
    body = response.content.decode()
    assert "cannot be sent" in body and 'value="Mini renamed"' in body
    config.refresh_from_db()
    assert config.name == "Mini"


def test_a_new_key_typed_with_remove_the_stored_key_ticked_replaces_it(page, user):
    """Both at once (the old key removed, the new one typed) saved no key at all: the key typed was
    dropped without a word, and every message then failed with "wants an API key (401)"."""
    config, prefix = _config_with_a_key(page, user)
    response = page.post(f"/settings/configs/{config.pk}/", {
        f"{prefix}-name": "Mini", f"{prefix}-base_url": "https://api.openai.com/v1", f"{prefix}-model": "gpt-4o-mini",
        f"{prefix}-api_key": "sk-replacement-key-0000", f"{prefix}-clear_api_key": "on",
        f"{prefix}-max_output_tokens": "1000", f"{prefix}-temperature": "0.3", f"{prefix}-is_default": "on"})
    assert response.status_code == 302
    config.refresh_from_db()
    assert config.has_api_key and config.api_key_last4 == "0000"


def test_a_refused_form_asks_for_the_key_it_did_not_keep(page, user):
    """A key typed into a form refused for another field is not sent back to the page (write-only), and
    the field said "Leave empty for endpoints that need no key": saved again as it stood, the model had
    no key and every message failed with a 401. The page asks for the key again."""
    response = page.post("/settings/configs/new/", {
        "new-name": "Mini", "new-base_url": "https://api.openai.com/v1", "new-model": "gpt-4o-mini",
        "new-api_key": KEY, "new-context_window": "1000", "new-max_output_tokens": "2000", "new-temperature": "0.3"})
    body = response.content.decode()
    assert response.status_code == 400 and KEY not in body
    assert 'id="id_new-api_key_again"' in body and "Type the API key again" in body

    config, prefix = _config_with_a_key(page, user)
    edit = {f"{prefix}-name": "Mini", f"{prefix}-base_url": "https://api.openai.com/v1",
            f"{prefix}-model": "gpt-4o-mini", f"{prefix}-max_output_tokens": "1000", f"{prefix}-temperature": "9"}
    body = page.post(f"/settings/configs/{config.pk}/", {**edit, f"{prefix}-api_key": "sk-replacement-0000"}
                     ).content.decode()
    assert "sk-replacement-0000" not in body and f'id="id_{prefix}-api_key_again"' in body
    # Nothing typed there, nothing to ask for: the stored key stays.
    assert "api_key_again" not in page.post(f"/settings/configs/{config.pk}/", edit).content.decode()


def _described_by(body: str, input_id: str) -> list[str]:
    """The texts of the elements the input's aria-describedby names (what a screen reader reads with it)."""
    tag = re.search(rf'<input[^>]*id="{input_id}"[^>]*>', body)
    assert tag is not None
    ids = re.search(r'aria-describedby="([^"]*)"', tag.group(0))
    texts = []
    for described in (ids.group(1).split() if ids else []):
        element = re.search(rf'<(\w+)[^>]*id="{described}"[^>]*>(.*?)</\1>', body, re.S)
        assert element is not None, f"aria-describedby names {described}, which is not on the page"
        texts.append(re.sub(r"<[^>]+>", "", element.group(2)))
    return texts


def test_the_api_key_field_is_described_by_its_help_and_by_the_request_to_type_it_again(page, user):
    """The API key's help (a key is set; empty keeps it) and the "Type the API key again" of a refused
    form were shown beside the field but not tied to it: a screen reader on the field read neither, and
    the form was saved again without its key."""
    response = page.post("/settings/configs/new/", {
        "new-name": "Mini", "new-base_url": "https://api.openai.com/v1", "new-model": "gpt-4o-mini",
        "new-api_key": KEY, "new-context_window": "1000", "new-max_output_tokens": "2000", "new-temperature": "0.3"})
    said = " ".join(_described_by(response.content.decode(), "id_new-api_key"))
    assert "Stored encrypted and never shown again" in said and "Type the API key again" in said

    config, prefix = _config_with_a_key(page, user)
    said = " ".join(_described_by(page.get("/settings/").content.decode(), f"id_{prefix}-api_key"))
    assert "A key is set, ending in ••••wxyz. Leave empty to keep it" in said

    response = page.post(f"/settings/configs/{config.pk}/", {
        f"{prefix}-name": "Mini", f"{prefix}-base_url": "https://api.openai.com/v1", f"{prefix}-model": "gpt-4o-mini",
        f"{prefix}-api_key": "sk-new kéy", f"{prefix}-max_output_tokens": "1000", f"{prefix}-temperature": "0.3"})
    said = _described_by(response.content.decode(), f"id_{prefix}-api_key")
    assert any("cannot be sent" in text for text in said)


def test_a_missing_chat_gets_the_apps_own_page_with_a_way_back(page):
    response = page.get("/c/999999/")
    body = response.content.decode()
    assert response.status_code == 404 and "Nothing here" in body and 'href="/"' in body


def test_revoking_a_token_or_a_share_asks_first_with_a_revoke_button(page, user):
    from chatapp.chat.share_services import conversation_share_create
    from chatapp.chat.token_services import api_token_create

    api_token_create(user=user, name="laptop", made_in="settings")
    conversation_share_create(owner=user, conversation=Conversation.objects.create(owner=user, title="Shared"))
    body = page.get("/settings/").content.decode()
    # settings.js asks with the form's data-confirm, its button labelled by data-confirm-label
    assert body.count('data-confirm-label="Revoke"') == 2
    assert 'data-confirm="Revoke the token “laptop”' in body


def _dangling_references(html: str) -> list[str]:
    """aria-describedby / aria-labelledby ids the page does not hold (a screen reader reads nothing)."""
    from html.parser import HTMLParser

    ids: set[str] = set()
    refs: list[tuple[str, str]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            for name, value in attrs:
                if name == "id" and value:
                    ids.add(value)
                if name in ("aria-describedby", "aria-labelledby") and value:
                    refs.extend((name, ref) for ref in value.split())

    Collect().feed(html)
    return [f"{name}={ref}" for name, ref in refs if ref not in ids]


def test_settings_fields_point_only_at_help_and_errors_the_page_holds(page, user):
    _config(user)  # its edit form too
    assert _dangling_references(page.get("/settings/").content.decode()) == []
    # with errors: the fields point at their error messages as well
    response = page.post("/settings/configs/new/", {"new-name": "", "new-context_window": "0"})
    assert response.status_code == 400
    assert 'id="id_new-context_window_error"' in response.content.decode()
    assert _dangling_references(response.content.decode()) == []


def test_a_summary_marker_groups_the_thousands_of_what_it_covers(page, user):
    conv = _conversation(user)
    first = _message(conv, "user", "one")
    last = _message(conv, "assistant", "two")
    summary = _message(conv, "system", "[Conversation summary]\n\nThe facts.", kind="summary",
                       covers_from_id=first.pk, covers_through_id=last.pk, covered_message_count=1376)
    body = page.get(f"/c/{conv.pk}/").content.decode()
    marker = body.split(f'id="m-{summary.pk}"', 1)[1].split("</summary>", 1)[0]
    # as the summary's own text and the dashboard write it ("covers 1376 messages" before)
    assert "covers 1,376 messages" in marker
