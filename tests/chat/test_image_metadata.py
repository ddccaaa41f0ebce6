"""A share link serves its images without their metadata (image_metadata): a photo's EXIF (GPS position,
camera, author), XMP, IPTC, comments, text chunks and what follows the picture's end (a motion photo's
video) are not published with it; what drawing it needs (colour profile, alpha, animation, the EXIF
orientation) is kept. Files built here byte by byte, as each format lays them out, so no decoder or
tool is needed to run them; a file cut short publishes nothing past where it stops being readable."""

from __future__ import annotations

import struct
import zlib

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from hypothesis import given, settings
from hypothesis import strategies as st

from chatapp.chat.api.image_views import IMAGE_CSP
from chatapp.chat.image_metadata import _exif_orientation, image_metadata_strip
from chatapp.chat.image_models import MessageImage
from chatapp.chat.models import Conversation, Message
from chatapp.chat.share_services import conversation_share_create
from chatapp.chat.share_views import SHARE_CSP
from optimizer.images import image_info
from tests.support.images import png_bytes

SECRET = b"Zelda-48.8584N"  # what no stripped file may still hold


def _tiff(*, orientation: int, order: str = ">") -> bytes:
    """An EXIF block as cameras write it: the orientation, an artist and a GPS directory, the secret in both."""
    mark = b"MM" if order == ">" else b"II"
    artist = SECRET + b"\x00"
    gps_ifd = 8 + 2 + 3 * 12 + 4 + len(artist)
    entries = [
        struct.pack(order + "HHIHH", 0x0112, 3, 1, orientation, 0),
        struct.pack(order + "HHII", 0x013B, 2, len(artist), 8 + 2 + 3 * 12 + 4),
        struct.pack(order + "HHII", 0x8825, 4, 1, gps_ifd),
    ]
    gps = struct.pack(order + "H", 1) + struct.pack(order + "HHII", 0x0001, 2, 2, 0) + struct.pack(order + "I", 0)
    return (mark + struct.pack(order + "HI", 42, 8) + struct.pack(order + "H", len(entries)) + b"".join(entries)
            + struct.pack(order + "I", 0) + artist + gps + SECRET)


def _segment(marker: int, body: bytes) -> bytes:
    return bytes((0xFF, marker)) + struct.pack(">H", len(body) + 2) + body


# The parts of a JPEG that draw it (a frame of 4x2, its tables, a scan whose data holds a stuffed 0xFF and
# a restart marker, as entropy-coded data does).
JFIF = _segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
ICC = _segment(0xE2, b"ICC_PROFILE\x00\x01\x01" + b"colour profile")
DQT = _segment(0xDB, b"\x00" + bytes(range(64)))
SOF = _segment(0xC0, struct.pack(">BHHB", 8, 2, 4, 1) + b"\x01\x11\x00")
DHT = _segment(0xC4, b"\x00" + bytes(16))
SCAN = _segment(0xDA, b"\x01\x01\x00\x00\x3f\x00") + b"\x12\xff\x00\x34\xff\xd0\x56\x78"
EOI = b"\xff\xd9"


def _jpeg(*extra_before_scan: bytes, after: bytes = b"") -> bytes:
    return b"\xff\xd8" + JFIF + b"".join(extra_before_scan) + ICC + DQT + SOF + DHT + SCAN + EOI + after


def _exif_of_jpeg(data: bytes) -> bytes | None:
    at = data.find(b"\xff\xe1")
    return None if at < 0 else data[at + 4:at + struct.unpack(">H", data[at + 2:at + 4])[0] + 2]


@pytest.mark.parametrize("order", [">", "<"])
def test_a_jpeg_keeps_its_picture_and_orientation_and_loses_the_rest(order):
    data = _jpeg(
        _segment(0xE1, b"Exif\x00\x00" + _tiff(orientation=6, order=order)),
        _segment(0xE1, b"http://ns.adobe.com/xap/1.0/\x00<x:xmpmeta>" + SECRET + b"</x:xmpmeta>"),
        _segment(0xE2, b"MPF\x00" + SECRET),  # the index of the pictures after the first one's end
        _segment(0xED, b"Photoshop 3.0\x00" + SECRET),  # IPTC: author, place
        _segment(0xEB, b"JP" + SECRET),  # a content credential (C2PA)
        _segment(0xFE, SECRET),  # a comment
        after=b"\x00\x00\x00\x18ftypmp42" + SECRET,  # a motion photo's video after the picture's end
    )
    assert SECRET in data and image_info(data) is not None

    stripped = image_metadata_strip(data, "image/jpeg")

    assert SECRET not in stripped
    exif = _exif_of_jpeg(stripped)
    assert exif is not None and _exif_orientation(exif) == 6  # shown upright, as in the chat
    assert stripped == b"\xff\xd8" + JFIF + _segment(0xE1, exif) + ICC + DQT + SOF + DHT + SCAN + EOI
    assert image_info(stripped) == image_info(data)


def test_an_upright_jpeg_keeps_no_exif_at_all():
    data = _jpeg(_segment(0xE1, b"Exif\x00\x00" + _tiff(orientation=1)))

    assert image_metadata_strip(data, "image/jpeg") == _jpeg()


def test_a_jpeg_without_metadata_is_served_as_it_is():
    assert image_metadata_strip(_jpeg(), "image/jpeg") == _jpeg()


@pytest.mark.parametrize("cut", [0.3, 0.5, 0.8])
def test_a_jpeg_cut_short_publishes_nothing_past_where_it_stops(cut):
    """A length past the file's end (a cut upload): the segment and all after it are left out."""
    whole = _jpeg(_segment(0xE1, b"Exif\x00\x00" + _tiff(orientation=3) + SECRET * 20))
    data = whole[: int(len(whole) * cut)]

    stripped = image_metadata_strip(data, "image/jpeg")

    assert SECRET not in stripped and stripped.startswith(b"\xff\xd8" + JFIF)


JPEG_METADATA = [
    _segment(0xE1, b"Exif\x00\x00" + _tiff(orientation=5)),
    _segment(0xE1, b"http://ns.adobe.com/xap/1.0/\x00" + SECRET),
    _segment(0xED, b"Photoshop 3.0\x00" + SECRET),
    _segment(0xFE, SECRET),
]


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from([JFIF, ICC, DQT, SOF, DHT, SCAN, EOI, *JPEG_METADATA]), max_size=12),
       cut=st.integers(min_value=0, max_value=400))
def test_no_order_or_cut_of_a_jpegs_parts_publishes_its_metadata(parts, cut):
    """Whatever the order of its parts (metadata between scans, after the end) and wherever the file is
    cut, nothing of its metadata is served, and serving it again changes nothing."""
    data = (b"\xff\xd8" + b"".join(parts) + EOI + SECRET)[:cut]

    stripped = image_metadata_strip(data, "image/jpeg")

    assert SECRET not in stripped
    assert image_metadata_strip(stripped, "image/jpeg") == stripped


@settings(max_examples=300, deadline=None)
@given(mime=st.sampled_from(["image/jpeg", "image/png", "image/webp", "image/gif"]), data=st.binary(max_size=200))
def test_any_bytes_are_read_without_an_error(mime, data):
    """Stored images were checked by their header only: a body the stripper cannot read is cut, never a 500."""
    assert isinstance(image_metadata_strip(data, mime), bytes)


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    found, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        kind, body = data[at + 4:at + 8], data[at + 8:at + 8 + length]
        assert struct.unpack(">I", data[at + 8 + length:at + 12 + length])[0] == zlib.crc32(kind + body)
        found.append((kind, body))
        at += 12 + length
    return found


def test_a_png_keeps_what_draws_it_and_loses_its_text_exif_and_time():
    plain = png_bytes(4, 2)
    header, idat = _png_chunks(plain)[0], _png_chunks(plain)[1]
    data = (
        plain[:8] + _png_chunk(*header)
        + _png_chunk(b"iCCP", b"sRGB\x00\x00" + zlib.compress(b"profile"))
        + _png_chunk(b"tEXt", b"Author\x00" + SECRET)
        + _png_chunk(b"iTXt", b"XML:com.adobe.xmp\x00\x00\x00\x00\x00" + SECRET)
        + _png_chunk(b"zTXt", b"Comment\x00\x00" + zlib.compress(SECRET))
        + _png_chunk(b"eXIf", _tiff(orientation=3))
        + _png_chunk(b"tIME", b"\x07\xe8\x01\x02\x03\x04\x05")
        + _png_chunk(b"caBX", SECRET)  # a program's own chunk (a content credential)
        + _png_chunk(*idat) + _png_chunk(b"IEND", b"") + SECRET
    )

    stripped = image_metadata_strip(data, "image/png")

    assert SECRET not in stripped
    chunks = _png_chunks(stripped)
    assert [kind for kind, _ in chunks] == [b"IHDR", b"iCCP", b"eXIf", b"IDAT", b"IEND"]
    assert _exif_orientation(chunks[2][1]) == 3
    assert image_metadata_strip(plain, "image/png") == plain  # a clean file is served as it is


def _riff_chunk(fourcc: bytes, body: bytes) -> bytes:
    return fourcc + struct.pack("<I", len(body)) + body + (b"\x00" if len(body) % 2 else b"")


def _webp_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    assert data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    assert struct.unpack("<I", data[4:8])[0] == len(data) - 8
    found, at = [], 12
    while at < len(data):
        fourcc, (size,) = data[at:at + 4], struct.unpack("<I", data[at + 4:at + 8])
        found.append((fourcc, data[at + 8:at + 8 + size]))
        at += 8 + size + size % 2
    return found


def test_a_webp_keeps_its_picture_and_orientation_and_loses_exif_and_xmp():
    icc, exif, xmp = 0x20, 0x08, 0x04
    vp8x = bytes((icc | exif | xmp, 0, 0, 0)) + (3).to_bytes(3, "little") + (1).to_bytes(3, "little")
    lossless = b"\x2f\x03\x40\x00\x00\x07\x10\x11\x11\x88\x88\xfe\x07\x00"  # a VP8L bitstream's bytes
    chunks = (_riff_chunk(b"VP8X", vp8x) + _riff_chunk(b"ICCP", b"profile") + _riff_chunk(b"VP8L", lossless)
              + _riff_chunk(b"EXIF", _tiff(orientation=8)) + _riff_chunk(b"XMP ", b"<x:xmpmeta>" + SECRET))
    data = b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WEBP" + chunks + _riff_chunk(b"JUNK", SECRET)

    stripped = image_metadata_strip(data, "image/webp")

    assert SECRET not in stripped
    kept = _webp_chunks(stripped)
    assert [fourcc for fourcc, _ in kept] == [b"VP8X", b"ICCP", b"VP8L", b"EXIF"]
    assert kept[0][1][0] == icc | exif and kept[0][1][1:] == vp8x[1:]  # flags say what is left
    assert kept[2][1] == lossless and _exif_orientation(kept[3][1]) == 8


def _gif_blocks(payload: bytes) -> bytes:
    return b"".join(bytes((len(payload[i:i + 255]),)) + payload[i:i + 255] for i in range(0, len(payload), 255)) + b"\0"


def test_a_gif_keeps_its_frames_and_loop_and_loses_comments_and_xmp():
    head = b"GIF89a" + struct.pack("<HHBBB", 2, 2, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff"
    loop = b"\x21\xff" + _gif_blocks(b"NETSCAPE2.0") [:-1] + b"\x03\x01\x00\x00\x00"
    control = b"\x21\xf9\x04\x00\x0a\x00\x00\x00"
    frame = b"\x2c" + struct.pack("<HHHHB", 0, 0, 2, 2, 0) + b"\x02" + _gif_blocks(b"\x44\x01")
    comment = b"\x21\xfe" + _gif_blocks(SECRET)
    xmp = b"\x21\xff" + bytes((11,)) + b"XMP DataXMP" + _gif_blocks(b"<x:xmpmeta>" + SECRET * 30)
    data = head + loop + comment + control + frame + xmp + control + frame + b";" + SECRET

    stripped = image_metadata_strip(data, "image/gif")

    assert stripped == head + loop + control + frame + control + frame + b";"


@pytest.mark.django_db
def test_a_share_link_serves_the_picture_without_its_metadata_and_no_file_name():
    owner = get_user_model().objects.create_user(username="zelda", password="a long test password 1")
    chat = Conversation.objects.create(owner=owner, title="Holiday", has_images=True)
    message = Message.objects.create(conversation=chat, role="user", content="Where is this?")
    data = _jpeg(_segment(0xE1, b"Exif\x00\x00" + _tiff(orientation=6)), _segment(0xFE, SECRET))
    image = MessageImage.objects.create(message=message, mime="image/jpeg", width=4, height=2,
                                        byte_count=len(data), name="zelda-home-address.jpg", data=data)
    issued = conversation_share_create(owner=owner, conversation=chat)
    anyone = Client()

    page = anyone.get(f"/s/{issued.token}/")
    served = anyone.get(f"/s/{issued.token}/images/{image.pk}/")

    assert page.status_code == 200 and "zelda-home-address" not in page.content.decode()
    assert 'alt="Image (4x2)"' in page.content.decode()
    assert page["Content-Security-Policy"] == SHARE_CSP and "script-src" not in SHARE_CSP  # default-src 'none'
    assert served.status_code == 200 and served["Content-Type"] == "image/jpeg"
    assert SECRET not in served.content and _exif_orientation(_exif_of_jpeg(served.content) or b"") == 6
    assert served["Content-Security-Policy"] == IMAGE_CSP and "no-store" in served["Cache-Control"]
    # The owner's own page and API keep the file as it was sent, and its name.
    mine = Client()
    mine.force_login(owner)
    assert mine.get(f"/api/images/{image.pk}/").content == data
    assert "zelda-home-address.jpg" in mine.get(f"/c/{chat.pk}/").content.decode()
