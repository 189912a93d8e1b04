"""What `encode_for_tensorflow` costs per image, for the three paths a classification run takes:
bytes kept (a plain JPEG), an EXIF-tagged JPEG (re-encoded upright), and --resize 224x224 crop.

The pictures are benchmarks/synthetic.py's 400x300 JPEGs, made in memory. Each case is timed
over every picture, pass after pass, and reported in microseconds per image (the fastest pass,
the least disturbed by other work on the machine, and the median). With `--compare FILE`, FILE
is another version of beam_tfrecord/images/normalize.py (e.g. `git show
main:beam_tfrecord/images/normalize.py > /tmp/normalize_main.py`), loaded beside this one's; the
two are timed in alternate passes in the same process, so both see the same load:

    .venv/bin/python benchmarks/encode_cost.py --images 300 --passes 20
    .venv/bin/python benchmarks/encode_cost.py --images 300 --passes 20 --compare /tmp/normalize_main.py
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import statistics
import sys
import time
from collections.abc import Callable

from PIL import Image
from synthetic import make_jpeg

CASES = ("kept", "exif_rotated", "resize_crop")


def pictures(count: int) -> dict[str, list[bytes]]:
    plain = [make_jpeg(seed) for seed in range(count)]
    exif = Image.Exif()
    exif[0x0112] = 6
    rotated = []
    for data in plain:
        out = io.BytesIO()
        Image.open(io.BytesIO(data)).save(out, format="JPEG", quality=85, exif=exif.tobytes())
        rotated.append(out.getvalue())
    return {"kept": plain, "exif_rotated": rotated, "resize_crop": plain}


def load_other(path: str) -> Callable:
    """`encode_for_tensorflow` of another normalize.py; its imports resolve to this checkout."""
    spec = importlib.util.spec_from_file_location("other_normalize", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.encode_for_tensorflow


def measure(count: int, passes: int, other: str | None) -> dict[str, dict[str, list[float]]]:
    """Microseconds per image of each pass, per case and per version ("this", "other")."""
    from beam_tfrecord.images.normalize import ImageConfig, encode_for_tensorflow

    versions = {"this": encode_for_tensorflow}
    if other:
        versions["other"] = load_other(other)
    options = {
        "kept": ImageConfig(),
        "exif_rotated": ImageConfig(),
        "resize_crop": ImageConfig(resize=(224, 224), resize_mode="crop"),
    }
    data = pictures(count)
    times: dict[str, dict[str, list[float]]] = {case: {name: [] for name in versions} for case in CASES}
    for case in CASES:
        for encode in versions.values():
            encode(data[case][0], options[case])  # warm imports and plugins
        for _ in range(passes):
            for name, encode in versions.items():
                started = time.perf_counter()
                for item in data[case]:
                    encode(item, options[case])
                times[case][name].append((time.perf_counter() - started) / count * 1e6)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--passes", type=int, default=20)
    parser.add_argument("--compare", help="another normalize.py, timed in alternate passes")
    args = parser.parse_args()
    times = measure(args.images, args.passes, args.compare)
    print(f"{args.images} images, {args.passes} passes a version; us/image: fastest pass (median)")
    for case, by_version in times.items():
        cells = [f"{name} {min(t):6.0f} ({statistics.median(t):6.0f})" for name, t in by_version.items()]
        line = f"{case:>14}: " + "   ".join(cells)
        if "other" in by_version:
            change = min(by_version["this"]) / min(by_version["other"]) - 1
            line += f"   this vs other, fastest: {100 * change:+.1f}%"
        print(line)


if __name__ == "__main__":
    main()
