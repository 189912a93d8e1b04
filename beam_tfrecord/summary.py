"""summary.json as a typed object: what a run wrote, counted, checked and was asked to do.

`Summary` and its parts write and read the file (`to_json`, `from_json`, `read_summary`), as
`RejectLine` does its line, so every reader uses fields, not string keys, and the file's layout is
known in one place. The write stage builds one from the plan's facts and the pipeline's tally
(`write.summary.build_summary`); the output room grows one (`output.grown_summary`); the readers
read one.

This module sits below every stage and above the kinds of label (each kind's section is its own
`labels.Section`): it imports neither a stage nor a stage's config. The settings are kept as
their configs recorded them (`OptionsSummary`); a stage reads a config back from that record
(`OptionsSummary.config`), a reader takes the few plain values it needs by their keys
(`Summary.schema`, ...).

The file keeps its keys and their order from run to run (tests/golden/outputs.json holds them);
fields a later version added are optional when read, so summaries of earlier runs still load, and
a JSON file that is no summary gives a `SummaryError` that says so.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict, TypeVar

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import tasks
from beam_tfrecord.config_base import Config, ConfigError, declared
from beam_tfrecord.edges import Json, JsonObject
from beam_tfrecord.keys import FACTS, ColumnType, FeatureLayout, PixelLayout, RecordLayout
from beam_tfrecord.labels import KINDS, Section
from beam_tfrecord.labels.base import fields_from, plain
from beam_tfrecord.names import DUPLICATES_FILE, SUMMARY_FILE, TFRECORD, ShardFormat

__all__ = [
    "DIGEST_METHOD",
    "DuplicateCounts",
    "ExtraColumnSummary",
    "FeatureSummary",
    "GroupSummary",
    "HistoryEntry",
    "MixedPixels",
    "OptionsSummary",
    "Resumed",
    "RunSummary",
    "SizeRange",
    "SplitSummary",
    "Summary",
    "SummaryError",
    "TfdsMetadataSummary",
    "read_summary",
]

_Section = TypeVar("_Section", bound=Section)
_Config = TypeVar("_Config", bound=Config)
# How each split's `digest` is made (write.tally adds its records' digests modulo 2**256).
DIGEST_METHOD = "sum of sha256(serialized record) mod 2**256: independent of record order and shards"


class SummaryError(ValueError):
    """A file that is not a summary.json this project can read."""


# Summary's fields written only where a run has them.
_ABSENT_WHEN_NONE = ("features", "resumed", "tfds_metadata", "history", "full_depth")


class MixedPixels(ValueError):
    """A run whose records hold pictures of several kinds (8-bit and 16-bit, or 16-bit and
    float): no one parse spec, TFDS feature or tensor type reads them all."""

    def __init__(self, mix: str) -> None:
        super().__init__(
            f"the records hold pictures of several kinds ({mix}): readers need one; read them one "
            "by one with iter_examples, or convert again with --bit_depth 8 (or each kind apart)"
        )


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
    def from_json(cls, data: Mapping[str, Json]) -> SplitSummary:
        return cls(**fields_from(cls, data))


@dataclass
class GroupSummary:
    """How files were grouped for splitting (plan.planner.GroupFacts)."""

    source: str | None = None  # group_pattern | manifest | pages | None
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
    def of(cls, sizes: Counter[int]) -> SizeRange | None:
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
    def from_json(cls, data: Mapping[str, Json]) -> FeatureSummary:
        defaults = {"precision": "float32", "batch_size": 32, "weights": None, "pooling": "none"}
        return cls(**{**defaults, **fields_from(cls, data)})


@dataclass(frozen=True)
class OptionsSummary:
    """summary.json's `options`: the source's settings, then the output's, as each config records
    them (`config_base.Config.to_json`), kept as that record. The configs' classes are the stages'
    (plan.source_config.SourceConfig, write.output_config.ConvertConfig): a stage reads one back
    with `config`, and a reader takes the plain values it needs by their keys (`value`)."""

    recorded: JsonObject = field(default_factory=dict)

    @classmethod
    def of(cls, source: Config | None, output: Config | None) -> OptionsSummary:
        """The record of a run's source settings and output settings (None: not given). The
        output's records `features_only` (the feature model's other settings are the `features`
        section's)."""
        return cls(
            {
                **(source.to_json() if source is not None else {}),
                **(output.to_json() if output is not None else {}),
            }
        )

    def to_json(self) -> JsonObject:
        return dict(self.recorded)

    @classmethod
    def from_json(cls, data: Mapping[str, Json]) -> OptionsSummary:
        return cls(dict(data))

    def config(self, config_type: type[_Config]) -> _Config | None:
        """The settings of `config_type` back from the record, an earlier version's record taking
        defaults for what it lacks; None where the record holds none of them (it lacks a setting
        the config has no default for: SourceConfig's input, ConvertConfig's output). A record
        the config refuses is a SummaryError."""
        needed = (
            item.record_key
            for item in declared(config_type)
            if item.field.default is dataclasses.MISSING and item.field.default_factory is dataclasses.MISSING
        )
        if not all(key in self.recorded for key in needed):
            return None
        try:
            return config_type.from_json(self.recorded)
        except ConfigError as error:
            raise SummaryError(f"summary.json's options cannot be read: {error}") from None

    def value(self, key: str, default: Json = None) -> Json:
        """One recorded setting by its key (`default`: a record that lacks it, as the config's
        default for it, or a run that gave no such config)."""
        return self.recorded.get(key, default)


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

    def to_json(self) -> JsonObject:
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

    def to_json(self) -> JsonObject:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None or k == "written"}


@dataclass
class Summary:
    """summary.json. Its presence means the run ended and every shard it lists is in place."""

    inputs_listed: int
    skipped: int
    inputs: int
    records: int
    rejects: int
    consistent: bool  # inputs (+ in_two_splits) == records + rejects
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
    # Records that repeat a picture in another split, as --overlapping_splits asks (not copies).
    in_two_splits: int = 0
    duplicates_file: str = DUPLICATES_FILE
    split_method: str = "hash"  # hash | stratified | declared by ... (a detection dataset's own)
    groups: GroupSummary = field(default_factory=GroupSummary)
    multi_label: bool = False
    extra_columns: list[ExtraColumnSummary] = field(default_factory=list)
    digest_method: str = DIGEST_METHOD
    source_formats: dict[str, int] = field(default_factory=dict)
    image_height: SizeRange | None = None
    image_width: SizeRange | None = None
    # Records of pictures kept past 8 bits, by `keys.PixelLayout.token` (`uint16 x1 png`);
    # absent from a run of 8-bit pictures.
    full_depth: dict[str, int] | None = None
    manifest_rows_without_file: int = 0
    manifest_rows_without_file_sample: list[str] = field(default_factory=list)
    manifest_rows_without_file_list: str | None = None
    warnings: list[str] = field(default_factory=list)
    features: FeatureSummary | None = None
    # Each of the run's kinds of label's section, by kind name (`labels.LabelKind.section`),
    # written under its `section_key` in the registry's order (`objects`, `segmentation`, ...).
    sections: dict[str, Section] = field(default_factory=dict)
    # A rerun that kept an interrupted run's finished shard tasks: how many, and their records.
    resumed: Resumed | None = None
    # The settings, as each config records them.
    options: OptionsSummary = field(default_factory=OptionsSummary)
    run: RunSummary | None = None
    tfds_metadata: TfdsMetadataSummary | None = None
    # The runs that made a dataset grown by `--append` (output.append), each with its date, input
    # and counts (and an append's new classes); absent from a dataset made by one run.
    history: list[HistoryEntry] | None = None

    # What readers need of the settings: plain values, read by their keys (a run without the
    # output's settings, or an earlier version's record without the key, reads as ConvertConfig's
    # default: tests/test_summary.py holds them to it).
    @property
    def schema(self) -> str:
        return self.options.value("schema", "tfds")

    @property
    def compression(self) -> str:
        return self.options.value("compression", TFRECORD.compression)

    @property
    def shard_format(self) -> ShardFormat:
        return ShardFormat(self.options.value("file_format", TFRECORD.file_format), self.compression)

    @property
    def forced_channels(self) -> int | None:
        """The channel count the run forced (`ImageConfig.channels`), if it did."""
        return self.options.value("channels")

    @property
    def labeled(self) -> bool:
        return self.class_names is not None

    @property
    def stratified(self) -> bool:
        return self.split_method == "stratified"

    def section(self, name: str, section_type: type[_Section]) -> _Section | None:
        """The named kind's section as its own type (None: the run has none)."""
        found = self.sections.get(name)
        assert found is None or isinstance(found, section_type)  # read by the kind's own type
        return found

    @property
    def kinds(self) -> tuple[str, ...]:
        """The run's kinds of label: those with a section, in the registry's order, else the
        default task's (a classification run's class)."""
        return tuple(self.sections) or tasks.task(tasks.DEFAULT).kinds

    def record_layout(self, with_pixels: bool = True) -> RecordLayout:
        """Which keys the run's records hold (see beam_tfrecord.keys); raises `MixedPixels` for
        a run of several kinds of pictures, unless `with_pixels` is False (the keys of 8-bit
        records, for a reader that reads each record's own pixel keys)."""
        features = None
        if self.features is not None:
            shape = tuple(self.features.shape or ())
            features = FeatureLayout(shape, self.features.dtype, not self.features.features_only)
        columns = tuple((c.name, c.type) for c in self.extra_columns)
        # Only a classification run's records hold the class keys: every other kind has a section
        # (a detection run's classes are its objects', a segmentation run's its masks' values).
        labeled = self.labeled and not self.sections
        multi = self.multi_label and labeled
        groups = tuple(
            g for name, section in self.sections.items() for g in KINDS[name].section_groups(section)
        )
        pixels = self.pixel_layout() if with_pixels else None
        return RecordLayout(self.schema, labeled, multi, columns, features, groups, pixels)

    def pixel_layout(self) -> PixelLayout | None:
        """How the run's pictures past 8 bits are stored: None for a run of 8-bit pictures;
        `MixedPixels` where its records hold pictures of several kinds (8-bit among them), which
        no one parse spec, TFDS feature or tensor type reads."""
        if not self.full_depth:
            return None
        found = [PixelLayout.from_token(token) for token in self.full_depth]
        # 16-bit PNGs of 1 to 4 bands decode to the most bands alike; an array's and the Object
        # Detection API's additional channels' band count is part of their kind.
        kinds = {
            (p.dtype, p.bands if p.array or p.additional else 0, p.array, p.stacked, p.additional)
            for p in found
        }
        if len(kinds) > 1 or sum(self.full_depth.values()) < self.records:
            raise MixedPixels(self.pixel_mix())
        # One kind; the facts are those any record holds (a record silent on one reads its default).
        facts = {name for p in found for name in p.facts}
        bands = max(p.bands for p in found)
        return dataclasses.replace(found[0], bands=bands, facts=tuple(n for n in FACTS if n in facts))

    def pixel_mix(self) -> str:
        """The kinds of pictures the records hold, for a message: `8-bit: 3, uint16 x1 png: 70`."""
        counts = dict(self.full_depth or {})
        eight = self.records - sum(counts.values())
        found = ([f"8-bit: {eight}"] if eight else []) + [f"{token}: {n}" for token, n in counts.items()]
        return ", ".join(found)

    def shard_files(self) -> dict[str, list[str]]:
        """Split -> its shard file names."""
        return {name: list(split.files) for name, split in self.splits.items()}

    def to_json(self) -> JsonObject:
        """The file's object, keys in their written order."""
        data: JsonObject = {}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if item.name == "run":
                data.update(value.to_json() if value is not None else {})
            elif item.name == "options":
                data[item.name] = value.to_json()
            elif item.name == "sections":
                data.update({KINDS[name].section_key: section.to_json() for name, section in value.items()})
            elif (item.name in _ABSENT_WHEN_NONE and value is None) or (
                item.name == "in_two_splits" and not value  # only an --overlapping_splits run's
            ):
                continue
            elif isinstance(value, TfdsMetadataSummary):
                data[item.name] = value.to_json()
            elif item.name in ("image_height", "image_width") and value is None:
                data[item.name] = {}
            elif dataclasses.is_dataclass(value) or item.name in ("splits", "extra_columns"):
                data[item.name] = plain(value)
            else:
                data[item.name] = value
        return data

    def to_text(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=False, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, data: Json, where: str = "summary.json") -> Summary:
        """A summary from the file's object; SummaryError when it is not one."""
        required = ("splits", "records", "inputs")
        if not isinstance(data, dict) or any(key not in data for key in required):
            raise SummaryError(f"{where} is not a beam-tfrecord summary (it lacks {', '.join(required)})")
        try:
            values = fields_from(cls, data)
            values["splits"] = {name: SplitSummary.from_json(s) for name, s in data["splits"].items()}
            values["groups"] = GroupSummary(**fields_from(GroupSummary, data.get("groups") or {}))
            values["extra_columns"] = [
                ExtraColumnSummary(**fields_from(ExtraColumnSummary, c))
                for c in data.get("extra_columns") or []
            ]
            for name in ("image_height", "image_width"):
                values[name] = SizeRange(**data[name]) if data.get(name) else None
            if data.get("features"):
                values["features"] = FeatureSummary.from_json(data["features"])
            values["full_depth"] = dict(data["full_depth"]) if data.get("full_depth") else None
            values["sections"] = {
                kind.name: kind.section_type.from_json(data[kind.section_key])
                for kind in KINDS.values()
                if kind.section_type is not None and data.get(kind.section_key)
            }
            if data.get("tfds_metadata"):
                values["tfds_metadata"] = TfdsMetadataSummary(
                    **fields_from(TfdsMetadataSummary, data["tfds_metadata"])
                )
            values["options"] = OptionsSummary.from_json(data.get("options") or {})
            run = fields_from(RunSummary, data)
            values["run"] = RunSummary(**run) if run else None
            values.setdefault("inputs_listed", data["inputs"])
            values.setdefault("skipped", 0)
            values.setdefault("rejects", 0)
            values.setdefault("consistent", data["inputs"] == data["records"] + values["rejects"])
            return cls(**values)
        except (TypeError, AttributeError, KeyError) as error:
            raise SummaryError(
                f"{where} cannot be read as a summary: {type(error).__name__}: {error}"
            ) from None


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


class Resumed(TypedDict):
    """A rerun's finished shard tasks kept from the run it resumed, and their records."""

    shards: int
    records: int


class HistoryEntry(TypedDict):
    """One run that made a grown dataset (`Summary.history`, output.append): when it ran, the
    input it listed and its counts; an append's run also names its new classes, the converted
    files it found changed or gone, when it started and, where the kinds of label keep a digest of
    each picture's annotations, the old pictures whose annotations changed."""

    date: str | None
    input: str | None
    inputs: int
    records: int
    rejects: int
    new_classes: NotRequired[list[str]]
    changed_since_converted: NotRequired[int]
    gone: NotRequired[int]
    started_at: NotRequired[float | None]
    annotations_changed: NotRequired[int]
