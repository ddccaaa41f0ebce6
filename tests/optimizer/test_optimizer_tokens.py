"""Token accounting: the cookbook's published counts, the parts rule, offline loading."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optimizer
from optimizer import Msg, count_content, count_message, count_messages, count_text, is_estimated
from optimizer.tokens import IMAGE_PART_TOKENS, encoding_for, line_pieces

# OpenAI cookbook, "How to count tokens with tiktoken": its example conversation and the counts the
# notebook prints: 129 for gpt-3.5-turbo / gpt-4 (cl100k_base), 124 for gpt-4o / gpt-4o-mini (o200k_base).
COOKBOOK_MESSAGES = [
    {"role": "system", "content": "You are a helpful, pattern-following assistant that translates corporate "
     "jargon into plain English."},
    {"role": "system", "name": "example_user", "content": "New synergies will help drive top-line growth."},
    {"role": "system", "name": "example_assistant", "content": "Things working well together will increase revenue."},
    {"role": "system", "name": "example_user", "content": "Let's circle back when we have more bandwidth to touch "
     "base on opportunities for increased leverage."},
    {"role": "system", "name": "example_assistant", "content": "Let's talk later when we're less busy about how to "
     "do better."},
    {"role": "user", "content": "This late pivot means we don't have time to boil the ocean for the client "
     "deliverable."},
]


@pytest.mark.parametrize(
    ("model", "expected"),
    [("gpt-3.5-turbo-0125", 129), ("gpt-4-0613", 129), ("gpt-4", 129), ("gpt-4o", 124), ("gpt-4o-mini", 124),
     ("gpt-4o-2024-08-06", 124)],
)
def test_cookbook_published_counts(model, expected):
    assert count_messages(COOKBOOK_MESSAGES, model=model) == expected


@pytest.mark.parametrize("model", ["gpt-3.5-turbo-0301", "openai/gpt-3.5-turbo-0301", "azure/gpt-35-turbo-0301"])
def test_the_0301_snapshot_frames_messages_as_the_cookbook_says(model):
    # The cookbook's own figure for gpt-3.5-turbo-0301 (4 tokens a message, a name in place of the
    # role: -1); it was counted as the later snapshots are, 129, two tokens short on this example.
    assert count_messages(COOKBOOK_MESSAGES, model=model) == 127
    plain = count_message({"role": "user", "content": "hi"}, model=model)
    named = count_message({"role": "user", "content": "hi", "name": "bob"}, model=model)
    assert plain == 4 + count_text("user", model=model) + count_text("hi", model=model)
    assert named == plain - 1 + count_text("bob", model=model)


@pytest.mark.parametrize("model", ["gpt-3.5-turbo", "gpt-3.5-turbo-0613", "gpt-3.5-turbo-03011", "gpt-4-0314"])
def test_other_snapshots_keep_three_a_message(model):
    assert count_message({"role": "user", "content": "hi"}, model=model) == 3 + 1 + 1


def test_msg_and_dict_count_the_same():
    d = COOKBOOK_MESSAGES[1]
    m = Msg(id="1", role="system", content=d["content"], name=d["name"])
    assert count_message(m, model="gpt-4o") == count_message(d, model="gpt-4o")


def test_name_costs_one_plus_its_tokens():
    plain = count_message({"role": "user", "content": "hi"}, model="gpt-4o")
    named = count_message({"role": "user", "content": "hi", "name": "bob"}, model="gpt-4o")
    assert named == plain + 1 + count_text("bob", model="gpt-4o")


def test_same_formula_as_score_py():
    """score.py's chat_tokens: 3 + sum(3 + role + content) over messages without names."""
    enc = encoding_for("gpt-4o-mini")
    msgs = [{"role": "user", "content": "Hello there, how are you?"}, {"role": "assistant", "content": "Fine."}]
    expected = 3 + sum(3 + len(enc.encode(m["role"])) + len(enc.encode(m["content"])) for m in msgs)
    assert count_messages(msgs, model="gpt-4o-mini") == expected


def test_encodings_follow_tiktoken_mapping():
    assert encoding_for("gpt-4o").name == "o200k_base"
    assert encoding_for("gpt-4.1-mini").name == "o200k_base"
    assert encoding_for("gpt-4").name == "cl100k_base"
    assert encoding_for("openai/gpt-4o-mini").name == "o200k_base"
    assert not is_estimated("gpt-4o-mini")


def test_unknown_model_falls_back_to_o200k_and_is_flagged():
    assert is_estimated("llama-3.1-8b-instruct")
    assert encoding_for("llama-3.1-8b-instruct").name == "o200k_base"
    assert count_text("hello world", model="llama-3.1-8b-instruct") == count_text("hello world", model="gpt-4o")


def test_special_token_text_is_counted_as_text():
    assert count_text("<|endoftext|>", model="gpt-4o") > 1


def test_list_of_parts_rule():
    text = "Describe this picture please."
    parts = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]
    assert count_content(parts, model="gpt-4o") == count_text(text, model="gpt-4o") + IMAGE_PART_TOKENS
    other = {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    as_json = json.dumps(other, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    assert count_content([other], model="gpt-4o") == count_text(as_json, model="gpt-4o")
    assert count_message({"role": "user", "content": parts}, model="gpt-4o") == (
        3 + count_text("user", model="gpt-4o") + count_content(parts, model="gpt-4o"))


def _run(code: str, env: dict) -> str:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                          cwd=os.path.dirname(os.path.dirname(optimizer.__file__))).stdout


def test_offline_cache_dir_is_litellm_copy_without_importing_litellm():
    env = {k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")}
    out = _run(
        "import os, sys, optimizer\n"
        "n = optimizer.count_text('hello world', model='gpt-4o')\n"
        "print(n, 'litellm' in sys.modules, os.environ['TIKTOKEN_CACHE_DIR'])",
        env,
    )
    n, imported, cache = out.split()
    spec = importlib.util.find_spec("litellm")
    assert int(n) == 2
    assert imported == "False"
    assert cache == os.path.join(spec.submodule_search_locations[0], "litellm_core_utils", "tokenizers")


def test_user_cache_dir_is_respected(tmp_path):
    env = dict(os.environ, TIKTOKEN_CACHE_DIR=str(tmp_path))
    out = _run(
        "import os, optimizer.tokens as t\nt.ensure_offline_cache()\nprint(os.environ['TIKTOKEN_CACHE_DIR'])", env
    )
    assert out.strip() == str(tmp_path)


# Letters, digits, punctuation and every kind of white space and line break the patterns treat apart.
_TRICKY = st.text(alphabet=st.sampled_from(list("ab Zé9.,:[]'\"-\n\r\t \u00a0\u2028\u0085\x0b\x0c\u3000…日")),
                  max_size=400)
# Code and shell text: punctuation ending a line and a slash opening the next, which o200k_base's
# pattern for punctuation runs (` ?[^\s\p{L}\p{N}]+[\r\n/]*`) takes together across the line break.
_CODE = st.text(alphabet=st.sampled_from(list("ab Z9 ;:|>-}).,!*\"'/\n\t")), max_size=200)


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4"])  # o200k_base, cl100k_base
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(_TRICKY, _CODE), min_size=1, max_size=12))
def test_a_text_counted_by_its_lines_counts_as_the_whole(model, lines):
    """count_text cuts long texts at line starts and sums the pieces: the sum is the whole text's count."""
    text = "\n".join(lines)
    enc = encoding_for(model)
    assert "".join(line_pieces(text)) == text
    assert sum(len(enc.encode_ordinary(p)) for p in line_pieces(text)) == len(enc.encode_ordinary(text))


def test_a_long_shell_paste_is_counted_exactly():
    """`cmd |` / `/usr/bin/...` lines: counted by pieces, o200k_base came out 100 tokens short of 899."""
    text = "\n".join(f"echo hi{i} |\n/usr/bin foo" for i in range(100))
    for model in ("gpt-4o", "gpt-4"):
        assert count_text(text, model=model) == len(encoding_for(model).encode_ordinary(text))


def test_a_long_text_is_counted_exactly():
    lines = [f"{'User' if i % 2 else 'Assistant'}: point {i}... see [{i}]\n  indented {i}\n" for i in range(300)]
    text = "\n".join(lines)
    assert len(text) > 1_000 and len(line_pieces(text)) > 100
    for model in ("gpt-4o", "gpt-4"):
        assert count_text(text, model=model) == len(encoding_for(model).encode_ordinary(text))


def test_a_request_packed_for_the_0301_snapshot_is_counted_with_its_framing():
    """Compression measures a message's framing through `count_message`, so a cut request for the
    snapshot fits the budget by the snapshot's own count, names included."""
    model = "gpt-3.5-turbo-0301"
    msgs = [Msg(id="sys", role="system", content="Be brief.")]
    for r in range(30):
        msgs += [Msg(id=f"u{r}", role="user", content=f"Question {r} " + "detail " * 40, name="ana"),
                 Msg(id=f"a{r}", role="assistant", content=f"Answer {r} " + "words " * 60)]
    msgs.append(Msg(id="q", role="user", content="And the log? " + "12:00 error\n" * 400, name="ana"))
    result = optimizer.pack(msgs, budget=1500, model=model)
    sent = [{"role": p.role, "content": p.content, **({"name": p.name} if p.name else {})} for p in result.messages]
    assert count_messages(sent, model=model) == result.stats["tokens_after"] <= 1500


@pytest.mark.parametrize(("typed", "canonical"), [
    ("GPT-4o", "gpt-4o"), ("OpenAI/gpt-4o-mini", "gpt-4o-mini"), ("openai/GPT-4o", "gpt-4o"),
    ("GPT-4", "gpt-4"), ("Gpt-3.5-Turbo", "gpt-3.5-turbo"), ("openrouter/openai/GPT-4-Turbo", "gpt-4-turbo"),
    ("  O1-mini ", "o1-mini"), ("GPT-3.5-TURBO-0301", "gpt-3.5-turbo-0301"),
])
def test_a_model_name_in_any_case_gets_the_canonical_name_s_tokenizer(typed, canonical):
    # tiktoken's table is lower case: "GPT-4" fell to the o200k fallback (cl100k is gpt-4's), counted
    # every message with the wrong encoding and flagged the counts estimated; "GPT-4o" was flagged so too.
    assert encoding_for(typed).name == encoding_for(canonical).name
    assert is_estimated(typed) is is_estimated(canonical) is False
    assert count_messages(COOKBOOK_MESSAGES, model=typed) == count_messages(COOKBOOK_MESSAGES, model=canonical)


@pytest.mark.parametrize("name", ["My-Local-Llama", "Qwen2.5:7B", "GPT4ALL-J", "anthropic/Claude-3.5-Sonnet"])
def test_a_name_tiktoken_does_not_know_stays_estimated_in_any_case(name):
    assert is_estimated(name) and is_estimated(name.lower())


def test_a_model_whose_encoding_cannot_load_is_counted_with_the_fallback_and_flagged(monkeypatch):
    """tiktoken names an encoding the bundled copies lack (r50k_base for "davinci", gpt2): it is counted
    with o200k_base and `is_estimated` says so, but `pack` read the flag from tiktoken's table alone and
    reported those counts exact."""
    real = optimizer.tokens._load_encoding

    def offline(name):
        if name == "cl100k_base":  # stands in for an encoding with no offline copy
            raise ValueError("no offline copy")
        return real(name)

    caches = (optimizer.tokens._resolve, optimizer.tokens._count_cached)  # what gpt-4 resolved to before
    for cache in caches:
        cache.cache_clear()
    monkeypatch.setattr(optimizer.tokens, "_load_encoding", offline)
    try:
        assert encoding_for("gpt-4").name == "o200k_base" and is_estimated("gpt-4")
        result = optimizer.pack([Msg(id="q", role="user", content="hello world")], budget=1000, model="gpt-4")
        assert result.stats["estimated"] is True
    finally:
        for cache in caches:
            cache.cache_clear()


@pytest.mark.parametrize("model", ["davinci", "gpt2", "text-davinci-001"])
def test_a_legacy_models_encoding_the_wheel_lacks_is_not_fetched_from_the_network(monkeypatch, model):
    """r50k_base and gpt2 are not among the bundled copies: tiktoken fetched them with no timeout, so the
    first count of a process hung where the network drops what it does not allow. Counted with the
    fallback, flagged, without a download attempt."""
    import tiktoken.load

    fetched = []

    def no_network(blobpath):
        fetched.append(blobpath)  # raising here alone would not do: a failed load falls back too
        raise ConnectionError("offline")

    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    caches = (optimizer.tokens._resolve, optimizer.tokens._count_cached, optimizer.tokens._load_encoding)
    for cache in caches:
        cache.cache_clear()
    try:
        assert encoding_for(model).name == "o200k_base" and is_estimated(model)
        assert count_messages([{"role": "user", "content": "hello"}], model=model) > 0
        # What the wheel ships still loads as itself (p50k_base: text-davinci-003).
        assert encoding_for("text-davinci-003").name == "p50k_base" and not is_estimated("text-davinci-003")
        assert fetched == []
    finally:
        for cache in caches:
            cache.cache_clear()
