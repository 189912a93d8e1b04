"""The key tables are the one declaration of what a record holds: the writer, the `tf.io` parse
spec, the TensorFlow-free reader, TFDS's features and verification must each agree with them, for
every key of every layout a run can produce. A key added to the table and forgotten by any one of
them fails here, by name."""

from __future__ import annotations

import dataclasses

import imagegen
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from beam_tfrecord.elements import RecordFields, StoredObject
from beam_tfrecord.keys import (
    SCHEMAS,
    FeatureLayout,
    PixelLayout,
    RecordLayout,
    StoredPixels,
    record_keys,
    reserved_names,
)
from beam_tfrecord.labels import geometry
from beam_tfrecord.labels.objects import ObjectLabels
from beam_tfrecord.plan.columns import ExtraColumn, parse_extra_columns
from beam_tfrecord.read.examples import record_to_dict
from beam_tfrecord.read.files import SplitFiles
from beam_tfrecord.write import schema
from beam_tfrecord.write.messages import Example
from beam_tfrecord.write.tfds_metadata import features_spec

EXTRAS = (("caption", "str", "a cat"), ("score", "float", 0.5), ("tags", "int_list", (3, 4)))
CLASSES = ("cat", "dog", "fox")
OBJECTS = ("objects",)  # a detection run's key groups: boxes alone, and with masks
MASKED = ("objects", "object_masks")
# RGB and near infrared as the Object Detection API's additional channels (--additional_channels).
RGBN = PixelLayout("uint8", 4, False, additional=True)


def layouts() -> list[RecordLayout]:
    """Every combination of the options that add or remove keys."""
    found = []
    for name in SCHEMAS:
        for labeled, multi in ((False, False), (True, False), (True, True)):
            for extras in ((), EXTRAS):
                for features in (None, FeatureLayout((2, 3)), FeatureLayout((4,), "float16", image=False)):
                    columns = tuple((n, t) for n, t, _ in extras)
                    found.append(RecordLayout(name, labeled, multi, columns, features))
    # Detection runs (the tfds schema's object keys): boxes alone, with masks, with features.
    found.append(RecordLayout("tfds", labeled=False, groups=OBJECTS))
    found.append(RecordLayout("tfds", labeled=False, groups=MASKED))
    found.append(RecordLayout("tfds", labeled=False, features=FeatureLayout((2, 3)), groups=MASKED))
    found.append(RecordLayout("tfds", labeled=False, groups=OBJECTS, depth=RGBN))
    return found


def fields_for(layout: RecordLayout) -> RecordFields:
    """A record of that layout, with a real JPEG so TFDS's Image feature decodes it."""
    label, text = (None, None)
    if layout.labeled:
        label, text = ((0, 2), ("cat", "fox")) if layout.multi_label else (1, "dog")
    features = None
    if layout.features is not None:
        size = int(np.prod(layout.features.shape))
        features = np.arange(size, dtype=np.float32).reshape(layout.features.shape) / 8
    extras = tuple(e for e in EXTRAS if (e[0], e[1]) in layout.extra_columns)
    labels = {}
    if "objects" in layout.groups:
        pixels = Image.fromarray(np.eye(6, 8, dtype=np.uint8))
        mask = geometry.encode_mask_png(pixels) if "object_masks" in layout.groups else None
        objects = (
            StoredObject(0.1, 0.2, 0.5, 0.9, "dog", 12.0, mask_png=mask, class_id=2),
            StoredObject(
                0.0, 0.0, 1.0, 1.0, "cat", 48.0, is_crowd=True, pose="Left", mask_png=mask, class_id=1
            ),
        )
        labels["objects"] = ObjectLabels("42", objects)
    encoded, image_format, depth = imagegen.jpeg(8, 6), "jpeg", None
    if layout.depth is not None:  # the additional channels: an RGB PNG and a band's PNG
        encoded, image_format = imagegen.png(8, 6), "png"
        band = geometry.encode_mask_png(Image.fromarray(np.full((6, 8), 200, np.uint8)))
        depth = StoredPixels("uint8", (6, 8, 4), False, additional=(band,))
    return RecordFields(
        encoded=encoded,
        format=image_format,
        height=6,
        width=8,
        channels=layout.depth.bands if layout.depth else 3,
        relpath="cat/ü 1.jpg",
        sha256="ab" * 32,
        label=label,
        label_text=text,
        features=features,
        feature_dtype=layout.features.dtype if layout.features else "float32",
        include_image=layout.has_image,
        extras=extras,
        labels=labels,
        groups=layout.groups,
        depth=depth,
    )


def split_files(layout: RecordLayout) -> SplitFiles:
    columns = tuple(ExtraColumn(n, t) for n, t in layout.extra_columns)  # type: ignore[arg-type]
    return SplitFiles(
        schema=layout.schema,
        labeled=layout.labeled,
        class_names=list(CLASSES) if layout.labeled else None,
        paths=[],
        compression="",
        records=1,
        channels=None,
        features=layout.features,
        extra_columns=columns,
        multi_label=layout.multi_label,
        kinds=("objects",) if "objects" in layout.groups else ("class",),
        groups=layout.groups,
        depth=layout.depth,
    )


def _id(layout: RecordLayout) -> str:
    parts = [layout.schema, "multi" if layout.multi_label else "labeled" if layout.labeled else "unlabeled"]
    parts += ["extras"] if layout.extra_columns else []
    parts += [f"features_{layout.features.dtype}"] if layout.features else []
    parts += [group.removeprefix("object_") for group in layout.groups]
    parts += ["additional_channels"] if layout.depth else []
    return "-".join(parts)


@pytest.mark.parametrize("layout", layouts(), ids=_id)
def test_the_writer_writes_exactly_the_tables_keys(layout):
    fields = fields_for(layout)
    assert schema.layout_of(layout.schema, fields) == layout
    stored = Example.FromString(schema.serialize(layout.schema, fields)).features.feature
    assert sorted(stored) == sorted(key.key for key in record_keys(layout))


@pytest.mark.parametrize("layout", layouts(), ids=_id)
def test_the_parse_spec_reads_every_key(layout):
    fields = fields_for(layout)
    spec = schema.parse_spec(layout)
    assert sorted(spec) == sorted(key.key for key in record_keys(layout))
    parsed = tf.io.parse_single_example(schema.serialize(layout.schema, fields), spec)
    if layout.features is not None:
        restored = schema.restore_features(parsed, layout.schema, layout.features)
        np.testing.assert_allclose(restored.numpy(), fields.features, rtol=1e-3)


@pytest.mark.parametrize("layout", layouts(), ids=_id)
def test_the_tensorflow_free_reader_gives_every_field(layout):
    fields = fields_for(layout)
    record = record_to_dict(schema.serialize(layout.schema, fields), split_files(layout))
    names = {key.name for key in record_keys(layout)} - {"features_float16", "features_shape"}
    if layout.features is not None:
        names.add("features")
    if "objects" in layout.groups:  # and the objects as NumPy arrays (labels/objects/reading.py)
        names |= {"boxes", "labels", *(["masks"] if ("object_masks" in layout.groups) else [])}
    if layout.depth is not None:  # and the picture's samples, every band
        names |= {"pixels"}
        assert record["pixels"].shape == (6, 8, 4) and record["pixels"][0, 0, 3] == 200
    assert set(record) == names
    assert record["height"] == 6 and record["filename"] == "cat/ü 1.jpg"
    if layout.labeled:
        assert record["label"] == ([0, 2] if layout.multi_label else 1)
    for name, _, value in fields.extras:
        assert record[name] == (list(value) if isinstance(value, tuple) else value)
    if layout.features is not None:
        np.testing.assert_allclose(record["features"], fields.features, rtol=1e-3)


@pytest.mark.parametrize("layout", layouts(), ids=_id)
def test_tfds_describes_and_reads_every_key_it_can(layout):
    import tensorflow_datasets as tfds

    spec = features_spec(
        layout, list(CLASSES) if layout.labeled or ("objects" in layout.groups) else None, None
    )

    def flat(level: dict, prefix: str = "") -> set[str]:
        found = set()
        for name, value in level.items():
            found |= flat(value, f"{prefix}{name}/") if isinstance(value, dict) else {prefix + name}
        return found

    described = {key.key for key in record_keys(layout) if key.tfds != "none"}
    assert flat(spec) == described
    if not layout.has_image:
        return  # TFDS's metadata is not written for records without an image (summary.json says why)
    serialized = schema.serialize(layout.schema, fields_for(layout))
    decoded = tfds.features.FeaturesDict(spec).deserialize_example(serialized)
    image = decoded["image"]["encoded"] if layout.schema == "tfds" else decoded["image_raw"]
    assert tuple(image.shape) == (6, 8, 3)
    if layout.labeled:
        label = decoded["image"]["class"]["label"] if layout.schema == "tfds" else decoded["label"]
        assert np.asarray(label).tolist() == ([0, 2] if layout.multi_label else 1)
    if "objects" in layout.groups:  # ids from 1 name the classes: 0 is the background's
        objects = decoded["image"]["object"]
        assert np.asarray(objects["class"]["label"]).tolist() == [2, 1]
        assert np.asarray(objects["bbox"]["ymax"]).tolist() == pytest.approx([0.9, 1.0])
        if "object_masks" in layout.groups:
            assert (
                tuple(objects["mask"].shape) == (2, 6, 8, 1) and int(np.asarray(objects["mask"]).max()) == 1
            )
    if layout.depth is not None:  # each band past the third, one channel each
        bands = decoded["image"]["additional_channels"]["encoded"]
        assert tuple(bands.shape) == (1, 6, 8, 1) and int(np.asarray(bands).max()) == 200


def test_a_manifest_column_cannot_shadow_any_field_or_key():
    for name in sorted(n for n in reserved_names() if "/" not in n):
        with pytest.raises(ValueError, match="already use"):
            parse_extra_columns(f"{name}:str")


def test_every_layout_option_changes_the_keys():
    """Each option the layouts vary really adds or removes keys (else the matrix above is moot)."""
    base = RecordLayout("tfds")
    variants = [
        dataclasses.replace(base, labeled=False),
        dataclasses.replace(base, multi_label=True),
        dataclasses.replace(base, extra_columns=(("caption", "str"),)),
        dataclasses.replace(base, features=FeatureLayout((2,))),
        dataclasses.replace(base, features=FeatureLayout((2,), "float16", image=False)),
        dataclasses.replace(base, depth=RGBN),
    ]
    for variant in variants:
        assert record_keys(variant) != record_keys(base), variant


@pytest.mark.parametrize("layout", [la for la in layouts() if la.has_image], ids=_id)
def test_verification_reads_every_key(layout):
    from beam_tfrecord.read.verify import _facts_fn

    facts = _facts_fn(layout)(tf.constant(schema.serialize(layout.schema, fields_for(layout))))
    bands = layout.depth.bands if layout.depth else 3
    assert facts["shape"].numpy().tolist() == facts["stored"].numpy().tolist() == [6, 8, bands]
    if layout.labeled:
        assert np.asarray(facts["label"]).reshape(-1).tolist() == ([0, 2] if layout.multi_label else [1])
