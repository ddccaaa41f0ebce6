"""Ollama's context length: the window it serves a model with is a setting of the server's, not the
model's. A longer prompt loses its oldest messages without an error (the optimizer never learns of
it), so the window entered here must be that setting, which no OpenAI-compatible call reports."""

from __future__ import annotations

from urllib.parse import urlsplit

# Ollama's port, and the name its Docker image's service usually has.
OLLAMA_PORT = 11434
OLLAMA_HOSTS = frozenset({"ollama"})
# What Ollama serves a model with on a machine of under 24 GiB of VRAM (docs.ollama.com/context-length;
# 2,048 before 0.6): the window assumed for a model the registry does not know, rather than more.
OLLAMA_DEFAULT_CONTEXT = 4096


def ollama_endpoint(base_url: str) -> bool:
    """Whether a base URL is an Ollama server's (its port, or a host named "ollama")."""
    try:
        parts = urlsplit((base_url or "").strip())
        port = parts.port
    except ValueError:
        return False
    return port == OLLAMA_PORT or (parts.hostname or "").lower() in OLLAMA_HOSTS


def assumed_window(base_url: str, *, default: int) -> int:
    """The window assumed for a model the registry does not know at this endpoint: never more than
    an Ollama server gives it by default."""
    return min(default, OLLAMA_DEFAULT_CONTEXT) if ollama_endpoint(base_url) else default


def ollama_window_note(base_url: str) -> str:
    """Words on where an Ollama endpoint's window comes from ("" for any other endpoint)."""
    if not ollama_endpoint(base_url):
        return ""
    return (f"Ollama serves every model with its own context length, not the model's: "
            f"{OLLAMA_DEFAULT_CONTEXT:,} tokens on most machines, or what OLLAMA_CONTEXT_LENGTH (or the model's "
            "num_ctx parameter) sets; `ollama ps` shows it. Enter that number: a longer prompt loses its start "
            "without an error.")
