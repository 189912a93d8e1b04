"""Every Pillow pixel mode to 8-bit grayscale (L) or RGB, the two that JPEG and PNG store and
`tf.io.decode_image` returns, by one documented mapping (docs/usage.md's table repeats it).

Values are scaled, never clipped: a 16-bit, 32-bit or float picture keeps its whole range.

| mode | becomes |
|---|---|
| L, RGB | unchanged |
| 1 | L: 0 and 255 |
| LA, La | L, alpha composited over white |
| P, PA | RGB (L when the palette is gray), transparency composited over white |
| RGBA, RGBa | RGB, alpha composited over white |
| I;16, I;16B, I;16L, I;16N | L: round(v * 255 / 65535) |
| 16-bit RGB, RGBA (PNG, TIFF) | Pillow reads them as 8 bits a channel (the high byte: v >> 8) |
| I (32-bit int) | L: v if all in 0..255; v * 255 / 65535 if all in 0..65535; else [min, max] to [0, 255] |
| F (32-bit float) | L: v * 255 if all in 0..1; v if all in 0..255; else [min, max] to [0, 255] (1) |

(1) NaN becomes 0 and an infinity the finite maximum or minimum, before the rule is chosen.
| CMYK | RGB (Pillow's conversion; Adobe's inverted CMYK JPEGs are inverted back by the decoder) |
| LAB | RGB through LittleCMS (CIE L*a*b* D50 to sRGB) |
| YCbCr, HSV, RGBX and the rest | RGB (Pillow's conversion) |
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageCms

from beam_tfrecord import reasons

__all__ = ["KEPT_MODES", "mode_changes", "output_channels", "scale_to_8bit", "to_8bit_gray_or_rgb"]

KEPT_MODES = ("L", "RGB")
SIXTEEN_BIT_MODES = ("I;16", "I;16B", "I;16L", "I;16N")
ALPHA_MODES = ("RGBA", "LA", "PA", "La", "RGBa")
GRAY_ALPHA_MODES = ("LA", "La")


def mode_changes(image: Image.Image) -> list[str]:
    """The reasons (as `changes.jsonl` names them) that `to_8bit_gray_or_rgb` changes pixels."""
    mode = image.mode
    found = []
    if mode == "CMYK":
        found.append(reasons.CMYK.code)
    elif mode in (*SIXTEEN_BIT_MODES, "I", "F"):
        found.append(reasons.HIGH_BIT_DEPTH.code)
    elif mode in ("P", "PA"):
        found.append(reasons.PALETTE.code)
    elif mode not in (*KEPT_MODES, *ALPHA_MODES):
        found.append(reasons.MODE.code)
    if mode in ALPHA_MODES or "transparency" in image.info:
        found.append(reasons.ALPHA_FLATTENED.code)
    return found


def output_channels(image: Image.Image) -> int:
    """1 or 3: the channels `to_8bit_gray_or_rgb` gives this image, known before decoding."""
    mode = image.mode
    if mode in ("1", "L", *GRAY_ALPHA_MODES, *SIXTEEN_BIT_MODES, "I", "F"):
        return 1
    if mode in ("P", "PA"):
        return 1 if _palette_is_gray(image) else 3
    return 3


def to_8bit_gray_or_rgb(image: Image.Image) -> Image.Image:
    """The image's pixels as L or RGB, by the mapping in the module docstring."""
    mode = image.mode
    if mode in KEPT_MODES and "transparency" not in image.info:
        return image
    if mode in SIXTEEN_BIT_MODES:
        return _gray_from_array(np.asarray(image, dtype=np.float64) * (255.0 / 65535.0))
    if mode in ("I", "F"):
        return _gray_from_array(scale_to_8bit(np.asarray(image, dtype=np.float64), mode))
    if mode == "1":
        return image.convert("L")
    if mode == "LAB":
        return _lab_to_rgb(image)
    if mode in ALPHA_MODES or "transparency" in image.info:
        return _flatten_alpha(image)
    if mode == "P":
        return image.convert("L" if _palette_is_gray(image) else "RGB")
    return image.convert("RGB")


def scale_to_8bit(values: np.ndarray, mode: str) -> np.ndarray:
    """Scale a 32-bit integer (`I`) or float (`F`) plane into 0..255 without clipping any value
    (the rule in the module docstring; a full-depth picture's `--bit_depth 8` takes it too)."""
    values = np.where(np.isnan(values), 0.0, values)
    finite = values[np.isfinite(values)]
    low = float(finite.min()) if finite.size else 0.0
    high = float(finite.max()) if finite.size else 0.0
    # Infinities sit at the ends of the finite range, not beyond it.
    values = np.clip(values, low, high)  # only the infinities move: every finite value is inside
    if mode == "F" and low >= 0.0 and high <= 1.0:
        return values * 255.0
    if low >= 0.0 and high <= 255.0:
        return values
    if mode == "I" and low >= 0.0 and high <= 65535.0:
        return values * (255.0 / 65535.0)
    if high == low:
        return np.zeros_like(values)
    return (values - low) * (255.0 / (high - low))


def _gray_from_array(values: np.ndarray) -> Image.Image:
    # Values are already within 0..255; rounding can only reach 255.0, never past it.
    return Image.fromarray(np.rint(values).astype(np.uint8), mode="L")


def _lab_to_rgb(image: Image.Image) -> Image.Image:
    transform = ImageCms.buildTransform(
        ImageCms.createProfile("LAB"), ImageCms.createProfile("sRGB"), "LAB", "RGB"
    )
    converted = ImageCms.applyTransform(image, transform)
    assert converted is not None  # None only where asked to convert in place
    return converted


def _flatten_alpha(image: Image.Image) -> Image.Image:
    """Composite over white; stays gray when the source has no color."""
    gray = (
        image.mode in GRAY_ALPHA_MODES
        or image.mode == "L"
        or (image.mode in ("P", "PA") and _palette_is_gray(image))
    )
    rgba = image.convert("RGBA")
    background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    flat = Image.alpha_composite(background, rgba).convert("RGB")
    return flat.convert("L") if gray else flat


def _palette_is_gray(image: Image.Image) -> bool:
    palette = image.getpalette() or []
    triples = zip(palette[0::3], palette[1::3], palette[2::3], strict=False)
    return all(r == g == b for r, g, b in triples)
