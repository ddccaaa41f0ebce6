"""The built-in offline model: streams a description of its context, with no HTTP at all."""

from __future__ import annotations

import pytest

import optimizer
from chatapp.providers import llm
from chatapp.providers.llm import calls as llm_calls
from tests.support.llm import run_stream


@pytest.fixture(autouse=True)
def _no_network(monkeypatch, settings):
    settings.OFFLINE_MODEL_DELAY_MS = 0

    def forbidden(*args, **kwargs):
        raise AssertionError("the offline model must not make HTTP requests")

    monkeypatch.setattr(llm_calls, "_async_client", forbidden)
    monkeypatch.setattr(llm_calls, "_sync_client", forbidden)


def test_target_for_no_config_is_the_offline_model():
    target = llm.llm_target_for(config=None)
    assert target.offline is True
    assert target.label == "Offline demo model"
    assert (target.context_window, target.max_output_tokens) == (16384, 1024)


def test_offline_stream_describes_messages_tokens_and_summary():
    header = "[Conversation summary — covers messages 1-48, 21,300 → 1,050 characters]"
    messages = [
        {"role": "system", "content": f"{header}\nWe talked."},
        {"role": "user", "content": "First question"},
        {"role": "assistant", "content": "First answer"},
        {"role": "user", "content": "Tell me about the gauge please"},
    ]
    note = "12 older messages were left out."
    events, error = run_stream(llm.llm_target_for(config=None), messages, context_note=note)

    assert error is None
    deltas = [e for e in events if isinstance(e, llm.Delta)]
    text = "".join(d.text for d in deltas)
    assert len(deltas) > 20  # streamed word by word
    assert text.startswith("**Offline demo model**")
    tokens = optimizer.count_messages(messages, model=llm.OFFLINE_MODEL)
    assert "Messages received:** 4 (1 assistant, 1 system, 2 user)" in text
    assert f"Context size:** {tokens:,} tokens" in text
    assert f"Summary:** yes — {header}" in text
    assert note in text
    assert "“Tell me about the gauge please”" in text
    usage = events[-1]
    assert isinstance(usage, llm.Usage) and usage.prompt_tokens == tokens and usage.completion_tokens > 0


def test_offline_stream_without_summary_or_note():
    events, _ = run_stream(llm.llm_target_for(config=None), [{"role": "user", "content": "hi"}])
    text = "".join(e.text for e in events if isinstance(e, llm.Delta))
    assert "Summary:** none in this context." in text
    assert "no note from the app" in text


def test_offline_complete_and_connection_test():
    completion = llm.llm_complete(target=llm.llm_target_for(config=None), messages=[{"role": "user", "content": "hi"}])
    assert completion.text.startswith("**Offline demo model**") and completion.prompt_tokens > 0
    ok, message = llm.llm_test_connection(target=llm.llm_target_for(config=None))
    assert ok and "built in" in message


def test_a_one_character_message_is_said_in_the_singular():
    """A message of one character ("?", "k") was described as "1 characters"."""
    text = llm.offline_reply(messages=[{"role": "user", "content": "?"}])
    assert "- **Your last message:** 1 character, starting “?”" in text
    assert "- **Your last message:** 2 characters" in llm.offline_reply(messages=[{"role": "user", "content": "ok"}])


def test_the_demo_reply_says_a_chat_takes_an_added_model_from_its_model_menu():
    """A chat begun on the demo stays on it once a model is added (README): its replies went on saying
    "Add an OpenAI-compatible endpoint … in Settings to get real answers", to a user who had, and
    whose next step is the chat's own model menu."""
    events, _ = run_stream(llm.llm_target_for(config=None), [{"role": "user", "content": "and now?"}])
    text = "".join(e.text for e in events if isinstance(e, llm.Delta))
    assert "then pick it in this chat's model menu (in its header)" in text
    assert "before adding a model" not in text
