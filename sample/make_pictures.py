"""Writes, under the folder it is given, the bundled COCO sample (sample/detection/coco) with two
more kinds of label, so that `make pictures` can convert it and draw docs/' contact sheets:

- keypoints/: each shape's corners as its keypoints (a person_keypoints file: squares 4 points,
  triangles 3, each with its outline as the skeleton);
- captions/: a captions file naming each picture's shapes.

The pictures are the sample's own (copied); nothing under sample/ changes.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COCO = os.path.join(HERE, "detection", "coco")


def main(root: str) -> None:
    with open(os.path.join(COCO, "annotations", "instances_shapes.json"), encoding="utf-8") as file:
        source = json.load(file)
    names = {category["id"]: category["name"] for category in source["categories"]}
    corners = {"square": 4, "triangle": 3}
    categories = [
        {
            **category,
            "keypoints": [f"corner {i + 1}" for i in range(corners[category["name"]])],
            "skeleton": [
                [i + 1, (i + 1) % corners[category["name"]] + 1] for i in range(corners[category["name"]])
            ],
        }
        for category in source["categories"]
    ]
    objects = []
    for annotation in source["annotations"]:
        if annotation["category_id"] not in names or not annotation.get("segmentation"):
            continue
        polygon = annotation["segmentation"][0]
        points = [value for i in range(0, len(polygon), 2) for value in (polygon[i], polygon[i + 1], 2)]
        objects.append({**annotation, "keypoints": points, "num_keypoints": len(points) // 3})
    shown = {}
    for annotation in source["annotations"]:
        if annotation["category_id"] in names:
            shown.setdefault(annotation["image_id"], []).append(names[annotation["category_id"]])
    captions = [
        {"id": image["id"], "image_id": image["id"], "caption": describe(shown.get(image["id"], []))}
        for image in source["images"]
    ]
    for folder, name, content in (
        (
            "keypoints",
            "person_keypoints_shapes.json",
            {**source, "categories": categories, "annotations": objects},
        ),
        ("captions", "captions_shapes.json", {**source, "annotations": captions}),
    ):
        target = os.path.join(root, folder)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(os.path.join(COCO, "images"), os.path.join(target, "images"))
        os.makedirs(os.path.join(target, "annotations"))
        with open(os.path.join(target, "annotations", name), "w", encoding="utf-8") as file:
            json.dump(content, file, indent=1)


def describe(shapes: list[str]) -> str:
    if not shapes:
        return "an empty grey picture"
    counts = {name: shapes.count(name) for name in sorted(set(shapes))}
    words = [f"a {name}" if n == 1 else f"{n} {name}s" for name, n in counts.items()]
    return " and ".join(words) + " on grey"


if __name__ == "__main__":
    main(sys.argv[1])
