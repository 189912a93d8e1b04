"""How the stored image may differ from its file: the image stage's settings, which check
themselves when made."""

from __future__ import annotations

from dataclasses import dataclass

from beam_tfrecord.config_base import Config, ConfigError, check_choice, documented, setting

__all__ = [
    "BIT_DEPTHS",
    "DEFAULT_MAX_FILE_MB",
    "DEFAULT_MAX_PIXELS",
    "IMAGE_FORMATS",
    "PAGES",
    "RESIZE_MODES",
    "ImageConfig",
    "format_size",
    "parse_size",
]

DEFAULT_MAX_PIXELS = 100_000_000
# A file's bytes are read whole into memory; a larger file is rejected from its listed size.
# 1 GB holds any picture under the pixel limit at 8 bytes a pixel (16-bit RGBA, uncompressed).
DEFAULT_MAX_FILE_MB = 1024.0
IMAGE_FORMATS = ("original", "jpeg", "png")
BIT_DEPTHS = ("full", "8")
RESIZE_MODES = ("stretch", "crop", "pad")
PAGES = ("stack", "first", "each")  # what a multi-page file becomes (`pages`)


@documented
@dataclass(frozen=True)
class ImageConfig(Config):
    """How the stored image may differ from the source; the defaults keep source bytes."""

    image_format: str = setting(
        "original",
        details="keep source bytes when TensorFlow decodes them unchanged, else re-encode; `jpeg` or `png` "
        "forces",
        group="images",
        label="Image format",
        choices=IMAGE_FORMATS,
        help="original keeps the source bytes when TensorFlow decodes them; jpeg or png re-encode all",
    )
    jpeg_quality: int = setting(
        95,
        group="images",
        label="JPEG quality",
        value_type=int,
        pattern="^([1-9]|[1-9][0-9]|100)$",
        help="1..100, for images re-encoded as JPEG",
    )
    resize: tuple[int, int] | None = setting(
        None,
        details="`WIDTHxHEIGHT` (the readers' `image_size` is `(height, width)`)",
        default_doc="none",
        group="images",
        label="Resize",
        parse=lambda text: parse_size(text),
        text=lambda size: format_size(size),
        record_text=lambda size: format_size(size),
        record_value=lambda text: parse_size(text),
        pattern="^[1-9][0-9]*x[1-9][0-9]*$",
        help="WIDTHxHEIGHT every image is resized to, e.g. 224x224",
    )
    resize_mode: str = setting(
        "stretch",
        group="images",
        label="Resize mode",
        choices=RESIZE_MODES,
        help="stretch, crop (centred, keeps the aspect ratio) or pad (centred, black borders)",
    )
    max_pixels: int = setting(
        DEFAULT_MAX_PIXELS,
        group="images",
        label="Maximum pixels",
        value_type=int,
        minimum=1,
        help="reject larger images as too_large, from the header, before decoding",
    )
    channels: int | None = setting(
        None,
        details="`1` or `3` forces grayscale or RGB; grayscale stays grayscale otherwise",
        default_doc="keep",
        group="images",
        label="Channels",
        value_type=int,
        choices=(1, 3),
        help="force grayscale (1) or RGB (3); by default grayscale stays grayscale",
    )
    bit_depth: str = setting(
        "full",
        details="`full` keeps samples and bands as they are ([scientific](scientific.md)); `8` scales "
        "them to 8-bit grayscale or RGB",
        group="images",
        label="Bit depth",
        record_default=False,
        choices=BIT_DEPTHS,
        help="full keeps 16-bit, float and many-band pictures as they are; 8 scales them to 8 bits",
    )
    pages: str = setting(
        "stack",
        details="what a file of several pages (a TIFF stack or hyperstack, a multi-frame DICOM) "
        "becomes: `stack` one record, `[D, H, W, C]`; `first` its first page (`frames_dropped` in "
        "changes.jsonl); `each` a record per page (`stack.tif#03`), split with its file "
        "([scientific pictures](scientific.md#one-record-per-page))",
        group="images",
        label="Pages",
        record_default=False,
        choices=PAGES,
        help="stack keeps a multi-page file's pages in one record; first keeps its first page; each "
        "makes a record of every page",
    )
    additional_channels: bool = setting(
        False,
        details="bands past the third as the Object Detection API's `num_additional_channels`: "
        "8-bit one-channel PNGs; tfds schema only "
        "([detection](detection.md#more-than-three-bands))",
        group="images",
        label="Additional channels",
        record_default=False,
        value_type=bool,
        help="store bands past the third as the Object Detection API's additional channels (8-bit PNGs)",
    )
    max_file_mb: float = setting(
        DEFAULT_MAX_FILE_MB,
        details="reject larger files as `too_large` unread, from their listed size (inputs are read whole "
        "into memory)",
        group="images",
        label="Maximum file size (MB)",
        value_type=float,
        help="reject larger files as too_large from their listed size, before reading them",
    )

    def __post_init__(self) -> None:
        check_choice("image_format", self.image_format, IMAGE_FORMATS)
        check_choice("resize_mode", self.resize_mode, RESIZE_MODES)
        check_choice("bit_depth", self.bit_depth, BIT_DEPTHS)
        check_choice("pages", self.pages, PAGES)
        check_choice("channels", self.channels, (None, 1, 3))
        if not 1 <= self.jpeg_quality <= 100:
            raise ConfigError("jpeg_quality", "must be in 1..100")
        if self.max_pixels < 1:
            raise ConfigError("max_pixels", "must be positive")
        if not self.max_file_mb > 0:
            raise ConfigError("max_file_mb", "must be positive")
        if self.resize is not None and (len(self.resize) != 2 or min(self.resize) < 1):
            raise ConfigError("resize", f"must be a positive (width, height), not {self.resize!r}")

    @property
    def full_depth(self) -> bool:
        """Keep samples past 8 bits and bands past RGB as the source holds them."""
        return self.bit_depth == "full"

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_mb * 1_000_000)


def parse_size(text: str) -> tuple[int, int]:
    """`"224x224"` -> (224, 224); width first, as people write it."""
    try:
        width, height = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"size must look like WIDTHxHEIGHT, e.g. 224x224, not {text!r}") from None
    if width <= 0 or height <= 0:
        raise ValueError(f"size must be positive, not {text!r}")
    return width, height


def format_size(size: tuple[int, int]) -> str:
    """(224, 160) -> `"224x160"`, the inverse of `parse_size`."""
    return f"{size[0]}x{size[1]}"
