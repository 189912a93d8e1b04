"""summary.json as a typed object: what a run wrote, counted, checked and was asked to do.

`Summary` and its parts write and read the file (`to_json`, `from_json`, `read_summary`), as
`RejectLine` does its line, so every reader uses fields, not string keys, and the file's layout is
known in one place. `build_summary` makes one from the plan's facts and the pipeline's tally.

The file keeps its keys and their order from run to run (tests/golden/outputs.json holds them);
fields a later version added are optional when read, so summaries of earlier runs still load, and
a JSON file that is no summary gives a `SummaryError` that says so.
"""

from __future__ import annotations

import dataclasses
import json
import posixpath
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import reasons
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.elements import DuplicateGroup, RejectLine
from beam_tfrecord.features.options import FeatureConfig
from beam_tfrecord.keys import FeatureLayout, RecordLayout, extra_key
from beam_tfrecord.labels.captions import CaptionTally
from beam_tfrecord.labels.class_mask import ClassMaskTally
from beam_tfrecord.labels.keypoints import KeypointTally
from beam_tfrecord.labels.objects import SIZE_BUCKETS, ObjectTally
from beam_tfrecord.names import DUPLICATES_FILE, MANIFEST_UNMATCHED_FILE, SUMMARY_FILE, TFRECORD, ShardFormat
from beam_tfrecord.plan import splits as splits_lib
from beam_tfrecord.plan.annotations.label_map import is_unused
from beam_tfrecord.plan.source_config import SourceConfig
from beam_tfrecord.write.output_config import ConvertConfig
from beam_tfrecord.write.tally import DIGEST_METHOD, Tally

if TYPE_CHECKING:
    from beam_tfrecord.plan.columns import ColumnType
    from beam_tfrecord.plan.staging import PlanFacts

__all__ = [
    "CaptionSummary",
    "DuplicateCounts",
    "ExtraColumnSummary",
    "FeatureSummary",
    "GroupSummary",
    "KeypointSummary",
    "ObjectSummary",
    "OptionsSummary",
    "RunSummary",
    "SegmentationSummary",
    "SizeRange",
    "SplitSummary",
    "Summary",
    "SummaryError",
    "TfdsMetadataSummary",
    "build_summary",
    "copy_warnings",
    "duplicate_counts",
    "read_summary",
    "share_and_class_warnings",
]

# A hash split further than this from its fraction gets a warning that names stratify.
SHARE_WARNING = 0.01


class SummaryError(ValueError):
    """A file that is not a summary.json this project can read."""


def _fields_from(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of `data` that are fields of `cls` (a later version's extra keys are ignored)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {key: value for key, value in data.items() if key in names}


@dataclass
class SplitSummary:
    """One split: the fraction asked, what it holds, and its shards."""

    fraction: float
    records: int
    share: float = 0.0  # of all records
    expected_deviation: float = 0.0  # a hash split's share lies within this about 95 times in 100
    labels: dict[str, int] = field(default_factory=dict)
    shards: int = 0
    planned_shards: int = 0
    bytes: int = 0
    files: list[str] = field(default_factory=list)
    digest: str = ""  # see DIGEST_METHOD

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SplitSummary:
        return cls(**_fields_from(cls, data))


@dataclass
class GroupSummary:
    """How files were grouped for splitting (plan.planner.GroupFacts)."""

    source: str | None = None  # group_pattern | manifest | None
    groups: int = 0
    grouped_files: int = 0
    without_group: int = 0


@dataclass
class SizeRange:
    """The smallest, largest and mean of a stored dimension, over every record."""

    min: int
    max: int
    mean: float

    @classmethod
    def of(cls, sizes: Counter) -> SizeRange | None:
        if not sizes:
            return None
        total = sum(sizes.values())
        mean = sum(size * n for size, n in sizes.items()) / total
        return cls(min(sizes), max(sizes), round(mean, 1))


@dataclass
class ExtraColumnSummary:
    """A manifest column stored in every record: its name, type and record key."""

    name: str
    type: ColumnType
    key: str


@dataclass
class FeatureSummary:
    """What a reader needs to restore a feature run's features, and how they were made."""

    model: str | None
    weights: str | None
    pooling: str
    dtype: str
    precision: str
    features_only: bool
    batch_size: int
    shape: list[int] | None
    framework: str = "keras"  # keras | onnx | torch: what ran the model
    input_normalization: str = "none"  # what a model_path model was fed (features.options)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FeatureSummary:
        defaults = {"precision": "float32", "batch_size": 32, "weights": None, "pooling": "none"}
        return cls(**{**defaults, **_fields_from(cls, data)})


@dataclass
class ObjectSummary:
    """A detection run's objects: where every annotated one went, and what the records hold.

    `annotated = stored + dropped`: `dropped_per_reason` counts objects left out of their image
    (dropped_objects.jsonl names each), with `image_rejected` for those whose image became a
    reject line and `no_image` for those of annotation entries that name no listed image
    (annotations_without_image.jsonl)."""

    kind: str
    masks: bool
    annotated: int
    stored: int
    dropped: int
    consistent: bool
    dropped_per_reason: dict[str, int] = field(default_factory=dict)
    unmatched_entries: int = 0
    negatives: int = 0  # records without an object
    per_class: dict[str, dict[str, int]] = field(default_factory=dict)  # name -> objects, images
    per_image: dict[str, Any] = field(default_factory=dict)  # mean, max, histogram of objects per record
    sizes: dict[str, int] = field(default_factory=dict)  # COCO's small, medium, large (stored pixels)
    class_ids: str = "from 1 (0 is background), as label_map.pbtxt; labels.txt line i is id i + 1"
    found_at: str = ""  # where the annotations were found, and how many pictures they matched

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ObjectSummary:
        return cls(**_fields_from(cls, data))


@dataclass
class SegmentationSummary:
    """A segmentation run's masks: what every class covers, and what the records hold.

    `per_class` gives each class's pixels, its share of the labelled pixels (the ignore value's
    aside) and the records whose mask holds it; `ignored_pixels` the ignore value's pixels;
    `pictures_without_mask` the records stored with a mask of the ignore value alone (no mask
    file, `--unannotated keep`)."""

    kind: str
    ignore: int | None
    per_class: dict[str, dict[str, Any]] = field(default_factory=dict)
    ignored_pixels: int = 0
    pictures_without_mask: int = 0
    unmatched_masks: int = 0
    class_ids: str = "from 0, as labels.txt lists them: a mask's value is its pixel's class id"
    mask_key: str = "image/segmentation/class/encoded (a single-channel PNG the picture's size)"
    found_at: str = ""
    palette: list[list[int]] = field(default_factory=list)  # class id i's colour, for pictures

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SegmentationSummary:
        return cls(**_fields_from(cls, data))


def _segmentation(facts: PlanFacts, tally: Tally, class_names: Sequence[str]) -> SegmentationSummary | None:
    """The segmentation section (None for any other run)."""
    plan = facts.labels_of("segmentation")
    if plan is None:
        return None
    masks = tally.kind_as("class_mask", ClassMaskTally)
    labelled = sum(n for value, n in masks.pixels.items() if value != plan.ignore)
    per_class = {
        name: {
            "pixels": masks.pixels[index],
            "share": round(masks.pixels[index] / labelled, 6) if labelled else 0.0,
            "pictures": masks.pictures[index],
        }
        for index, name in enumerate(class_names)
    }
    return SegmentationSummary(
        kind=plan.kind,
        ignore=plan.ignore,
        per_class=per_class,
        ignored_pixels=masks.pixels[plan.ignore] if plan.ignore is not None else 0,
        pictures_without_mask=masks.missing,
        unmatched_masks=plan.unmatched_entries,
        class_ids="from 0, as labels.txt lists them: a mask's value is its pixel's class id"
        + (f"; {plan.ignore} is ignored (not labelled)" if plan.ignore is not None else ""),
        found_at=plan.found_at,
        palette=plan.palette,
    )


@dataclass
class KeypointSummary:
    """A keypoints run's points: each class's keypoint names and skeleton (0-based pairs), and
    the points stored labelled (of them visible) and those the picture's edge or crop made
    unlabelled (counted, the records' `keypoints_outside` change)."""

    names: dict[str, list[str]] = field(default_factory=dict)
    skeletons: dict[str, list[list[int]]] = field(default_factory=dict)
    points_per_object: int = 0
    labelled: int = 0
    visible: int = 0
    made_unlabelled: int = 0
    keys: str = (
        "image/object/keypoint/x, y (fractions of the image, 0 where not labelled) and visibility "
        "(0 not labelled, 1 hidden, 2 visible): points_per_object for each object, object after object"
    )

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KeypointSummary:
        return cls(**_fields_from(cls, data))


def _keypoints(facts: PlanFacts, tally: Tally) -> KeypointSummary | None:
    """The keypoints section (None for any other run)."""
    plan = facts.objects
    if plan is None or not plan.keypoint_names:
        return None
    return KeypointSummary(
        names={name: list(points) for name, points in plan.keypoint_names.items()},
        skeletons={name: [list(pair) for pair in pairs] for name, pairs in plan.skeletons.items()},
        points_per_object=max(len(points) for points in plan.keypoint_names.values()),
        labelled=tally.kind_as("keypoints", KeypointTally).points["labelled"],
        visible=tally.kind_as("keypoints", KeypointTally).points["visible"],
        made_unlabelled=tally.kind_as("keypoints", KeypointTally).points["outside"],
    )


@dataclass
class CaptionSummary:
    """A captions run's captions: how many were stored, how they spread over the pictures, the
    pictures stored without one (`--unannotated keep`) and the entries that name no listed
    picture (annotations_without_image.jsonl, lines that cannot be read included)."""

    kind: str
    captions: int = 0
    pictures_with_captions: int = 0
    pictures_without_caption: int = 0
    per_picture: dict[str, Any] = field(default_factory=dict)  # min, mean, max captions a picture
    unmatched_entries: int = 0
    caption_key: str = "image/caption (every caption of the picture, UTF-8, in its file's order)"
    found_at: str = ""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CaptionSummary:
        return cls(**_fields_from(cls, data))


def _captions(facts: PlanFacts, tally: Tally) -> CaptionSummary | None:
    """The captions section (None for any other run)."""
    plan = facts.labels_of("captions")
    if plan is None:
        return None
    counts = tally.kind_as("captions", CaptionTally).per_image
    records = sum(counts.values())
    stored = sum(k * n for k, n in counts.items())
    with_some = {k: n for k, n in counts.items() if k}
    return CaptionSummary(
        kind=plan.kind,
        captions=stored,
        pictures_with_captions=sum(with_some.values()),
        pictures_without_caption=counts.get(0, 0),
        per_picture={
            "min": min(with_some, default=0),
            "mean": round(stored / records, 2) if records else 0.0,
            "max": max(counts, default=0),
        },
        unmatched_entries=plan.unmatched_entries,
        found_at=plan.found_at,
    )


# Objects per record, bucketed for the summary.
PER_IMAGE_BUCKETS = ((0, 0), (1, 1), (2, 4), (5, 9), (10, 19), (20, None))


def _per_image(counts: Counter) -> dict[str, Any]:
    records = sum(counts.values())
    histogram = {}
    for low, high in PER_IMAGE_BUCKETS:
        name = str(low) if low == high else f"{low}+" if high is None else f"{low}-{high}"
        histogram[name] = sum(n for k, n in counts.items() if k >= low and (high is None or k <= high))
    mean = sum(k * n for k, n in counts.items()) / records if records else 0.0
    return {"mean": round(mean, 2), "max": max(counts, default=0), "histogram": histogram}


def _objects(
    facts: PlanFacts, tally: Tally, planned_rejects: Sequence[RejectLine], class_names: Sequence[str]
) -> ObjectSummary | None:
    """The objects section, from the plan's facts and the tally (None for a classification run)."""
    plan = facts.objects
    if plan is None:
        return None
    found = tally.kind_as("objects", ObjectTally)
    dropped = Counter(plan.dropped_per_reason) + Counter(tally.dropped)
    rejected = tally.objects_rejected + sum(r.objects for r in planned_rejects)
    if rejected:
        dropped[reasons.IMAGE_REJECTED.code] += rejected
    if plan.unmatched_objects:
        dropped[reasons.NO_IMAGE.code] += plan.unmatched_objects
    stored = sum(found.per_class.values())
    images: Counter = Counter()
    for (_, label), n in tally.by_split_label.items():
        images[label] += n
    return ObjectSummary(
        kind=plan.kind,
        masks=bool(plan.masks),
        annotated=plan.annotated,
        stored=stored,
        dropped=sum(dropped.values()),
        consistent=plan.annotated == stored + sum(dropped.values()),
        dropped_per_reason=dict(sorted(dropped.items())),
        unmatched_entries=plan.unmatched_entries,
        negatives=found.per_image.get(0, 0),
        per_class={name: {"objects": found.per_class[name], "images": images[name]} for name in class_names},
        per_image=_per_image(found.per_image),
        sizes={name: found.sizes[name] for name, _ in SIZE_BUCKETS},
        found_at=plan.found_at,
    )


@dataclass(frozen=True)
class OptionsSummary:
    """summary.json's `options`: the source's settings, then the output's, as each config records
    them (`Config.to_json`); read back into the configs (`from_json`), an earlier version's record
    taking defaults for what it lacks. `features_only` is kept as recorded: the feature model's
    other settings are the `features` section's."""

    source: SourceConfig | None = None
    output: ConvertConfig | None = None
    features_only: bool = False

    @classmethod
    def of(cls, source: SourceConfig | None, output: ConvertConfig | None) -> OptionsSummary:
        features = output.features if output is not None else None
        return cls(source, output, bool(features and features.features_only))

    def to_json(self) -> dict[str, Any]:
        data = {
            **(self.source.to_json() if self.source is not None else {}),
            **(self.output.to_json() if self.output is not None else {}),
        }
        if self.output is not None:
            data["features_only"] = self.features_only
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OptionsSummary:
        """The configs back from the record (None for one it does not hold)."""
        source = SourceConfig.from_json(data) if "input" in data else None
        output = ConvertConfig.from_json(data) if "output" in data else None
        return cls(source, output, bool(data.get("features_only")))


@dataclass
class RunSummary:
    """How the run executed (the command fills every field; a user's own pipeline may leave them)."""

    input: str | None = None
    output: str | None = None
    runner: str | None = None
    direct_running_mode: str | None = None
    workers: int | None = None
    parallelism: int | None = None
    sink: str | None = None
    read_threads: int | None = None
    beam_version: str | None = None
    started_at: float | None = None
    wall_time_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        """Its fields, `wall_time_s` only once measured."""
        data = dataclasses.asdict(self)
        if data["wall_time_s"] is None:
            del data["wall_time_s"]
        return data


@dataclass
class TfdsMetadataSummary:
    """Whether TFDS's files were written beside the shards, and why not."""

    written: bool
    reason: str | None = None
    filename_template: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None or k == "written"}


@dataclass
class Summary:
    """summary.json. Its presence means the run ended and every shard it lists is in place."""

    inputs_listed: int
    skipped: int
    inputs: int
    records: int
    rejects: int
    consistent: bool  # inputs == records + rejects
    splits: dict[str, SplitSummary]
    class_names: list[str] | None = None
    records_per_label: dict[str, int] = field(default_factory=dict)
    rejects_per_reason: dict[str, int] = field(default_factory=dict)
    reencoded: int = 0
    # Records per reason (one record may have several); one line per record in changes.jsonl.
    changes_per_reason: dict[str, int] = field(default_factory=dict)
    frames_dropped: int = 0
    duplicate_records: int = 0
    duplicate_groups: int = 0
    cross_split_duplicates: int = 0
    duplicates_file: str = DUPLICATES_FILE
    split_method: str = "hash"  # hash | stratified | declared by ... (a detection dataset's own)
    groups: GroupSummary = field(default_factory=GroupSummary)
    multi_label: bool = False
    extra_columns: list[ExtraColumnSummary] = field(default_factory=list)
    digest_method: str = DIGEST_METHOD
    source_formats: dict[str, int] = field(default_factory=dict)
    image_height: SizeRange | None = None
    image_width: SizeRange | None = None
    manifest_rows_without_file: int = 0
    manifest_rows_without_file_sample: list[str] = field(default_factory=list)
    manifest_rows_without_file_list: str | None = None
    warnings: list[str] = field(default_factory=list)
    features: FeatureSummary | None = None
    objects: ObjectSummary | None = None  # a detection run's
    segmentation: SegmentationSummary | None = None  # a segmentation run's
    captions: CaptionSummary | None = None  # a captions run's
    keypoints: KeypointSummary | None = None  # a keypoints run's (beside its objects)
    # A rerun that kept an interrupted run's finished shard tasks: how many, and their records.
    resumed: dict[str, int] | None = None
    # The settings, as each config records them.
    options: OptionsSummary = field(default_factory=OptionsSummary)
    run: RunSummary | None = None
    tfds_metadata: TfdsMetadataSummary | None = None
    # The runs that made a dataset grown by `--append` (output.append), each with its date, input
    # and counts (and an append's new classes); absent from a dataset made by one run.
    history: list[dict[str, Any]] | None = None

    # What readers need of the settings.
    @property
    def schema(self) -> str:
        return self.options.output.schema if self.options.output is not None else "tfds"

    @property
    def compression(self) -> str:
        return self.options.output.compression if self.options.output is not None else "none"

    @property
    def shard_format(self) -> ShardFormat:
        return self.options.output.shard_format if self.options.output is not None else TFRECORD

    @property
    def forced_channels(self) -> int | None:
        """The channel count the run forced (`ImageConfig.channels`), if it did."""
        return self.options.output.image.channels if self.options.output is not None else None

    @property
    def labeled(self) -> bool:
        return self.class_names is not None

    @property
    def stratified(self) -> bool:
        return self.split_method == "stratified"

    def record_layout(self) -> RecordLayout:
        """Which keys the run's records hold (see beam_tfrecord.keys)."""
        features = None
        if self.features is not None:
            shape = tuple(self.features.shape or ())
            features = FeatureLayout(shape, self.features.dtype, not self.features.features_only)
        columns = tuple((c.name, c.type) for c in self.extra_columns)
        objects = self.objects is not None
        masks = bool(self.objects and self.objects.masks)
        segmentation, captions = self.segmentation is not None, self.captions is not None
        # A detection run's classes are its objects', a segmentation run's its masks' values.
        labeled = self.labeled and not objects and not segmentation
        multi = self.multi_label and labeled
        groups = [*(("objects",) if objects else ()), *(("object_masks",) if masks else ())]
        groups += [*(("keypoints",) if self.keypoints is not None else ())]
        groups += [*(("class_mask",) if segmentation else ()), *(("captions",) if captions else ())]
        return RecordLayout(self.schema, labeled, multi, columns, features, tuple(groups))

    def shard_files(self) -> dict[str, list[str]]:
        """Split -> its shard file names."""
        return {name: list(split.files) for name, split in self.splits.items()}

    def to_json(self) -> dict[str, Any]:
        """The file's object, keys in their written order."""
        data: dict[str, Any] = {}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if item.name == "run":
                data.update(value.to_json() if value is not None else {})
            elif item.name == "options":
                data[item.name] = value.to_json()
            elif (
                item.name
                in (
                    "features",
                    "objects",
                    "segmentation",
                    "captions",
                    "keypoints",
                    "resumed",
                    "tfds_metadata",
                    "history",
                )
                and value is None
            ):
                continue
            elif isinstance(value, TfdsMetadataSummary):
                data[item.name] = value.to_json()
            elif item.name in ("image_height", "image_width") and value is None:
                data[item.name] = {}
            elif dataclasses.is_dataclass(value) or item.name in ("splits", "extra_columns"):
                data[item.name] = _plain(value)
            else:
                data[item.name] = value
        return data

    def to_text(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=False, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, data: Any, where: str = "summary.json") -> Summary:
        """A summary from the file's object; SummaryError when it is not one."""
        required = ("splits", "records", "inputs")
        if not isinstance(data, dict) or any(key not in data for key in required):
            raise SummaryError(f"{where} is not a beam-tfrecord summary (it lacks {', '.join(required)})")
        try:
            values = _fields_from(cls, data)
            values["splits"] = {name: SplitSummary.from_json(s) for name, s in data["splits"].items()}
            values["groups"] = GroupSummary(**_fields_from(GroupSummary, data.get("groups") or {}))
            values["extra_columns"] = [
                ExtraColumnSummary(**_fields_from(ExtraColumnSummary, c))
                for c in data.get("extra_columns") or []
            ]
            for name in ("image_height", "image_width"):
                values[name] = SizeRange(**data[name]) if data.get(name) else None
            if data.get("features"):
                values["features"] = FeatureSummary.from_json(data["features"])
            if data.get("objects"):
                values["objects"] = ObjectSummary.from_json(data["objects"])
            if data.get("segmentation"):
                values["segmentation"] = SegmentationSummary.from_json(data["segmentation"])
            if data.get("captions"):
                values["captions"] = CaptionSummary.from_json(data["captions"])
            if data.get("keypoints"):
                values["keypoints"] = KeypointSummary.from_json(data["keypoints"])
            if data.get("tfds_metadata"):
                values["tfds_metadata"] = TfdsMetadataSummary(
                    **_fields_from(TfdsMetadataSummary, data["tfds_metadata"])
                )
            values["options"] = OptionsSummary.from_json(data.get("options") or {})
            run = _fields_from(RunSummary, data)
            values["run"] = RunSummary(**run) if run else None
            values.setdefault("inputs_listed", data["inputs"])
            values.setdefault("skipped", 0)
            values.setdefault("rejects", 0)
            values.setdefault("consistent", data["inputs"] == data["records"] + values["rejects"])
            return cls(**values)
        except (TypeError, AttributeError, KeyError, ConfigError) as error:
            raise SummaryError(
                f"{where} cannot be read as a summary: {type(error).__name__}: {error}"
            ) from None


def _plain(value: Any) -> Any:
    """Dataclasses (and dicts and lists of them) as JSON values, in field order."""
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def read_summary(output: str) -> Summary:
    """The summary.json of `output`; SummaryError when the file is no summary."""
    path = FileSystems.join(output, SUMMARY_FILE)
    with FileSystems.open(path) as handle:
        text = handle.read().decode("utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise SummaryError(f"{path} is not JSON: {error}") from None
    return Summary.from_json(data, path)


class DuplicateCounts(TypedDict):
    """The duplicate figures, named as Summary's fields."""

    duplicate_records: int
    duplicate_groups: int
    cross_split_duplicates: int


def duplicate_counts(groups: Sequence[DuplicateGroup]) -> DuplicateCounts:
    """summary.json's duplicate figures: records beyond the first copy of each content
    (`duplicate_records`), groups, and records whose bytes also lie in another split
    (`cross_split_duplicates`: every copy of a group that spans two splits or more)."""
    return {
        "duplicate_records": sum(len(g.copies) - 1 for g in groups),
        "duplicate_groups": len(groups),
        "cross_split_duplicates": sum(len(g.copies) for g in groups if len(g.splits) > 1),
    }


def _splits(
    facts: PlanFacts, tally: Tally, shard_files: Iterable[tuple[str, int]], records: int, stratified: bool
) -> dict[str, SplitSummary]:
    """Each split's counts, share, expected deviation, labels and shards."""
    shards: dict[str, list[tuple[str, int]]] = {name: [] for name in facts.splits}
    for path, size in sorted(shard_files):
        split = posixpath.basename(path).split("-", 1)[0]
        shards.setdefault(split, []).append((posixpath.basename(path), size))
    grouping = facts.grouping
    # What a hash split draws: each group once, each file of no group once.
    units = grouping.groups + grouping.without_group if grouping.source else records
    splits = {}
    for name in facts.splits:
        per_label = {
            label: n for (split, label), n in sorted(tally.by_split_label.items(), key=str) if split == name
        }
        count = tally.records.get(name, 0)
        deviation = 0.0 if stratified else splits_lib.expected_deviation(facts.splits[name], units)
        splits[name] = SplitSummary(
            fraction=facts.splits[name],
            records=count,
            share=round(count / records, 4) if records else 0.0,
            expected_deviation=round(deviation, 4),
            labels={str(k): v for k, v in per_label.items()} if facts.class_names is not None else {},
            shards=len(shards[name]),
            planned_shards=facts.shard_counts[name],
            bytes=sum(size for _, size in shards[name]),
            files=[file for file, _ in shards[name]],
            digest=f"{tally.digests.get(name, 0):064x}",
        )
    return splits


def share_and_class_warnings(
    splits: Mapping[str, SplitSummary],
    class_names: Sequence[str],
    records_of: Mapping[str, int],
    records: int,
    stratified: bool,
    declared: bool,
) -> list[str]:
    """The warnings on a dataset's split shares (hash splits only: declared splits asked no
    fraction) and on its classes without a record, worded once for a run's summary and a grown
    dataset's (output.append). `records_of`: class name -> its records."""
    warnings = []
    if not stratified and not declared and len(splits) > 1 and records:
        name, split = max(splits.items(), key=lambda item: abs(item[1].share - item[1].fraction))
        if abs(split.share - split.fraction) > SHARE_WARNING:
            warnings.append(
                f"split {name} holds {split.share:.1%} of records, not the {split.fraction:.1%} asked: "
                f"hash splits are off by up to ±{split.expected_deviation:.1%} at this size "
                "(and never move a file when files are added); stratify gives exact shares"
            )
    for label in class_names:
        if not records_of.get(label) and not is_unused(label):  # a label map's missing id
            warnings.append(f"class {label!r} has no valid image")
    return warnings


def copy_warnings(duplicate_records: int, cross_split_duplicates: int) -> list[str]:
    """The warnings on records whose source bytes another record has, in one split or across two."""
    warnings = []
    if duplicate_records:
        warnings.append(
            f"{duplicate_records} records have the same image bytes as another record (see {DUPLICATES_FILE})"
        )
    if cross_split_duplicates:
        warnings.append(
            f"{cross_split_duplicates} records have the same bytes as a record in another "
            f"split: the splits leak (see {DUPLICATES_FILE}; dedupe keeps one copy)"
        )
    return warnings


def _warnings(
    facts: PlanFacts,
    splits: Mapping[str, SplitSummary],
    label_counts: Counter,
    records: int,
    stratified: bool,
    dupes: DuplicateCounts,
) -> list[str]:
    """What a user should know before training on the output."""
    declared = facts.split_source.startswith("declared")
    warnings = share_and_class_warnings(
        splits, facts.class_names or [], label_counts, records, stratified, declared
    )
    if facts.manifest_unmatched:
        warnings.append(
            f"{len(facts.manifest_unmatched)} manifest rows name no listed file "
            f"(see {MANIFEST_UNMATCHED_FILE})"
        )
    if records == 0:
        warnings.append("every input was rejected: no record was written")
    warnings += copy_warnings(dupes["duplicate_records"], dupes["cross_split_duplicates"])
    grouping = facts.grouping
    if grouping.source and not grouping.groups:
        warnings.append(f"no file has a group ({grouping.source}): every file was split on its own")
    warnings += facts.annotation_warnings
    return warnings


def _feature_summary(
    options: FeatureConfig | None, shapes: Counter, warnings: list[str]
) -> FeatureSummary | None:
    """What a reader needs to restore the features (shape, dtype, image kept or not) and how
    they were made; None for a run without a feature model."""
    if options is None:
        return None
    if len(shapes) > 1:
        warnings.append(f"features have {len(shapes)} different shapes: {sorted(shapes)}")
    shape = list(shapes.most_common(1)[0][0]) if shapes else None
    return FeatureSummary(
        model=options.feature_model or options.model_path,
        weights=options.model_weights if options.feature_model else None,
        pooling=options.pooling,
        dtype=options.dtype,
        precision=options.precision,
        features_only=options.features_only,
        batch_size=options.batch_size,
        shape=shape,
        framework=options.framework,
        input_normalization=options.input_normalization,
    )


def build_summary(
    facts: PlanFacts,
    planned_rejects: Sequence[RejectLine],
    tally: Tally,
    shard_files: Iterable[tuple[str, int]],
    options: OptionsSummary,
    run: RunSummary | None = None,
    features: FeatureConfig | None = None,
    duplicates: Sequence[DuplicateGroup] = (),
    resumed: Mapping[str, int] | None = None,
) -> Summary:
    """summary.json from the plan's facts, the rejects known from the listing, the tally of the
    rest and the shard files (path, size) in place: counts per split, label and reason, and the
    nothing-lost check.

    `options` are the run's settings; `run` says how it ran; `duplicates`
    are the groups of records with identical source bytes."""
    skipped = sum(1 for r in planned_rejects if r.reason == reasons.SKIPPED.code)
    planned = Counter(r.reason for r in planned_rejects if r.reason != reasons.SKIPPED.code)
    rejects = Counter(tally.rejects) + planned
    inputs = facts.listed - skipped
    records = sum(tally.records.values())
    rejected = sum(rejects.values())
    source = options.source
    stratified = bool(source and source.stratify)
    splits = _splits(facts, tally, shard_files, records, stratified)
    label_counts: Counter = Counter()
    for (_, label), n in tally.by_split_label.items():
        label_counts[label] += n
    if facts.labels_of("segmentation") is not None:  # a class's pictures: records whose mask holds it
        names = facts.class_names or []
        pictures = tally.kind_as("class_mask", ClassMaskTally).pictures
        label_counts = Counter({names[v]: n for v, n in pictures.items() if v < len(names)})
    dupes = duplicate_counts(duplicates)
    warnings = _warnings(facts, splits, label_counts, records, stratified, dupes)
    schema = options.output.schema if options.output is not None else "tfds"
    columns = [
        ExtraColumnSummary(c.name, c.type, extra_key(schema, c.name))
        for c in (source.extra_columns if source else ())
    ]
    feature_info = _feature_summary(features, tally.feature_shapes, warnings)
    labeled = facts.class_names is not None
    objects = _objects(facts, tally, planned_rejects, facts.class_names or [])
    if objects is not None and not objects.consistent:
        warnings.append(
            f"{objects.annotated} objects were annotated, {objects.stored} stored and {objects.dropped} "
            "dropped: some object is unaccounted for"
        )
    return Summary(
        inputs_listed=facts.listed,
        skipped=skipped,
        inputs=inputs,
        records=records,
        rejects=rejected,
        consistent=inputs == records + rejected,
        splits=splits,
        class_names=facts.class_names,
        records_per_label={str(k): v for k, v in sorted(label_counts.items(), key=str)} if labeled else {},
        rejects_per_reason=dict(sorted(rejects.items())),
        reencoded=tally.reencoded,
        changes_per_reason={r: tally.changes[r] for r in reasons.codes("change") if tally.changes[r]},
        frames_dropped=tally.changes[reasons.FRAMES_DROPPED.code],
        duplicate_records=dupes["duplicate_records"],
        duplicate_groups=dupes["duplicate_groups"],
        cross_split_duplicates=dupes["cross_split_duplicates"],
        duplicates_file=DUPLICATES_FILE,
        split_method=facts.split_source or ("stratified" if stratified else "hash"),
        groups=GroupSummary(**dataclasses.asdict(facts.grouping)),
        multi_label=bool(source and source.multi_label),
        extra_columns=columns,
        digest_method=DIGEST_METHOD,
        source_formats=dict(sorted(tally.source_formats.items())),
        image_height=SizeRange.of(tally.heights),
        image_width=SizeRange.of(tally.widths),
        manifest_rows_without_file=len(facts.manifest_unmatched),
        manifest_rows_without_file_sample=facts.manifest_unmatched[:20],
        manifest_rows_without_file_list=MANIFEST_UNMATCHED_FILE if facts.manifest_unmatched else None,
        warnings=warnings,
        features=feature_info,
        objects=objects,
        segmentation=_segmentation(facts, tally, facts.class_names or []),
        captions=_captions(facts, tally),
        keypoints=_keypoints(facts, tally),
        resumed=dict(resumed) if resumed else None,
        options=options,
        run=run,
    )
