"""The least work that writes this project's detection records, for the floor of issue 28's goal
of 500 us of CPU a photo outside the validating decode.

A plain converter with nothing but the steps whose output is in the files: the COCO file loaded
whole with `json.load`; per photo the bytes read, their sha256 (`image/key/sha256`), the same
validating decode this project makes (Pillow, JPEGs at 1/8 DCT scale, in one call), the boxes
normalised and clipped to the picture, the `tf.train.Example` filled through protobuf and
serialized deterministically, its sha256 (the summary's digest), TFRecord framing with CRC32C, the
write and the `.idx` offsets. Two threads by default, each writing its own file, so that nothing
is handed from thread to thread.

It checks nothing else: no JPEG segment walk, no EXIF, no box placement beyond clipping to the
picture, no change, dropped-object or reject lines, no duplicate table, no resume ledger, no split, no
plan staged for other workers. It reads only the data `benchmarks/photos.py` makes, whose
annotations are all valid, and `--compare` checks that its records are byte for byte the records
of `python -m pipelines.convert` on the same data (as a multiset: the shards differ).

`--checked` keeps the least work's record path (the boxes, the Example, the framing) and puts
this project's checks and plan in front of it: the launcher's `prepare` (the COCO file read and
checked annotation by annotation, the plan made and staged, the file index's digests), and per
staged shard task `load_shard_task`, then per photo the read and `encode_for_tensorflow` (the JPEG
segment walk, the decode, EXIF, the change reasons, the extension); the boxes are placed inline
with placement's rules for a picture kept as it is (clipped, a note when an edge moved, a drop with
a reason), and the summary's counts are kept. A photo the library re-encodes, or whose boxes need
more than that, goes through the library's own steps. With no runner and the record path at its
least, what it costs over the least work is what the checks and the plan cost.

`--library` runs the same loop with this project's own steps in place of the plain ones: the
launcher's `prepare`, and per staged shard task `load_shard_task`, `prepare_input` (the read, the JPEG
segment walk, the decode, EXIF, the boxes placed, the sha256), `finish_record` (the Example, its
sha256) and the tally, each thread writing whole shard tasks. It leaves out Beam, the hand-off of
records between threads and the output's bookkeeping: the `.idx` files, the resume ledger, the
reject, change and duplicate lines, the file index's rows and `summary.json`.

Between the four (the least work, `--checked`, `--library`, `pipelines.convert`) the CPU a photo
splits into what the output needs, what the product's checks and plan add, what the library's
layered steps add over the least record path, and what the runner and the bookkeeping add.

    python benchmarks/least_work.py --image_dir DIR --instances FILE --output OUT [--threads 2]
        [--checked | --library] [--compare OURS_OUTPUT]

`benchmarks/cpu_split.py --tool least_work` splits its CPU by library, as for the other tools.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import hashlib
import io
import json
import os
import struct
import sys
from collections.abc import Iterator, Sequence
from math import isfinite
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE)]

import google_crc32c  # noqa: E402
from PIL import Image  # noqa: E402

from beam_tfrecord import compat  # noqa: E402
from beam_tfrecord.write.messages import Example  # noqa: E402

# TFRecord's framing and the summary's digest, written out here as a plain converter would
# (beam_tfrecord.write.tfrecord_files and write.tally hold the project's own).
_MASK_DELTA = 0xA282EAD8
_DIGEST_MODULUS = 2**256


def _masked_crc(data: bytes) -> bytes:
    crc = google_crc32c.value(data)
    return struct.pack("<I", (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF)


def _frame(record: bytes) -> bytes:
    length = struct.pack("<Q", len(record))
    return length + _masked_crc(length) + record + _masked_crc(record)


def load_plan(instances: str) -> tuple[list[tuple[dict, list[dict]]], dict[int, tuple[int, bytes]]]:
    """(image entry, its annotations in file order) per image, and category id -> (label, name):
    labels are 1-based in category id order, as this project numbers a COCO file's classes."""
    with open(instances, encoding="utf-8") as handle:
        coco = json.load(handle)
    ordered = sorted(coco["categories"], key=lambda c: c["id"])
    categories = {c["id"]: (rank + 1, c["name"].encode()) for rank, c in enumerate(ordered)}
    by_image: dict[Any, list[dict]] = collections.defaultdict(list)
    for annotation in coco["annotations"]:
        by_image[annotation["image_id"]].append(annotation)
    return [(image, by_image.pop(image["id"], [])) for image in coco["images"]], categories


def convert(
    data: bytes, image_entry: dict, annotations: Sequence[dict], categories: dict[int, tuple[int, bytes]]
) -> bytes:
    """One photo's serialized record."""
    sha256 = hashlib.sha256(data).hexdigest()
    image = Image.open(io.BytesIO(data), formats=["JPEG"])
    width, height = image.size
    image.draft(image.mode, ((width + 7) // 8, (height + 7) // 8))
    compat.decode_in_one_call(image, len(data))
    image.load()  # the validating decode: raises on a broken file
    boxes = _Boxes()
    for annotation in annotations:
        x, y, w, h = annotation["bbox"]
        right, bottom = x + w, y + h
        left, top = max(x, 0.0), max(y, 0.0)
        kept_right, kept_bottom = min(right, width), min(bottom, height)
        boxes.xmin.append(left / width)
        boxes.ymin.append(top / height)
        boxes.xmax.append(kept_right / width)
        boxes.ymax.append(kept_bottom / height)
        # A clipped box keeps the part of the source's area that its kept box keeps.
        kept = (kept_right - left) * (kept_bottom - top) / ((right - x) * (bottom - y))
        boxes.areas.append(annotation["area"] * min(1.0, kept))
        label, text = categories[annotation["category_id"]]
        boxes.labels.append(label)
        boxes.texts.append(text)
        boxes.crowd.append(annotation.get("iscrowd", 0))
    head = (image_entry["file_name"].encode(), str(image_entry["id"]).encode(), sha256.encode())
    return example_bytes(data, b"jpeg", *head, height, width, 3, boxes)


class _Boxes:
    """A record's object columns, as the Example stores them."""

    def __init__(self) -> None:
        self.xmin: list[float] = []
        self.ymin: list[float] = []
        self.xmax: list[float] = []
        self.ymax: list[float] = []
        self.areas: list[float] = []
        self.labels: list[int] = []
        self.texts: list[bytes] = []
        self.crowd: list[int] = []


def example_bytes(
    data: bytes,
    image_format: bytes,
    filename: bytes,
    source_id: bytes,
    sha256: bytes,
    height: int,
    width: int,
    channels: int,
    boxes: _Boxes,
) -> bytes:
    """The record, filled through protobuf and serialized as the project serializes it."""
    zeros = [0] * len(boxes.labels)
    example = Example()
    feature = example.features.feature
    feature["image/encoded"].bytes_list.value.append(data)
    feature["image/format"].bytes_list.value.append(image_format)
    feature["image/filename"].bytes_list.value.append(filename)
    feature["image/source_id"].bytes_list.value.append(source_id)
    feature["image/key/sha256"].bytes_list.value.append(sha256)
    feature["image/height"].int64_list.value.append(height)
    feature["image/width"].int64_list.value.append(width)
    feature["image/channels"].int64_list.value.append(channels)
    feature["image/object/bbox/xmin"].float_list.value.extend(boxes.xmin)
    feature["image/object/bbox/ymin"].float_list.value.extend(boxes.ymin)
    feature["image/object/bbox/xmax"].float_list.value.extend(boxes.xmax)
    feature["image/object/bbox/ymax"].float_list.value.extend(boxes.ymax)
    feature["image/object/area"].float_list.value.extend(boxes.areas)
    feature["image/object/class/label"].int64_list.value.extend(boxes.labels)
    feature["image/object/class/text"].bytes_list.value.extend(boxes.texts)
    feature["image/object/is_crowd"].int64_list.value.extend(boxes.crowd)
    feature["image/object/difficult"].int64_list.value.extend(zeros)
    feature["image/object/truncated"].int64_list.value.extend(zeros)
    feature["image/object/view"].bytes_list.value.extend([b""] * len(zeros))
    return example.SerializeToString(deterministic=True)


def read_bytes(path: str) -> bytes:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        return os.read(descriptor, os.fstat(descriptor).st_size)
    finally:
        os.close(descriptor)


def write_part(
    part: Sequence[tuple[dict, list[dict]]],
    image_dir: str,
    categories: dict[int, tuple[int, bytes]],
    path: str,
) -> tuple[int, int]:
    """One thread's photos into one file and its `.idx`: (records, sum of their sha256)."""
    with _Writer(path) as writer:
        for image_entry, annotations in part:
            data = read_bytes(os.path.join(image_dir, image_entry["file_name"]))
            writer.write(convert(data, image_entry, annotations, categories))
    return writer.count, writer.digest


class _Writer:
    """One TFRecord file and its `.idx`, and the summary's digest of what went in."""

    def __init__(self, path: str) -> None:
        self.path, self.count, self.digest = path, 0, 0
        self._offsets: list[str] = []
        self._offset = 0

    def __enter__(self) -> _Writer:
        self._out = open(self.path, "wb")  # closed by __exit__
        return self

    def write(self, record: bytes) -> None:
        self.digest = (self.digest + int.from_bytes(hashlib.sha256(record).digest())) % _DIGEST_MODULUS
        framed = _frame(record)
        self._out.write(framed)
        self._offsets.append(f"{self._offset} {len(framed)}\n")
        self._offset += len(framed)
        self.count += 1

    def __exit__(self, *exc: object) -> None:
        self._out.close()
        with open(self.path + ".idx", "w") as index:
            index.writelines(self._offsets)


def library_run(image_dir: str, instances: str, output: str, threads: int) -> tuple[int, int]:
    """This project's steps, without Beam: (records, sum of their sha256)."""
    from beam_tfrecord.elements import RejectLine, ShardKey
    from beam_tfrecord.images.inputs import prepare_input
    from beam_tfrecord.labels import RunLabels
    from beam_tfrecord.output.mode import OutputKind, OutputMode
    from beam_tfrecord.pipeline import prepare
    from beam_tfrecord.plan import staging
    from beam_tfrecord.write import tally as tally_lib
    from beam_tfrecord.write.records import finish_record
    from beam_tfrecord.write.tfrecord_files import write_record
    from pipelines.options import check_options, parse_options

    argv = ["--input", image_dir, "--output", output, "--annotations", "coco"]
    argv += [f"--annotations_path=train={instances}", "--runner=DirectRunner"]
    settings = check_options(parse_options(argv))
    config = settings.config
    staged = prepare(
        settings.source, config, mode=OutputMode(OutputKind.OVERWRITE), parallelism=threads, round_robin=True
    )
    shard_tasks = staging.list_shard_task_files(staged.plan_dir)

    def run_shard_tasks(part: int) -> tally_lib.Tally:
        tally = tally_lib.Tally()
        for number, path in enumerate(shard_tasks[part::threads]):
            shard_task = staging.load_shard_task(path)
            shard = ShardKey(shard_task.split, shard_task.index, shard_task.count)
            labels = RunLabels.of(shard_task.kinds, shard_task.settings)
            with open(os.path.join(output, f"library-{part}-{number}.tfrecord"), "wb") as out:
                for item in shard_task.inputs:
                    pending = prepare_input(item, config.image, shard, labels=labels)
                    if isinstance(pending, RejectLine):
                        tally.add(pending)
                        continue
                    record = finish_record(config.schema, pending)
                    write_record(out, record.example)
                    tally.add(record)
        return tally

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        tallies = list(pool.map(run_shard_tasks, range(threads)))
    total = tallies[0]
    for other in tallies[1:]:
        total.merge(other)
    return sum(total.records.values()), sum(total.digests.values()) % _DIGEST_MODULUS


def checked_run(image_dir: str, instances: str, output: str, threads: int) -> tuple[int, int, int]:
    """The project's checks and plan with the least work's record path: (records, sum of their
    sha256, photos that went through the library's steps). The launcher's `prepare` (the COCO file
    read and checked, the plan staged); per staged shard task `load_shard_task`; per photo the read and
    `encode_for_tensorflow` (the JPEG segment walk, the decode, EXIF, the change reasons, the
    extension), then the boxes placed inline as the placement places them in a picture whose
    geometry is unchanged (clipped, a note when an edge moved, a drop with a reason), the record
    through `example_bytes`, and what the summary counts (counted, not written). Any other photo
    goes through the library's own steps, and is counted: the benchmark sets should have none."""
    from beam_tfrecord.elements import PlannedInput, RejectLine, ShardKey, ShardTask
    from beam_tfrecord.images.inputs import prepare_input
    from beam_tfrecord.images.inputs import read_bytes as read_input
    from beam_tfrecord.images.normalize import encode_for_tensorflow
    from beam_tfrecord.labels import RunLabels
    from beam_tfrecord.labels.geometry import identity_transform
    from beam_tfrecord.labels.objects import size_bucket
    from beam_tfrecord.output.mode import OutputKind, OutputMode
    from beam_tfrecord.pipeline import prepare
    from beam_tfrecord.plan import staging
    from beam_tfrecord.reasons import Reject
    from beam_tfrecord.write.records import finish_record
    from pipelines.options import check_options, parse_options

    argv = ["--input", image_dir, "--output", output, "--annotations", "coco"]
    argv += [f"--annotations_path=train={instances}", "--runner=DirectRunner"]
    settings = check_options(parse_options(argv))
    config = settings.config
    options = config.image
    staged = prepare(
        settings.source, config, mode=OutputMode(OutputKind.OVERWRITE), parallelism=threads, round_robin=True
    )
    shard_tasks = staging.list_shard_task_files(staged.plan_dir)

    def place(
        item: PlannedInput, width: int, height: int, ids: dict[str, int], counts: collections.Counter
    ) -> _Boxes | None:
        """The boxes of a picture whose geometry is unchanged (None: a picture without
        annotations, or objects the inline form does not place: normalized, masks, VOC's flags,
        a declared size that is not the picture's)."""
        annotations = item.annotations
        if annotations is None or annotations.normalized:
            return None
        if (annotations.width, annotations.height) not in ((None, None), (width, height)):
            return None
        boxes, right, bottom, clipped = _Boxes(), float(width), float(height), False
        for found in annotations.objects:
            if found.mask is not None or found.difficult or found.truncated or found.pose:
                return None
            x0, y0, x1, y1 = found.xmin, found.ymin, found.xmax, found.ymax
            if not (isfinite(x0) and isfinite(y0) and isfinite(x1) and isfinite(y1)):
                counts["dropped invalid_box"] += 1
                continue
            if x1 <= x0 or y1 <= y0 or x1 <= 0 or y1 <= 0 or x0 >= width or y0 >= height:
                counts["dropped zero_area or outside_image"] += 1
                continue
            if found.class_name not in ids:
                counts["dropped unknown_category"] += 1
                continue
            inside = (
                0.0 if x0 < 0.0 else x0,
                0.0 if y0 < 0.0 else y0,
                right if right < x1 else x1,
                bottom if bottom < y1 else y1,
            )
            box = (x0, y0, x1, y1)
            if inside != box and max(abs(a - b) for a, b in zip(box, inside, strict=True)) > 0.5:
                clipped = True
            # The identity transform's mapping, as placement's box mapper computes it (-0.0 is 0.0).
            kept = (inside[0] + 0.0, inside[1] + 0.0, inside[2] + 0.0, inside[3] + 0.0)
            whole = kept if inside == box else (x0 + 0.0, y0 + 0.0, x1 + 0.0, y1 + 0.0)
            kept_area = (kept[2] - kept[0]) * (kept[3] - kept[1])
            area = kept_area
            if found.area is not None:
                area = found.area * min(1.0, kept_area / ((whole[2] - whole[0]) * (whole[3] - whole[1])))
                area = area if isfinite(area) else kept_area
            boxes.xmin.append(kept[0] / width)
            boxes.ymin.append(kept[1] / height)
            boxes.xmax.append(kept[2] / width)
            boxes.ymax.append(kept[3] / height)
            boxes.areas.append(area)
            boxes.labels.append(ids[found.class_name])
            boxes.texts.append(found.class_name.encode())
            boxes.crowd.append(int(found.is_crowd))
            counts[("objects", found.class_name)] += 1
            counts[("size", size_bucket(area))] += 1
        if clipped:
            counts["change boxes_clipped"] += 1
        return boxes

    def run_shard_tasks(part: int) -> tuple[int, int, int]:
        counts: collections.Counter = collections.Counter()
        count = digest = 0
        for number, path in enumerate(shard_tasks[part::threads]):
            shard_task = staging.load_shard_task(path)
            shard = ShardKey(shard_task.split, shard_task.index, shard_task.count)
            names = RunLabels.of(shard_task.kinds, shard_task.settings).settings[0].class_names
            ids = {name: index + 1 for index, name in enumerate(names)}
            with _Writer(os.path.join(output, f"checked-{part}-{number}.tfrecord")) as writer:
                for item in shard_task.inputs:
                    record = _checked_record(item, shard_task, shard, ids, counts)
                    if record is not None:
                        writer.write(record)
            count, digest = count + writer.count, digest + writer.digest
        return count, digest, counts["library's steps"]

    def _checked_record(
        item: PlannedInput,
        shard_task: ShardTask,
        shard: ShardKey,
        ids: dict[str, int],
        counts: collections.Counter,
    ) -> bytes | None:
        limit = options.max_file_bytes
        try:
            data = read_input(item.path, limit) if item.size <= limit else b""
        except Exception:  # unreadable: the library's steps say why
            data = b""
        if not data or len(data) > limit:  # too large, unreadable or empty: the library says which
            return _library_record(item, shard_task, shard, counts)
        try:
            image = encode_for_tensorflow(data, options, name=item.relpath)
        except Reject as reject:
            counts[f"reject {reject.reason}"] += 1
            return None
        unchanged = image.transform == identity_transform(image.width, image.height)
        boxes = place(item, image.width, image.height, ids, counts) if unchanged else None
        if boxes is None:  # turned or resized, or boxes the inline form does not place
            return _library_record(item, shard_task, shard, counts)
        counts[("records", item.split)] += 1
        counts[("height", image.height)] += 1
        counts[("width", image.width)] += 1
        counts[("per image", len(boxes.labels))] += 1
        counts.update(("class", label) for label in set(boxes.texts))
        counts.update(("change", code) for code in image.changes)
        sha256 = hashlib.sha256(data).hexdigest().encode()
        head = (item.relpath.encode(), item.annotations.source_id.encode(), sha256)
        return example_bytes(
            image.data, image.format.encode(), *head, image.height, image.width, image.channels, boxes
        )

    def _library_record(
        item: PlannedInput, shard_task: ShardTask, shard: ShardKey, counts: collections.Counter
    ) -> bytes | None:
        counts["library's steps"] += 1
        pending = prepare_input(
            item, options, shard, labels=RunLabels.of(shard_task.kinds, shard_task.settings)
        )
        if isinstance(pending, RejectLine):
            counts[f"reject {pending.reason}"] += 1
            return None
        counts[("records", item.split)] += 1
        return finish_record(config.schema, pending).example

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        done = list(pool.map(run_shard_tasks, range(threads)))
    total = sum(n for n, _, _ in done), sum(d for _, d, _ in done) % _DIGEST_MODULUS
    return (*total, sum(library for _, _, library in done))


def _records(folder: str) -> Iterator[bytes]:
    """Every record of the TFRecord files in `folder`, CRCs checked (the project's reader: this
    is the check, not the timed work; imported here, since it imports Beam, which the least work
    does not need)."""
    from beam_tfrecord.write.tfrecord_files import iter_records

    for name in sorted(os.listdir(folder)):
        if ".tfrecord" in name and not name.endswith(".idx"):
            with open(os.path.join(folder, name), "rb") as handle:
                yield from iter_records(handle)


def least_work_run(image_dir: str, instances: str, output: str, threads: int) -> tuple[int, int]:
    """The plain steps: (records, sum of their sha256)."""
    plan, categories = load_plan(instances)
    os.makedirs(output, exist_ok=True)
    parts = [plan[index::threads] for index in range(threads)]
    paths = [os.path.join(output, f"part-{index}.tfrecord") for index in range(threads)]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        done = list(pool.map(write_part, parts, [image_dir] * threads, [categories] * threads, paths))
    return sum(n for n, _ in done), sum(d for _, d in done) % _DIGEST_MODULUS


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--image_dir", required=True)
    parser.add_argument("--instances", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--threads", type=int, default=2)
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--library", action="store_true", help="this project's own steps, without Beam")
    form.add_argument(
        "--checked", action="store_true", help="this project's checks and plan, the least work's record path"
    )
    parser.add_argument("--compare", help="an output of pipelines.convert on the same data: same records?")
    args = parser.parse_args()
    if args.library:
        count, digest = library_run(args.image_dir, args.instances, args.output, args.threads)
    elif args.checked:
        count, digest, library = checked_run(args.image_dir, args.instances, args.output, args.threads)
    else:
        count, digest = least_work_run(args.image_dir, args.instances, args.output, args.threads)
    print(f"{count} records, digest {digest:064x}")
    if args.checked:
        print(f"photos through the library's own steps: {library}")
    if args.compare:
        ours, mine = collections.Counter(_records(args.compare)), collections.Counter(_records(args.output))
        if ours != mine:
            missing, extra = sum((ours - mine).values()), sum((mine - ours).values())
            sys.exit(
                f"records differ: {missing} of {args.compare}'s are not written here, "
                f"{extra} written here are not there"
            )
        print(f"the same {count} records as {args.compare}")


if __name__ == "__main__":
    main()
