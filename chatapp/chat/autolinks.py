"""Bare web addresses in a message's text as links (GFM's autolinks extension, its http, https and www.
forms): models write addresses bare far more often than as Markdown links.

A core rule over the parsed text, not mdit-py-plugins' gfm_autolink: its inline rule scans the text
before every ":" back for a scheme, and a line of 40,000 "a:" took 15 s to draw. Here one regular
expression reads each text token once. Text in code, and inside a link already, is left as it is.
"""

from __future__ import annotations

import re
from typing import Literal

from markdown_it.rules_core import StateCore
from markdown_it.token import Token

# An address starts after a space, a line start or an opening mark, never inside a word ("xhttp://");
# it runs to the next space or "<" (the sanitizer's business is the rest).
_ADDRESS = re.compile(r"(?<![\w.+-])(?:https?://|www\.)[^\s<]+", re.IGNORECASE)
_HOST_START = re.compile(r"[^\W_]")  # a letter or digit (http://localhost:11434 is one too)
# GFM: trailing punctuation is the sentence's, not the address's.
_TRAILING = ".,:;!?*_~'\""


def _trimmed(address: str) -> str:
    """The address without the sentence's punctuation after it; a ")" closing none of its own "(" is the
    sentence's too (`(see https://x.example/a)`), one that does is kept (`…/wiki/Foo_(bar)`)."""
    opened, closed = address.count("("), address.count(")")  # once: a run of ")" is read once
    end = len(address)
    while end:
        last = address[end - 1]
        if last == ")" and closed > opened:
            closed -= 1
        elif last not in _TRAILING:
            break
        end -= 1
    return address[:end]


def _linked(state: StateCore, text: Token) -> list[Token] | None:
    """`text` as text and link tokens, or None when it holds no address."""
    out: list[Token] = []
    at = 0
    content = text.content
    for match in _ADDRESS.finditer(content):
        address = _trimmed(match.group())
        if not _HOST_START.match(address, address.find("://") + 3 if "://" in address else 4):
            continue  # "http://" or "www." with no host after it
        href = state.md.normalizeLink(address if "://" in address else f"http://{address}")
        if not state.md.validateLink(href):
            continue
        if match.start() > at:
            out.append(_token("text", content[at:match.start()], text.level))
        opening = _token("link_open", "", text.level, tag="a", nesting=1)
        opening.attrs = {"href": href}
        opening.markup, opening.info = "linkify", "auto"
        out += [opening, _token("text", state.md.normalizeLinkText(address), text.level + 1),
                _token("link_close", "", text.level, tag="a", nesting=-1)]
        at = match.start() + len(address)
    if not out:
        return None
    if at < len(content):
        out.append(_token("text", content[at:], text.level))
    return out


def _token(kind: str, content: str, level: int, *, tag: str = "", nesting: Literal[-1, 0, 1] = 0) -> Token:
    token = Token(kind, tag, nesting)
    token.content, token.level = content, level
    return token


def autolinks_mark(state: StateCore) -> None:
    """Each inline block's text tokens outside links, with their addresses made links."""
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        depth = 0
        for token in block.children:
            if token.type == "link_open":
                depth += 1
            elif token.type == "link_close":
                depth -= 1
            linked = _linked(state, token) if token.type == "text" and depth == 0 else None
            children += linked if linked is not None else [token]
        block.children = children
