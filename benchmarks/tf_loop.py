"""The baseline: the loop from TensorFlow's tutorials, one process.

Read each file, decode it once with TensorFlow to see that it can be read, then write the raw
bytes, label and id through one tf.io.TFRecordWriter.

    python benchmarks/tf_loop.py INPUT_DIR OUTPUT_FILE
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf


def main(input_dir: str, output_file: str) -> None:
    classes = sorted(d for d in os.listdir(input_dir) if os.path.isdir(os.path.join(input_dir, d)))
    written = skipped = 0
    with tf.io.TFRecordWriter(output_file) as writer:
        for label, name in enumerate(classes):
            folder = os.path.join(input_dir, name)
            for filename in sorted(os.listdir(folder)):
                with open(os.path.join(folder, filename), "rb") as handle:
                    data = handle.read()
                try:
                    tf.io.decode_image(data)
                except (tf.errors.InvalidArgumentError, ValueError):
                    skipped += 1
                    continue
                feature = {
                    "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
                    "id": tf.train.Feature(bytes_list=tf.train.BytesList(value=[filename.encode()])),
                }
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())
                written += 1
    print(f"loop: {written} written, {skipped} skipped")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
