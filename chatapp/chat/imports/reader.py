"""An uploaded file as JSON values, one top-level item at a time.

`json.load` of a 200 MB export holds the whole document as Python objects at once (several times
the file's size) on top of the text decoded as one `str` (up to 4 bytes a character once a single
emoji appears). This reader keeps the file's bytes and decodes a window of them (4 MiB, grown for an
item larger than that), parsing one item of the top-level array at a time with the C decoder's
`raw_decode`: the peak is the bytes plus one conversation's objects. A top-level object (our export
of one conversation) is one item.

It also takes what people actually upload: ChatGPT's export as downloaded (a ZIP holding
conversations.json, or since early 2026 its numbered parts, joined into one list), a UTF-8 byte
order mark. Errors say what is wrong in words, with a line number.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any

from .records import ImportFileError, describe

WINDOW_BYTES = 1 << 22
_NON_SPACE = re.compile(r"[^ \t\n\r]")
_ZIP_MAGIC = b"PK\x03\x04"
_BOM = b"\xef\xbb\xbf"


def json_bytes(data: bytes, *, max_bytes: int) -> bytes:
    """The JSON text of an upload: the file itself, or the conversations.json of a ZIP archive."""
    if not data.strip():
        raise ImportFileError("The file is empty.")
    if data.startswith(_ZIP_MAGIC):
        data = _zip_member(data, max_bytes=max_bytes)
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ImportFileError("The file is UTF-16 text: save it as UTF-8 and upload it again.")
    return data


def _zip_member(data: bytes, *, max_bytes: int) -> bytes:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = [i for i in archive.infolist() if not i.is_dir()]
            named = [i for i in members if _base_name(i) == "conversations.json"]
            parts = sorted((i for i in members if _PART.fullmatch(_base_name(i))), key=_part_number)
            if parts and not named:
                return _parts_joined(archive, parts, max_bytes=max_bytes)
            candidates = named or [i for i in members if i.filename.lower().endswith(".json")]
            if len(candidates) != 1:
                listed = ", ".join(i.filename for i in members[:10]) or "nothing"
                raise ImportFileError(
                    "The ZIP archive has no conversations.json (nor a single JSON file) to import; "
                    f"it holds: {listed}."
                )
            return _member_read(archive, candidates[0], max_bytes=max_bytes)
    # zlib.error and EOFError: a damaged or cut-off member, found while it is inflated. ValueError (with
    # UnicodeDecodeError) and IndexError: a damaged directory (an offset before the file's start, a name the
    # directory marks UTF-8 that is not, a name of no length), which zipfile does not report as BadZipFile.
    except (zipfile.BadZipFile, zipfile.LargeZipFile, RuntimeError, NotImplementedError, OSError, zlib.error,
            EOFError, ValueError, IndexError) as exc:
        raise ImportFileError(f"The file looks like a ZIP archive but cannot be read ({exc}).") from None


# ChatGPT's exports since early 2026 split the chats into numbered parts (conversations-000.json, -001.json,
# …), each a list of conversations, beside other JSON files (export_manifest.json, user.json).
_PART = re.compile(r"conversations-(\d{1,9})\.json")
_JSON_SPACE = b" \t\r\n"


def _base_name(member: zipfile.ZipInfo) -> str:
    return member.filename.rsplit("/", 1)[-1]


def _part_number(member: zipfile.ZipInfo) -> int:
    found = _PART.fullmatch(_base_name(member))
    return int(found.group(1)) if found else 0


def _member_read(archive: zipfile.ZipFile, member: zipfile.ZipInfo, *, max_bytes: int) -> bytes:
    # The size in the directory may lie (a crafted archive): the read is bounded too.
    if member.file_size > max_bytes:
        raise ImportFileError(_too_large(member.filename, member.file_size, max_bytes))
    with archive.open(member) as handle:
        content = handle.read(max_bytes + 1)
    if len(content) > max_bytes:
        raise ImportFileError(_too_large(member.filename, len(content), max_bytes))
    return content


def _parts_joined(archive: zipfile.ZipFile, parts: list[zipfile.ZipInfo], *, max_bytes: int) -> bytes:
    """The numbered parts' conversations as one JSON list, in the parts' order, within `max_bytes` in all."""
    items: list[bytes] = []
    room = max_bytes
    for member in parts:
        try:
            content = _member_read(archive, member, max_bytes=room)
        except ImportFileError:
            raise ImportFileError(
                f"The archive's conversations-NNN.json files are more than {max_bytes / 1e6:,.1f} MB unpacked "
                "together, the limit."
            ) from None
        room -= len(content)
        body = content.removeprefix(_BOM).strip(_JSON_SPACE)
        if not (body.startswith(b"[") and body.endswith(b"]")):
            raise ImportFileError(f"{member.filename} in the archive is not a list of conversations.")
        inner = body[1:-1].strip(_JSON_SPACE)
        if inner:  # a part may be an empty list
            items.append(inner)
    return b"[" + b",".join(items) + b"]"


def _too_large(name: str, size: int, limit: int) -> str:
    return f"{name} in the archive is {size / 1e6:,.1f} MB unpacked; the limit is {limit / 1e6:,.1f} MB."


class JsonItems:
    """Iterates the items of the top-level JSON array of `data` (a top-level object: itself)."""

    def __init__(self, data: bytes, *, window_bytes: int = WINDOW_BYTES) -> None:
        self._data = data
        self._window = window_bytes
        self._decoder = json.JSONDecoder()
        self._text = ""
        self._i = 0
        self._next_byte = 3 if data.startswith(_BOM) else 0
        self.top_level = ""  # "object" or "array" once iteration began
        self.items_read = 0

    def __iter__(self) -> Iterator[Any]:
        first = self._peek()
        if first == "{":
            self.top_level = "object"
            value = self._value()
            self._expect_end()
            yield value
            return
        if first != "[":
            self._refuse_top_level(first)
        self.top_level = "array"
        self._i += 1
        if self._peek() == "]":
            self._i += 1
            self._expect_end()
            return
        while True:
            if not self._peek():
                raise self._truncated()
            value = self._value()
            self.items_read += 1
            separator = self._peek()
            if separator == ",":
                self._i += 1
                yield value
            elif separator == "]":
                self._i += 1
                self._expect_end()
                yield value
                return
            elif not separator:
                raise self._truncated()
            else:
                raise ImportFileError(
                    f"The file is not valid JSON: after item {self.items_read} of the list, line "
                    f"{self._line()} has {separator!r} where a comma or the closing ] belongs."
                )

    # --- the window ---------------------------------------------------------------------------------

    def _at_end(self) -> bool:
        return self._next_byte >= len(self._data)

    def _grow(self, size: int) -> bool:
        """Decode up to `size` more bytes onto the window, dropping what was consumed."""
        if self._at_end():
            return False
        data = self._data
        end = min(len(data), self._next_byte + size)
        # Not in the middle of a character: a UTF-8 character is at most 4 bytes, so its start is at
        # most 3 back. A longer run of continuation bytes is no UTF-8 (the decoder then says where); a
        # search without that bound walked back to the window's start and never moved on.
        cut = end
        while cut < len(data) and end - cut < 3 and cut > self._next_byte + 1 and data[cut] & 0xC0 == 0x80:
            cut -= 1
        if cut == len(data) or data[cut] & 0xC0 != 0x80:
            end = cut
        try:
            text = data[self._next_byte:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            at = self._next_byte + exc.start
            line = data.count(b"\n", 0, at) + 1
            raise ImportFileError(
                f"The file is not UTF-8 text (byte {at:,}, line {line:,}): it is not a JSON export."
            ) from None
        self._text = self._text[self._i:] + text
        self._i = 0
        self._next_byte = end
        return True

    def _peek(self) -> str:
        """The next character that is not white space ("" at the end of the file)."""
        while True:
            match = _NON_SPACE.search(self._text, self._i)
            if match is not None:
                self._i = match.start()
                return match.group()
            self._i = len(self._text)
            if not self._grow(self._window):
                return ""

    def _value(self) -> Any:
        size = self._window
        while True:
            try:
                value, end = self._decoder.raw_decode(self._text, self._i)
                # A value reaching the window's end may go on past it (a number cut in two).
                if end < len(self._text) or self._at_end():
                    self._i = end
                    return value
            except json.JSONDecodeError as exc:
                if self._at_end():
                    raise self._invalid(exc) from None
            except RecursionError:
                raise ImportFileError("The file is JSON nested too deeply to be an export.") from None
            except ValueError as exc:  # a number of more digits than Python converts (sys.int_info)
                raise ImportFileError(f"The file is not valid JSON: {exc}.") from None
            self._grow(size)
            size *= 2

    def _expect_end(self) -> None:
        extra = self._peek()
        if extra:
            raise ImportFileError(
                f"The file is not valid JSON: line {self._line()} has {extra!r} after the end of the document."
            )

    # --- errors ------------------------------------------------------------------------------------

    def _line(self, pos: int | None = None) -> str:
        """The line of window position `pos` (default: the current one), counted in the file's bytes."""
        pos = self._i if pos is None else pos
        at = self._next_byte - len(self._text[pos:].encode("utf-8", "surrogatepass"))
        line = self._data.count(b"\n", 0, at) + 1
        return f"{line:,}"

    def _truncated(self) -> ImportFileError:
        where = f"after item {self.items_read} of the list" if self.top_level == "array" else "before its end"
        return ImportFileError(f"The file is cut short {where}: it looks truncated (download it again).")

    def _invalid(self, exc: json.JSONDecodeError) -> ImportFileError:
        # An unterminated string, or an error at the very end: the text stops in the middle of a value.
        if exc.msg.startswith("Unterminated string") or exc.pos >= len(self._text.rstrip()):
            if self.top_level == "array":
                return ImportFileError(
                    f"The file is cut short in item {self.items_read + 1} of the list: it looks truncated "
                    "(download it again)."
                )
            return ImportFileError("The file is cut short before the end of its JSON: it looks truncated.")
        return ImportFileError(f"The file is not valid JSON: {exc.msg} (line {self._line(exc.pos)}).")

    def _refuse_top_level(self, first: str) -> None:
        if first and first in '"-0123456789tfn':
            try:
                value = self._value()
            except ImportFileError:
                value = None
            else:
                raise ImportFileError(
                    f"The file is JSON but not a conversation export: it holds {describe(value)}, "
                    "not a list of conversations."
                )
        begins = self._text[self._i:self._i + 24]
        hint = ""
        if first == "<":
            hint = " It looks like HTML: ChatGPT's export has a chat.html beside conversations.json; upload the .zip."
        raise ImportFileError(f"The file is not JSON: it begins with {begins!r}.{hint}")
