"""Saved prompts: the API (`/api/prompts/`: list, create, read, change, delete; owner only; the
service's checks said by field) and Settings → Prompts (add, edit, delete; a refused form keeps what
was typed)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chatapp.chat.prompt_models import SavedPrompt
from chatapp.chat.prompt_services import MAX_PROMPTS_PER_USER, prompt_create
from tests.support.accounts import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def page(client, user):
    client.force_login(user)
    return client


def test_a_prompt_made_through_the_api_is_listed_read_changed_and_deleted(user):
    api = token_client(user)

    made = api.post("/api/prompts/", {"command": "/Review", "title": "", "content": "Review this code:\r\n"},
                    format="json")

    assert made.status_code == 201
    body = made.json()
    # The slash and capitals a user may type are not part of the command; a blank title is the command.
    assert (body["command"], body["title"], body["content"]) == ("review", "review", "Review this code:\n")
    api.post("/api/prompts/", {"command": "eli5", "title": "Explain simply", "content": "Explain as to a child:"},
             format="json")
    listed = api.get("/api/prompts/").json()["results"]
    assert [p["command"] for p in listed] == ["eli5", "review"]
    assert api.get(f"/api/prompts/{body['id']}/").json()["content"] == "Review this code:\n"

    changed = api.patch(f"/api/prompts/{body['id']}/", {"title": "Code review"}, format="json")
    assert changed.status_code == 200 and changed.json()["title"] == "Code review"
    assert changed.json()["command"] == "review"  # what was not sent is kept
    assert api.patch(f"/api/prompts/{body['id']}/", {}, format="json").status_code == 400

    assert api.delete(f"/api/prompts/{body['id']}/").status_code == 204
    assert [p["command"] for p in api.get("/api/prompts/").json()["results"]] == ["eli5"]


@pytest.mark.parametrize(("fields", "field", "words"), [
    ({"command": "two words", "content": "x"}, "command", "lowercase letters"),
    ({"command": "", "content": "x"}, "command", "lowercase letters"),
    ({"command": "ok", "content": ""}, "content", "Write the prompt"),
    ({"command": "compact", "content": "x"}, "command", "own command"),
    ({"command": "ok", "content": "   "}, "content", "Write the prompt"),
    # Nothing that shows (a zero-width space pasted alone): the "/" menu would put nothing in the box.
    ({"command": "ok", "content": "\u200b\n\ufeff"}, "content", "Write the prompt"),
    ({"command": "ok", "title": "t" * 101, "content": "x"}, "title", "100 characters"),
])
def test_a_refused_prompt_says_why_beside_its_field_and_stores_nothing(user, fields, field, words):
    refused = token_client(user).post("/api/prompts/", fields, format="json")

    assert refused.status_code == 400
    assert words in " ".join(refused.json()[field])
    assert not SavedPrompt.objects.exists()


def test_a_command_is_one_per_user_and_there_is_a_limit(user, other_user, settings):
    api = token_client(user)
    assert api.post("/api/prompts/", {"command": "tldr", "content": "Sum up:"}, format="json").status_code == 201
    again = api.post("/api/prompts/", {"command": "TLDR", "content": "Again"}, format="json")
    assert again.status_code == 400 and "already have" in again.json()["command"][0]
    other = api.post("/api/prompts/", {"command": "other", "content": "x"}, format="json").json()
    clash = api.patch(f"/api/prompts/{other['id']}/", {"command": "tldr"}, format="json")
    assert clash.status_code == 400 and SavedPrompt.objects.get(pk=other["id"]).command == "other"
    # Another user may use the same command.
    assert token_client(other_user).post("/api/prompts/", {"command": "tldr", "content": "Mine"},
                                         format="json").status_code == 201

    SavedPrompt.objects.bulk_create(SavedPrompt(owner=user, command=f"p{i}", title="t", content="c")
                                    for i in range(MAX_PROMPTS_PER_USER - 2))
    full = api.post("/api/prompts/", {"command": "onemore", "content": "x"}, format="json")
    assert full.status_code == 400 and "the most there can be" in full.json()["detail"]


def test_the_list_the_slash_menu_reads_again_is_not_sent_again_while_unchanged(user, other_user):
    # The "/" menu reads the list at every opening; a browser revalidates its copy (If-None-Match), and
    # the prompts' texts (up to 200 of 200,000 characters) come again only when something changed.
    api = token_client(user)
    tldr = prompt_create(owner=user, command="tldr", title="", content="Summarize this")
    first = api.get("/api/prompts/?limit=200")
    etag = first["ETag"]
    assert first.status_code == 200 and etag and "no-cache" in first["Cache-Control"]
    unchanged = api.get("/api/prompts/?limit=200", HTTP_IF_NONE_MATCH=etag)
    assert unchanged.status_code == 304 and not unchanged.content

    changes = [
        lambda: api.patch(f"/api/prompts/{tldr.pk}/", {"content": "Summarize this, briefly"}, format="json"),
        lambda: api.post("/api/prompts/", {"command": "fix", "content": "Fix the grammar"}, format="json"),
        lambda: api.delete(f"/api/prompts/{tldr.pk}/"),
    ]
    for change in changes:
        assert change().status_code in (200, 201, 204)
        again = api.get("/api/prompts/?limit=200", HTTP_IF_NONE_MATCH=etag)
        assert again.status_code == 200 and again["ETag"] != etag
        etag = again["ETag"]
    assert api.get("/api/prompts/?limit=1", HTTP_IF_NONE_MATCH=etag).status_code == 200  # another page
    prompt_create(owner=other_user, command="fix", title="", content="Theirs")
    theirs = token_client(other_user).get("/api/prompts/?limit=200", HTTP_IF_NONE_MATCH=etag)
    assert theirs.status_code == 200 and theirs.json()["results"][0]["content"] == "Theirs"


def test_another_users_prompt_is_404_everywhere(user, other_user, page):
    theirs = prompt_create(owner=other_user, command="secret", content="Their text")
    api = token_client(user)

    assert api.get(f"/api/prompts/{theirs.pk}/").status_code == 404
    assert api.patch(f"/api/prompts/{theirs.pk}/", {"title": "x"}, format="json").status_code == 404
    assert api.delete(f"/api/prompts/{theirs.pk}/").status_code == 404
    assert api.get("/api/prompts/").json()["results"] == []
    assert page.post(reverse("prompt-edit", args=[theirs.pk]), {f"prompt-{theirs.pk}-command": "x"}).status_code == 404
    assert page.post(reverse("prompt-remove", args=[theirs.pk])).status_code == 404
    assert "Their text" not in page.get(reverse("settings")).content.decode()
    assert SavedPrompt.objects.get(pk=theirs.pk).title == "secret"


def test_settings_adds_edits_and_deletes_prompts(page, user):
    added = page.post(reverse("prompt-add"), {"prompt-new-command": "review", "prompt-new-title": "Code review",
                                              "prompt-new-content": "Review this:"})
    prompt = SavedPrompt.objects.get(owner=user)
    assert added.status_code == 302 and added["Location"].endswith(f"#prompt-{prompt.pk}")
    shown = page.get(reverse("settings")).content.decode()
    assert "<code>/review</code> Code review" in shown

    edited = page.post(reverse("prompt-edit", args=[prompt.pk]), {
        f"prompt-{prompt.pk}-command": "review", f"prompt-{prompt.pk}-title": "Review",
        f"prompt-{prompt.pk}-content": "Review this, briefly:"})
    assert edited.status_code == 302
    prompt.refresh_from_db()
    assert (prompt.title, prompt.content) == ("Review", "Review this, briefly:")

    assert page.post(reverse("prompt-remove", args=[prompt.pk])).status_code == 302
    assert not SavedPrompt.objects.exists()
    assert 'id="prompts-none"' in page.get(reverse("settings")).content.decode()


def test_a_refused_settings_form_shows_why_and_keeps_the_text_typed(page, user):
    prompt_create(owner=user, command="review", content="Review this:")

    refused = page.post(reverse("prompt-add"), {"prompt-new-command": "review", "prompt-new-title": "",
                                                "prompt-new-content": "A long text I typed"})

    assert refused.status_code == 400
    body = refused.content.decode()
    assert "You already have a prompt “/review”." in body
    assert "A long text I typed</textarea>" in body
    assert '<details class="add-config" id="add-prompt" open>' in body
    assert SavedPrompt.objects.count() == 1


def test_every_field_refused_is_said_at_once(user):
    # A blank text was refused by the API's own check before the service looked at the command: the
    # client fixed the text and sent again, only then told its command was wrong too.
    refused = token_client(user).post("/api/prompts/", {"command": "two words", "content": ""}, format="json")

    assert refused.status_code == 400
    assert "lowercase letters" in " ".join(refused.json()["command"])
    assert "Write the prompt's text." in refused.json()["content"]


def test_settings_says_every_field_refused_at_once(page, user):
    # The form's own "required" on the text refused it before the command was looked at: fixed and sent
    # again, the form then said the command was wrong too.
    refused = page.post(reverse("prompt-add"), {"prompt-new-command": "two words", "prompt-new-title": "",
                                                "prompt-new-content": ""})

    assert refused.status_code == 400
    body = refused.content.decode()
    assert 'id="id_prompt-new-command_error"' in body and "lowercase letters, digits" in body
    assert 'id="id_prompt-new-content_error"' in body
    assert 'value="two words"' in body
