"""The Object Detection API's label map a detection run writes beside its shards
(`label_map.pbtxt`: `string_int_label_map.proto` as text), and the placeholder class that holds a
given label map's missing id: ids count by position from 1 everywhere (labels.txt line i, TFDS's
ClassLabel, the readers' labels), so a gap in a user's map holds `(unused id N)`, a class no
object has, which the label map leaves out so its ids come back as given."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

__all__ = ["is_unused", "label_map", "unused_name"]

_UNUSED = re.compile(r"\(unused id (\d+)\)")


def unused_name(label_id: int) -> str:
    """The placeholder class that holds a missing id's place (labels.txt, TFDS's names)."""
    return f"(unused id {label_id})"


def is_unused(name: str) -> bool:
    return _UNUSED.fullmatch(name) is not None


def label_map(class_names: Sequence[str], keypoint_names: Mapping[str, Sequence[str]] | None = None) -> str:
    """The label map: ids from 1, 0 being background, in labels.txt's order, placeholders left
    out. A keypoints run's classes list their points (`keypoints { id label }`, ids from 0 in the
    records' order), as CenterNet's keypoint tasks read them."""
    items = []
    for i, name in enumerate(class_names, 1):
        if is_unused(name):
            continue
        points = "".join(
            f"  keypoints {{\n    id: {k}\n    label: {json.dumps(point, ensure_ascii=False)}\n  }}\n"
            for k, point in enumerate((keypoint_names or {}).get(name, ()))
        )
        items.append(f"item {{\n  id: {i}\n  name: {json.dumps(name, ensure_ascii=False)}\n{points}}}\n")
    return "".join(items)
