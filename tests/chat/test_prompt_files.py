"""Settings → Prompts: the prompts exported as a JSON file, and such a file imported (this page's
export, here or on another server, or Open WebUI's), adding what is new and never overwriting."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from chatapp.chat.prompt_models import SavedPrompt
from chatapp.chat.prompt_services import MAX_PROMPTS_PER_USER, prompt_create

pytestmark = pytest.mark.django_db


def _signed_in(client, username: str):
    user = get_user_model().objects.create_user(username=username, password="a long test password 9")
    client.force_login(user)
    return user


def _report(page) -> list[str]:
    """The lines of the import's report on Settings' page."""
    return [html.unescape(text) for text in re.findall(r'<p class="prompt-import-line[^"]*">(.*?)</p>',
                                                       page.content.decode(), flags=re.S)]


def _import(client, content: bytes | str, name: str = "prompts.json"):
    data = content.encode() if isinstance(content, str) else content
    page = client.post(reverse("prompt-import"), {"file": SimpleUploadedFile(name, data)}, follow=True)
    assert page.redirect_chain[-1][0].endswith("#prompt-import-report")
    return _report(page)


def _mine(user) -> list[tuple[str, str, str]]:
    return list(SavedPrompt.objects.filter(owner=user).order_by("command").values_list("command", "title", "content"))


def test_exported_prompts_imported_by_another_account_are_the_same_prompts(client):
    ada = _signed_in(client, "ada")
    prompt_create(owner=ada, command="review", title="Review my code", content="Review this code:\n\n")
    prompt_create(owner=ada, command="eli5", content="Explain as to a child: «ça va»")

    exported = client.get(reverse("prompt-export"))

    assert exported.status_code == 200
    assert exported["Content-Disposition"] == 'attachment; filename="prompts.json"'
    assert exported["Cache-Control"] == "no-store"  # the user's own data, as every other download
    grace = _signed_in(client, "grace")
    said = _import(client, exported.content)
    assert _mine(grace) == _mine(ada)
    assert said == ["Imported 2 prompts: /eli5, /review."]


def test_a_file_of_open_webuis_prompts_export_is_imported(client):
    # Open WebUI writes its prompts with the "/" and fields of its own, which are not ours to keep.
    items = [{"command": "/summarize", "user_id": "u-1", "title": "Summarize", "content": "Summarize: {{CLIPBOARD}}",
              "timestamp": 1732000000, "access_control": None}]
    user = _signed_in(client, "owui")

    assert _import(client, json.dumps(items)) == ["Imported 1 prompt: /summarize."]
    assert _mine(user) == [("summarize", "Summarize", "Summarize: {{CLIPBOARD}}")]


def test_an_import_never_overwrites_a_prompt_already_there_and_says_which_it_skipped(client):
    user = _signed_in(client, "keeper")
    prompt_create(owner=user, command="review", title="Mine", content="My own words")
    file = [{"command": "/review", "title": "Theirs", "content": "Their words"},
            {"command": "/fix", "title": "", "content": "Fix this:"},
            {"command": "/fix", "title": "Again", "content": "Twice in the file"}]

    said = _import(client, json.dumps(file))

    assert _mine(user) == [("fix", "fix", "Fix this:"), ("review", "Mine", "My own words")]
    assert said[0] == "Imported 1 prompt: /fix."
    assert said[1] == "Skipped 1 whose command you already have (yours kept as it was): /review."
    assert said[2] == "Skipped 1 given again in the file (the first one imported): /fix."


def test_items_that_fail_the_forms_checks_are_refused_with_why_and_the_rest_imported(client):
    user = _signed_in(client, "mixed")
    file = {"prompts": [{"command": "two words", "content": "x"}, {"command": "/ok", "content": "Fine"},
                        {"command": "/compact", "content": "x"}, {"command": "/empty", "content": "  "},
                        {"title": "no command", "content": "x"}]}

    said = _import(client, json.dumps(file))

    assert _mine(user) == [("ok", "ok", "Fine")]
    assert said[0] == "Imported 1 prompt: /ok."
    assert said[1].startswith("Not imported: “two words”: use 1 to 40 lowercase letters")
    assert "“/compact”: “/compact” is the message box's own command" in said[1] and said[1].endswith(" And 1 more.")


@pytest.mark.parametrize(("content", "words"), [
    (b"\x89PNG not json", "The file is not JSON"),
    ('{"format": "longchat.conversation", "messages": []}', "Expected a list of prompts"),
    ('[["review", "x"]]', "Expected a list of prompts"),
    ("[]", "holds no prompts"),
    # Open WebUI's chats export and ChatGPT's conversations.json, lists of objects too, picked by mistake
    # beside the prompts file: each was refused as a prompt, "item 1: use 1 to 40 lowercase letters…"
    # three times and "And 497 more.", as if the file were prompts with bad commands.
    ('[{"id": "c1", "user_id": "u", "title": "Trip plan", "chat": {"messages": []}}]', "Expected a list of prompts"),
    ('[{"title": "Trip plan", "create_time": 1.5, "mapping": {}}, {"title": "Other", "mapping": {}}]',
     "Expected a list of prompts"),
])
def test_a_file_that_is_not_a_list_of_prompts_is_refused_whole(client, content, words):
    user = _signed_in(client, "wrong-file")

    said = _import(client, content)

    assert len(said) == 1 and words in said[0]
    assert _mine(user) == []


def test_an_import_stops_adding_at_the_most_prompts_an_account_holds(client):
    user = _signed_in(client, "full")
    SavedPrompt.objects.bulk_create(SavedPrompt(owner=user, command=f"p{i}", title=f"p{i}", content="x")
                                    for i in range(MAX_PROMPTS_PER_USER - 1))
    file = [{"command": f"/new{i}", "content": "y"} for i in range(3)]

    said = _import(client, json.dumps(file))

    assert SavedPrompt.objects.filter(owner=user).count() == MAX_PROMPTS_PER_USER
    assert said[0] == "Imported 1 prompt: /new0."
    assert said[1].startswith(f"Not imported, past the {MAX_PROMPTS_PER_USER} prompts an account holds: /new1, /new2.")


def test_the_export_holds_only_the_signed_in_users_prompts_and_needs_a_sign_in(client):
    other = get_user_model().objects.create_user(username="other", password="a long test password 9")
    prompt_create(owner=other, command="secret", content="Not yours")
    assert client.get(reverse("prompt-export"))["Location"].startswith(reverse("login"))
    assert client.post(reverse("prompt-import"))["Location"].startswith(reverse("login"))
    _signed_in(client, "me")

    assert json.loads(client.get(reverse("prompt-export")).content) == []
    assert _report(client.post(reverse("prompt-import"), follow=True)) == ["Choose a prompts file to import."]


@pytest.mark.parametrize("encoded", [
    lambda text: b"\xef\xbb\xbf" + text.encode(),  # Notepad's "UTF-8 with BOM"
    lambda text: text.encode("utf-16"),  # Windows PowerShell 5's Out-File: UTF-16 with its BOM
], ids=["utf-8 with bom", "utf-16"])
def test_a_file_saved_by_windows_tools_with_a_byte_order_mark_is_imported(client, encoded):
    # A prompts file opened and saved again in Notepad, or written by PowerShell, starts with a byte order
    # mark: it was refused whole as "not JSON", though JSON's RFC lets a reader ignore the mark.
    user = _signed_in(client, "windows")

    said = _import(client, encoded(json.dumps([{"command": "/fix", "content": "Fix «this»"}], ensure_ascii=False)))

    assert _mine(user) == [("fix", "fix", "Fix «this»")]
    assert said == ["Imported 1 prompt: /fix."]


def test_a_full_account_importing_prompts_it_already_has_is_told_they_were_skipped_not_refused(client):
    # At the most prompts there can be, every item of the file was refused for the limit, even the
    # prompts already there: importing one's own export said "Not imported: … you hold 200 prompts",
    # as if prompts were lost, when nothing was missing.
    user = _signed_in(client, "full-again")
    SavedPrompt.objects.bulk_create(SavedPrompt(owner=user, command=f"p{i:03}", title=f"p{i}", content="x")
                                    for i in range(MAX_PROMPTS_PER_USER))
    exported = client.get(reverse("prompt-export")).content

    said = _import(client, exported)

    assert len(said) == 1 and said[0].startswith(f"Skipped {MAX_PROMPTS_PER_USER} whose command you already have")
    assert SavedPrompt.objects.filter(owner=user).count() == MAX_PROMPTS_PER_USER


def test_a_command_twice_in_the_file_is_said_to_be_twice_in_the_file(client):
    # The second of two items with one command was listed among those "whose command you already have":
    # the user, who had no such prompt, read that the file's first one had not been imported.
    user = _signed_in(client, "twice")
    file = [{"command": "/fix", "title": "First", "content": "Fix this:"},
            {"command": "/FIX", "title": "Second", "content": "Fix that:"}]

    said = _import(client, json.dumps(file))

    assert _mine(user) == [("fix", "First", "Fix this:")]
    assert said == ["Imported 1 prompt: /fix.", "Skipped 1 given again in the file (the first one imported): /fix."]


def test_a_title_longer_than_ours_from_open_webui_is_shortened_not_the_prompt_refused(client):
    # Open WebUI keeps a title of any length: such a prompt was refused whole, said as "Ensure this field
    # has no more than 100 characters." (which field, the file's user could not tell), its text lost.
    user = _signed_in(client, "long-title")
    title = "Rewrite the following paragraph in plain English for a general audience, keeping every fact " * 2

    said = _import(client, json.dumps([{"command": "/plain", "title": title, "content": "Rewrite:"}]))

    assert said == ["Imported 1 prompt: /plain."]
    [(command, kept, content)] = _mine(user)
    assert (command, content) == ("plain", "Rewrite:")
    assert len(kept) <= 100 and kept.endswith("…") and title.startswith(kept[:-1])


def test_prompts_past_the_limit_are_named_once_with_how_to_import_them_later(client):
    # Past the limit each prompt left out was a refusal of its own, the reason said again for each
    # ("…the most there can be.; /new2: you hold 200 prompts, the most there can be.; …") and only 3
    # named: the user could not tell which prompts of the file were missing, nor how to get them.
    user = _signed_in(client, "over")
    SavedPrompt.objects.bulk_create(SavedPrompt(owner=user, command=f"p{i:03}", title="t", content="x")
                                    for i in range(MAX_PROMPTS_PER_USER - 1))
    file = [{"command": f"/new{i}", "content": "y"} for i in range(6)] + [{"command": "two words", "content": "z"}]

    said = _import(client, json.dumps(file))

    assert said[0] == "Imported 1 prompt: /new0."
    assert said[1] == (f"Not imported, past the {MAX_PROMPTS_PER_USER} prompts an account holds: /new1, /new2, "
                       "/new3, /new4, /new5. Delete some, then import the file again (the prompts already here "
                       "are skipped).")
    assert said[2].startswith("Not imported: “two words”: use 1 to 40 lowercase letters")


def test_refused_items_are_said_in_readable_sentences_with_their_names_kept_short(client):
    # Each reason ended with its full stop before the next was joined on ("…box).; /compact: …"), and an
    # item's "command" was quoted whole however long (a file whose commands hold whole texts).
    user = _signed_in(client, "refused")
    long_command = "Summarize the following meeting notes into a list of decisions and actions " * 20
    file = [{"command": "two words", "content": "x"}, {"command": "/compact", "content": "x"},
            {"command": long_command, "content": "x"}]

    said = _import(client, json.dumps(file))

    assert _mine(user) == []
    assert said == ["Not imported: “two words”: use 1 to 40 lowercase letters, digits, “-” or “_”, starting with a "
                    "letter or digit (typed after “/” in the message box). “/compact”: “/compact” is the message "
                    "box's own command: choose another. “Summarize the following meeting notes…”: use 1 to 40 "
                    "lowercase letters, digits, “-” or “_”, starting with a letter or digit (typed after “/” in the "
                    "message box)."]


def test_the_imports_report_stays_in_the_prompts_section_until_the_page_is_left(client):
    # The report was a toast, which fades after 4.5 s like any: "Imported … Skipped … Not imported: …"
    # (up to 8 commands each, and 3 reasons) was gone before it could be read, and nothing said it again.
    user = _signed_in(client, "reader")
    prompt_create(owner=user, command="review", content="Mine")
    file = [{"command": "/review", "content": "x"}, {"command": "/fix", "content": "Fix:"},
            {"command": "two words", "content": "x"}]

    page = client.post(reverse("prompt-import"), {"file": SimpleUploadedFile("p.json", json.dumps(file).encode())},
                       follow=True)

    body = page.content.decode()
    section = body[body.index('id="prompts-h"'):body.index("</section>", body.index('id="prompts-h"'))]
    report = section[section.index('id="prompt-import-report"'):]
    assert "Imported 1 prompt: /fix." in report and "/review" in report and "“two words”" in report
    assert 'role="status"' in section[section.index('id="prompt-import-report"') - 200:][:400]
    assert [str(m) for m in get_messages(page.wsgi_request)] == []  # not also a toast
    assert 'id="prompt-import-report"' not in client.get(reverse("settings")).content.decode()  # said once


def test_an_open_webui_command_longer_than_ours_is_imported_cut_to_40_characters(client):
    # Open WebUI makes a command from the title (its slug), of any length: such a prompt was refused
    # whole ("use 1 to 40 lowercase letters…"), its text lost to the import.
    user = _signed_in(client, "long-command")
    command = "/summarize-the-meeting-notes-into-a-list-of-actions"

    said = _import(client, json.dumps([{"command": command, "title": "Meeting actions", "content": "Summarize:"}]))

    assert _mine(user) == [("summarize-the-meeting-notes-into-a-list", "Meeting actions", "Summarize:")]
    assert said == ["Imported 1 prompt: /summarize-the-meeting-notes-into-a-list.",
                    "Cut to 40 characters, the longest a command is here: "
                    "/summarize-the-meeting-notes-into-a-list-of-actions became "
                    "/summarize-the-meeting-notes-into-a-list."]


def test_two_open_webui_commands_alike_in_their_first_40_characters_are_both_imported(client):
    # Cut to 40 characters, the second came out as the first's command: it was not imported, said to be
    # "given again in the file", though the file held two prompts, its text lost to the import.
    user = _signed_in(client, "alike")
    stem = "/translate-the-following-text-into-french"
    file = [{"command": f"{stem}-formal", "title": "Formal", "content": "Translate (vous):"},
            {"command": f"{stem}-informal", "title": "Informal", "content": "Translate (tu):"},
            {"command": f"{stem}-formal", "title": "Formal again", "content": "Translate (vous), again:"}]

    said = _import(client, json.dumps(file))

    assert _mine(user) == [("translate-the-following-text-into-fren-2", "Informal", "Translate (tu):"),
                           ("translate-the-following-text-into-french", "Formal", "Translate (vous):")]
    assert said == ["Imported 2 prompts: /translate-the-following-text-into-french, "
                    "/translate-the-following-text-into-fren-2.",
                    "Cut to 40 characters, the longest a command is here: "
                    "/translate-the-following-text-into-french-formal became "
                    "/translate-the-following-text-into-french, /translate-the-following-text-into-french-informal "
                    "became /translate-the-following-text-into-fren-2.",
                    "Skipped 1 given again in the file (the first one imported): "
                    "/translate-the-following-text-into-french."]
    # The same file again adds nothing: each prompt is found under the command it was given here.
    assert _import(client, json.dumps(file))[0].startswith("Skipped 3 whose command you already have")
    assert len(_mine(user)) == 2


def test_a_long_title_is_shortened_between_the_letters_a_reader_sees(client):
    # Cut at its 99th code point, a Hindi title lost the vowel sign of its last letter ("हु" shown as "ह"):
    # another word than the file's. The cut falls before the whole letter, as a chat's title is cut.
    user = _signed_in(client, "hindi-title")
    title = ("कृपया, इस लेख का सारांश तीन वाक्यों में लिखें, मुख्य बिंदुओं और निष्कर्षों को स्पष्ट रूप से बताते "
             "हुए, सरल हिंदी में लिखिए ताकि हर पाठक इसे आसानी से समझ सके")

    _import(client, json.dumps([{"command": "/summary", "title": title, "content": "Summarize:"}]))

    [(_, kept, _)] = _mine(user)
    assert kept.endswith("बताते…") and title.startswith(kept[:-1])


def test_a_file_of_the_newer_open_webuis_prompts_export_keeps_each_prompts_name(client):
    # Open WebUI's newer prompts (with versions and tags) call the title "name" and keep the command
    # without its "/": imported, each prompt showed its command where its name belonged.
    items = [{"id": "9f1c", "command": "summarize", "name": "Summarize a text", "content": "Summarize: {{CLIPBOARD}}",
              "tags": ["writing"], "is_active": True, "access_grants": [], "created_at": 1760000000}]
    user = _signed_in(client, "owui-named")

    assert _import(client, json.dumps(items)) == ["Imported 1 prompt: /summarize."]
    assert _mine(user) == [("summarize", "Summarize a text", "Summarize: {{CLIPBOARD}}")]
