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

`--library` runs the same loop with this project's own steps in place of the plain ones: the
launcher's `prepare` (the COCO file read and checked, the plan made and staged, the file index's
digests), and per staged shard task `load_task`, `prepare_input` (the read, the JPEG segment walk,
the decode, EXIF, the boxes placed, the sha256), `finish_record` (the Example, its sha256) and
the tally, each thread writing whole shard tasks. It leaves out Beam, the hand-off of records
between threads and the output's bookkeeping: the `.idx` files, the resume ledger, the reject,
change and duplicate lines, the file index's rows and `summary.json`. Between the three (the least
work, `--library`, `pipelines.convert`) the CPU a photo splits into what the output needs, what
the product's checks and plan add, and what the runner and the bookkeeping add.

    python benchmarks/least_work.py --image_dir DIR --instances FILE --output OUT [--threads 2]
        [--library] [--compare OURS_OUTPUT]

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
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE)]

import google_crc32c  # noqa: E402
from PIL import Image  # noqa: E402

from beam_tfrecord import compat  # noqa: E402
from beam_tfrecord.write.messages import Example  # noqa: E402
from beam_tfrecord.write.tfrecord_files import iter_records  # noqa: E402

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
    xmin, ymin, xmax, ymax, areas, labels, texts = [], [], [], [], [], [], []
    for annotation in annotations:
        x, y, w, h = annotation["bbox"]
        right, bottom = x + w, y + h
        left, top = max(x, 0.0), max(y, 0.0)
        kept_right, kept_bottom = min(right, width), min(bottom, height)
        xmin.append(left / width)
        ymin.append(top / height)
        xmax.append(kept_right / width)
        ymax.append(kept_bottom / height)
        # A clipped box keeps the part of the source's area that its kept box keeps.
        kept = (kept_right - left) * (kept_bottom - top) / ((right - x) * (bottom - y))
        areas.append(annotation["area"] * min(1.0, kept))
        label, text = categories[annotation["category_id"]]
        labels.append(label)
        texts.append(text)
    crowd = [a.get("iscrowd", 0) for a in annotations]
    zeros = [0] * len(annotations)
    example = Example()
    feature = example.features.feature
    feature["image/encoded"].bytes_list.value.append(data)
    feature["image/format"].bytes_list.value.append(b"jpeg")
    feature["image/filename"].bytes_list.value.append(image_entry["file_name"].encode())
    feature["image/source_id"].bytes_list.value.append(str(image_entry["id"]).encode())
    feature["image/key/sha256"].bytes_list.value.append(sha256.encode())
    feature["image/height"].int64_list.value.append(height)
    feature["image/width"].int64_list.value.append(width)
    feature["image/channels"].int64_list.value.append(3)
    feature["image/object/bbox/xmin"].float_list.value.extend(xmin)
    feature["image/object/bbox/ymin"].float_list.value.extend(ymin)
    feature["image/object/bbox/xmax"].float_list.value.extend(xmax)
    feature["image/object/bbox/ymax"].float_list.value.extend(ymax)
    feature["image/object/area"].float_list.value.extend(areas)
    feature["image/object/class/label"].int64_list.value.extend(labels)
    feature["image/object/class/text"].bytes_list.value.extend(texts)
    feature["image/object/is_crowd"].int64_list.value.extend(crowd)
    feature["image/object/difficult"].int64_list.value.extend(zeros)
    feature["image/object/truncated"].int64_list.value.extend(zeros)
    feature["image/object/view"].bytes_list.value.extend([b""] * len(annotations))
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
    digest, offsets, offset = 0, [], 0
    with open(path, "wb") as out:
        for image_entry, annotations in part:
            data = read_bytes(os.path.join(image_dir, image_entry["file_name"]))
            record = convert(data, image_entry, annotations, categories)
            digest = (digest + int.from_bytes(hashlib.sha256(record).digest())) % _DIGEST_MODULUS
            framed = _frame(record)
            out.write(framed)
            offsets.append(f"{offset} {len(framed)}\n")
            offset += len(framed)
    with open(path + ".idx", "w") as index:
        index.writelines(offsets)
    return len(part), digest


def library_run(image_dir: str, instances: str, output: str, threads: int) -> tuple[int, int]:
    """This project's steps, without Beam: (records, sum of their sha256)."""
    from beam_tfrecord.elements import RejectLine, ShardKey
    from beam_tfrecord.images.inputs import prepare_input
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
    staged = prepare(settings.source, config, overwrite=True, parallelism=threads, round_robin=True)
    tasks = staging.list_task_files(staged.plan_dir)

    def run_tasks(part: int) -> tally_lib.Tally:
        tally = tally_lib.Tally()
        for number, path in enumerate(tasks[part::threads]):
            task = staging.load_task(path)
            shard = ShardKey(task.split, task.index, task.count)
            with open(os.path.join(output, f"library-{part}-{number}.tfrecord"), "wb") as out:
                for item in task.inputs:
                    pending = prepare_input(item, config.image, shard, class_names=task.class_names)
                    if isinstance(pending, RejectLine):
                        tally.add(pending)
                        continue
                    record = finish_record(config.schema, pending)
                    write_record(out, record.example)
                    tally.add(record)
        return tally

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        tallies = list(pool.map(run_tasks, range(threads)))
    total = tallies[0]
    for other in tallies[1:]:
        total.merge(other)
    return sum(total.records.values()), sum(total.digests.values()) % _DIGEST_MODULUS


def _records(folder: str) -> Iterator[bytes]:
    """Every record of the TFRecord files in `folder`, CRCs checked (the project's reader: this
    is the check, not the timed work)."""
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
    parser.add_argument("--library", action="store_true", help="this project's own steps, without Beam")
    parser.add_argument("--compare", help="an output of pipelines.convert on the same data: same records?")
    args = parser.parse_args()
    if args.library:
        count, digest = library_run(args.image_dir, args.instances, args.output, args.threads)
    else:
        count, digest = least_work_run(args.image_dir, args.instances, args.output, args.threads)
    print(f"{count} records, digest {digest:064x}")
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
