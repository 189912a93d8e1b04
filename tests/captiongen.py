"""Caption datasets made by the tests themselves, laid out as their sources ship them: COCO 2017's
`annotations/captions_<split>2017.json` beside `instances_*`, Flickr8k's Kaggle `captions.txt`
(`image,caption` with a header, five lines a picture, commas unquoted inside captions) and its
original `Flickr8k.token.txt` (`name.jpg#N<TAB>caption`). Each builder returns the captions a
converter must store, per picture relpath under the dataset root, in order."""

from __future__ import annotations

import json
import pathlib

from imagegen import jpeg, write_tree

WORDS = ("a dog", "two children", "a man in a red shirt", "a black cat", "people")
PLACES = ("on the grass", "near a lake, at dusk", "in the snow", "by a wall", "on a street")


def caption(picture: int, index: int) -> str:
    """A caption that differs by picture and by index, some with commas in them."""
    return f"{WORDS[(picture + index) % len(WORDS)]} {PLACES[(picture * 2 + index) % len(PLACES)]} ({index})"


def coco2017(root: pathlib.Path, per_split: int = 3, captions_per_picture: int = 5) -> dict[str, list[str]]:
    """coco2017/{train2017,val2017}/*.jpg with annotations/captions_*2017.json (and an instances
    file beside them, as the download holds)."""
    expected: dict[str, list[str]] = {}
    files: dict[str, bytes] = {}
    next_id = 1
    for split in ("train2017", "val2017"):
        images, annotations = [], []
        for _ in range(per_split):
            image_id = next_id
            next_id += 1
            name = f"{image_id:012d}.jpg"
            files[f"{split}/{name}"] = jpeg(40, 30, seed=image_id)
            images.append({"id": image_id, "file_name": name, "width": 40, "height": 30})
            texts = [caption(image_id, k) for k in range(captions_per_picture)]
            expected[f"{split}/{name}"] = texts
            for k, text in enumerate(texts):
                # COCO's captions carry stray spaces and newlines; the converter trims them.
                annotations.append({"id": image_id * 100 + k, "image_id": image_id, "caption": f" {text}\n"})
        document = {"info": {"year": 2017}, "images": images, "annotations": annotations}
        files[f"annotations/captions_{split}.json"] = json.dumps(document).encode()
        instances = {"images": images, "annotations": [], "categories": [{"id": 1, "name": "person"}]}
        files[f"annotations/instances_{split}.json"] = json.dumps(instances).encode()
    write_tree(root, files)
    return expected


def flickr8k(root: pathlib.Path, pictures: int = 4, per_picture: int = 5) -> dict[str, list[str]]:
    """Kaggle's Flickr8k: Images/*.jpg and captions.txt (`image,caption`, a header, unquoted
    commas)."""
    expected: dict[str, list[str]] = {}
    files: dict[str, bytes] = {}
    lines = ["image,caption"]
    for i in range(pictures):
        name = f"{1000268201 + i}_693b08cb0e.jpg"
        files[f"Images/{name}"] = jpeg(44, 30, seed=i + 50)
        expected[f"Images/{name}"] = [caption(i, k) for k in range(per_picture)]
        lines += [f"{name},{text}" for text in expected[f"Images/{name}"]]
    files["captions.txt"] = ("\n".join(lines) + "\n").encode()
    write_tree(root, files)
    return expected


def flickr8k_token(root: pathlib.Path, pictures: int = 3) -> dict[str, list[str]]:
    """The original Flickr8k text release: Flicker8k_Dataset/*.jpg and Flickr8k.token.txt."""
    expected: dict[str, list[str]] = {}
    files: dict[str, bytes] = {}
    lines = []
    for i in range(pictures):
        name = f"{2000000 + i}_abc.jpg"
        files[f"Flicker8k_Dataset/{name}"] = jpeg(36, 28, seed=i + 80)
        expected[f"Flicker8k_Dataset/{name}"] = [caption(i + 3, k) for k in range(5)]
        lines += [f"{name}#{k}\t{text}" for k, text in enumerate(expected[f"Flicker8k_Dataset/{name}"])]
    files["Flickr8k_text/Flickr8k.token.txt"] = ("\n".join(lines) + "\n").encode()
    write_tree(root, files)
    return expected


def pairs_file(path: pathlib.Path, captions: dict[str, list[str]], style: str) -> None:
    """`captions` (picture relpath -> its captions) written as a file of pairs the way the
    datasets keep them, each picture by its file name:
    - `csv`: `name.jpg,caption` lines without a header (commas unquoted in captions, as
      Flickr8k's captions.txt writes them under its header);
    - `csv_header`: the same under Flickr8k's header `image,caption`;
    - `tabs`: `name.jpg<TAB>caption` lines;
    - `token`: Flickr30k's `results_20130124.token` lines, `name.jpg#N<TAB>caption`."""
    lines = ["image,caption"] if style == "csv_header" else []
    for relpath, texts in captions.items():
        name = relpath.rsplit("/", 1)[-1]
        for index, text in enumerate(texts):
            if style == "token":
                lines.append(f"{name}#{index}\t{text}")
            elif style == "tabs":
                lines.append(f"{name}\t{text}")
            else:
                lines.append(f"{name},{text}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
