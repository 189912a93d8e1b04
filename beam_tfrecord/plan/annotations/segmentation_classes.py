"""The class tables of the segmentation datasets whose masks name no class themselves: facts of each
dataset as its own tools publish them, used when the dataset's folder holds no names file.

- Pascal VOC: 21 classes (0 background), 255 the "void" border, and the palette its
  `SegmentationClass` PNGs carry (the devkit's `labelcolormap`, also labelme's and imgviz's);
- Cityscapes: `cityscapesscripts/helpers/labels.py`'s table: the 34 label ids, the 19 train ids
  (255: ignored in training) and each label's colour;
- ADE20K (SceneParsing, `ADEChallengeData2016`): 0 "other", then the 150 classes of
  `objectInfo150.csv`;
- CamVid as the SegNet tutorial ships it: 11 classes and 11 "Unlabelled".
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "ADE20K_CLASSES",
    "CAMVID_CLASSES",
    "CITYSCAPES_LABELS",
    "VOC_CLASSES",
    "VOC_VOID_COLOUR",
    "CityscapesLabel",
    "cityscapes_names",
    "voc_palette",
]

VOC_CLASSES = (
    "background", "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair",
    "cow", "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train",
    "tvmonitor",
)  # fmt: skip
VOC_VOID_COLOUR = (224, 224, 192)


def voc_palette(count: int = 256) -> tuple[tuple[int, int, int], ...]:
    """The devkit's colour map: class id i's colour interleaves i's bits into r, g and b, from the
    most significant bit down."""
    colours = []
    for index in range(count):
        r = g = b = 0
        value = index
        for shift in range(7, -1, -1):
            r |= (value & 1) << shift
            g |= ((value >> 1) & 1) << shift
            b |= ((value >> 2) & 1) << shift
            value >>= 3
        colours.append((r, g, b))
    return tuple(colours)


class CityscapesLabel(NamedTuple):
    name: str
    id: int
    train_id: int  # 255: not a training class
    colour: tuple[int, int, int]


CITYSCAPES_LABELS: tuple[CityscapesLabel, ...] = tuple(
    CityscapesLabel(*row)
    for row in (
        ("unlabeled", 0, 255, (0, 0, 0)),
        ("ego vehicle", 1, 255, (0, 0, 0)),
        ("rectification border", 2, 255, (0, 0, 0)),
        ("out of roi", 3, 255, (0, 0, 0)),
        ("static", 4, 255, (0, 0, 0)),
        ("dynamic", 5, 255, (111, 74, 0)),
        ("ground", 6, 255, (81, 0, 81)),
        ("road", 7, 0, (128, 64, 128)),
        ("sidewalk", 8, 1, (244, 35, 232)),
        ("parking", 9, 255, (250, 170, 160)),
        ("rail track", 10, 255, (230, 150, 140)),
        ("building", 11, 2, (70, 70, 70)),
        ("wall", 12, 3, (102, 102, 156)),
        ("fence", 13, 4, (190, 153, 153)),
        ("guard rail", 14, 255, (180, 165, 180)),
        ("bridge", 15, 255, (150, 100, 100)),
        ("tunnel", 16, 255, (150, 120, 90)),
        ("pole", 17, 5, (153, 153, 153)),
        ("polegroup", 18, 255, (153, 153, 153)),
        ("traffic light", 19, 6, (250, 170, 30)),
        ("traffic sign", 20, 7, (220, 220, 0)),
        ("vegetation", 21, 8, (107, 142, 35)),
        ("terrain", 22, 9, (152, 251, 152)),
        ("sky", 23, 10, (70, 130, 180)),
        ("person", 24, 11, (220, 20, 60)),
        ("rider", 25, 12, (255, 0, 0)),
        ("car", 26, 13, (0, 0, 142)),
        ("truck", 27, 14, (0, 0, 70)),
        ("bus", 28, 15, (0, 60, 100)),
        ("caravan", 29, 255, (0, 0, 90)),
        ("trailer", 30, 255, (0, 0, 110)),
        ("train", 31, 16, (0, 80, 100)),
        ("motorcycle", 32, 17, (0, 0, 230)),
        ("bicycle", 33, 18, (119, 11, 32)),
    )
)


def cityscapes_names(train_ids: bool) -> tuple[str, ...]:
    """The classes by label id (34), or by train id (19)."""
    if not train_ids:
        return tuple(label.name for label in CITYSCAPES_LABELS)
    trained = sorted((label.train_id, label.name) for label in CITYSCAPES_LABELS if label.train_id != 255)
    return tuple(name for _, name in trained)


ADE20K_CLASSES = (
    "other",
    "wall", "building", "sky", "floor", "tree", "ceiling", "road", "bed", "windowpane", "grass", "cabinet",
    "sidewalk", "person", "earth", "door", "table", "mountain", "plant", "curtain", "chair", "car", "water",
    "painting", "sofa", "shelf", "house", "sea", "mirror", "rug", "field", "armchair", "seat", "fence",
    "desk", "rock", "wardrobe", "lamp", "bathtub", "railing", "cushion", "base", "box", "column", "signboard",
    "chest of drawers", "counter", "sand", "sink", "skyscraper", "fireplace", "refrigerator", "grandstand",
    "path", "stairs", "runway", "case", "pool table", "pillow", "screen door", "stairway", "river", "bridge",
    "bookcase", "blind", "coffee table", "toilet", "flower", "book", "hill", "bench", "countertop", "stove",
    "palm", "kitchen island", "computer", "swivel chair", "boat", "bar", "arcade machine", "hovel", "bus",
    "towel", "light", "truck", "tower", "chandelier", "awning", "streetlight", "booth", "television receiver",
    "airplane", "dirt track", "apparel", "pole", "land", "bannister", "escalator", "ottoman", "bottle",
    "buffet", "poster", "stage", "van", "ship", "fountain", "conveyer belt", "canopy", "washer", "plaything",
    "swimming pool", "stool", "barrel", "basket", "waterfall", "tent", "bag", "minibike", "cradle", "oven",
    "ball", "food", "step", "tank", "trade name", "microwave", "pot", "animal", "bicycle", "lake",
    "dishwasher", "screen", "blanket", "sculpture", "hood", "sconce", "vase", "traffic light", "tray",
    "ashcan", "fan", "pier", "crt screen", "plate", "monitor", "bulletin board", "shower", "radiator",
    "glass", "clock", "flag",
)  # fmt: skip

CAMVID_CLASSES = (
    "Sky", "Building", "Pole", "Road", "Pavement", "Tree", "SignSymbol", "Fence", "Car", "Pedestrian",
    "Bicyclist", "Unlabelled",
)  # fmt: skip
