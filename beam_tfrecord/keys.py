"""The record keys, declared once per schema: every other view of a record is derived from these
tables. The writer (`write.schema.build_example`), the `tf.io` parse spec
(`write.schema.parse_spec`), the TensorFlow-free reader (`read.examples`), verification
(`read.verify`) and TFDS's features.json (`write.tfds_metadata`) all iterate `record_keys`, so a
key is added here once and reaches all of them (tests/test_keys.py checks that they agree).

Two schemas: `tfds` (the keys TensorFlow Datasets and the object-detection tools use) and `simple`
(the keys of the hand-written scripts this project replaces). Which keys a record holds depends on
the run, described by a `RecordLayout`: labels only in a labeled run (an int64 list of ids, and in
the tfds schema a list of names, in a multi-label run), manifest columns under `image/meta/NAME`
(tfds) or `NAME` (simple), a detection run's objects (the TensorFlow Object Detection API's and
Model Garden's keys, `image/object/...`, in the tfds schema only: the simple schema holds one label
per image), and a feature-model run's output: `image/features` (a FloatList of the
flattened tensor) or, stored as float16, `image/features/float16` (little-endian bytes, half the
size), with `image/features/shape` to restore it (`features`, `features_float16`,
`features_shape` in the simple schema). A `features_only` run drops the encoded image.

Plain data: no TensorFlow, no protobuf, no stage imported, so the planner can check a manifest
column's name against the keys before anything is read.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal, TypeAlias, TypedDict, get_args

__all__ = [
    "COLUMN_TYPES",
    "FACTS",
    "SCHEMAS",
    "TABLES",
    "ColumnType",
    "Fact",
    "FeatureLayout",
    "KeyTable",
    "PixelLayout",
    "RecordKey",
    "RecordLayout",
    "StoredPixels",
    "extra_key",
    "key_of",
    "record_keys",
    "reserved_names",
    "table",
]

SCHEMAS = ("tfds", "simple")
DType = Literal["bytes", "int64", "float32"]
# How TFDS's features.json describes a key: its Image, Text, a scalar, a ClassLabel (the run's
# class names), or not at all: TFDS nests keys at each `/`, and `image/features` cannot be both a
# leaf and the folder of `image/features/shape`, so a feature run's output is read with
# load_dataset or iter_examples, not through TFDS.
TfdsFeature = Literal[
    "image",
    "array",
    "band",
    "text",
    "scalar",
    "class_label",
    "object_class_label",
    "mask",
    "class_mask",
    "class_mask_uint16",
    "none",
]
# A manifest column's type, as `extra_columns` names it (`caption,score:float,tags:str_list`): the
# planner parses values as it (plan.columns), records store them by it, summary.json names it.
ColumnType = Literal["str", "int", "float", "str_list", "int_list", "float_list"]
COLUMN_TYPES: tuple[str, ...] = get_args(ColumnType)
EXTRA_TYPES: dict[str, DType] = {"str": "bytes", "int": "int64", "float": "float32"}


@dataclass(frozen=True)
class RecordKey:
    """One feature of a record.

    Args:
      name: what every reader calls it, the same in both schemas (iter_examples' dict key).
      key: the feature key stored in the Example.
      dtype: the Example's list kind: bytes, int64 or float32.
      text: bytes that hold UTF-8 text (readers give str).
      ragged: any number of values (a list); else exactly as many as `shape` says.
      shape: () for one value, (n,) for a vector of n.
      tfds: how TFDS's features.json describes it.
    """

    name: str
    key: str
    dtype: DType
    text: bool = False
    ragged: bool = False
    shape: tuple[int, ...] = ()
    tfds: TfdsFeature = "scalar"


@dataclass(frozen=True)
class KeyTable:
    """A schema's keys: the image's (always, but `image` in a features_only run), the label's
    (labeled runs), where manifest columns go, and the feature model's three keys."""

    schema: str
    image: tuple[RecordKey, ...]
    label: RecordKey
    label_text: RecordKey | None  # the class name beside the id (tfds schema only)
    extra_prefix: str  # a manifest column NAME is stored under extra_prefix + NAME
    features: str  # float32 values, flattened
    features_float16: str  # little-endian float16 bytes, instead of `features`
    features_shape: str  # the int64 shape to restore either
    # The keys of each group a kind of label stores (`labels`: each kind names its groups), in
    # the order a record holds them: a detection run's `objects` (the image's id in its source,
    # then one list per object attribute, one value per object, in the same order), their
    # `object_masks` (one PNG each), a keypoints run's `keypoints` (every object's points in
    # turn, as many for each object as the run's keypoint count: the Object Detection API's
    # keys, as its CenterNet reads them), a segmentation run's `class_mask` (the picture's
    # class-id mask, a single-channel PNG, and its format, as DeepLab's converters and TF Model
    # Garden's segmentation decoder name them; `class_mask_uint16`, the same keys, where the
    # run's class ids or ignore value pass 255 and every mask is a 16-bit PNG), a captions run's
    # `captions` (every caption of the picture: Model Garden's create_coco_tf_record key), a
    # panoptic run's `panoptic` (Model Garden's create_coco_tf_record --include_panoptic_masks
    # keys, and its things' masks under the objects' mask key). A schema without a group holds
    # one label per image.
    groups: Mapping[str, tuple[RecordKey, ...]] = field(default_factory=dict)
    # The groups whose keys no manifest column may take (a detection run's); a segmentation,
    # keypoints or captions run takes no manifest, so its keys stay free for another run's column.
    reserved_groups: tuple[str, ...] = ("objects", "object_masks")
    # A picture past 8 bits (`PixelLayout`): its sample type's name, and, for one stored as an
    # array rather than a PNG, the zlib-compressed samples and their shape. The array keys are
    # TFDS's `Tensor(encoding="zlib")` serialized keys (`NAME/value`, `NAME/shape`), so TFDS reads
    # them as they are.
    pixel_dtype: RecordKey | None = None
    pixel_array: tuple[RecordKey, ...] = ()
    # A picture of more than three bands stored as the Object Detection API reads one (its
    # `num_additional_channels`): the first three in the image key, each other a single-channel
    # PNG, in band order, under this key (`PixelLayout.additional`).
    pixel_additional: RecordKey | None = None
    facts_prefix: str = ""  # a source's fact NAME (FACTS) is stored under facts_prefix + NAME


class _TextFields(TypedDict):
    """The fields every text key shares, spread into its RecordKey."""

    dtype: DType
    text: bool
    tfds: TfdsFeature


_TEXT: _TextFields = {"dtype": "bytes", "text": True, "tfds": "text"}
TABLES: dict[str, KeyTable] = {
    "tfds": KeyTable(
        schema="tfds",
        image=(
            RecordKey("image", "image/encoded", "bytes", tfds="image"),
            RecordKey("format", "image/format", **_TEXT),
            RecordKey("height", "image/height", "int64"),
            RecordKey("width", "image/width", "int64"),
            RecordKey("channels", "image/channels", "int64"),
            RecordKey("filename", "image/filename", **_TEXT),
            RecordKey("sha256", "image/key/sha256", **_TEXT),
        ),
        label=RecordKey("label", "image/class/label", "int64", tfds="class_label"),
        label_text=RecordKey("label_text", "image/class/text", **_TEXT),
        pixel_dtype=RecordKey("dtype", "image/dtype", **_TEXT),
        pixel_array=(
            RecordKey("array", "image/array/value", "bytes", tfds="array"),
            RecordKey("array_shape", "image/array/shape", "int64", ragged=True, tfds="none"),
        ),
        pixel_additional=RecordKey(
            "additional_channels", "image/additional_channels/encoded", "bytes", ragged=True, tfds="band"
        ),
        facts_prefix="image/source/",
        extra_prefix="image/meta/",
        features="image/features",
        features_float16="image/features/float16",
        features_shape="image/features/shape",
        groups={
            "objects": (
                RecordKey("source_id", "image/source_id", **_TEXT),
                RecordKey("object_xmin", "image/object/bbox/xmin", "float32", ragged=True),
                RecordKey("object_ymin", "image/object/bbox/ymin", "float32", ragged=True),
                RecordKey("object_xmax", "image/object/bbox/xmax", "float32", ragged=True),
                RecordKey("object_ymax", "image/object/bbox/ymax", "float32", ragged=True),
                RecordKey(
                    "object_label",
                    "image/object/class/label",
                    "int64",
                    ragged=True,
                    tfds="object_class_label",
                ),
                RecordKey("object_text", "image/object/class/text", **_TEXT, ragged=True),
                RecordKey("object_area", "image/object/area", "float32", ragged=True),
                RecordKey("object_is_crowd", "image/object/is_crowd", "int64", ragged=True),
                RecordKey("object_difficult", "image/object/difficult", "int64", ragged=True),
                RecordKey("object_truncated", "image/object/truncated", "int64", ragged=True),
                RecordKey("object_view", "image/object/view", **_TEXT, ragged=True),
            ),
            "object_masks": (
                RecordKey("object_mask", "image/object/mask", "bytes", ragged=True, tfds="mask"),
            ),
            "keypoints": (
                RecordKey("keypoint_x", "image/object/keypoint/x", "float32", ragged=True),
                RecordKey("keypoint_y", "image/object/keypoint/y", "float32", ragged=True),
                RecordKey("keypoint_visibility", "image/object/keypoint/visibility", "int64", ragged=True),
            ),
            "class_mask": (
                RecordKey("mask", "image/segmentation/class/encoded", "bytes", tfds="class_mask"),
                RecordKey("mask_format", "image/segmentation/class/format", **_TEXT),
            ),
            "class_mask_uint16": (
                RecordKey("mask", "image/segmentation/class/encoded", "bytes", tfds="class_mask_uint16"),
                RecordKey("mask_format", "image/segmentation/class/format", **_TEXT),
            ),
            "captions": (RecordKey("caption", "image/caption", **_TEXT, ragged=True),),
            "panoptic": (
                RecordKey("category_mask", "image/panoptic/category_mask", "bytes", tfds="class_mask"),
                RecordKey("instance_mask", "image/panoptic/instance_mask", "bytes", tfds="class_mask"),
                RecordKey("semantic_mask", "image/segmentation/class/encoded", "bytes", tfds="class_mask"),
                RecordKey("segment_mask", "image/object/mask", "bytes", ragged=True, tfds="mask"),
            ),
        },
    ),
    "simple": KeyTable(
        schema="simple",
        image=(
            RecordKey("image", "image_raw", "bytes", tfds="image"),
            RecordKey("filename", "id", **_TEXT),
            RecordKey("height", "height", "int64"),
            RecordKey("width", "width", "int64"),
            RecordKey("channels", "depth", "int64"),
            RecordKey("sha256", "sha256", **_TEXT),  # the source file's, so copies can be found afterwards
        ),
        label=RecordKey("label", "label", "int64", tfds="class_label"),
        label_text=None,
        pixel_dtype=RecordKey("dtype", "dtype", **_TEXT),
        pixel_array=(
            RecordKey("array", "image_array", "bytes", tfds="none"),
            RecordKey("array_shape", "image_shape", "int64", ragged=True, tfds="none"),
        ),
        facts_prefix="source_",
        extra_prefix="",
        features="features",
        features_float16="features_float16",
        features_shape="features_shape",
    ),
}


def table(schema: str) -> KeyTable:
    try:
        return TABLES[schema]
    except KeyError:
        raise ValueError(f"schema must be one of {', '.join(SCHEMAS)}, not {schema!r}") from None


@dataclass(frozen=True)
class FeatureLayout:
    """What a reader needs to restore the stored features: their shape and how they are stored."""

    shape: tuple[int, ...]
    dtype: str = "float32"  # float32 | float16
    image: bool = True  # False when the run dropped the encoded image (features_only)


# What a full-depth source says of its pixels that a reader needs to use them
# (`images.deep.DeepPicture.facts`), and how each is stored: a DICOM's, a GeoTIFF's.
FACTS: dict[str, RecordKey] = {
    fact.name: fact
    for fact in (
        RecordKey("modality", "modality", **_TEXT),
        RecordKey("photometric_interpretation", "photometric_interpretation", **_TEXT),
        RecordKey("rescale_slope", "rescale_slope", "float32"),
        RecordKey("rescale_intercept", "rescale_intercept", "float32"),
        RecordKey("transfer_syntax", "transfer_syntax", **_TEXT),
        RecordKey("bits_stored", "bits_stored", "int64"),
        # GDAL's six numbers, as text (`repr` of each, comma-separated): a float32 list would move
        # a UTM origin by up to half a metre.
        RecordKey("geo_transform", "geo_transform", **_TEXT),
        RecordKey("crs", "crs", **_TEXT),
    )
}


@dataclass(frozen=True)
class PixelLayout:
    """How a picture past 8 bits is stored (absent from the layout of an 8-bit picture, whose
    record is as it always was).

    Args:
      dtype: the samples' type, NumPy's name (`uint16`, `float32`, `int16`, ...).
      bands: the band count.
      array: True when the samples are stored as an array (`image/array/value`, zlib'd, with
        `image/array/shape`): float, signed, many-band and stacked pictures; False for a 16-bit
        PNG in `image/encoded` (unsigned 16-bit, 1, 3 or 4 bands).
      stacked: the array is [D, H, W, C], pages or frames.
      facts: the `FACTS` the records hold, in `FACTS`' order.
      additional: the Object Detection API's additional channels (`--additional_channels`): the
        first three bands an 8-bit RGB PNG in `image/encoded`, each other band a single-channel
        8-bit PNG under `image/additional_channels/encoded`; `dtype` is then `uint8`.
    """

    dtype: str
    bands: int
    array: bool
    stacked: bool = False
    facts: tuple[str, ...] = ()
    additional: bool = False

    @property
    def token(self) -> str:
        """How summary.json counts records of this layout (`uint16 x1 png`, `float32 x13 array
        stack +crs,geo_transform`, `uint8 x4 png additional_channels`); `from_token` reads it back."""
        text = f"{self.dtype} x{self.bands} {'array' if self.array else 'png'}"
        text += " stack" if self.stacked else ""
        text += f" {_ADDITIONAL}" if self.additional else ""
        return text + (f" +{','.join(self.facts)}" if self.facts else "")

    @classmethod
    def from_token(cls, token: str) -> PixelLayout:
        parts = token.split(" ")
        facts = tuple(parts.pop()[1:].split(",")) if parts[-1].startswith("+") else ()
        words = parts[3:]
        return cls(
            parts[0], int(parts[1][1:]), parts[2] == "array", "stack" in words, facts, _ADDITIONAL in words
        )


_ADDITIONAL = "additional_channels"  # the token's word for `PixelLayout.additional`


# A fact of a full-depth source kept beside its pixels (a DICOM's modality, a GeoTIFF's transform).
Fact: TypeAlias = str | int | float | tuple[float, ...]


@dataclass(frozen=True)
class StoredPixels:
    """What a record holds of a picture past 8 bits beside its encoded bytes (images.pixels)."""

    dtype: str  # NumPy's name
    shape: tuple[int, ...]  # [H, W, C] or [D, H, W, C]
    array: bool  # the samples are an array (`image/array/value`), not a 16-bit PNG
    facts: Mapping[str, Fact] = field(default_factory=dict)
    # The Object Detection API's additional channels (`--additional_channels`): a single-channel
    # 8-bit PNG per band past the first three, which the encoded image holds as 8-bit RGB.
    additional: tuple[bytes, ...] = ()

    @property
    def layout(self) -> PixelLayout:
        facts = tuple(name for name in FACTS if name in self.facts)
        stacked = len(self.shape) == 4
        return PixelLayout(self.dtype, self.shape[-1], self.array, stacked, facts, bool(self.additional))


@dataclass(frozen=True)
class RecordLayout:
    """Which keys a run's records hold: everything a reader needs besides the key tables.

    Args:
      schema: tfds or simple.
      labeled: the records hold a class id (and, in the tfds schema, its name).
      multi_label: the label keys hold lists (a multi-label manifest).
      extra_columns: (name, type) of each manifest column stored, type as in
        `COLUMN_TYPES` (str, int, float, or their `_list`).
      features: the feature model's output, when the run has one.
      groups: the key groups (`KeyTable.groups`) the run's kinds of label store beyond the
        class's, in the order a record holds them.
      pixels: how a picture past 8 bits is stored; None for 8-bit pictures.
    """

    schema: str = "tfds"
    labeled: bool = True
    multi_label: bool = False
    extra_columns: tuple[tuple[str, str], ...] = ()
    features: FeatureLayout | None = None
    groups: tuple[str, ...] = ()
    depth: PixelLayout | None = None

    def __post_init__(self) -> None:
        held = table(self.schema).groups
        for group in self.groups:
            if group not in held:
                raise ValueError(
                    f"the {self.schema} schema holds one label per image, no {group} keys: those "
                    "records use the tfds schema"
                )
        object.__setattr__(self, "extra_columns", tuple((str(n), str(t)) for n, t in self.extra_columns))
        object.__setattr__(self, "groups", tuple(self.groups))

    @property
    def has_image(self) -> bool:
        return self.features is None or self.features.image

    def without_features(self) -> RecordLayout:
        return replace(self, features=None)


def extra_key(schema: str, name: str) -> str:
    """A manifest column's key: `image/meta/NAME` (tfds) or `NAME` (simple)."""
    return table(schema).extra_prefix + name


@functools.cache
def record_keys(layout: RecordLayout) -> tuple[RecordKey, ...]:
    """Every key a record of `layout` holds, in the table's order (cached: the writer asks per record)."""
    keys = table(layout.schema)
    pixels = layout.depth
    stored_array = pixels is not None and pixels.array
    found = [key for key in keys.image if key.name != "image" or (layout.has_image and not stored_array)]
    if pixels is not None and layout.has_image:
        assert keys.pixel_dtype is not None
        found.append(keys.pixel_dtype)
        if pixels.array:
            found += keys.pixel_array
        if pixels.additional:
            assert keys.pixel_additional is not None  # the option asks for the tfds schema
            found.append(keys.pixel_additional)
        found += [replace(FACTS[name], key=keys.facts_prefix + FACTS[name].key) for name in pixels.facts]
    if layout.labeled:
        found.append(replace(keys.label, ragged=layout.multi_label))
        if keys.label_text is not None:
            found.append(replace(keys.label_text, ragged=layout.multi_label))
    for name, column_type in layout.extra_columns:
        scalar = column_type.removesuffix("_list")
        tfds: TfdsFeature = "text" if scalar == "str" else "scalar"
        found.append(
            RecordKey(
                name,
                extra_key(layout.schema, name),
                EXTRA_TYPES[scalar],
                text=scalar == "str",
                ragged=column_type.endswith("_list"),
                tfds=tfds,
            )
        )
    for group in layout.groups:
        found += keys.groups[group]
    features = layout.features
    if features is not None:
        rank = len(features.shape)
        if features.dtype == "float16":
            found.append(RecordKey("features_float16", keys.features_float16, "bytes", tfds="none"))
        else:
            size = math.prod(features.shape)
            found.append(RecordKey("features", keys.features, "float32", shape=(size,), tfds="none"))
        found.append(RecordKey("features_shape", keys.features_shape, "int64", shape=(rank,), tfds="none"))
    return tuple(found)


def key_of(layout: RecordLayout | str, name: str) -> str:
    """The stored key of the named field (`image`, `label`, `height`, ...) in a layout or schema."""
    keys = table(layout if isinstance(layout, str) else layout.schema)
    for key in _fixed(keys):
        if key.name == name:
            return key.key
    names = {"features": keys.features, "features_float16": keys.features_float16}
    names["features_shape"] = keys.features_shape
    if name in names:
        return names[name]
    raise KeyError(f"the {keys.schema} schema has no key named {name!r}")


def reserved_names() -> frozenset[str]:
    """What a manifest column may not be called: any field name or stored key of either schema
    (a column would shadow it in the record, or in the dict iter_examples gives). A segmentation
    or captions run's keys are not among them: those runs take no manifest."""
    found: set[str] = set()
    for keys in TABLES.values():
        fixed = _fixed(keys, with_tasks=False)
        found |= {key.name for key in fixed} | {key.key for key in fixed}
        found |= {keys.features, keys.features_float16, keys.features_shape, "features_shape"}
    return frozenset(found)


def _fixed(keys: KeyTable, with_tasks: bool = True) -> list[RecordKey]:
    """A table's keys but the manifest columns' and the features' (whose shape is the run's);
    `with_tasks`: every group's, else only those a manifest column may not share
    (`KeyTable.reserved_groups`)."""
    found = [*keys.image, keys.label, *((keys.label_text,) if keys.label_text else ())]
    found += [*((keys.pixel_dtype,) if keys.pixel_dtype else ()), *keys.pixel_array]
    found += [keys.pixel_additional] if keys.pixel_additional else []
    found += [replace(fact, key=keys.facts_prefix + fact.key) for fact in FACTS.values()]
    for name, group in keys.groups.items():
        if with_tasks or name in keys.reserved_groups:
            found += group
    return found
