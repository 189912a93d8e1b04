"""What every reader needs before the first record, without TensorFlow: the split's shards and
how to parse them (from summary.json), the clear refusal of an unfinished folder, the `.idx`
offsets (or an ArrayRecord shard's own count), and how records are divided between workers.

Shared by `load_dataset` (tf.data), `iter_examples` (no TensorFlow) and the PyTorch adapter, so
all three say the same thing about the same folder and split the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_tfrecord import tasks
from beam_tfrecord.keys import FeatureLayout, PixelLayout, RecordLayout
from beam_tfrecord.labels import AnyKind, ReadContext, Section
from beam_tfrecord.labels import kinds as label_kinds
from beam_tfrecord.names import index_path, is_array_record
from beam_tfrecord.output import outputs
from beam_tfrecord.plan.columns import ExtraColumn
from beam_tfrecord.summary import MixedPixels, SizeRange, Summary
from beam_tfrecord.write import array_record_files
from beam_tfrecord.write.tfrecord_files import FramingError, iter_records, parse_index

_LOGGER = logging.getLogger(__name__)

__all__ = [
    "RecordRange",
    "SplitFiles",
    "class_names",
    "iter_range",
    "plan_reads",
    "read_index",
    "split_files",
    "worker_shard",
]


@dataclass(frozen=True)
class SplitFiles:
    """What a reader needs to know about one split of an output directory."""

    schema: str
    labeled: bool
    class_names: list[str] | None
    paths: list[str]
    compression: str  # "GZIP" or "" as TFRecordDataset spells it
    records: int
    channels: int | None  # what the run forced with channels, if anything
    shard_bytes: int = 0  # the split's shard files together, as stored (gzip: compressed)
    features: FeatureLayout | None = None  # a feature-model run's stored features
    # (min, max) stored height and width over the run's records; None when nothing was stored.
    heights: tuple[int, int] | None = None
    widths: tuple[int, int] | None = None
    extra_columns: tuple[ExtraColumn, ...] = ()  # manifest columns stored in the records
    multi_label: bool = False  # label keys hold lists of class ids and names
    # The run's kinds of label (`labels.KINDS`' names), the key groups their records hold beside
    # the image's and the class's, and each kind's summary section (what its readers need).
    kinds: tuple[str, ...] = tasks.task(tasks.DEFAULT).kinds
    groups: tuple[str, ...] = ()
    sections: Mapping[str, Section] = field(default_factory=dict)
    file_format: str = "tfrecord"  # or "array_record": random access, read through its package
    # How the run's pictures past 8 bits are stored (keys.PixelLayout); None for 8-bit pictures,
    # and for a run of several kinds, which `mixed_pixels` then names (summary.MixedPixels).
    depth: PixelLayout | None = None
    mixed_pixels: str | None = None

    @property
    def random_access(self) -> bool:
        return self.file_format == "array_record"

    @property
    def one_size(self) -> bool:
        """Every stored image has the same size, so batches need no `image_size`."""
        return (self.heights is None or self.heights[0] == self.heights[1]) and (
            self.widths is None or self.widths[0] == self.widths[1]
        )

    @property
    def has_images(self) -> bool:
        return self.features is None or self.features.image

    @property
    def task(self) -> str:
        """The run's task, the one whose kinds of label its records hold."""
        return next((t.name for t in tasks.TASKS.values() if t.kinds == self.kinds), tasks.DEFAULT)

    @property
    def stored_size(self) -> tuple[int, int] | None:
        """The (height, width) every stored picture has, where they share one."""
        if self.one_size and self.heights and self.widths:
            return self.heights[0], self.widths[0]
        return None

    def context(self, where: str, kind: AnyKind) -> ReadContext:
        """What `kind`'s reader knows of this split (`where` names it in messages)."""
        names = tuple(self.class_names or ())
        return ReadContext(where, self.layout, names, self.sections.get(kind.name), self.stored_size)

    def check_targets_readable(self, output: str, reader: str) -> None:
        """A reader that hands out targets that lie on the picture (boxes, masks) cannot serve a
        `features_only` run (no picture): one clear error rather than a KeyError, or features
        without their targets."""
        held = [kind.held_as for kind in label_kinds(self.kinds) if kind.target_needs_image]
        if held and not self.has_images:
            raise ValueError(
                f"{output} is a features_only {self.task} run: its records hold features and {held[0]} "
                f"but no image, and {reader} hands out targets with an image. Read them with "
                "iter_examples(...) or load_dataset(..., features=True) (every stored key)"
            )

    @property
    def layout(self) -> RecordLayout:
        """Which keys the split's records hold (see `beam_tfrecord.keys`)."""
        columns = tuple((c.name, c.type) for c in self.extra_columns)
        return RecordLayout(
            self.schema, self.labeled, self.multi_label, columns, self.features, self.groups, self.depth
        )

    def check_one_kind_of_picture(self) -> None:
        """A reader that gives one tensor type cannot read a run of several kinds of pictures."""
        if self.mixed_pixels is not None:
            raise MixedPixels(self.mixed_pixels)


def _range(stats: SizeRange | None) -> tuple[int, int] | None:
    return (int(stats.min), int(stats.max)) if stats else None


def split_files(output_dir: str, split: str = "train", summary: Summary | None = None) -> SplitFiles:
    """The shards of `split` and how to parse them, from summary.json.

    Raises `IncompleteOutput` (the same words from every reader) for a folder without
    summary.json or with shard files it does not list, ValueError for an unknown split."""
    summary = summary if summary is not None else outputs.complete_summary(output_dir)
    if split not in summary.splits:
        raise ValueError(f"{output_dir} has no split {split!r}; it has {sorted(summary.splits)}")
    info = summary.splits[split]
    paths = [FileSystems.join(output_dir, name) for name in sorted(info.files)]
    layout = summary.record_layout(with_pixels=False)
    try:
        pixels, mixed = summary.pixel_layout(), None
    except MixedPixels:
        pixels, mixed = None, summary.pixel_mix()
    return SplitFiles(
        schema=layout.schema,
        labeled=layout.labeled,
        class_names=summary.class_names,
        paths=paths,
        compression="GZIP" if any(p.endswith(".gz") for p in paths) else "",
        records=info.records,
        channels=summary.forced_channels,
        shard_bytes=info.bytes,
        features=layout.features,
        heights=_range(summary.image_height),
        widths=_range(summary.image_width),
        extra_columns=tuple(ExtraColumn(c.name, c.type) for c in summary.extra_columns),
        multi_label=layout.multi_label,
        kinds=summary.kinds,
        groups=layout.groups,
        sections=summary.sections,
        file_format=summary.shard_format.file_format,
        depth=pixels,
        mixed_pixels=mixed,
    )


def class_names(output_dir: str) -> list[str] | None:
    """The label names in id order (labels.txt's lines), or None for an unlabeled run; no
    TensorFlow, so PyTorch jobs use it too."""
    return outputs.complete_summary(output_dir).class_names


def read_index(shard_path: str) -> list[tuple[int, int]] | None:
    """(offset, framed size) of every record of a shard from its `.idx`, or None where there is
    none (gzip shards, or output written before index files existed)."""
    path = index_path(shard_path)
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
            return parse_index(handle.read().decode("ascii"))
    except FramingError:
        raise
    except Exception:
        if FileSystems.exists(path):
            raise
        return None


@dataclass(frozen=True)
class RecordRange:
    """Records `start` (inclusive) to `stop` (exclusive) of one shard; `offset` is where record
    `start` begins (from the index), `stride`/`phase` keep every stride-th record from `phase`
    where there is no index to seek with. `stop` None: to the end."""

    path: str
    start: int = 0
    stop: int | None = None
    offset: int = 0
    stride: int = 1
    phase: int = 0


def worker_shard(rank: int, world_size: int, worker: int, workers: int) -> tuple[int, int]:
    """`(index, count)` of one DataLoader worker of one distributed rank: every (rank, worker)
    pair gets its own index, so the parts are disjoint and together cover every record."""
    if not (0 <= rank < world_size and 0 <= worker < workers):
        raise ValueError(f"rank {rank} of {world_size}, worker {worker} of {workers} is out of range")
    return rank * workers + worker, world_size * workers


def plan_reads(
    paths: Sequence[str], index: int, count: int, compressed: bool = False, records: int | None = None
) -> list[RecordRange]:
    """The part of a split that worker `index` of `count` reads; the parts are disjoint and
    together hold every record once.

    With `.idx` files the split's records are cut into `count` contiguous runs of nearly equal
    length (a run may cross shards), each read from its offset: balanced whatever the shard
    sizes, and each worker reads only its own bytes. Without them (gzip, older output): whole
    shards round-robin when there are at least as many shards as workers, else every worker
    reads every shard and keeps every `count`-th record.

    `records` (summary.json's count) guards the indexes: a stale or short `.idx` whose entries
    do not add up to it is not trusted (it would drop records silently); the shards are then
    read as if they had none. ArrayRecord shards are cut the same way, from their own counts.
    """
    if not 0 <= index < count:
        raise ValueError(f"shard=(index, count) needs 0 <= index < count, not ({index}, {count})")
    if paths and all(is_array_record(path) for path in paths):
        lengths = [array_record_files.count_records(path) for path in paths]
        return _contiguous(paths, lengths, index, count)  # its reader seeks by record number
    found = [] if compressed else [read_index(path) for path in paths]
    indexes = [entries for entries in found if entries is not None]
    usable = not compressed and len(indexes) == len(paths)  # every shard has its index
    total = sum(len(entries) for entries in indexes) if usable else 0
    if usable and records is not None and total != records:
        _LOGGER.warning(
            "the .idx files list %d records, summary.json %d: reading without them", total, records
        )
        usable = False
    if usable:
        return _contiguous(
            paths,
            [len(entries) for entries in indexes],
            index,
            count,
            lambda shard, record: indexes[shard][record][0],
        )
    if len(paths) >= count:
        return [RecordRange(path) for path in paths[index::count]]
    return [RecordRange(path, stride=count, phase=index) for path in paths]


def _contiguous(
    paths: Sequence[str],
    lengths: Sequence[int],
    index: int,
    count: int,
    offset_of: Callable[[int, int], int] = lambda shard, record: 0,
) -> list[RecordRange]:
    """Part `index` of `count` nearly equal contiguous runs of the records of `paths` (`lengths`
    records each; a run may cross shards), each from the byte offset of its first record
    (`offset_of(shard, record)`; 0 where the reader seeks by record number)."""
    total = sum(lengths)
    first, last = total * index // count, total * (index + 1) // count
    ranges, base = [], 0
    for shard, (path, length) in enumerate(zip(paths, lengths, strict=True)):
        start, stop = max(first - base, 0), min(last - base, length)
        if start < stop:
            ranges.append(RecordRange(path, start, stop, offset_of(shard, start)))
        base += length
    return ranges


def iter_range(part: RecordRange, compression: str = "") -> Iterator[bytes]:
    """The serialized records of one RecordRange, read through Beam's filesystems (local, gs://,
    and any other filesystem Beam knows); CRCs are checked. An ArrayRecord shard is read through
    its own package (local files only)."""
    if is_array_record(part.path):
        yield from array_record_files.iter_range(part.path, part.start, part.stop)
        return
    kind = CompressionTypes.GZIP if compression == "GZIP" else CompressionTypes.UNCOMPRESSED
    with FileSystems.open(part.path, compression_type=kind) as handle:
        if part.offset:
            handle.seek(part.offset)
        position = part.start
        for record in iter_records(handle):
            if part.stop is not None and position >= part.stop:
                return
            if (position - part.phase) % part.stride == 0:
                yield record
            position += 1
