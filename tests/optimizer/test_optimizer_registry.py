"""Model registry read from litellm's bundled JSON, and prices."""

import pytest

from optimizer import compute_budget, cost_usd, model_info, provider_for_base_url
from optimizer.budget import budget_for_model


def test_known_model():
    info = model_info("gpt-4o-mini")
    assert info is not None
    assert info.context_window == 128_000
    assert info.max_output_tokens == 16_384
    assert info.input_cost_per_token == pytest.approx(1.5e-07)
    assert info.output_cost_per_token == pytest.approx(6e-07)
    assert info.cached_input_cost_per_token == pytest.approx(7.5e-08)


def test_provider_prefix_and_case():
    assert model_info("openai/GPT-4o-mini").context_window == 128_000


def test_unknown_model():
    assert model_info("my-local-llama-q4") is None
    assert cost_usd("my-local-llama-q4", prompt_tokens=1000) is None


def test_cost_with_cached_tokens():
    cost = cost_usd("gpt-4o-mini", prompt_tokens=1_000_000, completion_tokens=1_000_000, cached_tokens=500_000)
    assert cost == pytest.approx(0.5 * 0.15 + 0.5 * 0.075 + 0.60)


def test_budget():
    assert compute_budget(context_window=16_384, max_output_tokens=2_000, safety_margin=384) == 14_000
    assert compute_budget(context_window=1_000, max_output_tokens=2_000) == 0
    assert budget_for_model("gpt-4o-mini") == 128_000 - 2_000


@pytest.mark.parametrize("name", [
    "ft:gpt-4o-mini-2024-07-18:acme::9ABCdef1",             # no suffix given: OpenAI leaves it empty
    "ft:gpt-4o-mini-2024-07-18:acme:support-bot:9ABCdef1",
    "openai/ft:gpt-4o-mini-2024-07-18:acme::9ABCdef1",
])
def test_an_openai_fine_tune_is_its_base_model_s_fine_tune_entry(name):
    """A fine-tuned model's id names its organization, suffix and job after the base (litellm's own rule
    strips those three parts): it was unknown, so its window fell to the 8,192 default and its requests
    went unpriced."""
    info = model_info(name)
    assert info is not None and info.key == "ft:gpt-4o-mini-2024-07-18"
    assert info.context_window == 128_000
    assert cost_usd(name, prompt_tokens=1_000_000) == pytest.approx(0.30)


def test_other_names_with_colons_are_not_taken_for_fine_tunes():
    assert model_info("qwen2.5:7b") is None  # an Ollama tag
    assert model_info("ft:my-own-base:acme::9ABCdef1") is None


@pytest.mark.parametrize("name, window, output, input_price", [
    ("anthropic/claude-3.5-sonnet", 200_000, 8_192, 3e-06),
    ("openrouter/anthropic/claude-3.5-sonnet", 200_000, 8_192, 3e-06),  # litellm's spelling of the same
    ("anthropic/claude-sonnet-4.5", 1_000_000, 64_000, 3e-06),
    ("x-ai/grok-4", 256_000, 256_000, 3e-06),  # OpenRouter's "x-ai" is xAI
    ("mistralai/mistral-large", 32_000, 4_000, 2e-06),  # and its "mistralai" is Mistral
])
def test_an_openrouter_name_is_the_vendor_s_model(name, window, output, input_price):
    """OpenRouter names a model "<vendor>/<model>"; litellm's table has no openrouter/ entries, so
    Claude through OpenRouter was unknown: an 8,192-token window assumed for a 200,000-token model and
    every request unpriced. Vercel's AI Gateway, in the table, uses the same ids for the same models."""
    info = model_info(name)
    assert info is not None
    assert (info.context_window, info.max_output_tokens) == (window, output)
    assert info.input_cost_per_token == pytest.approx(input_price)


def test_an_openrouter_free_variant_is_its_model_at_no_cost():
    info = model_info("deepseek/deepseek-r1:free")
    assert info is not None and info.context_window == model_info("deepseek/deepseek-r1").context_window
    assert cost_usd("deepseek/deepseek-r1:free", prompt_tokens=1_000_000, completion_tokens=1_000) == 0
    assert cost_usd("openai/gpt-4o-mini:free", prompt_tokens=1_000_000) == 0


@pytest.mark.parametrize("name", [
    "meta-llama/llama-3.1-70b-instruct",  # the gateway lists "meta/llama-3.1-70b", not the same id
    "google/gemma-2-9b-it:free",  # nor "gemma-2-9b-it", only "gemma-2-9b"
    "acme/claude-3.5-sonnet",  # the gateway's entries are matched under their vendor only
    "claude-3.5-sonnet",
    "llama3.1:8b",  # an Ollama tag, not a variant
    "deepseek/deepseek-r1:nitro",  # a routing variant: its prices are the chosen provider's
])
def test_an_openrouter_name_matches_no_other_model(name):
    assert model_info(name) is None


def test_a_provider_s_entry_is_found_by_its_endpoint_s_host():
    provider = provider_for_base_url("https://api.mistral.ai/v1")
    assert provider == "mistral"
    info = model_info("mistral-large-latest", provider=provider)
    assert info is not None and info.key == "mistral/mistral-large-latest"
    assert model_info("mistral-large-latest") is None  # Azure lists it too: no host, no guess
    assert provider_for_base_url("http://localhost:11434/v1") is None
    assert provider_for_base_url("not a url") is None


@pytest.mark.parametrize(("typed", "canonical"), [
    ("GPT-4o", "gpt-4o"), ("OpenAI/gpt-4o-mini", "gpt-4o-mini"), ("openai/GPT-4o", "gpt-4o"),
    ("Anthropic/Claude-3.5-Sonnet", "anthropic/claude-3.5-sonnet"),
    ("DeepSeek/DeepSeek-R1:FREE", "deepseek/deepseek-r1:free"),
])
def test_a_model_name_in_any_case_gets_the_canonical_name_s_window_and_prices(typed, canonical):
    assert model_info(typed) == model_info(canonical) is not None
    assert budget_for_model(typed) == budget_for_model(canonical)
    assert cost_usd(typed, prompt_tokens=1000, completion_tokens=100) == cost_usd(
        canonical, prompt_tokens=1000, completion_tokens=100)
    assert model_info(typed.upper(), provider="openai") == model_info(canonical, provider="openai")


@pytest.mark.parametrize("name", [
    "My-Local-Llama-Q4", "GPT4ALL-J", "Meta-Llama/Llama-3.1-70B-Instruct", "ACME/Claude-3.5-Sonnet",
])
def test_an_unknown_name_in_any_case_matches_no_model(name):
    assert model_info(name) is None and model_info(name.lower()) is None
