"""What the money card says: no saving where nothing was cut (a provider's prompt cache would have
served the full history too), unknown, not negative, where nothing is priced, and no spend for a
request the endpoint refused."""

from __future__ import annotations

import pytest

import optimizer
from chatapp.chat.models import Conversation, Message, OptimizationRecord, SummaryJob
from chatapp.chat.services import user_settings_update
from chatapp.chat.summary_runner import summary_job_run
from chatapp.providers.crypto import secret_encrypt
from tests.dashboard.factories import make_conversation, make_job, make_record
from tests.support.chat import TEST_KEY, make_config, post_stream, send

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_rate_limit")]


def test_money_saved_is_zero_when_every_turn_sent_the_full_history(user, fake_openai, client):
    fake_openai.reset()
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=16_000, max_output=500)
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    for turn in range(4):
        result = send(user, conversation, f"Question {turn}: " + "tell me about tents and ridges " * 20)
        assert result.names[-1] == "done", result.events[-1]

    records = list(OptimizationRecord.objects.filter(conversation=conversation))
    # Nothing was optimized: every request sent the whole history, exactly as the provider counted it.
    assert all(r.tokens_sent == r.tokens_full == r.provider_prompt_tokens for r in records)
    client.force_login(user)
    headline = client.get(f"/api/dashboard/conversations/{conversation.pk}/").json()
    assert headline["tokens"]["saved"] == 0
    # The provider's prompt cache served part of each later prompt; it would have served the very same
    # prefix without the optimizer (the full history *was* the request), so it is no saving of ours.
    assert headline["money"]["gross_saved_usd"] == 0, headline["money"]
    assert headline["money"]["net_saved_usd"] == 0, headline["money"]


WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo",
         "lima", "mike"]


def test_money_saved_is_unknown_not_negative_when_the_chat_model_is_unpriced(user, fake_openai, client, published):
    fake_openai.reset()
    # A local model the registry has no price for (Ollama, vLLM...); summaries by a priced model.
    local = make_config(user, fake_openai.base_url, model="my-local-llama", window=1600, max_output=200)
    summarizer = make_config(user, fake_openai.base_url, model="gpt-4o-mini", name="summaries")
    user_settings_update(user=user, preference="quality", summary_config=summarizer)
    conversation = Conversation.objects.create(owner=user, llm_config=local)
    for turn in range(14):
        text = f"Turn {turn}: " + " ".join(WORDS[(turn * 3 + k) % len(WORDS)] for k in range(45))
        assert send(user, conversation, text).names[-1] == "done"
    client.force_login(user)
    compact = client.post(f"/api/conversations/{conversation.pk}/compact/", {}, content_type="application/json")
    assert compact.status_code in (200, 201, 202), compact.content
    for job in SummaryJob.objects.filter(conversation=conversation, status="pending"):
        summary_job_run(job_id=job.pk)
    assert SummaryJob.objects.filter(conversation=conversation, status="done", cost_usd__gt=0).exists()

    headline = client.get(f"/api/dashboard/conversations/{conversation.pk}/").json()
    assert headline["money"]["unpriced_records"] == headline["turns"]  # no request could be priced
    overview = client.get("/api/dashboard/conversations/").json()
    row = next(r for r in (overview["results"] if isinstance(overview, dict) else overview)
               if r["id"] == conversation.pk)
    assert row["net_saved_usd"] is None  # the savings list: unknown
    # The conversation's own card should not claim the optimizer lost money.
    assert headline["money"]["net_saved_usd"] is None, headline["money"]


def test_a_request_the_endpoint_refused_costs_nothing(user, fake_openai, client):
    fake_openai.reset()
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini", window=16_000, max_output=500)
    config.api_key_encrypted = secret_encrypt("bad-key-0001")  # refused with a 401 on every call: nothing billed
    config.save(update_fields=["api_key_encrypted"])
    conversation = Conversation.objects.create(owner=user, llm_config=config)
    assert send(user, conversation, "Which tent for a windy ridge? " * 10).names[-1] == "error"
    config.api_key_encrypted = secret_encrypt(TEST_KEY)  # the key fixed, then Retry: one request answered
    config.save(update_fields=["api_key_encrypted"])
    question = Message.objects.get(conversation=conversation, role="user")
    assert post_stream(user, f"/api/messages/{question.pk}/retry/").names[-1] == "done"

    refused, answered = OptimizationRecord.objects.filter(conversation=conversation).order_by("id")
    assert (refused.cost_sent_usd, refused.cost_full_usd) == (0, 0)
    client.force_login(user)
    money = client.get(f"/api/dashboard/conversations/{conversation.pk}/").json()["money"]
    # it was counted as sent and paid for, twice the spend
    assert money["sent_usd"] == pytest.approx(float(answered.cost_sent_usd))
    assert money["full_usd"] == pytest.approx(float(answered.cost_full_usd))
    assert money["refused_turns"] == 1  # counted when its turn ended, as the card names it
    # and the card's prompt-cache estimate priced its tokens too
    series = client.get(f"/api/dashboard/conversations/{conversation.pk}/series/").json()
    estimate = series["prompt_cache_estimate"]
    assert estimate["sent_usd"] == pytest.approx(optimizer.cost_usd("gpt-4o-mini", prompt_tokens=answered.tokens_sent))


def test_the_offline_demo_gives_no_counting_accuracy(user, client):
    # Its "usage" is our own count handed back: 100.0% accurate, and mixed into a real model's figure.
    conversation = Conversation.objects.create(owner=user, offline=True)
    assert send(user, conversation, "Hello, what can you do?").names[-1] == "done"

    record = OptimizationRecord.objects.get(conversation=conversation)
    assert record.provider_prompt_tokens is None
    client.force_login(user)
    assert client.get(f"/api/dashboard/conversations/{conversation.pk}/").json()["accuracy"] is None


def test_one_unpriced_turn_keeps_the_priced_turns_cache_estimate(user, client):
    # Three turns on a priced model, then one on a local model the registry has no price for (the
    # chat was switched to it): the priced turns' prompt-cache figures stay, the unpriced one is named.
    c = make_conversation(owner=user)
    make_record(conversation=c, tokens_full=2000, tokens_sent=2000)
    make_record(conversation=c, tokens_full=2500, tokens_sent=2500)  # starts with the 2000 above: cached
    make_record(conversation=c, tokens_full=3000, tokens_sent=3000)  # starts with the 2500 above
    make_record(conversation=c, tokens_full=3500, tokens_sent=3500, model="my-local-llama")
    client.force_login(user)
    estimate = client.get(f"/api/dashboard/conversations/{c.pk}/series/").json()["prompt_cache_estimate"]
    mini = optimizer.model_info("gpt-4o-mini")
    sent = (2000 + 2500 + 3000) * mini.input_cost_per_token
    saving = (2000 + 2500) * (mini.input_cost_per_token - mini.cached_input_cost_per_token)
    assert estimate["sent_usd"] == pytest.approx(sent), estimate
    assert estimate["sent_usd_with_cache"] == pytest.approx(sent - saving)
    assert estimate["unpriced_turns"] == 1
    # a token figure, whatever the prices: the local turn (another model) starts no cached prefix
    assert estimate["cached_share"] == pytest.approx((2000 + 2500) / (2000 + 2500 + 3000 + 3500))


def test_a_chat_whose_only_request_was_refused_claims_no_loss(user, client):
    # A long chat compacted (its summary paid for), then its one request refused by the endpoint
    # (a bad key): billed nothing, so nothing could be saved either; what the summary cost is not a
    # loss of the optimizer's, as with a chat nothing could be priced for.
    c = make_conversation(owner=user)
    make_record(conversation=c, tokens_full=9000, tokens_sent=3000, strategy="summarize", triggered=True,
                cost_full="0", cost_sent="0")  # as record_finish leaves a refused request
    make_job(conversation=c, summary=None, cost="0.000500")
    client.force_login(user)
    money = client.get(f"/api/dashboard/conversations/{c.pk}/").json()["money"]
    assert money["net_saved_usd"] is None, money
    assert money["gross_saved_usd"] is None
    assert money["refused_turns"] == 1
    row = client.get("/api/dashboard/conversations/").json()["results"][0]
    assert row["net_saved_usd"] is None
    page = client.get(f"/c/{c.pk}/dashboard/").content.decode()
    card = page[page.index('data-card="money"'):]
    card = card[:card.index("</article>")] if "</article>" in card else card[:2000]
    # (also what a request never sent is: its client left while the context was packed)
    assert "1 turn not billed (refused by the endpoint or never sent)" in card
    assert "\u2212$0.0005" not in card  # no loss claimed


def test_a_refused_request_beside_billed_ones_leaves_their_saving(user, client):
    c = make_conversation(owner=user)
    make_record(conversation=c, tokens_full=4000, tokens_sent=1000, strategy="truncate", triggered=True,
                cost_full="0.004000", cost_sent="0.001000")
    make_record(conversation=c, tokens_full=4500, tokens_sent=1500, cost_full="0", cost_sent="0")  # refused
    make_job(conversation=c, summary=None, cost="0.000500")
    client.force_login(user)
    money = client.get(f"/api/dashboard/conversations/{c.pk}/").json()["money"]
    assert money["gross_saved_usd"] == pytest.approx(0.003)
    assert money["net_saved_usd"] == pytest.approx(0.0025)
    assert money["refused_turns"] == 1


@pytest.mark.parametrize(("model", "tokens"), [
    ("codestral/codestral-latest", 3000),  # listed at $0 by litellm: every turn costs nothing
    ("gpt-4o-mini", 3),  # a few tokens: $0.00000045, stored to six decimals as 0
])
def test_a_turn_billed_at_nothing_is_not_called_refused(user, client, model, tokens):
    assert optimizer.cost_usd(model, prompt_tokens=tokens) is not None
    c = make_conversation(owner=user)
    make_record(conversation=c, tokens_full=tokens, tokens_sent=tokens, model=model, cost_full="0", cost_sent="0")
    make_job(conversation=c, summary=None, cost="0.000500")
    client.force_login(user)
    money = client.get(f"/api/dashboard/conversations/{c.pk}/").json()["money"]
    assert money["refused_turns"] == 0
    # priced at nothing: the saving is known (none), and what summarizing cost is the net
    assert money["net_saved_usd"] == pytest.approx(-0.0005)
    assert "refused" not in client.get(f"/c/{c.pk}/dashboard/").content.decode()


def test_the_overview_names_what_summarizing_chats_with_no_saving_known_cost(user, client):
    # A chat compacted before any request (imported, then compacted): its summary was paid for. The
    # overview read "— saved, minus $0 summarizing", as if summarizing had cost nothing.
    c = make_conversation(owner=user, title="Imported")
    make_job(conversation=c, summary=None, cost="0.000100")
    client.force_login(user)
    money = client.get("/api/dashboard/overview/").json()["money"]
    assert money["net_saved_usd"] is None
    assert money["summary_cost_other_usd"] == pytest.approx(0.0001)
    page = client.get("/dashboard/").content.decode()
    card = page[page.index('data-card="money"'):]
    card = card[:card.index("</article>")]
    assert "$0.0001 summarizing chats with no saving known" in card, card


def _money_card(page: str) -> str:
    card = page[page.index('data-card="money"'):]
    return card[:card.index("</article>")]


def test_a_chat_on_a_model_with_no_prices_says_no_request_was_priced(user, client):
    # A local model (Ollama, vLLM) the registry has no price for, no summary paid for: both cards read
    # "— saved - $0 summarizing", a subtraction of nothing from nothing.
    c = make_conversation(owner=user, title="Local")
    for _ in range(3):
        make_record(conversation=c, tokens_full=900, tokens_sent=600, model="my-local-llama")
    client.force_login(user)
    card = _money_card(client.get(f"/c/{c.pk}/dashboard/").content.decode())
    assert "No saving to count: no request was priced · 3 turns unpriced" in card, card
    assert "summarizing" not in card
    overview = _money_card(client.get("/dashboard/").content.decode())
    assert "No saving to count: no request was priced" in overview and "summarizing" not in overview, overview


def test_a_chat_whose_requests_were_priced_but_not_billed_does_not_say_unpriced(user, client):
    # Its one request refused by the endpoint (a bad key), no summary paid for: the card read "No saving
    # to count: no request was priced" beside the model's prices it had just listed, and so did the
    # overview. Priced, it was not billed; with a local model's turn beside it, neither.
    c = make_conversation(owner=user, title="Refused")
    make_record(conversation=c, tokens_full=900, tokens_sent=600, cost_full="0", cost_sent="0")  # refused
    client.force_login(user)
    card = _money_card(client.get(f"/c/{c.pk}/dashboard/").content.decode())
    assert "No saving to count: no request was billed · input $0.15/M" in card, card
    assert "1 turn not billed" in card
    overview = _money_card(client.get("/dashboard/").content.decode())
    assert "No saving to count: no request was billed" in overview, overview
    make_record(conversation=c, tokens_full=900, tokens_sent=600, model="my-local-llama")
    card = _money_card(client.get(f"/c/{c.pk}/dashboard/").content.decode())
    assert "No saving to count: no request was priced and billed" in card, card
    overview = _money_card(client.get("/dashboard/").content.decode())
    assert "No saving to count: no request was priced and billed" in overview, overview


@pytest.mark.parametrize(("model", "tokens", "cached"), [
    ("codestral/codestral-latest", 3000, 2048),  # listed at $0: the provider's cache still served 2,048 tokens
    ("gpt-4o-mini", 3, 0),  # a few tokens: $0.00000045, stored to six decimals as 0
])
def test_a_turn_billed_at_nothing_keeps_its_prompt_cache_figures(user, client, model, tokens, cached):
    # Stored at $0 but billed (not refused: test_a_turn_billed_at_nothing_is_not_called_refused): the
    # prompt-cache estimate left such a turn out as if refused, its cached tokens and its spend unsaid.
    c = make_conversation(owner=user)
    make_record(conversation=c, tokens_full=tokens, tokens_sent=tokens, model=model, cost_full="0", cost_sent="0",
                provider_cached_tokens=cached)
    client.force_login(user)
    estimate = client.get(f"/api/dashboard/conversations/{c.pk}/series/").json()["prompt_cache_estimate"]
    price = optimizer.model_info(model).input_cost_per_token
    assert estimate["provider_reported_turns"] == 1
    assert estimate["cached_tokens"] == cached
    assert estimate["cached_share"] == pytest.approx(cached / tokens)
    assert estimate["sent_usd"] == pytest.approx(tokens * price)
