"""System prompts (issue 13, item 3): the user's custom instructions (Settings) and a system prompt per
conversation (its header menu) open every request as the static layer, are counted by the gauge, and a
change applies from the next turn and is marked on that turn's optimization record."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

import optimizer
from chatapp.chat.context_pack import context_build
from chatapp.chat.gauge import context_gauge
from chatapp.chat.models import Conversation, OptimizationRecord, UserSettings
from chatapp.chat.selectors import user_settings_get
from chatapp.chat.services import SYSTEM_PROMPT_MAX_CHARS, conversation_set_system_prompt, user_settings_update
from chatapp.dashboard.turns import dashboard_record_context
from chatapp.providers.llm import llm_target_for
from tests.support.chat import make_config, post_stream, seed_messages, send
from tests.support.fake_openai import strict_template_problem

pytestmark = pytest.mark.django_db

INSTRUCTIONS = "I am a database engineer. Answer in short paragraphs and name PostgreSQL versions."
PROMPT = "You review SQL migrations. Point out locking problems before anything else."


def _record(result) -> OptimizationRecord:
    assert result.names[-1] == "done", result.events
    return OptimizationRecord.objects.get(reply_id=result.named("start")[0]["assistant_message"]["id"])


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _set_prompts(user, conversation, *, instructions: str = "", prompt: str = "") -> None:
    user_settings_update(user=user, custom_instructions=instructions)
    conversation_set_system_prompt(conversation=conversation, text=prompt)


def test_the_prompts_reach_the_model_as_one_leading_system_message(user, conversation, fake_openai):
    _set_prompts(user, conversation, instructions=INSTRUCTIONS, prompt=PROMPT)
    fake_openai.reset()

    record = _record(send(user, conversation, "Is adding a NOT NULL column safe?"))

    received = fake_openai.completions[-1].messages
    assert received[0] == {"role": "system", "content": f"{INSTRUCTIONS}\n\n{PROMPT}"}
    assert received[1:] == [{"role": "user", "content": "Is adding a NOT NULL column safe?"}]
    # The record says what was sent in their place: the text itself, since no message row holds it.
    first, second = record.sent[:2]
    assert (first["source_ids"], first["system_prompt"], first["content"]) == (["instructions"], "instructions",
                                                                              INSTRUCTIONS)
    assert (second["source_ids"], second["system_prompt"], second["content"]) == (["system-prompt"], "conversation",
                                                                                 PROMPT)
    assert first["role"] == second["role"] == "system"
    assert record.stats["system_prompt_tokens"] == first["tokens"] + second["tokens"] > 0
    assert len(record.stats["system_prompt_hash"]) == 16
    assert "system_prompt_changed" not in record.stats  # the first turn changes nothing
    assert record.dropped_ranges == []
    # Merging the two prompts into one message is how any request goes out, not a saving.
    assert (record.strategy, record.tokens_full) == ("none", record.tokens_sent)


def test_a_chat_without_prompts_sends_and_records_none(user, conversation, fake_openai):
    fake_openai.reset()
    record = _record(send(user, conversation, "Hello"))
    assert fake_openai.completions[-1].messages == [{"role": "user", "content": "Hello"}]
    assert record.stats["system_prompt_tokens"] == 0
    assert record.stats["system_prompt_hash"] == ""
    assert all("system_prompt" not in entry for entry in record.sent)


def test_prompts_of_only_invisible_characters_are_no_prompts(user, conversation, fake_openai):
    """White space alone was dropped, but a zero-width space or a byte order mark (pasted alone, and
    blank in the settings' box) was stored and sent as a system message of its own, counted too."""
    _set_prompts(user, conversation, instructions="\u200b", prompt="\ufeff\n\u2060 ")
    assert (user_settings_get(user=user).custom_instructions, conversation.system_prompt) == ("", "")
    fake_openai.reset()
    record = _record(send(user, conversation, "Hello"))
    assert fake_openai.completions[-1].messages == [{"role": "user", "content": "Hello"}]
    assert record.stats["system_prompt_tokens"] == 0


def test_the_prompts_survive_truncation_of_a_long_conversation(user, fake_openai):
    # A strict template too: the prompts, then the summary-free window, roles alternating.
    config = make_config(user, fake_openai.base_url, model="strict-echo", window=3_000, max_output=500)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    seed_messages(conversation, 300, model="strict-echo")
    _set_prompts(user, conversation, instructions=INSTRUCTIONS, prompt=PROMPT)
    fake_openai.reset()

    record = _record(send(user, conversation, "What did we decide about the index?"))

    received = fake_openai.completions[-1].messages
    assert strict_template_problem(received) is None
    assert received[0]["role"] == "system"
    assert received[0]["content"].startswith(f"{INSTRUCTIONS}\n\n{PROMPT}")
    assert record.sent[0]["system_prompt"] == "instructions" and record.sent[1]["system_prompt"] == "conversation"
    assert record.dropped_ranges, "most of the 300 messages were left out"
    assert record.tokens_sent <= record.budget
    conversation.refresh_from_db()
    assert isinstance(conversation.window_start_id, int)


def test_the_gauge_counts_the_prompts(user, conversation, fake_openai):
    send(user, conversation, "First question")
    conversation.refresh_from_db()
    model = conversation.llm_config.model
    bare = context_gauge(conversation=conversation, user=user)["tokens"]

    conversation_set_system_prompt(conversation=conversation, text=PROMPT)
    with_prompt = context_gauge(conversation=conversation, user=user)["tokens"]
    assert with_prompt - bare == optimizer.count_message({"role": "system", "content": PROMPT}, model=model)

    user_settings_update(user=user, custom_instructions=INSTRUCTIONS)
    both = context_gauge(conversation=conversation, user=user)["tokens"]
    # The two are sent as one system message: counted as that message.
    joined = {"role": "system", "content": f"{INSTRUCTIONS}\n\n{PROMPT}"}
    assert both - bare == optimizer.count_message(joined, model=model)

    # And the API's gauge (what the chat page refreshes after saving a prompt) says the same.
    assert _api(user).get(f"/api/conversations/{conversation.pk}/context/").json()["tokens"] == both
    # The next turn sends what the gauge announced, plus the new message.
    record = _record(send(user, conversation, "Second question"))
    new_message = optimizer.count_message({"role": "user", "content": "Second question"}, model=model)
    assert record.tokens_sent == both + new_message


def test_a_change_applies_from_the_next_turn_and_is_recorded(user, conversation, fake_openai):
    api = _api(user)
    conversation_set_system_prompt(conversation=conversation, text="Answer in English.")
    first = _record(send(user, conversation, "One"))
    assert fake_openai.completions[-1].messages[0] == {"role": "system", "content": "Answer in English."}

    response = api.patch(f"/api/conversations/{conversation.pk}/", {"system_prompt": "Answer in French."},
                         format="json")
    assert response.status_code == 200 and response.json()["system_prompt"] == "Answer in French."
    second = _record(send(user, conversation, "Two"))
    assert fake_openai.completions[-1].messages[0] == {"role": "system", "content": "Answer in French."}
    third = _record(send(user, conversation, "Three"))

    api.patch("/api/settings/", {"custom_instructions": INSTRUCTIONS}, format="json")
    fourth = _record(send(user, conversation, "Four"))
    api.patch(f"/api/conversations/{conversation.pk}/", {"system_prompt": ""}, format="json")
    user_settings_update(user=user, custom_instructions="")
    fifth = _record(send(user, conversation, "Five"))

    for record in (first, second, third, fourth, fifth):
        record.refresh_from_db()
    changed = [r.stats.get("system_prompt_changed", False) for r in (first, second, third, fourth, fifth)]
    assert changed == [False, True, False, True, True]
    assert fifth.stats["system_prompt_hash"] == "" and fifth.stats["system_prompt_tokens"] == 0
    assert fake_openai.completions[-1].messages[0]["role"] == "user"
    # Each record keeps the text it sent, whatever the prompt says now.
    assert first.sent[0]["content"] == "Answer in English."
    assert second.sent[0]["content"] == "Answer in French."


def test_regenerate_sends_the_current_prompts(user, conversation, fake_openai):
    record = _record(send(user, conversation, "Name a lock mode."))
    conversation_set_system_prompt(conversation=conversation, text=PROMPT)
    fake_openai.reset()

    result = post_stream(user, f"/api/messages/{record.reply_id}/regenerate/")

    assert result.names[-1] == "done", result.events
    assert fake_openai.completions[-1].messages[0] == {"role": "system", "content": PROMPT}
    regenerated = _record(result)
    regenerated.refresh_from_db()
    assert regenerated.stats["system_prompt_changed"] is True


def test_prompts_cost_no_query_on_the_request_path(user, conversation):
    seed_messages(conversation, 20)
    target = llm_target_for(config=conversation.llm_config)

    def queries() -> int:
        # The settings row and the conversation row are what the turn already holds.
        instructions = user_settings_get(user=user).custom_instructions
        conversation.refresh_from_db()
        with CaptureQueriesContext(connection) as captured:
            context_build(conversation=conversation, preference="balanced", target=target, store_window=False,
                          instructions=instructions)
        return len(captured)

    before = queries()
    _set_prompts(user, conversation, instructions=INSTRUCTIONS, prompt=PROMPT)
    assert queries() == before


def test_a_window_reaching_the_head_starts_at_the_first_message_not_at_a_prompt(user, conversation):
    ids = seed_messages(conversation, 6)
    conversation_set_system_prompt(conversation=conversation, text=PROMPT)
    # Running totals far above what is stored (as after an import): the optimizer cuts with no window
    # yet, and everything loaded fits, so its window starts at position 0 — the prompt.
    Conversation.objects.filter(pk=conversation.pk).update(live_token_count=1_000_000)
    conversation.refresh_from_db()
    target = llm_target_for(config=conversation.llm_config)

    result, _ = context_build(conversation=conversation, preference="balanced", target=target)

    assert result.window_start == str(ids[0])
    assert result.messages[0].source_ids == ("system-prompt",)
    conversation.refresh_from_db()
    assert conversation.window_start_id == ids[0]


def test_the_api_validates_and_scopes_the_system_prompt(user, other_user, conversation):
    api = _api(user)
    url = f"/api/conversations/{conversation.pk}/"

    too_long = api.patch(url, {"system_prompt": "x" * (SYSTEM_PROMPT_MAX_CHARS + 1), "title": "Renamed"},
                         format="json")
    assert too_long.status_code == 400
    assert "at most 20,000 characters" in too_long.json()["system_prompt"][0]
    conversation.refresh_from_db()
    assert (conversation.system_prompt, conversation.title) == ("", "New chat")  # a 400 changes nothing

    saved = api.patch(url, {"system_prompt": "  Be brief.\r\nUse SI units.  "}, format="json")
    assert saved.status_code == 200
    assert saved.json()["system_prompt"] == "Be brief.\nUse SI units."
    assert api.get(url).json()["system_prompt"] == "Be brief.\nUse SI units."
    # 20,000 characters exactly are accepted.
    assert api.patch(url, {"system_prompt": "y" * SYSTEM_PROMPT_MAX_CHARS}, format="json").status_code == 200

    theirs = _api(other_user)
    assert theirs.get(url).status_code == 404
    assert theirs.patch(url, {"system_prompt": "Leak everything."}, format="json").status_code == 404
    conversation.refresh_from_db()
    assert conversation.system_prompt == "y" * SYSTEM_PROMPT_MAX_CHARS


def test_the_settings_api_validates_custom_instructions(user):
    api = _api(user)
    too_long = api.patch("/api/settings/", {"custom_instructions": "x" * (SYSTEM_PROMPT_MAX_CHARS + 1)},
                         format="json")
    assert too_long.status_code == 400
    assert "Custom instructions must be at most 20,000 characters" in too_long.json()["custom_instructions"][0]

    saved = api.patch("/api/settings/", {"custom_instructions": " Call me Ada.\n"}, format="json")
    assert saved.status_code == 200 and saved.json()["custom_instructions"] == "Call me Ada."
    assert api.get("/api/settings/").json()["custom_instructions"] == "Call me Ada."
    # Another setting leaves the instructions alone.
    api.patch("/api/settings/", {"preference": "fast"}, format="json")
    assert UserSettings.objects.get(user=user).custom_instructions == "Call me Ada."


def test_the_schema_documents_both_prompts(user):
    schema = _api(user).get("/api/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]
    assert "system_prompt" in components["ConversationOutput"]["properties"]
    assert "custom_instructions" in components["UserSettingsOutput"]["properties"]
    patch = components["PatchedConversationDetailInput"]["properties"]["system_prompt"]
    assert "never dropped" in patch["description"]
    assert "custom_instructions" in components["PatchedUserSettingsInput"]["properties"]


def test_the_settings_form_saves_custom_instructions(client, user):
    client.force_login(user)
    page = client.get("/settings/").content.decode()
    assert 'name="custom_instructions"' in page
    assert "Sent first in every chat, never dropped by the optimizer; counts against the context budget." in page

    response = client.post("/settings/instructions/", {"custom_instructions": "Call me Ada.\r\nBe brief."})
    assert response.status_code == 302 and response["Location"].endswith("/settings/#instructions-h")
    assert UserSettings.objects.get(user=user).custom_instructions == "Call me Ada.\nBe brief."
    assert "Call me Ada.\nBe brief.</textarea>" in client.get("/settings/").content.decode()

    refused = client.post("/settings/instructions/", {"custom_instructions": "x" * (SYSTEM_PROMPT_MAX_CHARS + 1)})
    assert refused.status_code == 400
    assert "at most 20,000 characters" in refused.content.decode()
    assert UserSettings.objects.get(user=user).custom_instructions == "Call me Ada.\nBe brief."
    # Saving the preferences form does not touch them.
    client.post("/settings/", {"preference": "quality", "auto_optimize": "on"})
    assert UserSettings.objects.get(user=user).custom_instructions == "Call me Ada.\nBe brief."


def test_the_chat_page_has_the_header_menu_and_dialog(client, user, conversation):
    client.force_login(user)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert 'data-action="edit-system-prompt"' in page
    assert '<dialog class="dialog dialog--wide" id="system-prompt-dialog" aria-labelledby="system-prompt-title"' in page
    for fmt in ("markdown", "json"):
        assert f'download href="/api/conversations/{conversation.pk}/export/?format={fmt}"' in page
        assert client.get(f"/api/conversations/{conversation.pk}/export/?format={fmt}").status_code == 200


def test_the_dashboard_shows_the_prompt_text_as_sent(user, conversation, fake_openai):
    _set_prompts(user, conversation, instructions=INSTRUCTIONS, prompt=PROMPT)
    record = _record(send(user, conversation, "Hello"))
    # Changed afterwards: "what the model saw" still shows what that turn sent.
    _set_prompts(user, conversation, instructions="Something else", prompt="")

    entries = dashboard_record_context(conversation=conversation, record_id=record.pk)["entries"]

    assert [(e["system_prompt"], e["role"], e["content"], e["content_is_sent_text"], e["missing"])
            for e in entries[:2]] == [
        ("instructions", "system", INSTRUCTIONS, True, False),
        ("conversation", "system", PROMPT, True, False),
    ]
    assert entries[2]["content"] == "Hello" and entries[2]["system_prompt"] is None
    api = _api(user).get(f"/api/dashboard/conversations/{conversation.pk}/records/{record.pk}/")
    assert api.status_code == 200
    assert api.json()["entries"][0]["content"] == INSTRUCTIONS
