"""A download's file name from a chat's title: bounded, safe on every system, and a valid header
whatever the title holds (titles are free text, often written by the model)."""

from __future__ import annotations

import pytest
from django.utils.http import content_disposition_header

from chatapp.chat.download_names import download_filename


def _name(title: str, **kwargs) -> str:
    return download_filename(title, fallback="conversation-7", extension="md", **kwargs)


@pytest.mark.parametrize("title", [
    "a" * 1000, "é" * 1000, "😀" * 1000, "👨\u200d👩\u200d👧 " * 300, "line\nbreak\r\n" * 200,
    'a "quoted" \'title\' ' * 80,
])
def test_a_long_title_gives_a_bounded_name_and_a_valid_header(title):
    # 100 characters of the title at most, and within the 255 bytes a file name may take on
    # Linux and macOS (400 bytes of emoji were passed on).
    name = _name(title)
    stem = name.removesuffix(".md")
    assert len(stem) <= 100 and len(name.encode()) <= 255
    assert not stem.endswith(("\u200d", " ", "."))
    header = content_disposition_header(as_attachment=True, filename=name)
    assert header.isascii() and "\r" not in header and "\n" not in header


@pytest.mark.parametrize("title", ["?!?", "!!!", "--", "...", "'\"", "\u200b\u200b", "\ufeff", "\u00ad", "", "  \n "])
def test_a_title_with_nothing_to_name_the_file_by_falls_back_to_the_chat_id(title):
    # "?!?" gave "!.md", "--" a name a shell reads as an option, an invisible title a name that looks
    # empty; two such chats also downloaded under one name.
    assert _name(title) == "conversation-7.md"


def test_an_emoji_title_names_the_file():
    assert _name("😀🎉") == "😀🎉.md"


@pytest.mark.parametrize(("title", "expected"), [
    ("line\nbreak\r\nthere", "line break there.md"),
    ('say "hi" \\ there', "say hi there.md"),
    # A right-to-left override showed "evil\u202egpj.exe" as "evilexe.jpg": format characters go.
    ("evil\u202egpj.exe", "evilgpj.exe.md"),
    ("a\u200bb\u2066c\u2069", "abc.md"),
    ("x\x9by", "x y.md"),  # a C1 control, as the C0 ones
])
def test_breaks_quotes_and_invisible_characters_do_not_reach_the_name(title, expected):
    assert _name(title) == expected


@pytest.mark.parametrize("title", ["CON", "nul", "Com1", "LPT9 "])
def test_a_name_windows_reserves_is_not_given(title):
    assert _name(title).rsplit(".", 1)[0].upper() not in {"CON", "NUL", "COM1", "LPT9"}


def test_the_suffix_survives_a_long_title():
    # The dashboard's "<title> records.csv" lost " records" past 100 characters of title: it then
    # bore the name of the chat's own export.
    name = download_filename("a" * 1000, fallback="conversation-7", suffix=" records", extension="csv")
    assert name.endswith("a records.csv") and len(name) <= 100 + len(" records.csv")
    assert download_filename("?!", fallback="conversation-7", suffix=" records", extension="csv") == (
        "conversation-7 records.csv")
