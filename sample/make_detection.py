"""Writes sample/detection/: the same eight pictures of squares and triangles as a COCO, a Pascal
VOC and a YOLO dataset, each in its format's standard layout, so the detection commands of the
README and docs/detection.md run as they stand. Each tree also holds what real datasets hold and
the converter must name:

- COCO: an annotation of an unknown category (dropped, `unknown_category`), a box partly outside
  the picture (clipped), an entry for a file that is not there (`annotations_without_image.jsonl`)
  and a picture no annotation names (a negative); polygons become masks with `--masks`.
- VOC: `difficult` and `truncated` objects, and one XML cut short (its picture is a
  `bad_annotation` reject naming the file and line).
- YOLO: a segmentation line (a polygon, a mask with `--masks`) and a class index data.yaml does
  not name (dropped, `unknown_category`).

The files are checked in; run this only to change them (`python sample/make_detection.py`), and
tests/test_sample_detection.py checks that they are what it writes.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass

from PIL import Image, ImageDraw

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "detection")
WIDTH, HEIGHT = 128, 96
CLASSES = ("square", "triangle")  # YOLO index and VOC name; COCO ids below
COCO_IDS = {"square": 3, "triangle": 7}
COLOURS = {"square": (70, 150, 220), "triangle": (250, 190, 60)}


@dataclass(frozen=True)
class Shape:
    name: str
    x: int
    y: int
    size: int

    @property
    def polygon(self) -> list[int]:
        x, y, s = self.x, self.y, self.size
        if self.name == "square":
            return [x, y, x + s, y, x + s, y + s, x, y + s]
        return [x, y + s, x + s // 2, y, x + s, y + s]

    @property
    def corners(self) -> tuple[int, int, int, int]:
        return self.x, self.y, self.x + self.size, self.y + self.size


# Eight pictures; the last has no shape (a negative), and picture 3's square runs past the
# right edge (its box is clipped).
PICTURES: list[list[Shape]] = [
    [Shape("square", 10, 20, 36)],
    [Shape("triangle", 14, 30, 40), Shape("square", 70, 14, 30)],
    [Shape("square", 8, 8, 24), Shape("triangle", 48, 40, 34), Shape("square", 92, 50, 26)],
    [Shape("triangle", 20, 16, 44), Shape("square", 100, 30, 40)],
    [Shape("square", 30, 30, 50)],
    [Shape("triangle", 6, 10, 30), Shape("triangle", 60, 44, 40)],
    [Shape("square", 40, 12, 20), Shape("triangle", 76, 20, 44)],
    [],
]


def picture(shapes: list[Shape]) -> Image.Image:
    image = Image.new("RGB", (WIDTH, HEIGHT), (128, 128, 128))
    draw = ImageDraw.Draw(image)
    for shape in shapes:
        points = shape.polygon
        draw.polygon(list(zip(points[::2], points[1::2], strict=True)), fill=COLOURS[shape.name])
    return image


def save(image: Image.Image, path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    image.save(path, format="JPEG", quality=90)


def clipped(shape: Shape) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = shape.corners
    return x0, y0, min(x1, WIDTH), min(y1, HEIGHT)


def write_coco(root: str) -> None:
    images, annotations = [], []
    for i, shapes in enumerate(PICTURES):
        name = f"shapes_{i}.jpg"
        save(picture(shapes), os.path.join(root, "images", name))
        images.append({"id": i + 1, "file_name": name, "width": WIDTH, "height": HEIGHT})
        for k, shape in enumerate(shapes):
            x0, y0, x1, y1 = shape.corners  # the source's box, which may run outside the picture
            annotations.append(
                {
                    "id": 100 * (i + 1) + k,
                    "image_id": i + 1,
                    "category_id": COCO_IDS[shape.name],
                    "bbox": [x0, y0, x1 - x0, y1 - y0],
                    "area": (x1 - x0) * (y1 - y0),
                    "iscrowd": 0,
                    "segmentation": [shape.polygon],
                }
            )
    annotations.append(  # a category the file does not declare
        {"id": 999, "image_id": 1, "category_id": 42, "bbox": [60, 60, 20, 20], "area": 400, "iscrowd": 0}
    )
    images.append({"id": 99, "file_name": "shapes_missing.jpg", "width": WIDTH, "height": HEIGHT})
    annotations.append(
        {"id": 9901, "image_id": 99, "category_id": 3, "bbox": [1, 1, 10, 10], "area": 100, "iscrowd": 0}
    )
    categories = [{"id": COCO_IDS[n], "name": n, "supercategory": "shape"} for n in CLASSES]
    document = {"images": images, "annotations": annotations, "categories": categories}
    os.makedirs(os.path.join(root, "annotations"), exist_ok=True)
    with open(os.path.join(root, "annotations", "instances_shapes.json"), "w") as f:
        json.dump(document, f, indent=1)
        f.write("\n")


def voc_object(shape: Shape, difficult: int, truncated: int) -> str:
    x0, y0, x1, y1 = clipped(shape)
    return (
        f"  <object>\n    <name>{shape.name}</name>\n    <pose>Unspecified</pose>\n"
        f"    <truncated>{truncated}</truncated>\n    <difficult>{difficult}</difficult>\n"
        f"    <bndbox><xmin>{x0}</xmin><ymin>{y0}</ymin><xmax>{x1}</xmax><ymax>{y1}</ymax></bndbox>\n"
        "  </object>\n"
    )


def write_voc(root: str) -> None:
    for i, shapes in enumerate(PICTURES):
        name = f"shapes_{i}"
        save(picture(shapes), os.path.join(root, "JPEGImages", f"{name}.jpg"))
        objects = "".join(
            voc_object(s, difficult=int(s.size < 25), truncated=int(clipped(s) != s.corners)) for s in shapes
        )
        xml = (
            f"<annotation>\n  <folder>VOC</folder>\n  <filename>{name}.jpg</filename>\n"
            f"  <size><width>{WIDTH}</width><height>{HEIGHT}</height><depth>3</depth></size>\n"
            f"{objects}</annotation>\n"
        )
        if i == 5:
            xml = xml[: xml.index("</bndbox>")]  # cut short: this picture is rejected, named
        os.makedirs(os.path.join(root, "Annotations"), exist_ok=True)
        with open(os.path.join(root, "Annotations", f"{name}.xml"), "w") as f:
            f.write(xml)


def yolo_line(shape: Shape, index: int, segment: bool) -> str:
    if segment:
        points = shape.polygon
        coords = [points[j] / (WIDTH if j % 2 == 0 else HEIGHT) for j in range(len(points))]
        return f"{index} " + " ".join(f"{c:.6f}" for c in coords) + "\n"
    x0, y0, x1, y1 = clipped(shape)
    cx, cy = (x0 + x1) / 2 / WIDTH, (y0 + y1) / 2 / HEIGHT
    return f"{index} {cx:.6f} {cy:.6f} {(x1 - x0) / WIDTH:.6f} {(y1 - y0) / HEIGHT:.6f}\n"


def write_yolo(root: str) -> None:
    for i, shapes in enumerate(PICTURES):
        name = f"shapes_{i}"
        save(picture(shapes), os.path.join(root, "images", "train", f"{name}.jpg"))
        lines = [
            yolo_line(s, CLASSES.index(s.name), segment=(i == 2 and k == 1)) for k, s in enumerate(shapes)
        ]
        if i == 4:
            lines.append("5 0.500000 0.500000 0.100000 0.100000\n")  # an index data.yaml does not name
        os.makedirs(os.path.join(root, "labels", "train"), exist_ok=True)
        with open(os.path.join(root, "labels", "train", f"{name}.txt"), "w") as f:
            f.writelines(lines)
    with open(os.path.join(root, "data.yaml"), "w") as f:
        f.write("# class names by index, as Ultralytics' data.yaml gives them\n")
        f.write(f"names: [{', '.join(CLASSES)}]\n")


def main(root: str = ROOT) -> None:
    shutil.rmtree(root, ignore_errors=True)
    write_coco(os.path.join(root, "coco"))
    write_voc(os.path.join(root, "voc"))
    write_yolo(os.path.join(root, "yolo"))


if __name__ == "__main__":
    main()
