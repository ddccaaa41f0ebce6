"""File names of downloads, after what they hold: a folder of downloads is read by name, not by id."""

from __future__ import annotations

import re

# What no file name holds on Windows, macOS or Linux: the separators, the reserved characters, controls.
_UNSAFE_IN_NAMES = re.compile(r'[\\/:*?"<>|\x00-\x1f\x7f]+')


def download_filename(title: str, *, extension: str) -> str:
    """A download named after a chat's title ("Trip to Lisbon.md"), as Open WebUI and LibreChat name
    theirs. What a file name cannot hold becomes a space; a title with nothing left is "conversation"."""
    name = " ".join(_UNSAFE_IN_NAMES.sub(" ", title).split())[:100].strip(" .")
    return f"{name or 'conversation'}.{extension}"
