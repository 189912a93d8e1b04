"""What a user sees of a broken or odd file must not depend on how Pillow is fed its bytes or how
the file is opened (issue 28 feeds a JPEG to the decoder in one call and reads with os.read)."""

from __future__ import annotations

import io
import struct

import imagegen
import numpy as np
from PIL import Image

from beam_tfrecord import compat
from beam_tfrecord.elements import PlannedInput, RejectLine
from beam_tfrecord.images.inputs import prepare_input
from beam_tfrecord.images.normalize import Reject, encode_for_tensorflow
from beam_tfrecord.images.options import ImageConfig


def _noisy(width: int, height: int, seed: int, mode: str = "RGB") -> Image.Image:
    """Pixels that compress badly, so the file is well over Pillow's 64 KB block."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    return Image.fromarray(pixels).convert(mode)


def _reject_as_before(data: bytes, name: str, monkeypatch) -> tuple[str, str]:
    """(reason, detail) with Pillow feeding its decoder as it does by default (64 KB a call),
    as before issue 28."""
    with monkeypatch.context() as patch:
        patch.setattr(compat, "decode_in_one_call", lambda image, size: None, raising=False)
        return _reject(data, name)


def _reject(data: bytes, name: str) -> tuple[str, str]:
    try:
        encode_for_tensorflow(data, ImageConfig(), name=name)
    except Reject as reject:
        return reject.reason, reject.detail
    return "record", ""


def test_a_cut_short_jpeg_over_64_kb_says_what_it_said_before(monkeypatch):
    """The detail of a truncated JPEG (`N bytes not processed`) counts what Pillow's decoder
    left over from its last block: with the block the size of the file, N changes."""
    pixels = np.asarray(imagegen.gradient(1200, 900)).astype(np.int16)
    pixels = pixels + np.random.default_rng(16).integers(-16, 17, pixels.shape)
    buffer = io.BytesIO()
    Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).convert("L").save(buffer, "JPEG", quality=95)
    data = buffer.getvalue()[:-1]
    assert len(data) > 65536
    expected = _reject_as_before(data, "a.jpg", monkeypatch)
    assert expected[0] == "truncated"
    assert _reject(data, "a.jpg") == expected


def _first_frame_one_row_short(data: bytes) -> bytes:
    """The GIF with its first frame declared a row taller than its LZW data: the data ends
    (an end code) before the frame's last row, and the rest of the file follows."""
    image = Image.open(io.BytesIO(data))
    at = data.index(b"\x2c\x00\x00\x00\x00" + struct.pack("<HH", *image.size))
    changed = bytearray(data)
    struct.pack_into("<H", changed, at + 7, image.size[1] + 1)
    struct.pack_into("<H", changed, 8, image.size[1] + 1)  # the logical screen too
    return bytes(changed)


def test_an_animated_gif_whose_first_frame_ends_early_keeps_its_reason(monkeypatch):
    """Pillow's GIF decoder returns at an LZW end code without saying it is done; fed the whole
    file at once, `load` finds no more to read and says `truncated`, where before it went on
    into the next frame and said `corrupt`."""
    frames = [_noisy(300, 200, seed).convert("P") for seed in range(3)]
    buffer = io.BytesIO()
    frames[0].save(buffer, "GIF", save_all=True, append_images=frames[1:])
    data = _first_frame_one_row_short(buffer.getvalue())
    assert len(data) > 65536
    expected = _reject_as_before(data, "a.gif", monkeypatch)
    assert expected[0] == "corrupt"
    assert _reject(data, "a.gif") == expected


def test_a_path_that_became_a_folder_is_named_in_its_reject(tmp_path):
    """`open()` names the path in IsADirectoryError; `os.read` on a folder's descriptor does not."""
    folder = tmp_path / "a.jpg"
    folder.mkdir()  # listed as a file, replaced by a folder before the run read it
    item = PlannedInput("a.jpg", str(folder), 100, "train")
    reject = prepare_input(item, ImageConfig())
    assert isinstance(reject, RejectLine) and reject.reason == "unreadable"
    assert reject.detail == f"IsADirectoryError: [Errno 21] Is a directory: '{folder}'"
