"""LaTeX math in messages, rendered on the server as MathML (which browsers draw natively: no script
and no font files in the page).

Models write math four ways: `$…$` and `$$…$$` (Markdown's habit), `\\(…\\)` and `\\[…\\]` (LaTeX's,
which most chat models use). The dollar forms are read by mdit-py-plugins' dollarmath rules, with
its guards for prices: no space just inside the dollars and no digit right after the closing one,
so "$5 and $10" stays text. The bracket forms are read by the two rules below: CommonMark would
otherwise take `\\(` for an escaped parenthesis and print the formula bare.

latex2mathml writes the text of `\\text{…}` unescaped, so its output is checked before it is used:
well-formed XML made only of the MathML elements and attributes listed here. Anything else (or a
formula it cannot read) is shown as its LaTeX source in a code span, as the model wrote it; the
sanitizer (rendering._sanitize) then passes only these names through as well.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from bisect import bisect_left
from typing import Any

from latex2mathml.converter import convert
from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline
from mdit_py_plugins.dollarmath import dollarmath_plugin

MATH_TAGS = frozenset({
    "math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "mfrac", "msqrt", "mroot", "msub", "msup",
    "msubsup", "munder", "mover", "munderover", "mtable", "mtr", "mtd", "mstyle", "mpadded", "mphantom",
    "menclose", "merror", "mmultiscripts", "mprescripts", "none", "semantics", "annotation",
})
MATH_ATTRIBUTES = frozenset({
    "display", "mathvariant", "stretchy", "fence", "separator", "accent", "accentunder", "lspace", "rspace",
    "columnalign", "columnlines", "columnspacing", "rowalign", "rowlines", "rowspacing", "linethickness",
    "displaystyle", "scriptlevel", "width", "height", "depth", "notation", "minsize", "maxsize",
    "movablelimits", "form", "largeop", "symmetric", "frame", "framespacing", "mathcolor", "mathbackground",
    "encoding",
})
_NAMESPACE = "{http://www.w3.org/1998/Math/MathML}"
# A formula longer than this is shown as source: the converter's time grows with it, and no reply
# needs one formula of this size.
MAX_FORMULA_CHARS = 5_000


def mathml(latex: str, *, display: bool) -> str:
    """The formula as MathML, or its source in a code span when it cannot be drawn safely."""
    latex = latex.strip()
    if latex and len(latex) <= MAX_FORMULA_CHARS:
        try:
            markup = convert(latex, display="block" if display else "inline")
        except Exception:  # the converter raises many kinds (and none of its own base) on malformed LaTeX
            markup = ""
        if markup and _only_mathml(markup):
            return markup
    source = html.escape(f"\\[{latex}\\]" if display else f"\\({latex}\\)")
    return f'<code class="math-source">{source}</code>'


def _only_mathml(markup: str) -> bool:
    try:
        # Our converter's output, not a document from outside: no DTD can stand inside its root element.
        root = ET.fromstring(markup)  # noqa: S314
    except ET.ParseError:
        return False
    for element in root.iter():
        tag = element.tag.removeprefix(_NAMESPACE)
        if tag not in MATH_TAGS or any(name not in MATH_ATTRIBUTES and name != "xmlns" for name in element.attrib):
            return False
    return True


_INLINE_END = re.compile(r"\\\)")


def _inline_ends(state: StateInline) -> list[int]:
    """Where `\\)` stands in the paragraph's text, in order: found once per paragraph (kept in the parse's
    env). Each `\\(` searched the rest of the text for one, and a paragraph of thousands that never
    close read its text that many times (40,000 took most of a minute to draw)."""
    found = state.env.get("math_inline_ends")
    if found is None or found[0] is not state.src:
        # Two occurrences cannot overlap: ")" is not "\\".
        found = state.env["math_inline_ends"] = (state.src, [m.start() for m in _INLINE_END.finditer(state.src)])
    return found[1]


def _bracket_inline(state: StateInline, silent: bool) -> bool:
    """`\\(…\\)` on one paragraph's text: a math_inline token (rendered as dollarmath's are)."""
    if not state.src.startswith("\\(", state.pos):
        return False
    ends = _inline_ends(state)
    at = bisect_left(ends, state.pos + 2)
    end = ends[at] if at < len(ends) else -1
    if end < 0 or not state.src[state.pos + 2 : end].strip():
        return False
    if not silent:
        token = state.push("math_inline", "math", 0)
        token.content = state.src[state.pos + 2 : end]
        token.markup = "\\("
    state.pos = end + 2
    return True


_BLOCK_END = re.compile(r"\\\]\s*$")


def _block_end_lines(state: StateBlock) -> list[int]:
    """The numbers of the lines ending with `\\]`, in order: found once per text (kept in the parse's
    env). Each `\\[` looked for its end line by line, and is asked again at every line of a paragraph
    (whether it interrupts it): a reply of a few thousand unclosed `\\[` lines took minutes to draw."""
    found = state.env.get("math_block_end_lines")
    if found is None or found[0] is not state.src:
        # Every line of the text (a quote parsing its lines lowers lineMax meanwhile); a line's end is
        # the same whatever a quote or a list takes off its start.
        count = len(state.bMarks) - 1  # the last mark is a line past the end
        lines = [n for n in range(count) if _BLOCK_END.search(state.src, state.bMarks[n], state.eMarks[n])]
        found = state.env["math_block_end_lines"] = (state.src, lines)
    return found[1]


def _bracket_block(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """A `\\[` line (at most three spaces in) through the line that ends with `\\]`: a math_block token."""
    first = state.bMarks[start] + state.tShift[start]
    if state.sCount[start] - state.blkIndent >= 4 or not state.src.startswith("\\[", first):
        return False
    ends = _block_end_lines(state)
    at = bisect_left(ends, start)
    # The first line's `\\[` cannot be the start of its own `\\]` ("[" is not "\\").
    if at == len(ends) or ends[at] >= end:
        return False
    if silent:
        return True
    line = ends[at]
    body = [state.src[first + 2 : state.eMarks[start]]]
    body += [state.src[state.bMarks[n] + state.tShift[n] : state.eMarks[n]] for n in range(start + 1, line + 1)]
    token = state.push("math_block", "math", 0)
    token.block, token.markup = True, "\\["
    token.content = _BLOCK_END.sub("", "\n".join(body))
    token.map = [start, line + 1]
    state.line = line + 1
    return True


def _render_block(_renderer: Any, tokens: list[Any], idx: int, _options: Any, _env: Any) -> str:
    """A display formula's box, which scrolls sideways when the formula is wider than the reply: a tab
    stop, so the keyboard can scroll it (some browsers make a scrolling box focusable on their own, not
    all), named as a group so a screen reader says what took the focus."""
    content = mathml(tokens[idx].content, display=True)
    return f'<div class="math block" tabindex="0" role="group" aria-label="Formula">\n{content}\n</div>\n'


def _render_inline_display(_renderer: Any, tokens: list[Any], idx: int, _options: Any, _env: Any) -> str:
    """`$$…$$` inside a line: drawn as a display formula, in a span. dollarmath's div cannot stand in a
    paragraph: the page's parser ended the paragraph before it, and the sentence's last words after it
    stood on a line of their own."""
    return f'<span class="math inline">{mathml(tokens[idx].content, display=True)}</span>'


def math_plugin(md: MarkdownIt) -> None:
    """Math in all four notations, rendered by `mathml`."""

    def render(latex: str, options: dict[str, Any]) -> str:
        return mathml(latex, display=bool(options.get("display_mode")))

    dollarmath_plugin(md, allow_space=False, allow_digits=False, double_inline=True, allow_labels=False,
                      renderer=render)
    md.add_render_rule("math_block", _render_block)
    md.add_render_rule("math_inline_double", _render_inline_display)
    md.inline.ruler.before("escape", "math_inline_brackets", _bracket_inline)
    md.block.ruler.before("fence", "math_block_brackets", _bracket_block,
                          {"alt": ["paragraph", "reference", "blockquote", "list"]})
