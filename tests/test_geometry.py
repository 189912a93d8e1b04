"""Boxes and masks follow every change made to the picture: each test draws a coloured rectangle at
a known box of a generated picture, converts it with `encode_for_tensorflow`, places the box with
`place_annotations`, decodes the stored bytes and checks that the stored box still frames the
colour and the stored mask covers it. Then the rules (clipping, dropping, frames, areas) and a
few properties that must hold for any size, orientation and resize."""

from __future__ import annotations

import io

import imagegen
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageOps

from beam_tfrecord import reasons
from beam_tfrecord.elements import ImageAnnotations, ObjectBox, PlannedInput, Polygon, RunLengths
from beam_tfrecord.images.inputs import prepare_input
from beam_tfrecord.images.normalize import encode_for_tensorflow
from beam_tfrecord.images.options import ImageConfig
from beam_tfrecord.labels import RunLabels, geometry
from beam_tfrecord.labels.objects.placement import annotation_frame, place_annotations
from beam_tfrecord.write.records import finish_record
from beam_tfrecord.write.tally import Tally

BACKGROUND = (60, 70, 80)
MAGENTA = (250, 0, 250)
LANDSCAPE, PORTRAIT = (120, 80), (80, 120)
TARGETS = {"landscape": (100, 60), "portrait": (60, 100)}
# The colour's bounds are whole pixels and a scaled box edge may fall mid-pixel; bicubic
# resampling and JPEG blur the edge by less than another half (measured: 0.5 px at most).
TOLERANCE_PX = 1.0


def picture(size: tuple[int, int], box: tuple[int, int, int, int], seed: int = 0) -> Image.Image:
    """A noisy dark background with a magenta rectangle covering pixels box[0]..box[2]-1 (x)."""
    rng = np.random.default_rng(seed)
    pixels = np.clip(np.array(BACKGROUND) + rng.integers(-8, 8, (size[1], size[0], 3)), 0, 255)
    pixels[box[1] : box[3], box[0] : box[2]] = MAGENTA
    return Image.fromarray(pixels.astype(np.uint8), "RGB")


def jpeg_with_orientation(image: Image.Image, orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return imagegen.encode(image, "JPEG", quality=95, exif=exif.tobytes())


def annotated(box, *, mask=None, area=None, width=None, height=None, normalized=False) -> ImageAnnotations:
    return ImageAnnotations(
        objects=(ObjectBox(*box, class_name="thing", area=area, mask=mask, source_ref="test#1"),),
        source_id="test",
        normalized=normalized,
        width=width,
        height=height,
    )


def colour_box(pixels: np.ndarray) -> tuple[int, int, int, int]:
    """The pixel bounds (x0, y0, x1, y1) of the magenta pixels of a decoded RGB image."""
    magenta = (pixels[..., 0] > 160) & (pixels[..., 1] < 100) & (pixels[..., 2] > 160)
    ys, xs = np.nonzero(magenta)
    assert xs.size, "no magenta pixel in the stored image"
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def grown(pixels: np.ndarray) -> np.ndarray:
    """The pixels and their 8 neighbours."""
    padded = np.pad(pixels, 1)
    rows, cols = pixels.shape
    return np.any([padded[dy : dy + rows, dx : dx + cols] for dy in range(3) for dx in range(3)], axis=0)


def stored_and_check(data: bytes, annotations: ImageAnnotations, options: ImageConfig | None = None):
    """Convert, place, decode; assert the stored box frames the colour and the mask covers it."""
    image = encode_for_tensorflow(data, options or ImageConfig())
    placed = place_annotations(annotations, image.transform, masks=True)
    assert not placed.dropped, placed.dropped
    (stored,) = placed.objects
    pixels = np.asarray(Image.open(io.BytesIO(image.data)).convert("RGB"))
    assert pixels.shape[:2] == (image.height, image.width)
    box = (
        stored.xmin * image.width,
        stored.ymin * image.height,
        stored.xmax * image.width,
        stored.ymax * image.height,
    )
    seen = colour_box(pixels)
    assert np.allclose(box, seen, atol=TOLERANCE_PX), (box, seen)
    mask = np.asarray(Image.open(io.BytesIO(stored.mask_png)))
    assert mask.shape == pixels.shape[:2] and set(np.unique(mask)) <= {0, 1}
    magenta = (pixels[..., 0] > 160) & (pixels[..., 1] < 100) & (pixels[..., 2] > 160)
    overlap = (magenta & (mask == 1)).sum()
    # The source mask is the colour's pixels exactly (COCO fills the pixels whose centres are
    # inside); resampling moves either edge by up to a pixel (bicubic blur, nearest neighbour).
    assert overlap and not (magenta & ~grown(mask == 1)).any() and not ((mask == 1) & ~grown(magenta)).any()
    return image, stored


def rectangle_outline(box) -> tuple[Polygon, ...]:
    x0, y0, x1, y1 = box
    return (Polygon((x0, y0, x1, y0, x1, y1, x0, y1)),)


BOX = (30, 20, 70, 50)  # of a 120 x 80 picture


# ------------------------------------------------------------------ each transform


def test_kept_bytes_keep_the_box_where_it_was():
    data = imagegen.encode(picture(LANDSCAPE, BOX), "JPEG", quality=95)
    image, stored = stored_and_check(data, annotated(BOX, mask=rectangle_outline(BOX)))
    assert not image.reencoded and image.data == data
    assert image.transform == geometry.identity_transform(*LANDSCAPE)
    assert (stored.xmin, stored.ymin, stored.xmax, stored.ymax) == (30 / 120, 20 / 80, 70 / 120, 50 / 80)
    assert stored.area == 40 * 30 and stored.notes == ()


@pytest.mark.parametrize("orientation", range(1, 9))
def test_every_exif_orientation_moves_the_box_with_the_pixels(orientation):
    data = jpeg_with_orientation(picture(LANDSCAPE, BOX), orientation)
    image, _ = stored_and_check(data, annotated(BOX, mask=rectangle_outline(BOX)))
    assert image.transform.orientation == orientation
    expected = PORTRAIT if orientation >= 5 else LANDSCAPE
    assert (image.width, image.height) == expected


# Where the stored picture's top-left and top-right corners are seen, by the EXIF specification's
# table (row 0 and column 0 of the stored picture as the viewer sees them): an oracle that owes
# nothing to Pillow or to our arithmetic.
CORNERS_SEEN = {
    1: ("top-left", "top-right"),
    2: ("top-right", "top-left"),
    3: ("bottom-right", "bottom-left"),
    4: ("bottom-left", "bottom-right"),
    5: ("top-left", "bottom-left"),
    6: ("top-right", "bottom-right"),
    7: ("bottom-right", "top-right"),
    8: ("bottom-left", "top-left"),
}


@pytest.mark.parametrize("orientation", range(1, 9))
def test_orientation_puts_the_corners_where_the_exif_specification_says(orientation):
    transform = geometry.pixel_transform(120, 80, orientation)
    corners = {"top-left": (0, 0, 10, 10), "top-right": (110, 0, 120, 10)}

    def seen(box):
        x0, y0, x1, y1 = transform.map_box(*box)
        width, height = transform.width, transform.height
        vertical = "top" if y0 == 0 else "bottom" if y1 == height else "?"
        horizontal = "left" if x0 == 0 else "right" if x1 == width else "?"
        return f"{vertical}-{horizontal}"

    assert (seen(corners["top-left"]), seen(corners["top-right"])) == CORNERS_SEEN[orientation]


@pytest.mark.parametrize("mode", ["stretch", "crop", "pad"])
@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("source", ["landscape", "portrait"])
def test_resize_moves_the_box_with_the_pixels(source, target, mode):
    size = LANDSCAPE if source == "landscape" else PORTRAIT
    box = (45, 30, 75, 50) if source == "landscape" else (30, 45, 50, 75)  # inside any centred crop
    data = imagegen.encode(picture(size, box), "PNG")
    options = ImageConfig(resize=TARGETS[target], resize_mode=mode)
    image, stored = stored_and_check(data, annotated(box, mask=rectangle_outline(box)), options)
    assert (image.width, image.height) == TARGETS[target]
    assert stored.notes == ()


@pytest.mark.parametrize("mode", ["stretch", "crop", "pad"])
@pytest.mark.parametrize("orientation", range(2, 9))
def test_exif_orientation_then_resize(orientation, mode):
    box = (50, 30, 70, 50)  # the centre of a 120 x 80 picture: inside any centred crop
    data = jpeg_with_orientation(picture(LANDSCAPE, box), orientation)
    options = ImageConfig(resize=(100, 60), resize_mode=mode)
    image, _ = stored_and_check(data, annotated(box, mask=rectangle_outline(box)), options)
    assert image.transform.orientation == orientation and (image.width, image.height) == (100, 60)


def test_exif_orientation_channels_and_format_together():
    data = jpeg_with_orientation(picture(LANDSCAPE, BOX), 6)
    options = ImageConfig(resize=(64, 64), resize_mode="pad", image_format="png")
    image, _ = stored_and_check(data, annotated(BOX, mask=rectangle_outline(BOX)), options)
    assert image.format == "png"


def test_animated_gif_keeps_the_first_frames_box():
    frames = [picture(LANDSCAPE, BOX), picture(LANDSCAPE, (80, 50, 110, 75), seed=1)]
    frames = [frame.convert("P", palette=Image.Palette.ADAPTIVE, colors=64) for frame in frames]
    data = imagegen.encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    image, _ = stored_and_check(data, annotated(BOX, mask=rectangle_outline(BOX)))
    assert "frames_dropped" in image.changes


def test_multi_page_tiff_with_resize_keeps_the_first_pages_box():
    pages = [picture(LANDSCAPE, BOX), picture(LANDSCAPE, (0, 0, 20, 20), seed=1)]
    data = imagegen.encode(pages[0], "TIFF", save_all=True, append_images=pages[1:])
    # At 8 bits the first page is the picture (by default the pages are one stack).
    options = ImageConfig(resize=(60, 60), resize_mode="crop", bit_depth="8")
    image, _ = stored_and_check(data, annotated(BOX, mask=rectangle_outline(BOX)), options)
    assert "frames_dropped" in image.changes


def test_normalized_boxes_and_outlines_follow_the_pixels_too():
    """A YOLO-like source: fractions of the stored size, for the box and its outline."""
    box = (BOX[0] / 120, BOX[1] / 80, BOX[2] / 120, BOX[3] / 80)
    data = jpeg_with_orientation(picture(LANDSCAPE, BOX), 8)
    options = ImageConfig(resize=(60, 60), resize_mode="pad")
    stored_and_check(data, annotated(box, mask=rectangle_outline(box), normalized=True), options)


def test_run_length_masks_follow_the_pixels():
    mask = np.zeros((80, 120), np.uint8)
    mask[BOX[1] : BOX[3], BOX[0] : BOX[2]] = 1
    runs = RunLengths(80, 120, _run_lengths(mask))
    assert np.array_equal(geometry.decode_run_lengths(runs), mask)
    data = jpeg_with_orientation(picture(LANDSCAPE, BOX), 5)
    stored_and_check(data, annotated(BOX, mask=runs), ImageConfig(resize=(50, 90), resize_mode="crop"))


def _run_lengths(mask: np.ndarray) -> tuple[int, ...]:
    """COCO's uncompressed RLE, written independently of the decoder: runs down each column."""
    flat = mask.T.reshape(-1)
    runs, current, length = [], 0, 0
    for value in flat:
        if value == current:
            length += 1
        else:
            runs.append(length)
            current, length = value, 1
    runs.append(length)
    return tuple(runs)


# ------------------------------------------------------------------ rules


def placed_one(box, transform, **kwargs):
    return place_annotations(annotated(box, **kwargs), transform, masks=True)


def test_a_box_past_the_edge_is_clipped_and_noted():
    placed = placed_one((100, 60, 140, 90), geometry.identity_transform(120, 80))
    (stored,) = placed.objects
    assert (stored.xmin, stored.ymin, stored.xmax, stored.ymax) == (100 / 120, 60 / 80, 1.0, 1.0)
    assert stored.notes == ("clipped", "mask_from_box") and stored.area == 20 * 20


def test_a_fraction_of_a_pixel_past_the_edge_is_rounding_not_clipping():
    placed = placed_one((100, 60, 120.3, 80.2), geometry.identity_transform(120, 80))
    assert placed.objects[0].xmax == 1.0 and "clipped" not in placed.objects[0].notes


def test_a_crop_that_cuts_a_box_clips_it_and_says_so():
    """A 120x80 picture cropped to a square keeps x from 20 to 100."""
    data = imagegen.encode(picture(LANDSCAPE, (5, 20, 45, 50)), "PNG")
    annotations = annotated((5, 20, 45, 50), mask=rectangle_outline((5, 20, 45, 50)), area=1200.0)
    options = ImageConfig(resize=(80, 80), resize_mode="crop")
    _, stored = stored_and_check(data, annotations, options)
    assert stored.notes == ("cropped",)
    assert stored.xmin == 0.0 and stored.xmax == pytest.approx(25 / 80)
    assert stored.area == pytest.approx(1200 * 25 / 40)  # the kept part of the box, at scale 1


@pytest.mark.parametrize(
    "box, transform, reason",
    [
        ((130, 10, 150, 20), geometry.identity_transform(120, 80), "outside_image"),
        ((-30, 10, 0, 20), geometry.identity_transform(120, 80), "outside_image"),
        ((10, 10, 10, 20), geometry.identity_transform(120, 80), "zero_area"),
        ((10, 30, 20, 20), geometry.identity_transform(120, 80), "zero_area"),
        ((float("nan"), 10, 20, 20), geometry.identity_transform(120, 80), "invalid_box"),
        ((2, 10, 15, 20), geometry.pixel_transform(120, 80, 1, (80, 80), "crop"), "cropped_out"),
    ],
)
def test_boxes_that_cannot_be_stored_are_dropped_with_their_reason(box, transform, reason):
    placed = placed_one(box, transform)
    assert placed.objects == () and [d.reason for d in placed.dropped] == [reason]
    assert placed.dropped[0].source_ref == "test#1" and placed.dropped[0].detail
    assert reasons.get(reason).kind == "drop"


def test_every_object_is_stored_or_dropped_once():
    objects = (
        ObjectBox(10, 10, 30, 30, "a"),
        ObjectBox(200, 10, 230, 30, "b"),
        ObjectBox(10, 10, 10, 30, "c"),
        ObjectBox(100, 60, 140, 90, "d"),
    )
    placed = place_annotations(ImageAnnotations(objects, "x"), geometry.identity_transform(120, 80))
    assert [o.class_name for o in placed.objects] == ["a", "d"]
    assert [d.class_name for d in placed.dropped] == ["b", "c"]


def test_the_declared_size_tells_which_frame_the_boxes_are_in():
    """A 120x80 picture tagged 6 is seen 80x120: a source that says 80x120 drew on the upright
    picture, one that says 120x80 on the stored one; anything else fits neither."""
    transform = geometry.pixel_transform(120, 80, 6)
    assert annotation_frame(annotated(BOX, width=120, height=80), transform) == "stored"
    assert annotation_frame(annotated(BOX, width=80, height=120), transform) == "upright"
    assert annotation_frame(annotated(BOX, width=640, height=480), transform) is None
    assert annotation_frame(annotated(BOX), transform) == "stored"
    assert annotation_frame(annotated(BOX), transform, ambiguous_frame="upright") == "upright"
    assert annotation_frame(annotated(BOX, width=0, height=0), transform) == "stored"  # VOC's "unknown"
    square = geometry.pixel_transform(80, 80, 6)
    assert annotation_frame(annotated(BOX, width=80, height=80), square, "upright") == "upright"


def test_boxes_drawn_on_the_upright_picture_are_not_turned_again():
    upright_box = (10, 30, 40, 100)  # of the 80 x 120 picture a viewer shows
    upright = picture(PORTRAIT, upright_box)
    stored = upright.transpose(Image.Transpose.ROTATE_90)  # what a camera tagging 6 stores
    data = jpeg_with_orientation(stored, 6)
    annotations = annotated(upright_box, mask=rectangle_outline(upright_box), width=80, height=120)
    image, _ = stored_and_check(data, annotations, ImageConfig(resize=(60, 60), resize_mode="pad"))
    assert place_annotations(annotations, image.transform).frame == "upright"


def test_a_declared_size_that_fits_neither_frame_drops_every_object():
    annotations = ImageAnnotations((ObjectBox(*BOX, "a"), ObjectBox(*BOX, "b")), "x", width=640, height=480)
    placed = place_annotations(annotations, geometry.pixel_transform(120, 80, 6))
    assert placed.frame is None and placed.objects == ()
    assert [d.reason for d in placed.dropped] == ["size_mismatch", "size_mismatch"]
    assert "640x480" in placed.dropped[0].detail and "80x120 upright" in placed.dropped[0].detail


def test_broken_masks_drop_their_object_with_a_reason():
    transform = geometry.identity_transform(120, 80)
    wrong_size = placed_one(BOX, transform, mask=RunLengths(10, 10, (100,)))
    assert [d.reason for d in wrong_size.dropped] == ["mask_size_mismatch"]
    short = placed_one(BOX, transform, mask=RunLengths(80, 120, (5, 5)))
    assert [d.reason for d in short.dropped] == ["mask_invalid"]
    without_masks = place_annotations(annotated(BOX, mask=RunLengths(10, 10, (100,))), transform)
    assert without_masks.objects[0].mask_png is None  # masks not asked: not looked at


def test_an_outline_with_too_few_points_gives_an_empty_mask_and_a_note():
    placed = placed_one(BOX, geometry.identity_transform(120, 80), mask=(Polygon((1, 1, 5, 5)),))
    assert placed.objects[0].notes == ("mask_empty",)
    assert {reasons.get(note).kind for note in placed.objects[0].notes} == {"object_note"}


def test_areas_scale_with_the_pixels():
    stretch = geometry.pixel_transform(120, 80, 6, (40, 60), "stretch")  # upright 80x120: half each way
    with_area = place_annotations(annotated(BOX, area=500.0), stretch).objects[0]
    box_only = place_annotations(annotated(BOX), stretch).objects[0]
    assert with_area.area == pytest.approx(500 / 4)
    assert box_only.area == pytest.approx(40 * 30 / 4)


def test_masks_are_png_of_0_and_1_as_model_gardens_decoder_reads_them():
    """TF Model Garden decodes `image/object/mask` with tf.io.decode_png(channels=1) and uses the
    values as they are: the object must be 1, not 255."""
    import tensorflow as tf

    placed = placed_one(BOX, geometry.identity_transform(120, 80), mask=rectangle_outline(BOX))
    decoded = tf.io.decode_png(placed.objects[0].mask_png, channels=1, dtype=tf.uint8).numpy()[..., 0]
    assert decoded.shape == (80, 120) and set(np.unique(decoded)) == {0, 1}
    assert decoded[25, 40] == 1 and decoded[5, 5] == 0


# ------------------------------------------------------------------ properties

ORIENTATIONS = st.integers(1, 8)
MODES = st.sampled_from(["stretch", "crop", "pad"])
SIDES = st.integers(8, 64)


@settings(max_examples=150, deadline=None)
@given(width=SIDES, height=SIDES, target=st.tuples(st.integers(4, 64), st.integers(4, 64)), mode=MODES)
def test_resample_gives_pillows_own_fit_and_pad_pixels(width, height, target, mode):
    """normalize resizes through geometry.resample: it must stay byte for byte what ImageOps
    gave before (the goldens check a few sizes; this checks many)."""
    image = imagegen.gradient(width, height)
    transform = geometry.pixel_transform(width, height, 1, target, mode)
    ours = geometry.resample(image, transform, Image.Resampling.BICUBIC, (0, 0, 0))
    try:
        expected = {
            "stretch": lambda: image.resize(target, Image.Resampling.BICUBIC),
            "crop": lambda: ImageOps.fit(image, target, Image.Resampling.BICUBIC),
            "pad": lambda: ImageOps.pad(image, target, Image.Resampling.BICUBIC, color=(0, 0, 0)),
        }[mode]()
    except ValueError:  # Pillow's pad rounds a picture twice as thin as the image to no pixel
        assert mode == "pad" and ours.size == target and min(transform.placed[2:]) == 1
        return
    assert ours.size == expected.size and ours.tobytes() == expected.tobytes()


@pytest.mark.parametrize(("size", "placed"), [((8, 64), (2, 0, 1, 4)), ((64, 8), (0, 2, 4, 1))])
def test_a_picture_too_thin_to_pad_keeps_a_line_of_one_pixel(size, placed):
    """An 8x64 picture padded into 4x4 is half a pixel wide: Pillow's `ImageOps.pad` raises, and
    the run stopped; the picture keeps one pixel's line, centred, and its boxes go with it."""
    with pytest.raises(ValueError):
        ImageOps.pad(imagegen.gradient(*size), (4, 4), Image.Resampling.BICUBIC)
    transform = geometry.pixel_transform(*size, 1, (4, 4), "pad")
    assert transform.placed == placed
    resampled = geometry.resample(imagegen.gradient(*size), transform, Image.Resampling.BICUBIC, (0, 0, 0))
    assert resampled.size == (4, 4) and resampled.getbbox() is not None
    whole = transform.map_box(0, 0, *size)
    assert whole == (placed[0], placed[1], placed[0] + placed[2], placed[1] + placed[3])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    width=SIDES,
    height=SIDES,
    orientation=ORIENTATIONS,
    resize=st.none() | st.tuples(st.integers(8, 64), st.integers(8, 64)),
    mode=MODES,
    corners=st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1)),
)
def test_a_box_lands_where_its_mask_lands(width, height, orientation, resize, mode, corners):
    """The arithmetic (map_box) and Pillow's operations (transform_mask) agree: a filled box,
    moved as pixels, covers the box as mapped, to the pixel."""
    x0, x1 = sorted(round(c * width) for c in corners[:2])
    y0, y1 = sorted(round(c * height) for c in corners[2:])
    transform = geometry.pixel_transform(width, height, orientation, resize, mode)
    mapped = transform.map_box(x0, y0, x1, y1)
    kept = (
        max(mapped[0], 0),
        max(mapped[1], 0),
        min(mapped[2], transform.width),
        min(mapped[3], transform.height),
    )
    if kept[2] - kept[0] < 2 or kept[3] - kept[1] < 2:
        return  # too thin to be sure a nearest-neighbour sample hits it
    mask = Image.new("L", (width, height), 0)
    mask.paste(1, (x0, y0, x1, y1))
    moved = geometry.transform_mask(mask, transform)
    assert moved.size == (transform.width, transform.height)
    assert np.allclose(moved.getbbox(), kept, atol=1.0), (moved.getbbox(), kept)


@settings(max_examples=200, deadline=None)
@given(
    width=SIDES,
    height=SIDES,
    orientation=ORIENTATIONS,
    target=st.tuples(st.integers(4, 300), st.integers(4, 300)),
    corners=st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1)),
)
def test_stretch_keeps_each_boxs_share_of_the_picture(width, height, orientation, target, corners):
    x0, x1 = sorted(c * width for c in corners[:2])
    y0, y1 = sorted(c * height for c in corners[2:])
    if x1 - x0 < 1e-3 or y1 - y0 < 1e-3:
        return
    transform = geometry.pixel_transform(width, height, orientation, target, "stretch")
    (stored,) = place_annotations(annotated((x0, y0, x1, y1)), transform).objects
    share = (stored.xmax - stored.xmin) * (stored.ymax - stored.ymin)
    assert share == pytest.approx((x1 - x0) * (y1 - y0) / (width * height), rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(
    width=SIDES,
    height=SIDES,
    orientation=ORIENTATIONS,
    resize=st.tuples(st.integers(4, 64), st.integers(4, 64)),
    mode=MODES,
    point=st.tuples(st.floats(0, 1), st.floats(0, 1)),
)
def test_orientation_and_resize_compose(width, height, orientation, resize, mode, point):
    """One transform maps a point as its orientation alone, then its resize alone, do; and the
    orientation is undone by its inverse."""
    x, y = point[0] * width, point[1] * height
    whole = geometry.pixel_transform(width, height, orientation, resize, mode)
    turned = geometry.pixel_transform(width, height, orientation)
    then = geometry.pixel_transform(*turned.upright_size, 1, resize, mode)
    assert np.allclose(whole.map_point(x, y), then.map_point(*turned.map_point(x, y)))
    assert whole.upright().map_point(*turned.map_point(x, y)) == whole.map_point(x, y)
    inverse = {6: 8, 8: 6}.get(orientation, orientation)
    back = geometry.pixel_transform(*turned.upright_size, inverse)
    assert np.allclose(back.map_point(*turned.map_point(x, y)), (x, y))


@settings(max_examples=60, deadline=None)
@given(width=SIDES, height=SIDES, orientation=ORIENTATIONS)
def test_orient_is_the_transpose_pillow_makes_for_the_tag(width, height, orientation):
    image = imagegen.gradient(width, height)
    exif = Image.Exif()
    exif[0x0112] = orientation
    tagged = Image.open(io.BytesIO(imagegen.encode(image, "PNG", exif=exif.tobytes())))
    expected = ImageOps.exif_transpose(tagged)
    assert geometry.orient(image, orientation).tobytes() == expected.tobytes()
    assert expected.size == geometry.pixel_transform(width, height, orientation).upright_size


def test_a_pad_that_needs_no_scaling_still_gives_the_mask_its_margin():
    """Found by the property test above: an upright 8x29 picture padded into 8x30 is not scaled,
    only given one row of margin; its masks must be 8x30 too, like the picture."""
    transform = geometry.pixel_transform(29, 8, 5, (8, 30), "pad")
    assert transform.resamples
    mask = Image.new("L", (29, 8), 1)
    moved = geometry.transform_mask(mask, transform)
    assert moved.size == (8, 30)
    assert np.asarray(moved).sum() == 8 * 29  # the picture's pixels, the margin 0


# ------------------------------------------------------------------ the fast paths are exact (issue 28)

# Coordinates as sources give them: floats, whole numbers as ints (COCO's JSON), both zeros.
COORDINATES = st.floats(-80, 160) | st.integers(-80, 160) | st.sampled_from([0.0, -0.0, 0])
TRANSFORMS = st.builds(
    geometry.pixel_transform,
    SIDES,
    SIDES,
    ORIENTATIONS,
    st.none() | st.tuples(st.integers(4, 64), st.integers(4, 64)),
    MODES,
)


def exactly(values) -> list[tuple[type, str]]:
    """Values compared as stored: the type and every bit (repr tells -0.0 from 0.0)."""
    return [(type(value), repr(value)) for value in values]


@settings(max_examples=300, deadline=None)
@given(transform=TRANSFORMS, box=st.tuples(COORDINATES, COORDINATES, COORDINATES, COORDINATES))
def test_the_box_mapper_gives_map_boxs_very_floats(transform, box):
    """Placement maps boxes through `box_mapper` (numbers looked up once per image): the
    same floats as `map_box`, to the bit, for any box, ordered or not."""
    assert exactly(transform.box_mapper()(*box)) == exactly(transform.map_box(*box))
    assert exactly(transform.upright().box_mapper()(*box)) == exactly(transform.upright().map_box(*box))


def reference_placement(box, transform, area):
    """The stored box (fractions) and area, spelled with the builtins and `map_box`, as
    placement computed them before it was made faster."""
    width, height = transform.stored_width, transform.stored_height
    inside = (max(box[0], 0.0), max(box[1], 0.0), min(box[2], float(width)), min(box[3], float(height)))
    mapped = transform.map_box(*inside)
    kept = (
        max(mapped[0], 0.0),
        max(mapped[1], 0.0),
        min(mapped[2], float(transform.width)),
        min(mapped[3], float(transform.height)),
    )
    fractions = (
        kept[0] / transform.width,
        kept[1] / transform.height,
        kept[2] / transform.width,
        kept[3] / transform.height,
    )
    kept_area = (kept[2] - kept[0]) * (kept[3] - kept[1])
    if area is None:
        return fractions, kept_area
    scale_x, scale_y = transform.scale
    whole = transform.map_box(*box)
    whole_area = (whole[2] - whole[0]) * (whole[3] - whole[1])
    return fractions, area * scale_x * scale_y * (min(1.0, kept_area / whole_area) if whole_area > 0 else 1.0)


@settings(max_examples=300, deadline=None)
@given(
    transform=TRANSFORMS,
    box=st.tuples(COORDINATES, COORDINATES, COORDINATES, COORDINATES),
    area=st.none() | st.floats(1, 5000) | st.integers(1, 5000),
)
# A box whose area underflows to 0.0 (found by this test): once a division by zero.
@example(
    transform=geometry.pixel_transform(8, 8, 1, None, "stretch"),
    box=(0.0, 0.0, 1.1758794151780853e-51, 2.225073858507e-311),
    area=1.0,
)
def test_placement_stores_the_very_floats_of_its_rule(transform, box, area):
    """Every stored box and area is, to the bit, the rule's arithmetic: clip to the picture,
    map, clip to the image (0.0 never turns into -0.0, a COCO int stays a number alike)."""
    placed = place_annotations(annotated(box, area=area), transform)
    if not placed.objects:
        return  # dropped: its reason is tested above
    (stored,) = placed.objects
    fractions, stored_area = reference_placement(box, transform, area)
    assert exactly((stored.xmin, stored.ymin, stored.xmax, stored.ymax)) == exactly(fractions)
    assert exactly([stored.area]) == exactly([stored_area])


def test_class_ids_are_given_when_the_object_is_placed():
    """The worker's class ids go in as the object is built (no copy of it afterwards); a label
    without an id keeps 0, and the worker drops that object as an unknown category."""
    annotations = ImageAnnotations(
        (ObjectBox(1, 1, 9, 9, class_name="cat"), ObjectBox(2, 2, 8, 8, class_name="dog")), "x"
    )
    placed = place_annotations(annotations, geometry.identity_transform(20, 20), class_ids={"cat": 3})
    assert [(o.class_name, o.class_id) for o in placed.objects] == [("cat", 3), ("dog", 0)]
    assert [
        o.class_id for o in place_annotations(annotations, geometry.identity_transform(20, 20)).objects
    ] == [0, 0]


def test_each_objects_flags_and_names_reach_its_stored_object():
    """A stored object is built by position (the cost of keywords, issue 28): each flag, the pose
    and where the object comes from land in their own field, never a neighbour's."""
    found = ObjectBox(1, 1, 9, 9, "cat", 20.0, is_crowd=True, difficult=False, truncated=True,
                      pose="Left", source_ref="a.xml#object 2")  # fmt: skip
    (stored,) = place_annotations(
        ImageAnnotations((found,), "x"), geometry.identity_transform(20, 20)
    ).objects
    assert (stored.is_crowd, stored.difficult, stored.truncated) == (True, False, True)
    assert (stored.class_name, stored.pose, stored.source_ref, stored.mask_png, stored.notes) == (
        "cat", "Left", "a.xml#object 2", None, ()
    )  # fmt: skip
    assert stored.area == 20.0


def test_each_task_gets_the_ids_of_its_own_class_names(tmp_path):
    """The worker remembers the last task's ids (a task's inputs share its tuple of names):
    another task's names, or the same names in a list, still give their own ids."""
    path = tmp_path / "a.jpg"
    path.write_bytes(imagegen.jpeg(20, 20))
    objects = (ObjectBox(1, 1, 9, 9, class_name="cat"), ObjectBox(2, 2, 8, 8, class_name="dog"))
    item = PlannedInput(
        "a.jpg", str(path), path.stat().st_size, "train", annotations=ImageAnnotations(objects, "a")
    )

    def ids(class_names):
        labels = RunLabels.of(("objects",), {"objects": {"class_names": class_names}})
        record = prepare_input(item, ImageConfig(), labels=labels)
        stored = record.fields.labels["objects"].objects
        return [(o.class_name, o.class_id) for o in stored], [d.reason for d in record.dropped]

    assert ids(("cat", "dog")) == ([("cat", 1), ("dog", 2)], [])
    assert ids(("cat", "dog")) == ([("cat", 1), ("dog", 2)], [])
    assert ids(("dog", "cat")) == ([("cat", 2), ("dog", 1)], [])
    assert ids(["cat"]) == ([("cat", 1)], [reasons.UNKNOWN_CATEGORY.code])
    assert ids(("dog",)) == ([("dog", 1)], [reasons.UNKNOWN_CATEGORY.code])


def test_a_coco_area_that_overflows_when_resized_is_the_kept_boxs_area(tmp_path):
    """A finite COCO `area` near the float limit, scaled up by --resize, would be infinite, which
    no size bucket of the summary holds: the record keeps the box's area, and the tally counts it."""
    path = tmp_path / "a.jpg"
    path.write_bytes(imagegen.jpeg(48, 32))
    annotations = ImageAnnotations((ObjectBox(1, 1, 20, 20, "cat", area=1e308),), "a", width=48, height=32)
    item = PlannedInput("a.jpg", str(path), path.stat().st_size, "train", annotations=annotations)
    labels = RunLabels.of(("objects",), {"objects": {"class_names": ["cat"]}})
    pending = prepare_input(item, ImageConfig(resize=(224, 224)), labels=labels)
    (stored,) = pending.fields.labels["objects"].objects
    box = (stored.xmax - stored.xmin) * (stored.ymax - stored.ymin)  # stored as fractions
    assert stored.area == pytest.approx(box * 224 * 224)
    tally = Tally().add(finish_record("tfds", pending))
    assert sum(tally.kind("objects").sizes.values()) == 1
