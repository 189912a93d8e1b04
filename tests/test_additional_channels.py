"""`--additional_channels`: a detection set of RGB + near-infrared pictures, as GDAL and tifffile
write them (4 bands interleaved, the fourth an unspecified extra sample), converted so that the
Object Detection API's `tf_example_decoder` reads every band: the first three as `image/encoded`,
each other band one PNG in `image/additional_channels/encoded`.

That API is not on the package index, so `od_api_decode` below does what its decoder documents,
step by step: the keys it declares (the additional channels as a fixed-length list of
`num_additional_channels` strings), each image decoded by `image/format` as uint8 (3 channels,
then 1 for each additional one), the additional ones squeezed and moved to the channel axis, and
its inputs.py's concatenation on that axis."""

from __future__ import annotations

import os

import annotationgen as ag
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
import tifffile
import tiffgen
from conftest import convert
from outputcheck import rejects, serialized_records, summary
from PIL import Image

from beam_tfrecord import iter_examples, load_dataset

RNG = np.random.default_rng(4)
BOX = (6, 4, 20, 12)  # COCO's x, y, width, height, in a 48x32 picture
SIZE = (32, 48)


def od_api_decode(serialized: bytes, additional: int) -> tuple[np.ndarray, np.ndarray]:
    """The picture and boxes the Object Detection API trains on, from one record: uint8
    [H, W, 3 + additional], and [N, 4] ymin, xmin, ymax, xmax as fractions."""
    corners = ("ymin", "xmin", "ymax", "xmax")
    spec = {
        "image/encoded": tf.io.FixedLenFeature((), tf.string, default_value=""),
        "image/format": tf.io.FixedLenFeature((), tf.string, default_value="jpeg"),
        "image/additional_channels/encoded": tf.io.FixedLenFeature((additional,), tf.string),
        **{f"image/object/bbox/{k}": tf.io.VarLenFeature(tf.float32) for k in corners},
    }
    parsed = tf.io.parse_single_example(serialized, spec)
    assert parsed["image/format"].numpy() == b"png"  # how it picks the decoder of both keys
    image = tf.io.decode_image(parsed["image/encoded"], channels=3)
    channels = tf.map_fn(
        lambda buffer: tf.io.decode_image(buffer, channels=1),
        parsed["image/additional_channels/encoded"],
        fn_output_signature=tf.uint8,
    )
    channels = tf.transpose(tf.squeeze(channels, axis=3), perm=[1, 2, 0])
    boxes = tf.stack([tf.sparse.to_dense(parsed[f"image/object/bbox/{k}"]) for k in corners], axis=1)
    return tf.concat([image, channels], axis=2).numpy(), boxes.numpy()


def rgbn_coco(root, dtype: str = "uint8", count: int = 3, bands: int = 4) -> dict[str, np.ndarray]:
    """`count` pictures of `bands` interleaved bands (RGB, near infrared, ...) in `images/`, as
    tifffile writes them (photometric RGB, the extra samples unspecified: no alpha), and their
    COCO instances file, one box each. Returns each picture's samples by relative path."""
    (root / "images").mkdir(parents=True)
    (root / "annotations").mkdir()
    truth, images, annotations = {}, [], []
    for i in range(count):
        samples = _samples(dtype, (*SIZE, bands))
        extra = (0,) * (bands - 3)  # EXTRASAMPLE_UNSPECIFIED: a band, not alpha
        tifffile.imwrite(
            root / f"images/{i}.tif", samples, photometric="rgb", planarconfig="contig", extrasamples=extra
        )
        truth[f"images/{i}.tif"] = tifffile.imread(root / f"images/{i}.tif")
        images.append(ag.image(i, f"{i}.tif", width=SIZE[1], height=SIZE[0]))
        annotations.append(ag.box(i, i, 17, list(BOX)))
    (root / "annotations" / "instances_all.json").write_bytes(ag.instances(images, annotations))
    return truth


def _samples(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "float32":  # reflectance in 0..1
        return RNG.random(shape).astype(np.float32)
    return RNG.integers(0, np.iinfo(dtype).max, shape, dtype=dtype, endpoint=True)


def eight_bit(samples: np.ndarray) -> np.ndarray:
    """The documented 8-bit rule (docs/scientific.md): 8-bit as it is, unsigned 16-bit times
    255/65535, float in 0..1 times 255, rounded."""
    if samples.dtype == np.uint8:
        return samples
    factor = 255.0 / 65535.0 if samples.dtype == np.uint16 else 255.0
    return np.rint(samples.astype(np.float64) * factor).astype(np.uint8)


def by_name(output) -> dict[str, bytes]:
    found = {}
    for raw in serialized_records(output, "train"):
        example = tf.train.Example.FromString(raw)
        found[example.features.feature["image/filename"].bytes_list.value[0].decode()] = raw
    return found


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "float32"])
def test_an_rgbn_detection_set_reads_as_the_od_api_decodes_it(tmp_path, dtype):
    truth = rgbn_coco(tmp_path / "in", dtype)
    out = tmp_path / "out"
    assert convert(tmp_path / "in", out, "--annotations", "coco", "--additional_channels") == 0
    result = summary(out)
    assert result["full_depth"] == {"uint8 x4 png additional_channels": 3}
    assert result["options"]["additional_channels"] is True
    scaled = result["changes_per_reason"].get("high_bit_depth", 0)
    assert scaled == (0 if dtype == "uint8" else 3)  # the 8-bit rule, said where it applied
    x, y, width, height = BOX
    expected_box = [y / SIZE[0], x / SIZE[1], (y + height) / SIZE[0], (x + width) / SIZE[1]]
    for name, raw in by_name(out).items():
        pixels, boxes = od_api_decode(raw, additional=1)
        assert pixels.dtype == np.uint8 and np.array_equal(pixels, eight_bit(truth[name])), name
        np.testing.assert_allclose(boxes, [expected_box], atol=1e-6)


def test_every_reader_gives_the_four_bands_and_the_boxes(tmp_path):
    truth = rgbn_coco(tmp_path / "in")
    out = tmp_path / "out"
    assert convert(tmp_path / "in", out, "--annotations", "coco", "--additional_channels") == 0
    x, y, width, height = BOX
    pixel_box = [x, y, x + width, y + height]
    seen = {}
    for record in iter_examples(str(out)):
        seen[record["filename"]] = record["pixels"]
        assert len(record["additional_channels"]) == 1
        np.testing.assert_allclose(record["boxes"], [pixel_box], atol=1e-4)
    assert sorted(seen) == sorted(truth) and all(np.array_equal(seen[n], truth[n]) for n in truth)

    # load_dataset's detection target: the picture with every band, and its boxes.
    for image, target in load_dataset(str(out), "train", batch_size=None, shuffle=False):
        assert image.dtype == tf.uint8 and tuple(image.shape) == (*SIZE, 4)
        assert any(np.array_equal(image.numpy(), samples) for samples in truth.values())
        np.testing.assert_allclose(target["boxes"].numpy(), [pixel_box], atol=1e-4)

    # TFDS: the RGB image and a sequence of one-band images.
    builder = tfds.builder_from_directory(str(out))
    for example in tfds.as_numpy(builder.as_dataset(split="train")):
        image = example["image"]
        samples = truth[image["filename"].decode()]
        assert np.array_equal(image["encoded"], samples[..., :3])
        assert np.array_equal(image["additional_channels"]["encoded"][0, ..., 0], samples[..., 3])


def test_a_resize_moves_the_extra_bands_and_the_boxes_as_it_moves_rgb(tmp_path):
    """The near-infrared band is a copy of red here, so after a padded resize it must still equal
    red pixel for pixel; the boxes are where an RGB PNG of the same picture puts them."""
    rgbn, rgb = tmp_path / "rgbn", tmp_path / "rgb"
    truth = rgbn_coco(rgbn, count=2)
    (rgb / "images").mkdir(parents=True)
    for name, samples in truth.items():
        samples[..., 3] = samples[..., 0]
        tifffile.imwrite(rgbn / name, samples, photometric="rgb", planarconfig="contig", extrasamples=(0,))
        Image.fromarray(samples[..., :3]).save(rgb / name.replace(".tif", ".png"))
    coco = (rgbn / "annotations" / "instances_all.json").read_text()
    (rgb / "annotations").mkdir()
    (rgb / "annotations" / "instances_all.json").write_text(coco.replace(".tif", ".png"))
    resize = ("--resize", "40x24", "--resize_mode", "pad")
    assert convert(rgbn, tmp_path / "a", "--annotations", "coco", "--additional_channels", *resize) == 0
    assert convert(rgb, tmp_path / "b", "--annotations", "coco", *resize) == 0
    plain = {name.replace(".png", ".tif"): raw for name, raw in by_name(tmp_path / "b").items()}
    for name, raw in by_name(tmp_path / "a").items():
        pixels, boxes = od_api_decode(raw, additional=1)
        assert pixels.shape == (24, 40, 4) and np.array_equal(pixels[..., 3], pixels[..., 0])
        example = tf.train.Example.FromString(plain[name]).features.feature
        corners = [
            example[f"image/object/bbox/{k}"].float_list.value for k in ("ymin", "xmin", "ymax", "xmax")
        ]
        np.testing.assert_allclose(boxes, np.array(corners).T, atol=1e-6)
    assert "resized" in summary(tmp_path / "a")["changes_per_reason"]


def test_a_13_band_tile_gives_ten_additional_channels(tmp_path):
    made = tiffgen.eurosat_tile()  # 13 uint16 bands, GDAL's layout, with its transform and CRS
    truth = np.moveaxis(made.array, 0, -1)
    os.makedirs(tmp_path / "in" / "River")
    (tmp_path / "in" / "River" / "River_1.tif").write_bytes(made.data)
    out = tmp_path / "out"
    assert convert(tmp_path / "in", out, "--additional_channels") == 0
    (raw,) = serialized_records(out, "train")
    pixels, _ = od_api_decode(raw, additional=10)
    assert np.array_equal(pixels, eight_bit(truth))
    record = next(iter_examples(str(out)))
    assert record["crs"] == "EPSG:32633" and record["dtype"] == "uint8"  # the source's facts kept


def test_bit_depth_8_still_keeps_every_band_with_the_option(tmp_path):
    truth = rgbn_coco(tmp_path / "in", "uint16", count=1)
    out = tmp_path / "out"
    assert (
        convert(tmp_path / "in", out, "--annotations", "coco", "--additional_channels", "--bit_depth", "8")
        == 0
    )
    (raw,) = serialized_records(out, "train")
    pixels, _ = od_api_decode(raw, additional=1)
    assert np.array_equal(pixels, eight_bit(truth["images/0.tif"]))


def test_pictures_of_three_bands_are_stored_as_usual(tmp_path):
    """The option changes pictures of more than three bands only: an RGB tree's records are the
    same bytes with it and without it."""
    (tmp_path / "in" / "a").mkdir(parents=True)
    for i in range(2):
        tifffile.imwrite(tmp_path / f"in/a/{i}.tif", _samples("uint16", (*SIZE, 3)), photometric="rgb")
        Image.fromarray(_samples("uint8", (*SIZE, 3))).save(tmp_path / f"in/a/{i}.png")
    assert convert(tmp_path / "in", tmp_path / "with", "--additional_channels") == 0
    assert convert(tmp_path / "in", tmp_path / "without") == 0
    assert serialized_records(tmp_path / "with", "train") == serialized_records(tmp_path / "without", "train")


def test_a_stack_is_a_reject_that_says_why(tmp_path):
    (tmp_path / "in" / "a").mkdir(parents=True)
    tifffile.imwrite(
        tmp_path / "in/a/stack.tif",
        _samples("uint16", (3, 16, 16, 4)),
        photometric="minisblack",
        planarconfig="contig",
    )
    tifffile.imwrite(
        tmp_path / "in/a/one.tif",
        _samples("uint8", (16, 16, 4)),
        photometric="minisblack",
        planarconfig="contig",
    )
    assert convert(tmp_path / "in", tmp_path / "out", "--additional_channels") == 0
    (reject,) = rejects(tmp_path / "out")
    assert reject["path"] == "a/stack.tif" and reject["reason"] == "unsupported_format"
    assert "--additional_channels" in reject["detail"]


def test_the_simple_schema_refuses_the_option(tmp_path, capsys):
    rgbn_coco(tmp_path / "in", count=1)
    assert convert(tmp_path / "in", tmp_path / "out", "--schema", "simple", "--additional_channels") == 2
    assert "--additional_channels needs the tfds schema" in capsys.readouterr().err
