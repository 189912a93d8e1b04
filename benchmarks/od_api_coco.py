"""The peer: the TensorFlow Object Detection API's COCO converter, for the comparison in
benchmarks/peers.py (issue 28).

Reimplemented, not copied, from the logic of `research/object_detection/dataset_tools/
create_coco_tf_record.py` in github.com/tensorflow/models (Apache License 2.0, Copyright 2017 The
TensorFlow Authors), the script detection users run today. What it does, and so what this does:

- loads the instances JSON once, indexes the categories by id and the annotations by image id;
- a `multiprocessing.Pool()` over all cores, `imap` in the file's image order, one image per task;
- per image: reads the file (through `tf.io.gfile`, as the original), opens it with Pillow
  (which reads only the header: nothing is decoded, so a truncated file is written as it is),
  takes the sha256 hex digest of the bytes;
- per object: skips a box of zero width or height, or one that reaches past the picture's edge;
  otherwise stores its corners normalised by the image size, `iscrowd`, the category id and name,
  and `area`; with `--include_masks`, pycocotools rasterises the segmentation (frPyObjects, decode,
  the union of a polygon's parts) and the mask is stored as a PNG;
- builds a `tf.train.Example` with the Object Detection API's keys in the worker, hands it back
  to the parent (pickled), which writes it to shard `index % num_shards` through
  `tf.io.TFRecordWriter` (round-robin; 10 shards here, as the issue measured).

`--validate` adds what its users add by hand once a truncated file has stopped a training job:
each image decoded with `tf.io.decode_image` in the worker, and a file that fails skipped. Not in
the original; it gives the peer the check this project makes on every image, so the two can be
compared for the same guarantee (benchmarks/peers.py `--peer_validates`).

    python benchmarks/od_api_coco.py --image_dir DIR --object_annotations_file FILE \\
        --output_file_prefix OUT/train [--num_shards 10] [--include_masks] [--validate]
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import io
import json
import multiprocessing
import os
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import PIL.Image
import tensorflow as tf
from pycocotools import mask as coco_mask


def _int64s(values: list[int]) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def _floats(values: list[float]) -> tf.train.Feature:
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def _bytes(values: list[bytes]) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def _png_mask(segmentation: Any, crowd: int, height: int, width: int) -> bytes:
    """The object's mask as the OD API stores it: rasterised by pycocotools, one PNG of 0/1."""
    rles = coco_mask.frPyObjects(segmentation, height, width)
    binary = coco_mask.decode(rles)
    if not crowd:  # a polygon list gives one layer per part: their union
        binary = np.amax(binary, axis=2)
    out = io.BytesIO()
    PIL.Image.fromarray(binary).save(out, format="PNG")
    return out.getvalue()


def image_example(
    image: dict,
    image_dir: str,
    objects: list[dict],
    categories: dict[int, dict],
    include_masks: bool,
    validate: bool = False,
) -> tuple[tf.train.Example | None, int]:
    """(the image's Example, how many of its objects were skipped); no Example for an image that
    fails `--validate`'s decode."""
    height, width = image["height"], image["width"]
    with tf.io.gfile.GFile(os.path.join(image_dir, image["file_name"]), "rb") as handle:
        encoded = handle.read()
    PIL.Image.open(io.BytesIO(encoded))  # the header only, as the original
    if validate:
        try:
            tf.io.decode_image(encoded, expand_animations=False)
        except (tf.errors.InvalidArgumentError, ValueError):
            return None, len(objects)
    key = hashlib.sha256(encoded).hexdigest()
    features = {
        "image/height": _int64s([height]),
        "image/width": _int64s([width]),
        "image/filename": _bytes([image["file_name"].encode("utf8")]),
        "image/source_id": _bytes([str(image["id"]).encode("utf8")]),
        "image/key/sha256": _bytes([key.encode("utf8")]),
        "image/encoded": _bytes([encoded]),
        "image/format": _bytes([b"jpeg"]),
    }
    skipped = 0
    if objects:
        xmin, xmax, ymin, ymax, crowd, names, ids, area, masks = [], [], [], [], [], [], [], [], []
        for item in objects:
            x, y, w, h = item["bbox"]
            if w <= 0 or h <= 0 or x + w > width or y + h > height:
                skipped += 1
                continue
            xmin.append(float(x) / width)
            xmax.append(float(x + w) / width)
            ymin.append(float(y) / height)
            ymax.append(float(y + h) / height)
            crowd.append(item["iscrowd"])
            category = int(item["category_id"])
            ids.append(category)
            names.append(categories[category]["name"].encode("utf8"))
            area.append(item["area"])
            if include_masks:
                masks.append(_png_mask(item["segmentation"], item["iscrowd"], height, width))
        features.update(
            {
                "image/object/bbox/xmin": _floats(xmin),
                "image/object/bbox/xmax": _floats(xmax),
                "image/object/bbox/ymin": _floats(ymin),
                "image/object/bbox/ymax": _floats(ymax),
                "image/object/class/text": _bytes(names),
                "image/object/class/label": _int64s(ids),
                "image/object/is_crowd": _int64s(crowd),
                "image/object/area": _floats(area),
            }
        )
        if include_masks:
            features["image/object/mask"] = _bytes(masks)
    return tf.train.Example(features=tf.train.Features(feature=features)), skipped


def _pool_task(args: tuple) -> tuple[tf.train.Example | None, int]:
    return image_example(*args)


def convert(
    annotations_file: str,
    image_dir: str,
    output_prefix: str,
    num_shards: int,
    include_masks: bool,
    validate: bool = False,
) -> tuple[int, int]:
    """Write every image of the instances file; (records, skipped objects)."""
    with tf.io.gfile.GFile(annotations_file, "r") as handle:
        document = json.load(handle)
    categories = {category["id"]: category for category in document["categories"]}
    per_image: dict[int, list[dict]] = collections.defaultdict(list)
    for item in document["annotations"]:
        per_image[item["image_id"]].append(item)
    images = document["images"]
    writers = [
        tf.io.TFRecordWriter(f"{output_prefix}-{shard:05d}-of-{num_shards:05d}.tfrecord")
        for shard in range(num_shards)
    ]
    tasks = [
        (image, image_dir, per_image[image["id"]], categories, include_masks, validate) for image in images
    ]
    skipped = written = 0
    pool = multiprocessing.Pool()
    for example, dropped in pool.imap(_pool_task, tasks):
        skipped += dropped
        if example is None:
            continue
        writers[written % num_shards].write(example.SerializeToString())
        written += 1
    pool.close()
    pool.join()
    for writer in writers:
        writer.close()
    return written, skipped


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--image_dir", required=True)
    parser.add_argument("--object_annotations_file", required=True)
    parser.add_argument("--output_file_prefix", required=True)
    parser.add_argument("--num_shards", type=int, default=10)
    parser.add_argument("--include_masks", action="store_true")
    parser.add_argument("--validate", action="store_true", help="decode each image; skip one that fails")
    args = parser.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(args.output_file_prefix)), exist_ok=True)
    written, skipped = convert(
        args.object_annotations_file,
        args.image_dir,
        args.output_file_prefix,
        args.num_shards,
        args.include_masks,
        args.validate,
    )
    print(f"od_api_coco: {written} written, {skipped} objects skipped")


if __name__ == "__main__":
    main()
