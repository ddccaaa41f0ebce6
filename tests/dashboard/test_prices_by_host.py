"""A model named by its provider's own name (Mistral's API calls "mistral/mistral-large-latest"
"mistral-large-latest") is priced as its window is found: by the endpoint's host, as the request was
made (the config may move to another endpoint later)."""

from __future__ import annotations

import pytest

import optimizer
from chatapp.chat.models import Conversation, Message, OptimizationRecord, SummaryJob
from chatapp.chat.services import user_settings_update
from chatapp.chat.summary_runner import summary_job_run
from chatapp.providers import netguard
from chatapp.providers.crypto import secret_encrypt
from chatapp.providers.llm import addresses
from tests.support.chat import TEST_KEY, make_config, post_stream, send

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_rate_limit")]

MISTRAL = "api.mistral.ai"


@pytest.fixture
def mistral_url(fake_openai, monkeypatch):
    """A base URL on Mistral's host name, answered by the fake endpoint (its host resolves to it)."""
    fake_openai.reset()
    real = netguard._resolve
    monkeypatch.setattr(netguard, "_resolve", lambda host, port: ["127.0.0.1"] if host == MISTRAL else real(host, port))
    addresses.host_lookups_forget()
    port = fake_openai.base_url.split(":")[2].split("/")[0]
    yield f"http://{MISTRAL}:{port}/v1"
    addresses.host_lookups_forget()


def _mistral_price(tokens: int) -> float:
    info = optimizer.model_info("mistral-large-latest", provider="mistral")
    assert info is not None and info.input_cost_per_token
    assert optimizer.model_info("mistral-large-latest") is None  # the name alone is not priced
    return tokens * info.input_cost_per_token


def test_a_turn_on_mistrals_own_model_name_is_priced(user, client, mistral_url):
    config = make_config(user, mistral_url, model="mistral-large-latest", window=16_000, max_output=500)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    assert send(user, conversation, "Which tent for a windy ridge? " * 10).names[-1] == "done"

    record = OptimizationRecord.objects.get(conversation=conversation)
    assert record.cost_sent_usd is not None
    assert float(record.cost_sent_usd) == pytest.approx(_mistral_price(record.tokens_sent), abs=1e-6)
    client.force_login(user)
    money = client.get(f"/api/dashboard/conversations/{conversation.pk}/").json()["money"]
    assert money["unpriced_records"] == 0, money
    assert money["sent_usd"] == pytest.approx(float(record.cost_sent_usd))
    assert money["prices"] is not None and money["prices"]["input"] > 0
    series = client.get(f"/api/dashboard/conversations/{conversation.pk}/series/").json()
    estimate = series["prompt_cache_estimate"]
    assert estimate["unpriced_turns"] == 0, estimate
    assert estimate["sent_usd"] == pytest.approx(_mistral_price(record.tokens_sent))


def test_a_refused_request_on_mistrals_own_model_name_is_named_refused(user, client, mistral_url):
    config = make_config(user, mistral_url, model="mistral-large-latest", window=16_000, max_output=500)
    config.api_key_encrypted = secret_encrypt("bad-key-0001")  # a 401: nothing billed
    config.save(update_fields=["api_key_encrypted"])
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    assert send(user, conversation, "Which tent for a windy ridge? " * 10).names[-1] == "error"
    config.api_key_encrypted = secret_encrypt(TEST_KEY)
    config.save(update_fields=["api_key_encrypted"])
    question = Message.objects.get(conversation=conversation, role="user")
    assert post_stream(user, f"/api/messages/{question.pk}/retry/").names[-1] == "done"

    client.force_login(user)
    money = client.get(f"/api/dashboard/conversations/{conversation.pk}/").json()["money"]
    assert money["refused_turns"] == 1, money
    assert money["unpriced_records"] == 0


def test_a_summary_by_mistrals_own_model_name_is_priced(user, client, mistral_url, published):
    chat = make_config(user, mistral_url, model="gpt-4o-mini", window=1600, max_output=200)
    summarizer = make_config(user, mistral_url, model="mistral-large-latest", name="summaries")
    user_settings_update(user=user, preference="quality", summary_config=summarizer)
    conversation = Conversation.objects.create(owner=user, llm_config=chat)
    for turn in range(14):
        assert send(user, conversation, f"Turn {turn}: " + "tents ridges stakes guylines wind " * 9).names[-1] == "done"
    client.force_login(user)
    compact = client.post(f"/api/conversations/{conversation.pk}/compact/", {}, content_type="application/json")
    assert compact.status_code in (200, 201, 202), compact.content
    for job in SummaryJob.objects.filter(conversation=conversation, status="pending"):
        summary_job_run(job_id=job.pk)

    job = SummaryJob.objects.filter(conversation=conversation, status="done").get()
    assert job.cost_usd is not None and job.cost_usd > 0
