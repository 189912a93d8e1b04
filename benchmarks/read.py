"""Read speed: `beam_tfrecord.load_dataset` on a conversion against Keras's
`image_dataset_from_directory` on the folder it came from and against the same decode and resize
fed from memory, the same pictures, 224x224 batches of 32, shuffled. Readers:

- keras-folder: Keras on the folder (plus `.prefetch`);
- load_dataset: the reader as it is (tf.data's autotuning off, its default; JPEGs of at least
  twice 224 a side decoded at a reduced DCT scale);
- in-memory: the pictures' encoded bytes held in memory (read from the shards before the clock
  starts), shuffled in a buffer of 1,024 as load_dataset's records are, decoded and resized by
  `beam_tfrecord.read.tf_data.decode` (load_dataset's own) in one parallel map: what reading the
  files costs is what load_dataset loses against it;
- load_dataset-full, in-memory-full (where any picture is large enough for the DCT scale): the
  same two with every picture decoded in full (`dct_scaling=False`);
- load_dataset-autotune: load_dataset with tf.data's autotuning on;
- load_dataset-cached (and load_dataset-full-cached): load_dataset with `cache=True`, the records
  held in memory from the end of the first pass (run these with `--passes 3` or more: the first
  pass of each process reads the files, the later ones only memory).

Each measurement is a fresh process that makes `--passes` passes; the readers alternate,
`--repeats` times. The median of every pass is what an epoch gets; the median of each process's
best pass is printed beside it, with the ratios of both. Each process imports this checkout's
`beam_tfrecord` (this checkout first on its PYTHONPATH), and says which it imported.

`--baseline ROOT` (another checkout of this project, an earlier commit: `git worktree add
--detach /tmp/base COMMIT`) adds, for each load_dataset reader of the run, the same reader with
ROOT's `load_dataset` (`load_dataset @ COMMIT`): its own process with ROOT first on PYTHONPATH
(this checkout left off it) and ROOT as its folder, checked to import ROOT's `beam_tfrecord`, in
the same rounds and on the same conversion (made by this checkout). Its ratios to Keras's folder
reader are printed beside the current one's, and this checkout's against it, paired by round.

    .venv/bin/python benchmarks/read.py --images 8000 --size 400x300 --repeats 3
    .venv/bin/python benchmarks/read.py --images 800 --size 1600x1200 --repeats 3
    .venv/bin/python benchmarks/read.py --images 3000 --photos --repeats 3   # 640x480 photographs
    .venv/bin/python benchmarks/read.py --images 8000 --readers keras-folder,load_dataset --baseline /tmp/base

`--photos` reads benchmarks/photos.py's photographs (about 640x480, 100-150 KB: pip install -r
requirements-bench.txt) laid out in two class folders instead of synthetic JPEGs. The folders
(no broken files: Keras stops at the first) and their conversions are made once under --work and
reused.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from checkouts import checkout_name, compile_packages, pythonpath_first, under  # noqa: E402

READERS = ("keras-folder", "load_dataset", "in-memory", "load_dataset-autotune", "load_dataset-cached")
# Where the DCT scale applies: the same readers decoding every picture in full.
FULL_DECODE = ("load_dataset-full", "in-memory-full", "load_dataset-full-cached")
IMAGE_SIZE = (224, 224)


def in_memory(output: str, full_decode: bool):  # -> tf.data.Dataset
    """The split's pictures decoded and resized as load_dataset does, from bytes in memory."""
    import tensorflow as tf

    from beam_tfrecord.keys import key_of
    from beam_tfrecord.read.tf_data import decode, split_files

    files = split_files(output, "train")
    keys = {name: key_of(files.schema, name) for name in ("image", "label", "height", "width")}
    spec = {
        keys["image"]: tf.io.FixedLenFeature([], tf.string),
        keys["label"]: tf.io.FixedLenFeature([], tf.int64),
        keys["height"]: tf.io.FixedLenFeature([], tf.int64),
        keys["width"]: tf.io.FixedLenFeature([], tf.int64),
    }
    every = tf.data.TFRecordDataset(files.paths).batch(1 << 20).map(lambda b: tf.io.parse_example(b, spec))
    held = every.get_single_element()  # every record's fields, in memory
    large = bool(tf.reduce_max(held[keys["height"]]) >= 2 * IMAGE_SIZE[0]) and bool(
        tf.reduce_max(held[keys["width"]]) >= 2 * IMAGE_SIZE[1]
    )
    scaled = large and not full_decode

    def picture(record):
        stored = (record[keys["height"]], record[keys["width"]]) if scaled else None
        return decode(record[keys["image"]], 3, IMAGE_SIZE, stored_size=stored), record[keys["label"]]

    options = tf.data.Options()
    options.autotune.enabled = False  # as load_dataset's default
    return (
        tf.data.Dataset.from_tensor_slices(held)
        .shuffle(1024, seed=0)
        .map(picture, num_parallel_calls=tf.data.AUTOTUNE)
        .batch(32, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
        .with_options(options)
    )


def measure(reader: str, folder: str, output: str, passes: int) -> None:
    """In a fresh process: images/s of each pass over the data, as one JSON line."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    library = None  # the beam_tfrecord package this process reads with
    if reader != "keras-folder":
        import beam_tfrecord

        library = os.path.dirname(beam_tfrecord.__file__)

    if reader == "keras-folder":
        import keras

        dataset = keras.utils.image_dataset_from_directory(
            folder, image_size=IMAGE_SIZE, batch_size=32, shuffle=True, seed=0, verbose=False
        ).prefetch(tf.data.AUTOTUNE)
    elif reader.startswith("in-memory"):
        dataset = in_memory(output, full_decode=reader.endswith("-full"))
    else:
        dataset = beam_tfrecord.load_dataset(
            output,
            "train",
            image_size=IMAGE_SIZE,
            batch_size=32,
            seed=0,
            autotune=reader.endswith("-autotune"),
            dct_scaling="-full" not in reader,
            cache=reader.endswith("-cached"),
        )
    rates = []
    for _ in range(passes):
        start, images = time.perf_counter(), 0
        for batch, _labels in dataset:
            images += int(batch.shape[0])
        rates.append(images / (time.perf_counter() - start))
    print(json.dumps({"reader": reader, "images": images, "rates": rates, "library": library}))


def prepare(work: str, images: int, size: tuple[int, int], photos: bool) -> tuple[str, str]:
    """The folder of pictures and its conversion, made once under `work`."""
    if photos:
        from photos import HEIGHT, IMAGE_FOLDER, WIDTH, ensure_photos

        size = (WIDTH, HEIGHT)
        source = ensure_photos(os.path.join(work, f"photos-{images}"), images)
        name = f"photos-{images}"
        folder = os.path.join(work, f"images-{name}")
        if not os.path.exists(os.path.join(folder, ".complete")):  # two class folders, linked
            for index, file_name in enumerate(sorted(os.listdir(os.path.join(source, IMAGE_FOLDER)))):
                target = os.path.join(folder, ("even", "odd")[index % 2], file_name)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                if not os.path.exists(target):
                    os.link(os.path.join(source, IMAGE_FOLDER, file_name), target)
            open(os.path.join(folder, ".complete"), "w").close()
    else:
        from synthetic import ensure_dataset

        name = f"{size[0]}x{size[1]}-{images}"
        folder = ensure_dataset(os.path.join(work, f"images-{name}"), images, size=size, broken=False)
    output = os.path.join(work, f"out-{name}")
    if not os.path.exists(os.path.join(output, "summary.json")):
        args = [
            "--input",
            folder,
            "--output",
            output,
            "--runner=DirectRunner",
            "--no_progress",
            "--overwrite",
        ]
        subprocess.run([sys.executable, "-m", "pipelines.convert", *args], check=True, cwd=ROOT)
    return folder, output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8000)
    parser.add_argument("--size", default="400x300", help="WIDTHxHEIGHT of the synthetic JPEGs")
    parser.add_argument("--photos", action="store_true", help="benchmarks/photos.py's photographs instead")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--passes", type=int, default=2, help="passes per process")
    parser.add_argument("--work", default="/tmp/beam-tfrecord-bench")
    parser.add_argument("--readers", help="comma-separated readers to run (default: all that apply)")
    parser.add_argument(
        "--baseline",
        metavar="ROOT",
        help="another checkout of this project (an earlier commit): also run each load_dataset reader "
        "with its load_dataset, in the same rounds",
    )
    parser.add_argument("--measure", nargs=3, metavar=("READER", "FOLDER", "OUTPUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(*args.measure, passes=args.passes)
        return
    width, height = (640, 480) if args.photos else (int(n) for n in args.size.split("x"))
    folder, output = prepare(args.work, args.images, (width, height), args.photos)
    scaled = width >= 2 * IMAGE_SIZE[1] and height >= 2 * IMAGE_SIZE[0]
    readers = READERS + (FULL_DECODE if scaled else ())
    if args.readers:
        readers = tuple(reader for reader in args.readers.split(",") if reader in readers)
    # Each reader's name -> (what it reads with, the checkout whose beam_tfrecord it imports).
    # The baseline's reader runs right after this checkout's, in every round.
    runs: dict[str, tuple[str, str]] = {}
    versus: list[tuple[str, str]] = []  # (this checkout's reader, the same with the baseline's)
    base_root = os.path.abspath(args.baseline) if args.baseline else None
    name = checkout_name(base_root) if base_root else ""
    for reader in readers:
        runs[reader] = (reader, ROOT)
        if base_root and reader.startswith("load_dataset"):
            runs[f"{reader} @ {name}"] = (reader, base_root)
            versus.append((reader, f"{reader} @ {name}"))
    if base_root:
        for root in (ROOT, base_root):
            compile_packages(sys.executable, root, ("beam_tfrecord",))  # no first round pays for it
    readers = tuple(runs)
    column = max(len(reader) for reader in readers)
    best: dict[str, list[float]] = {reader: [] for reader in readers}
    rounds: dict[str, list[float]] = {reader: [] for reader in readers}  # each process's median pass
    every: dict[str, list[float]] = {reader: [] for reader in readers}  # each pass: what an epoch gets
    for repeat in range(args.repeats):
        for reader in readers:
            reads_with, root = runs[reader]
            command = [
                sys.executable,
                __file__,
                "--passes",
                str(args.passes),
                "--measure",
                reads_with,
                folder,
                output,
            ]
            environment = {**os.environ, **pythonpath_first(root, ROOT)}
            line = subprocess.run(
                command, check=True, capture_output=True, text=True, cwd=root, env=environment
            ).stdout
            result = json.loads(line.strip().splitlines()[-1])
            if result["library"] is not None:
                if not under(result["library"], root):
                    sys.exit(f"{reader} read with {result['library']}, not {root}'s beam_tfrecord")
                if repeat == 0:
                    print(f"{reader} reads with {result['library']}", flush=True)
            best[reader].append(max(result["rates"]))
            every[reader].extend(result["rates"])
            rounds[reader].append(statistics.median(result["rates"]))
            rates = ", ".join(f"{rate:.0f}" for rate in result["rates"])
            print(
                f"repeat {repeat + 1} {reader:{column}} {result['images']} images, passes {rates}", flush=True
            )
    medians = {reader: statistics.median(rates) for reader, rates in best.items()}
    epochs = {reader: statistics.median(rates) for reader, rates in every.items()}
    kind = "photographs" if args.photos else "synthetic JPEGs"
    print(f"\n{args.images} {kind} of {width}x{height}, 224x224 batches of 32, {platform.processor() or ''}")
    print(
        f"cpus {os.cpu_count()}, {args.passes} passes in each of {args.repeats} processes: the median "
        "of every pass (an epoch), and the median of each process's best pass"
    )
    for reader in readers:
        print(
            f"  {reader:{column}} epoch {epochs[reader]:6.0f} images/s   best {medians[reader]:6.0f}   "
            f"(every pass: {', '.join(f'{r:.0f}' for r in every[reader])})"
        )
    pairs = [(reader, "keras-folder") for reader in readers if reader != "keras-folder"]
    pairs += [("load_dataset", "in-memory"), ("load_dataset-full", "in-memory-full")]
    pairs += [("load_dataset-cached", "in-memory"), ("load_dataset-full-cached", "in-memory-full")]
    pairs += versus
    for reader, base in pairs:
        if reader not in readers or base not in readers:
            continue
        # Paired: each round's ratio (the two processes ran one after the other), then their median,
        # which a machine whose speed drifts over the run moves less than a ratio of medians.
        paired = statistics.median(r / b for r, b in zip(rounds[reader], rounds[base], strict=True))
        print(
            f"  ratio {reader} / {base}: epoch {epochs[reader] / epochs[base]:.3f}x, "
            f"best {medians[reader] / medians[base]:.3f}x, paired by round {paired:.3f}x"
        )


if __name__ == "__main__":
    main()
