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
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import reasons
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.elements import DuplicateGroup, RejectLine
from beam_tfrecord.features.options import FeatureConfig
from beam_tfrecord.keys import FeatureLayout, RecordLayout, extra_key
from beam_tfrecord.labels import KINDS, Section, SectionInputs, of_task
from beam_tfrecord.labels.base import fields_from, plain
from beam_tfrecord.labels.objects.label_map import is_unused
from beam_tfrecord.names import DUPLICATES_FILE, MANIFEST_UNMATCHED_FILE, SUMMARY_FILE, TFRECORD, ShardFormat
from beam_tfrecord.plan import splits as splits_lib
from beam_tfrecord.plan.source_config import SourceConfig
from beam_tfrecord.write.output_config import ConvertConfig
from beam_tfrecord.write.tally import DIGEST_METHOD, Tally

if TYPE_CHECKING:
    from beam_tfrecord.plan.columns import ColumnType
    from beam_tfrecord.plan.staging import PlanFacts

__all__ = [
    "ExtraColumnSummary",
    "FeatureSummary",
    "GroupSummary",
    "OptionsSummary",
    "RunSummary",
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

_Section = TypeVar("_Section", bound=Section)
# A hash split further than this from its fraction gets a warning that names stratify.
SHARE_WARNING = 0.01


class SummaryError(ValueError):
    """A file that is not a summary.json this project can read."""


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
        return cls(**fields_from(cls, data))


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
        return cls(**{**defaults, **fields_from(cls, data)})


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
    # Each of the run's kinds of label's section, by kind name (`labels.LabelKind.section`),
    # written under its `section_key` in the registry's order (`objects`, `segmentation`, ...).
    sections: dict[str, Section] = field(default_factory=dict)
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

    def section(self, name: str, section_type: type[_Section]) -> _Section | None:
        """The named kind's section as its own type (None: the run has none)."""
        found = self.sections.get(name)
        assert found is None or isinstance(found, section_type)  # read by the kind's own type
        return found

    @property
    def kinds(self) -> tuple[str, ...]:
        """The run's kinds of label: those with a section, in the registry's order, else the class."""
        return tuple(self.sections) or ("class",)

    def record_layout(self) -> RecordLayout:
        """Which keys the run's records hold (see beam_tfrecord.keys)."""
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
        return RecordLayout(self.schema, labeled, multi, columns, features, groups)

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
            elif item.name == "sections":
                data.update({KINDS[name].section_key: section.to_json() for name, section in value.items()})
            elif item.name in ("features", "resumed", "tfds_metadata", "history") and value is None:
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
    def from_json(cls, data: Any, where: str = "summary.json") -> Summary:
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
        except (TypeError, AttributeError, KeyError, ConfigError) as error:
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


def _sections(
    facts: PlanFacts, tally: Tally, planned_rejects: Sequence[RejectLine], label_counts: Counter
) -> dict[str, Section]:
    """Each of the run's kinds of label's section, in the registry's order (summary.json's)."""
    found = facts.annotations
    inputs = SectionInputs(
        class_names=tuple(facts.class_names or ()),
        format=found.format if found is not None else "",
        found_at=found.found_at if found is not None else "",
        unmatched_entries=found.unmatched_entries if found is not None else 0,
        dropped=dict(tally.dropped),
        objects_rejected=tally.objects_rejected + sum(r.objects for r in planned_rejects),
        records_per_label=dict(label_counts),
    )
    run = {kind.name for kind in of_task(facts.task)}
    sections = {}
    for kind in KINDS.values():
        if kind.name in run:
            section = kind.section(facts.kinds.get(kind.name), tally.kind(kind.name), inputs)
            if section is not None:
                sections[kind.name] = section
    return sections


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
    kinds = of_task(facts.task)
    names = tuple(facts.class_names or ())
    for kind in kinds:  # a kind that counts a class's records otherwise (the masks that hold it)
        counted = kind.label_counts(tally.kind(kind.name), names)
        if counted is not None:
            label_counts = counted
    dupes = duplicate_counts(duplicates)
    warnings = _warnings(facts, splits, label_counts, records, stratified, dupes)
    schema = options.output.schema if options.output is not None else "tfds"
    columns = [
        ExtraColumnSummary(c.name, c.type, extra_key(schema, c.name))
        for c in (source.extra_columns if source else ())
    ]
    feature_info = _feature_summary(features, tally.feature_shapes, warnings)
    labeled = facts.class_names is not None
    sections = _sections(facts, tally, planned_rejects, label_counts)
    for section in sections.values():
        warnings += section.warnings()
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
        sections=sections,
        resumed=dict(resumed) if resumed else None,
        options=options,
        run=run,
    )
