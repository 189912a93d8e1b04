"""Checking a conversion's output the way a training job will meet it, and saying clearly what is wrong.

Every shard is read in full with TensorFlow (record framing and CRCs: TFRecordDataset raises
DataLossError), every record parsed with the schema's spec and its image decoded; then the
counts are compared with summary.json, the shard names and TFDS's dataset_info.json, and each
`.idx` with the record headers it indexes. gs:// output under a GCS emulator is read through
Beam's filesystems (`tf_data.record_dataset`), since TensorFlow's GCS client cannot be pointed
at one.
"""

from __future__ import annotations

import dataclasses
import io
import json
import posixpath
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf
from apache_beam.io.filesystems import FileSystems
from google.protobuf.message import DecodeError
from PIL import Image

from beam_tfrecord import gcs, names, storage
from beam_tfrecord.edges import ByKind
from beam_tfrecord.keys import FACTS, PixelLayout, RecordLayout, key_of, record_keys, table
from beam_tfrecord.labels import Checks
from beam_tfrecord.labels import kinds as label_kinds
from beam_tfrecord.labels.base import tf_message
from beam_tfrecord.names import LABELS_FILE, REJECTS_FILE, SUMMARY_FILE, TFDS_INFO_FILE
from beam_tfrecord.output.outputs import unfinished_message
from beam_tfrecord.read.files import read_index
from beam_tfrecord.read.tf_data import decode_pixels, record_dataset, traced_as_written
from beam_tfrecord.summary import MixedPixels, Summary, SummaryError, read_summary
from beam_tfrecord.write import schema as schema_lib
from beam_tfrecord.write.messages import Example
from beam_tfrecord.write.tfrecord_files import FramingError, index_records

__all__ = [
    "TRUE_COLOUR",
    "OutputReport",
    "Sample",
    "format_report",
    "preview_bands",
    "preview_note",
    "preview_png",
    "verify_output",
]


@dataclass(frozen=True)
class Sample:
    """One record picked for the contact sheet: its caption (`class_name`: its classes, or its
    first caption), its stored picture, and what each kind of label draws of it, by kind name
    (`labels.LabelKind.draw`: a detection record's boxes, names and masks, a segmentation
    record's class-id mask, a keypoints record's points)."""

    split: str
    filename: str
    class_name: str | None
    encoded: bytes
    labels: ByKind = field(default_factory=dict)


@dataclass
class OutputReport:
    """What reading every shard found; `errors` empty means the output is sound."""

    summary: Summary | None  # None when the folder has none (an error says so)
    errors: list[str] = field(default_factory=list)
    records: Counter[str] = field(default_factory=Counter)  # split -> n
    by_split_label: Counter[tuple[str, str | None]] = field(default_factory=Counter)  # (split, label) -> n
    sizes: Counter[tuple[int, ...]] = field(default_factory=Counter)  # (height, width) -> n
    channels: Counter[int] = field(default_factory=Counter)
    shard_lengths: dict[str, list[int]] = field(default_factory=dict)  # split -> per shard
    shard_bytes: Counter[str] = field(default_factory=Counter)  # split -> bytes
    samples: list[Sample] = field(default_factory=list)
    tfds_metadata: bool = False


def list_shards(output: str) -> dict[str, list[tuple[str, int]]]:
    """split -> sorted (file name, size) of every file named like a shard directly under `output`."""
    (result,) = FileSystems.match([FileSystems.join(output, "*")])
    found: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for metadata in result.metadata_list:
        match = names.SHARD_NAME.match(posixpath.basename(metadata.path))
        if match:
            found[match["split"]].append((posixpath.basename(metadata.path), metadata.size_in_bytes))
    return {split: sorted(files) for split, files in sorted(found.items())}


def check_shard_names(found: Mapping[str, list[tuple[str, int]]], summary: Summary) -> list[str]:
    """Shard names against each other and the summary: `-of-N` is the file count, no index missing."""
    errors = []
    shard_format = summary.shard_format
    for split in sorted(set(found) - set(summary.splits)):
        errors.append(f"split {split}: {len(found[split])} shard files, but summary.json has no such split")
    for split, info in summary.splits.items():
        files = [name for name, _ in found.get(split, [])]
        if not files:
            errors.append(f"split {split}: no shard file found (summary.json lists {info.shards})")
            continue
        # (Every name matches: list_shards keeps only those that do.)
        parsed = [match for match in map(names.SHARD_NAME.match, files) if match is not None]
        counts = sorted({int(m["count"]) for m in parsed})
        if len(counts) > 1:
            errors.append(f"split {split}: shard names disagree on the shard count: -of- {counts}")
        count = counts[-1]
        if count != len(files):
            errors.append(
                f"split {split}: names say {count} shards (-of-{count:05d}), {len(files)} files found"
            )
        missing = sorted(set(range(count)) - {int(m["index"]) for m in parsed})
        if missing:
            shown = ", ".join(names.shard_name(split, i, count, shard_format) for i in missing[:5])
            errors.append(f"split {split}: missing shard {shown}")
        if info.shards != len(files):
            errors.append(f"split {split}: summary.json says {info.shards} shards, {len(files)} files found")
        if sorted(info.files) != files:
            extra = sorted(set(files) - set(info.files))
            if extra:
                errors.append(f"split {split}: files not in summary.json: {', '.join(extra[:5])}")
        wrong = [name for name in files if names.shard_format_of(name) != shard_format]
        if wrong:
            errors.append(f"split {split}: {wrong[0]} does not match the run's file format and compression")
    return errors


# The facts of a record that are its picture's, not its labels'.
_PICTURE_FACTS = frozenset({"shape", "stored", "filename", "encoded", "pixels"})


class _Sampler:
    """A seeded reservoir sample over every record read, so a sample costs no second pass."""

    def __init__(self, size: int, seed: int) -> None:
        self.size, self.seen, self.rng = size, 0, random.Random(seed)
        self.items: list[Sample] = []

    def wants(self) -> int | None:
        """The slot the next record would take, or None; call once per record."""
        self.seen += 1
        if len(self.items) < self.size:
            return len(self.items)
        slot = self.rng.randrange(self.seen)
        return slot if slot < self.size else None

    def put(self, slot: int, sample: Sample) -> None:
        if slot == len(self.items):
            self.items.append(sample)
        else:
            self.items[slot] = sample


def _facts_fn(layout: RecordLayout) -> Callable[[tf.Tensor], dict[str, tf.Tensor]]:
    """Per record: the decoded shape, the stored shape, the name, the stored picture (`encoded`;
    a picture past 8 bits: its samples, `pixels`) and every key the kinds of label store (their
    checks read them); every key of the layout must parse (a feature run's features with their
    recorded length)."""
    spec = schema_lib.parse_spec(layout)
    key = {name: key_of(layout, name) for name in ("image", "height", "width", "channels", "filename")}
    unlabelled = {k.name for k in table(layout.schema).image} | {n for n, _ in layout.extra_columns}
    labelled = [
        k for k in record_keys(layout) if k.name not in unlabelled and not k.name.startswith("features")
    ]

    def facts(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_single_example(serialized, spec)
        result = {
            "stored": tf.stack([parsed[key["height"]], parsed[key["width"]], parsed[key["channels"]]]),
            "filename": parsed[key["filename"]],
        }
        if layout.depth is not None:  # a picture past 8 bits: its samples (previewed if sampled)
            image = result["pixels"] = _samples(parsed, layout.depth, layout.schema)
        else:
            result["encoded"] = parsed[key["image"]]
            image = tf.io.decode_image(result["encoded"], expand_animations=False)
        result["shape"] = tf.shape(image, out_type=tf.int64)[-3:]
        result |= {k.name: parsed[k.key] for k in labelled}
        return result

    return facts


def _samples(parsed: Mapping[str, tf.Tensor], pixels: PixelLayout, schema: str) -> tf.Tensor:
    """A picture past 8 bits as stored: an array, or a 16-bit PNG in its own bands (a run of gray
    and RGB ones reads them all as RGB in load_dataset, as it does 8-bit ones; each record must
    hold the bands it says)."""
    if pixels.array or pixels.additional:  # (the OD API's bands: RGB and one PNG a band past it)
        return decode_pixels(parsed, pixels, schema)
    return tf.io.decode_png(parsed[key_of(schema, "image")], channels=0, dtype=tf.uint16)


def _own_layout(serialized: bytes, layout: RecordLayout) -> RecordLayout:
    """A record's layout in a run of several kinds of pictures (`summary.MixedPixels`): the run's
    keys, with the pixel keys its own picture holds (none for an 8-bit one), as iter_examples
    reads it. A record that is no Example keeps the run's, and fails to parse with it."""
    keys = table(layout.schema)
    assert keys.pixel_dtype is not None
    try:
        stored = Example.FromString(serialized).features.feature
    except DecodeError:
        return layout
    if keys.pixel_dtype.key not in stored:
        return layout
    dtype = bytes(stored[keys.pixel_dtype.key].bytes_list.value[0]).decode("utf-8", "replace")
    value, shape = keys.pixel_array
    if value.key in stored:
        dims = tuple(stored[shape.key].int64_list.value) or (0,)
        depth = PixelLayout(dtype, int(dims[-1]), True, len(dims) == 4)
    else:
        channels = stored[key_of(layout, "channels")].int64_list.value
        depth = PixelLayout(dtype, int(channels[0]) if channels else 1, False)
    facts = tuple(name for name, fact in FACTS.items() if keys.facts_prefix + fact.key in stored)
    return dataclasses.replace(layout, depth=dataclasses.replace(depth, facts=facts))


def _facts_of(
    path: str, compression: str, layout: RecordLayout, mixed: bool
) -> Iterator[dict[str, tf.Tensor]]:
    """The facts (`_facts_fn`) of every record of a shard, in order: mapped over the shard, or,
    in a run of several kinds of pictures, each record by its own layout (one traced function
    per kind)."""
    records = record_dataset(path, compression)
    if not mixed:
        mapped = traced_as_written(_facts_fn(layout))
        yield from records.map(mapped, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return
    functions: dict[RecordLayout, Callable[[tf.Tensor], dict[str, tf.Tensor]]] = {}
    for serialized in records:
        own = _own_layout(serialized.numpy(), layout)
        if own not in functions:
            functions[own] = tf.function(traced_as_written(_facts_fn(own)))
        yield functions[own](serialized)


# Band orders the preview knows by their count, shown as true colour: Sentinel-2's 13 bands
# (B1..B8, B8A, B9..B12, as ESA's L1C products and EuroSAT hold them) as bands 4-3-2 (B4 red, B3
# green, B2 blue). Any other count shows its first three bands, or its first.
TRUE_COLOUR: dict[int, tuple[tuple[int, ...], str]] = {13: ((3, 2, 1), "bands 4-3-2 as RGB")}


def preview_bands(bands: int) -> tuple[int, ...]:
    """Which of a picture's `bands` its preview shows (as RGB, or as gray where one)."""
    if bands in TRUE_COLOUR:
        return TRUE_COLOUR[bands][0]
    return (0, 1, 2) if bands >= 3 else (0,)


def preview_note(summary: Summary) -> str | None:
    """What the contact sheet's title says of a run's pictures past 8 bits, so no one takes a
    preview's brightness for the samples': each stretched to its own range, which bands show,
    a stack's first page. None for a run of 8-bit pictures, drawn as stored."""
    try:
        pixels = summary.pixel_layout()
    except MixedPixels:
        return "pictures past 8 bits contrast-stretched, each to its own range"
    if pixels is None:
        return None
    said = ["each picture contrast-stretched to its own range"]
    if pixels.bands in TRUE_COLOUR:
        said.append(TRUE_COLOUR[pixels.bands][1])
    elif pixels.bands > 3:
        said.append(f"bands 1-2-3 of {pixels.bands} as RGB")
    elif pixels.bands == 2:
        said.append("band 1 of 2")
    if pixels.stacked:
        said.append("first page of each stack")
    return ", ".join(said)


def preview_png(pixels: np.ndarray) -> bytes:
    """An 8-bit PNG the contact sheet draws of a picture past 8 bits ([H, W, C] or [D, H, W, C]):
    its first page, the bands `preview_bands` shows (a complex sample's magnitude), the
    picture's own finite range of them stretched to 0..255, NaN and infinities as its minimum.
    Made only for the sampled records."""
    if pixels.ndim == 4:
        pixels = pixels[0]
    shown = pixels[..., list(preview_bands(pixels.shape[-1]))]
    values = (np.abs(shown) if np.iscomplexobj(shown) else shown).astype(np.float32)
    finite = np.isfinite(values)
    low = values[finite].min() if finite.any() else np.float32(0)
    high = values[finite].max() if finite.any() else np.float32(0)
    scale = np.float32(255.0) / np.float32(max(high - low, 1e-12))
    stretched = (np.where(finite, values, low) - low) * scale
    eight = np.clip(np.round(stretched), 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(eight[..., 0] if eight.shape[-1] == 1 else eight).save(buffer, format="PNG")
    return buffer.getvalue()


def _explain(path: str, index: int, compression: str, layout: RecordLayout, mixed: bool = False) -> str:
    """Which step failed on record `index` of a shard: parsing with the spec, or decoding (in a
    run of several kinds of pictures, `mixed`, by the record's own layout)."""
    raw = next(iter(record_dataset(path, compression).skip(index).take(1)))
    if mixed:
        layout = _own_layout(raw.numpy(), layout)
    try:
        parsed = tf.io.parse_single_example(raw, schema_lib.parse_spec(layout))
    except tf.errors.InvalidArgumentError as error:
        return f"does not parse with the {layout.schema} schema's spec: {tf_message(error)}"
    try:
        if layout.depth is not None:
            _samples(parsed, layout.depth, layout.schema)
        else:
            tf.io.decode_image(parsed[key_of(layout, "image")], expand_animations=False)
    except tf.errors.InvalidArgumentError as error:
        return f"its image does not decode: {tf_message(error)}"
    return "fails to read"


def read_shard(
    path: str,
    split: str,
    report: OutputReport,
    sampler: _Sampler,
    checks: Mapping[str, Checks[object]],
) -> bool:
    """Read one shard in full into `report`; False (with an error recorded) if it cannot be."""
    summary = report.summary
    assert summary is not None
    name = posixpath.basename(path)
    compression = "GZIP" if name.endswith(".gz") else ""
    try:
        layout, mixed = summary.record_layout(), False
    except MixedPixels:  # pictures of several kinds: each record read by its own pixel keys
        layout, mixed = summary.record_layout(with_pixels=False), True
    if not layout.has_image:  # the features are checked against their length where an image is
        layout = layout.without_features()
    count = 0
    try:
        for facts in _facts_of(path, compression, layout, mixed):
            shape, stored = tuple(facts["shape"].numpy()), tuple(facts["stored"].numpy())
            filename = facts["filename"].numpy().decode("utf-8", "replace")
            if shape != stored:
                report.errors.append(
                    f"{name} record {count} ({filename}): decodes to {shape}, stored {stored}"
                )
            labels: tuple[str | None, ...] = (None,)
            label: str | None = None
            drawn: dict[str, object] = {}
            values = {k: v.numpy() for k, v in facts.items() if k not in _PICTURE_FACTS}
            where = f"{name} record {count} ({filename})"
            for kind_name, check in checks.items():
                found = check.record(values, shape, where, report.errors)
                labels = found.classes if found.classes is not None else labels
                label = found.shown if found.shown is not None else label
                if found.drawn is not None:
                    drawn[kind_name] = found.drawn
            report.records[split] += 1
            for one in labels:  # a multi-label record counts for each of its classes
                report.by_split_label[(split, one)] += 1
            report.sizes[shape[:2]] += 1
            report.channels[shape[2]] += 1
            slot = sampler.wants()
            if slot is not None:
                shown = (
                    facts["encoded"].numpy() if "encoded" in facts else preview_png(facts["pixels"].numpy())
                )
                sampler.put(slot, Sample(split, filename, label, shown, drawn))
            count += 1
    except tf.errors.DataLossError as error:
        first = tf_message(error)
        report.errors.append(f"{name}: record {count} is corrupt (bad CRC or framing: {first})")
        return False
    except tf.errors.InvalidArgumentError:
        why = _explain(path, count, compression, layout, mixed)
        report.errors.append(f"{name}: record {count} {why}")
        return False
    report.shard_lengths.setdefault(split, []).append(count)
    if names.shard_format_of(name) == names.TFRECORD:
        report.errors += check_index(path)
    return True


def check_index(path: str) -> list[str]:
    """A shard's `.idx` must give every record's offset and framed size, as its headers do (a
    reader that seeks by it would otherwise read garbage). No `.idx` is not an error: output
    written before index files existed has none."""
    name = posixpath.basename(path)
    try:
        entries = read_index(path)
    except (FramingError, ValueError) as error:
        return [f"{name}.idx cannot be read: {error}"]
    if entries is None:
        return []
    expected, position = [], 0
    for size in index_records(path):
        expected.append((position, size))
        position += size
    if entries != expected:
        return [f"{name}.idx does not match the shard ({len(entries)} entries, {len(expected)} records)"]
    return []


def check_counts(report: OutputReport, broken: set[str], checks: Mapping[str, Checks[object]]) -> list[str]:
    """What was read against summary.json, for the splits whose every shard was read to its end."""
    summary, errors = report.summary, []
    assert summary is not None
    for split, info in summary.splits.items():
        if split in broken:
            errors.append(f"split {split}: counts not compared, a shard could not be read to its end")
            continue
        if report.records[split] != info.records:
            errors.append(
                f"split {split}: {report.records[split]} records read, summary.json says {info.records}"
            )
            continue  # the per-label counts would only repeat it
        for label, expected in info.labels.items():
            if report.by_split_label[(split, label)] != expected:
                found = report.by_split_label[(split, label)]
                errors.append(
                    f"split {split} label {label}: {found} records read, summary.json says {expected}"
                )
    if not broken and sum(report.records.values()) != summary.records:
        errors.append(f"{sum(report.records.values())} records read, summary.json says {summary.records}")
    if not broken:  # each kind's counts against its summary section
        for check in checks.values():
            errors += check.against_summary()
    return errors


def check_tfds_info(output: str, report: OutputReport, broken: set[str]) -> list[str]:
    """dataset_info.json's per-shard counts must be the real ones: TFDS asserts them when reading."""
    path = FileSystems.join(output, TFDS_INFO_FILE)
    if not FileSystems.exists(path):
        return []
    report.tfds_metadata = True
    errors = []
    for split in json.loads(storage.read_text(path)).get("splits", []):
        name = split["name"]
        lengths = [int(n) for n in split.get("shardLengths", [])]
        if name not in broken and lengths != report.shard_lengths.get(name, []):
            errors.append(
                f"{TFDS_INFO_FILE}: split {name} shard lengths {lengths}, "
                f"files hold {report.shard_lengths.get(name)}"
            )
    if not errors and not broken and not (storage.is_gcs(output) and gcs.emulator_host()):
        errors += _tfds_loads(output)  # TFDS reads through TensorFlow's GCS client: no emulator
    return errors


def _tfds_loads(output: str) -> list[str]:
    """The conversion writes TFDS metadata without loading it back; inspect does load a record
    (ArrayRecord output through `as_data_source`, the way TFDS reads that format)."""
    import tensorflow_datasets as tfds

    try:
        builder = tfds.builder_from_directory(output)
        split = next((name for name, info in builder.info.splits.items() if info.num_examples), None)
        if split is not None and builder.info.file_format.value == "array_record":
            builder.as_data_source(split)[0]
        elif split is not None:
            for _ in builder.as_dataset(split=f"{split}[:1]"):
                pass
    except Exception as error:
        return [f"TFDS cannot load the output: {type(error).__name__}: {error}"]
    return []


def check_side_files(output: str, summary: Summary) -> list[str]:
    """labels.txt holds the class names in id order; rejects.jsonl one line per reject or skip."""
    errors = []
    class_names = summary.class_names
    labels_path = FileSystems.join(output, LABELS_FILE)
    if class_names is not None:
        if not FileSystems.exists(labels_path):
            errors.append(f"{LABELS_FILE} is missing")
        elif storage.read_text(labels_path).splitlines() != list(class_names):
            errors.append(f"{LABELS_FILE} does not list summary.json's class names")
    rejects_path = FileSystems.join(output, REJECTS_FILE)
    if not FileSystems.exists(rejects_path):
        errors.append(f"{REJECTS_FILE} is missing")
    else:
        lines = len(storage.read_text(rejects_path).splitlines())
        expected = summary.rejects + summary.skipped
        if lines != expected:
            errors.append(
                f"{REJECTS_FILE} has {lines} lines, summary.json counts {expected} rejects and skips"
            )
    return errors


def verify_output(output: str, sample: int = 32, seed: int = 0) -> OutputReport:
    """Read everything under `output` and compare; the report's `errors` say what is wrong."""
    summary_path = FileSystems.join(output, SUMMARY_FILE)
    if not FileSystems.exists(summary_path):
        report = OutputReport(summary=None)
        report.errors.append(unfinished_message(output))
        return report
    try:
        summary = read_summary(output)
    except SummaryError as error:
        return OutputReport(summary=None, errors=[str(error)])
    report = OutputReport(summary=summary)
    found = list_shards(output)
    report.errors += check_shard_names(found, summary)
    report.errors += check_side_files(output, summary)
    sampler = _Sampler(sample, seed)
    names = tuple(summary.class_names) if summary.class_names is not None else None
    checks = {
        kind.name: kind.checks(names, summary.sections.get(kind.name)) for kind in label_kinds(summary.kinds)
    }
    broken = set()
    for split, files in found.items():
        for name, size in files:
            report.shard_bytes[split] += size
            if not read_shard(FileSystems.join(output, name), split, report, sampler, checks):
                broken.add(split)
    report.errors += check_counts(report, broken, checks)
    report.errors += check_tfds_info(output, report, broken)
    report.samples = sorted(sampler.items, key=lambda s: (s.class_name or "", s.split, s.filename))
    return report


def _stats(values: Counter[int]) -> str:
    total = sum(values.values())
    if not total:
        return "-"
    mean = sum(v * n for v, n in values.items()) / total
    return f"{min(values)} to {max(values)}, mean {mean:.1f}"


def format_report(report: OutputReport) -> str:
    """What was read, as an aligned table: records per split and label, sizes, rejects, checks."""
    summary, rows = report.summary, []
    for split in summary.splits if summary is not None else {}:
        mb = report.shard_bytes[split] / 1e6
        shards = len(report.shard_lengths.get(split, []))
        rows.append(
            (f"split {split}", f"{report.records[split]} records in {shards} shards read, {mb:.1f} MB")
        )
        for (name, label), n in sorted(report.by_split_label.items(), key=str):
            if name == split and label is not None:
                rows.append((f"  {label}", str(n)))
    listed = summary.records if summary is not None else "?"
    rows.append(("records", f"{sum(report.records.values())} (summary.json: {listed})"))
    heights: Counter[int] = Counter()
    widths: Counter[int] = Counter()
    for (h, w), n in report.sizes.items():
        heights[h] += n
        widths[w] += n
    rows.append(("image height", _stats(heights)))
    rows.append(("image width", _stats(widths)))
    common = ", ".join(f"{w}x{h} ({n})" for (h, w), n in report.sizes.most_common(5))
    rows.append(("most common sizes (WxH)", common or "-"))
    rows.append(("channels", ", ".join(f"{c} ({n})" for c, n in sorted(report.channels.items())) or "-"))
    rows.append(("rejects", str(summary.rejects if summary is not None else "?")))
    for reason, n in (summary.rejects_per_reason if summary is not None else {}).items():
        rows.append((f"  {reason}", str(n)))
    rows.append(("TFDS metadata", "dataset_info.json, features.json" if report.tfds_metadata else "none"))
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"{key.ljust(width)}  {value}" for key, value in rows)
