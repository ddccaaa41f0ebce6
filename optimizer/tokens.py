"""Exact token accounting with tiktoken, offline.

Why this module looks the way it does:

* tiktoken downloads its BPE files on first use, which fails on a machine without internet. The
  `litellm` wheel ships copies of them (``litellm/litellm_core_utils/tokenizers/``), named the way
  tiktoken's own cache names them (sha1 of the download URL), so pointing ``TIKTOKEN_CACHE_DIR`` there
  makes tiktoken load them through its normal path, including its sha256 hash check. We locate the
  directory with ``importlib.util.find_spec`` so that litellm (a heavy import) is never imported, and
  we leave a ``TIKTOKEN_CACHE_DIR`` (or tiktoken's older ``DATA_GYM_CACHE_DIR``) the user set alone.
* Chat overhead follows OpenAI's cookbook ("How to count tokens with tiktoken"): every message costs
  3 tokens of framing plus its role and content, a ``name`` costs 1 token plus its text, and the
  reply is primed with 3 more tokens. The same formula is used by ``../shared/bench/score.py``. The
  one exception the cookbook lists is gpt-3.5-turbo-0301 (`message_overhead`): 4 tokens a message, and
  a name that stands in place of the role, -1.
* Content in the list-of-parts form is counted part by part, by a documented rule (see
  `count_content`): an image the request carries (a data: URL) at OpenAI's documented cost for its
  size (`images.image_tokens`), one only linked at the flat low-detail figure, its size unknown.
* A message's count is computed once (callers store it in ``Msg.tokens``) and handed back in, so
  the request path never re-tokenizes history.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import importlib.util
import json
import os
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from .images import image_info, image_tokens
from .types import Msg

TOKENS_PER_MESSAGE = 3  # <|start|>{role}<|message|>{content}<|end|> framing
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3  # every reply is primed with <|start|>assistant<|message|>
# gpt-3.5-turbo-0301 framed a message as <|start|>{role or name}\n{content}<|end|>\n: a token more each,
# and a name was written instead of the role, not beside it (Azure names the same snapshot gpt-35-turbo).
_FRAMING_0301 = (4, -1)
_MODELS_0301 = frozenset({"gpt-3.5-turbo-0301", "gpt-35-turbo-0301"})
IMAGE_PART_TOKENS = 85  # OpenAI's base cost of one image at "low" detail; a documented flat estimate
FALLBACK_ENCODING = "o200k_base"

_PROVIDER_PREFIXES = ("openai/", "azure/", "openrouter/openai/", "litellm_proxy/", "text-completion-openai/")


def _bundled_cache_dir() -> str | None:
    """Directory of the tiktoken files shipped inside the litellm wheel, found without importing it."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(next(iter(spec.submodule_search_locations)), "litellm_core_utils", "tokenizers")
    return path if os.path.isdir(path) else None


def ensure_offline_cache() -> None:
    """Point tiktoken at litellm's bundled encodings unless the user chose a cache directory."""
    if "TIKTOKEN_CACHE_DIR" in os.environ or "DATA_GYM_CACHE_DIR" in os.environ:
        return
    path = _bundled_cache_dir()
    if path:
        os.environ["TIKTOKEN_CACHE_DIR"] = path


def _downloads(name: str) -> bool:
    """Whether tiktoken would go to the network for encoding `name`: the cache is the bundled one (not a
    directory the user chose and filled) and holds no file of it. The wheel ships o200k_base, cl100k_base
    and p50k_base; tiktoken fetches any other (r50k_base, gpt2: legacy names' encodings) with no timeout,
    so the first count of a process hung on a network that drops what it does not allow."""
    ensure_offline_cache()
    bundled = _bundled_cache_dir()
    if bundled is None or os.environ.get("TIKTOKEN_CACHE_DIR") != bundled:
        return False
    # tiktoken's cache names a file by the sha1 of its URL (openai_public's encodings/<name>.tiktoken).
    url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
    return not os.path.exists(os.path.join(bundled, hashlib.sha1(url.encode(), usedforsecurity=False).hexdigest()))


def _strip_provider(model: str) -> str:
    name = model.strip()
    lowered = name.lower()
    for prefix in _PROVIDER_PREFIXES:
        if lowered.startswith(prefix):
            return name[len(prefix) :]
    return name


@lru_cache(maxsize=256)
def _encoding_name(model: str) -> tuple[str, bool]:
    """(encoding name, estimated) for a model name, by tiktoken's own model table."""
    import tiktoken.model

    try:
        # tiktoken's table is all lower case, and a user may type "GPT-4" (the registry is read the same way)
        return tiktoken.model.encoding_name_for_model(_strip_provider(model).lower()), False
    except KeyError:
        return FALLBACK_ENCODING, True


@lru_cache(maxsize=8)
def _load_encoding(name: str) -> Any:
    ensure_offline_cache()
    import tiktoken

    return tiktoken.get_encoding(name)


@lru_cache(maxsize=256)
def _resolve(model: str) -> tuple[Any, bool]:
    name, estimated = _encoding_name(model)
    if name != FALLBACK_ENCODING and _downloads(name):
        return _load_encoding(FALLBACK_ENCODING), True
    try:
        return _load_encoding(name), estimated
    except Exception:  # an encoding we have no offline copy of (e.g. o200k_harmony): fall back, flagged
        if name == FALLBACK_ENCODING:
            raise
        return _load_encoding(FALLBACK_ENCODING), True


def encoding_for(model: str) -> Any:
    """The tiktoken Encoding used for `model` (cached; o200k_base when the model is unknown)."""
    return _resolve(model)[0]


def is_estimated(model: str) -> bool:
    """True when tiktoken does not know `model`, so counts use the o200k_base fallback and are estimates."""
    return _resolve(model)[1]


def count_text(text: str, *, model: str) -> int:
    """Tokens of a plain string. Special-token text such as ``<|endoftext|>`` is counted as ordinary text.

    A long text is counted line by line (`line_pieces`), each line through a cache: the texts a turn
    counts in full are mostly lines counted before (a recall block quotes messages it quoted last
    turn; the newest message as sent is that block and the question), and the sum is exact.
    """
    if not text:
        return 0
    if len(text) < _PIECES_FROM_CHARS:
        return _count_cached(text, model)
    if encoding_for(model).name not in _LINE_SAFE_ENCODINGS:
        return _count_piece(text, model)
    return sum(_count_piece(piece, model) for piece in line_pieces(text))


def _count_piece(text: str, model: str) -> int:
    if len(text) > _CACHED_TEXT_MAX_CHARS:
        return len(encoding_for(model).encode_ordinary(text))
    return _count_cached(text, model)


def line_pieces(text: str) -> list[str]:
    """`text` cut before each line that opens with a letter, digit or ASCII punctuation mark but `/`.

    In cl100k_base and o200k_base no token spans such a cut, so the pieces' counts add up to the
    text's: the encodings tokenize each match of their pre-tokenizing pattern apart; a match that
    holds a line break either ends with its run of breaks (o200k_base's run of punctuation may take
    slashes into it too, `|\n/`: hence no cut before a `/`) or is white space only, and none begins
    with a break and goes on to a character that is not white space. A run of white space that ends
    in a break is matched whole by the branch for such runs, whatever follows it, so the piece
    before a cut tokenizes alone as it does in the text. (The older r50k/p50k patterns lack that
    branch and split such a run by what follows: they are counted whole.) The property test in
    tests/optimizer/test_optimizer_tokens.py checks the sum against whole texts in both encodings.
    """
    cuts = [m.end() for m in _LINE_START.finditer(text)]
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


_LINE_SAFE_ENCODINGS = frozenset({"cl100k_base", "o200k_base"})
# A line break before a letter, digit or ASCII punctuation mark but "/" (`\w` is str.isalnum() or "_").
_LINE_START = re.compile(r"\n(?=[\w!-.:-@\[-`{-~])")
# Shorter texts are counted whole: cutting them saves nothing worth the scan.
_PIECES_FROM_CHARS = 1_000
# Hashing a string is far cheaper than encoding it, and the same texts come back request after
# request. Bounded twice (entries and size of one text) so that a long-lived process stays small.
_CACHED_TEXT_MAX_CHARS = 20_000


@lru_cache(maxsize=4096)
def _count_cached(text: str, model: str) -> int:
    return len(encoding_for(model).encode_ordinary(text))


def count_content(content: str | list[dict[str, Any]] | None, *, model: str) -> int:
    """Tokens of a message's content, string or OpenAI list-of-parts.

    Rule for parts: ``{"type": "text"}`` parts count their text; an ``image_url`` part whose URL is a
    base64 data: URL of a PNG, JPEG, WebP or GIF costs what OpenAI documents for its size and detail
    (`images.image_tokens`); any other image part (a link, an ``image`` part) a flat 85 tokens, OpenAI's
    base cost of one low-detail image, its size unknown here; any other part the tokens of its
    compact JSON.
    """
    if content is None:
        return 0
    if isinstance(content, str):
        return count_text(content, model=model)
    total = 0
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text":
            total += count_text(str(part.get("text", "")), model=model)
        elif kind in ("image_url", "image"):
            total += _image_part_tokens(part)
        else:
            as_json = json.dumps(part, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
            total += count_text(as_json, model=model)
    return total


def _image_part_tokens(part: Mapping[str, Any]) -> int:
    image = part.get("image_url")
    if not isinstance(image, Mapping):
        return IMAGE_PART_TOKENS
    url, detail = str(image.get("url", "")), str(image.get("detail", "auto"))
    head, comma, payload = url.partition(",")
    if not (head.startswith("data:") and head.endswith(";base64") and comma):
        return IMAGE_PART_TOKENS
    try:
        # The first 64 KiB of the file: every header image_info reads lies there but a JPEG's behind
        # larger metadata (an editor's XMP history may take megabytes). Such a JPEG is read whole: at the
        # flat figure, its 765 tokens or more counted 85, and a request merging it (a recall block, a
        # pinned question) was reported, on the gauge and in the records, far under what it sent.
        start = base64.b64decode(payload[:87_384], validate=True)
        info = image_info(start)
        if info is None and start.startswith(b"\xff\xd8") and len(payload) > 87_384:
            info = image_info(base64.b64decode(payload, validate=True))
    except (ValueError, binascii.Error):
        return IMAGE_PART_TOKENS
    return IMAGE_PART_TOKENS if info is None else image_tokens(info.width, info.height, detail=detail)


def content_chars(content: str | list[dict[str, Any]] | None) -> int:
    """Characters of a message's content (text parts only for list content)."""
    if content is None:
        return 0
    if isinstance(content, str):
        return len(content)
    return sum(len(str(p.get("text", ""))) for p in content if isinstance(p, Mapping) and p.get("type") == "text")


def content_text(content: str | list[dict[str, Any]] | None) -> str:
    """The text of a message's content (text parts joined by newlines for list content)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")


@lru_cache(maxsize=256)
def message_overhead(model: str) -> tuple[int, int]:
    """(tokens a message's framing costs, tokens a name adds beside its text) for `model`."""
    if _strip_provider(model).lower() in _MODELS_0301:
        return _FRAMING_0301
    return TOKENS_PER_MESSAGE, TOKENS_PER_NAME


def count_message(msg: Msg | Mapping[str, Any], *, model: str) -> int:
    """Full chat-format count of one message: 3 + role + content (+1 + name tokens if it has a name;
    4 and -1 for gpt-3.5-turbo-0301, see `message_overhead`).

    This is the figure callers store (``Msg.tokens``); it always counts, ignoring a stored count.
    """
    if isinstance(msg, Msg):
        role, content, name = msg.role, msg.content, msg.name
    else:
        role, content, name = msg.get("role", ""), msg.get("content") or "", msg.get("name")
    per_message, per_name = message_overhead(model)
    total = per_message + count_text(str(role), model=model) + count_content(content, model=model)
    if name:
        total += per_name + count_text(str(name), model=model)
    return total


def count_system(content: str, *, model: str) -> int:
    """Full count of a system message with `content` (a summary or a recall block as sent)."""
    return count_message({"role": "system", "content": content}, model=model)


def count_messages(msgs: Iterable[Msg | Mapping[str, Any]], *, model: str) -> int:
    """Tokens of a whole chat request: the sum of `count_message` plus 3 for reply priming."""
    return REPLY_PRIMING + sum(count_message(m, model=model) for m in msgs)


def message_tokens(msg: Msg, *, model: str) -> int:
    """A message's stored count when it has one, else its count now."""
    return msg.tokens if msg.tokens is not None else count_message(msg, model=model)
