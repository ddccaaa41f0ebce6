"""Image headers read without a decoder, and OpenAI's documented image cost (optimizer.images)."""

from __future__ import annotations

import base64
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from optimizer.images import image_info, image_tokens
from optimizer.tokens import IMAGE_PART_TOKENS, count_content


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b"")


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00;"


def jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def webp_lossless(width: int, height: int) -> bytes:
    bits = (width - 1) | ((height - 1) << 14)
    body = b"\x2f" + struct.pack("<I", bits)
    return b"RIFF" + struct.pack("<I", 4 + 8 + len(body)) + b"WEBP" + b"VP8L" + struct.pack("<I", len(body)) + body


def webp_lossy(width: int, height: int) -> bytes:
    body = b"\x00\x00\x00" + b"\x9d\x01\x2a" + struct.pack("<HH", width, height) + b"\x00" * 4
    return b"RIFF" + struct.pack("<I", 4 + 8 + len(body)) + b"WEBP" + b"VP8 " + struct.pack("<I", len(body)) + body


def webp_extended(width: int, height: int) -> bytes:
    body = b"\x00\x00\x00\x00" + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", 4 + 8 + len(body)) + b"WEBP" + b"VP8X" + struct.pack("<I", len(body)) + body


MAKERS = {"image/png": png, "image/gif": gif, "image/jpeg": jpeg, "image/webp": webp_lossless}


@pytest.mark.parametrize(("mime", "make"), [*MAKERS.items(), ("image/webp", webp_lossy), ("image/webp", webp_extended)])
def test_each_type_is_known_by_its_magic_bytes_with_its_size(mime, make):
    info = image_info(make(640, 480))
    assert (info.mime, info.width, info.height) == (mime, 640, 480)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"hello world",
        b"\x89PNG\r\n\x1a\n",
        b"GIF89a",
        b"\xff\xd8\xff",
        b"<svg xmlns='http://www.w3.org/2000/svg'/>",
        b"RIFF\x00\x00\x00\x00WAVE",
        png(0, 10),
        gif(10, 0),
    ],
)
def test_anything_else_is_not_an_image(data):
    assert image_info(data) is None


def test_a_jpeg_whose_size_follows_a_large_exif_block_is_read():
    exif = b"\xff\xe1" + struct.pack(">H", 60_002) + b"E" * 60_000
    data = jpeg(1200, 900)
    assert image_info(data[:2] + exif + data[2:]).width == 1200


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        (1024, 1024, 765),  # OpenAI's worked example: 768x768, 4 tiles
        (2048, 4096, 1105),  # to 1024x2048, then 768x1536: 6 tiles
        (4096, 8192, 1105),  # the same after the first scaling
        (512, 512, 255),  # one tile, no scaling up
        (100, 100, 255),
        (513, 100, 425),  # two tiles wide
    ],
)
def test_high_detail_cost_follows_openais_rule(width, height, tokens):
    assert image_tokens(width, height) == tokens
    assert image_tokens(width, height, detail="high") == tokens


def test_low_detail_is_flat():
    assert image_tokens(4000, 3000, detail="low") == IMAGE_PART_TOKENS


@given(st.integers(1, 20_000), st.integers(1, 20_000))
def test_cost_is_bounded_and_symmetric(width, height):
    tokens = image_tokens(width, height)
    assert 85 + 170 <= tokens <= 85 + 170 * 8  # at most 768x2048 after scaling: 2x4 tiles
    assert tokens == image_tokens(height, width)
    assert (tokens - 85) % 170 == 0


@given(st.integers(1, 512), st.integers(1, 512))
def test_an_image_within_one_tile_costs_one_tile(width, height):
    # Not monotonic in general (OpenAI's rule is not: 727x1025 is 6 tiles, 894x1192 scales to 4).
    assert image_tokens(width, height) == 85 + 170


def test_count_content_prices_a_data_url_image_by_its_size():
    url = "data:image/png;base64," + base64.b64encode(png(1024, 1024)).decode()
    parts = [{"type": "image_url", "image_url": {"url": url}}]
    assert count_content(parts, model="gpt-4o") == 765
    low = [{"type": "image_url", "image_url": {"url": url, "detail": "low"}}]
    assert count_content(low, model="gpt-4o") == 85


def test_count_content_prices_a_jpeg_whose_size_follows_megabytes_of_metadata():
    """An editor's XMP (its document history) may run to megabytes before the frame header: the image
    was counted at the flat 85 where it costs 765."""
    xmp = b"\xff\xe1" + struct.pack(">H", 65_000) + b"X" * 64_998
    data = jpeg(1024, 1024)
    url = "data:image/jpeg;base64," + base64.b64encode(data[:2] + xmp * 3 + data[2:]).decode()
    assert count_content([{"type": "image_url", "image_url": {"url": url}}], model="gpt-4o") == 765


def test_count_content_keeps_the_flat_estimate_for_an_image_it_cannot_read():
    parts = [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,!!!"}},
    ]
    assert count_content(parts, model="gpt-4o") == 2 * IMAGE_PART_TOKENS
