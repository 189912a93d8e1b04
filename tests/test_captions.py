"""Captions end to end: COCO 2017's captions files beside its instances files, Flickr8k's
captions.txt and its token file, converted the way a user points at them; every caption of every
picture kept in order, the ones that name nothing listed, the lines that cannot be read and the
pictures without one all accounted for."""

from __future__ import annotations

import json

import captiongen
import pytest
from conftest import convert
from imagegen import jpeg, write_tree
from outputcheck import rejects, summary

from beam_tfrecord.read.examples import iter_examples


def stored(output) -> dict[str, list[str]]:
    """filename -> its stored captions, over every split."""
    return {
        record["filename"]: record["caption"]
        for split in summary(output)["splits"]
        for record in iter_examples(str(output), split)
    }


def unmatched(output) -> list[dict]:
    with open(output / "annotations_without_image.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def test_coco_2017_captions_are_found_beside_the_instances_files_and_keep_their_splits(tmp_path):
    expected = captiongen.coco2017(tmp_path / "coco2017")
    out = tmp_path / "out"
    assert convert(tmp_path / "coco2017", out, "--task", "captions") == 0
    assert stored(out) == expected
    splits = {r["filename"]: s for s in summary(out)["splits"] for r in iter_examples(str(out), s)}
    assert {name for name, split in splits.items() if split == "validation"} == {
        name for name in expected if name.startswith("val2017/")
    }
    found = summary(out)
    assert found["captions"]["captions"] == sum(map(len, expected.values()))
    assert found["captions"]["pictures_without_caption"] == 0
    # The instances files are not read by a captions run: skipped, said so, never records.
    skipped = {r["path"] for r in rejects(out) if r["reason"] == "skipped"}
    assert "annotations/instances_val2017.json" in skipped


def test_a_split_folder_given_as_input_finds_its_captions_file_beside_it(tmp_path):
    expected = captiongen.coco2017(tmp_path / "coco2017")
    out = tmp_path / "out"
    assert convert(tmp_path / "coco2017" / "val2017", out, "--task", "captions") == 0
    assert stored(out) == {
        k.removeprefix("val2017/"): v for k, v in expected.items() if k.startswith("val2017/")
    }


@pytest.mark.parametrize("builder", ["flickr8k", "flickr8k_token"])
def test_flickr8k_captions_keep_every_caption_with_its_commas(tmp_path, builder):
    expected = getattr(captiongen, builder)(tmp_path / "flickr")
    out = tmp_path / "out"
    assert convert(tmp_path / "flickr", out, "--task", "captions", "--annotations", "pairs") == 0
    assert stored(out) == expected
    assert any("," in text for texts in expected.values() for text in texts)


def test_bad_lines_missing_pictures_and_pictures_without_captions_are_all_named(tmp_path):
    files = {f"photos/p{i}.jpg": jpeg(30, 20, seed=i) for i in range(4)}
    lines = [
        "image,caption",
        "p0.jpg,a dog on the grass",
        "p0.jpg,  a brown dog, running  ",
        "p1.jpg,two cats",
        "gone.jpg,a picture that is not there",
        "p2.jpg",  # no caption: named with its line number
        "p2.jpg,a bird",
    ]
    files["captions.csv"] = ("\n".join(lines) + "\n").encode()
    write_tree(tmp_path / "data", files)
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, "--task", "captions") == 0
    assert stored(out) == {
        "photos/p0.jpg": ["a dog on the grass", "a brown dog, running"],
        "photos/p1.jpg": ["two cats"],
        "photos/p2.jpg": ["a bird"],
        "photos/p3.jpg": [],
    }
    lines_out = {(u["annotation"], u["reason"]) for u in unmatched(out)}
    assert lines_out == {("captions.csv:5", "missing_image"), ("captions.csv:6", "bad_entry")}
    assert summary(out)["captions"]["pictures_without_caption"] == 1

    dropped = tmp_path / "dropped"
    assert convert(tmp_path / "data", dropped, "--task", "captions", "--unannotated", "drop") == 0
    assert {r["path"]: r["reason"] for r in rejects(dropped) if r["reason"] != "skipped"} == {
        "photos/p3.jpg": "unannotated"
    }


def test_an_instances_file_given_as_captions_is_refused_in_one_line(tmp_path, capsys):
    captiongen.coco2017(tmp_path / "coco2017")
    instances = tmp_path / "coco2017" / "annotations" / "instances_val2017.json"
    code = convert(
        tmp_path / "coco2017" / "val2017",
        tmp_path / "out",
        "--task",
        "captions",
        "--annotations_path",
        str(instances),
    )
    assert code == 2
    assert "instances file" in capsys.readouterr().err


def test_load_dataset_gives_each_picture_its_captions(tmp_path):
    import tensorflow as tf

    from beam_tfrecord.read.tf_data import load_dataset

    expected = captiongen.flickr8k(tmp_path / "flickr")
    out = tmp_path / "out"
    assert convert(tmp_path / "flickr", out, "--task", "captions") == 0
    images, captions = next(iter(load_dataset(str(out), image_size=(32, 32), batch_size=4, shuffle=False)))
    assert images.shape == (4, 32, 32, 3)
    assert isinstance(captions, tf.RaggedTensor)
    got = sorted(sorted(t.decode() for t in row) for row in captions.to_list())
    assert got == sorted(sorted(texts) for texts in expected.values())


def test_flickr8k_s_text_zip_lemma_file_is_not_more_captions_and_its_split_lists_are_kept(tmp_path):
    """Flickr8k_text.zip holds Flickr8k.token.txt, the same captions lemmatized
    (Flickr8k.lemma.token.txt) and the split lists Flickr_8k.{train,dev,test}Images.txt."""
    expected = captiongen.flickr8k_token(tmp_path / "flickr")
    text = tmp_path / "flickr" / "Flickr8k_text"
    lemma = (text / "Flickr8k.token.txt").read_text().replace(" a ", " the ")
    (text / "Flickr8k.lemma.token.txt").write_text(lemma)
    names = sorted(name.split("/")[-1] for name in expected)
    for word, chosen in (("train", names[:1]), ("dev", names[1:2]), ("test", names[2:])):
        (text / f"Flickr_8k.{word}Images.txt").write_text("".join(f"{n}\n" for n in chosen))
    out = tmp_path / "out"
    assert convert(tmp_path / "flickr", out, "--task", "captions") == 0
    assert stored(out) == expected  # five captions each, not ten
    splits = {
        r["filename"].split("/")[-1]: s for s in summary(out)["splits"] for r in iter_examples(str(out), s)
    }
    assert splits == {names[0]: "train", names[1]: "validation", names[2]: "test"}


def test_a_caption_that_opens_a_quote_keeps_to_its_own_line(tmp_path):
    files = {f"photos/p{i}.jpg": jpeg(30, 20, seed=i) for i in range(3)}
    lines = ["image,caption", 'p0.jpg,"a dog said "woof', "p1.jpg,a cat", "p2.jpg,a bird"]
    files["captions.csv"] = ("\n".join(lines) + "\n").encode()
    write_tree(tmp_path / "data", files)
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, "--task", "captions") == 0
    found = stored(out)
    assert found["photos/p1.jpg"] == ["a cat"] and found["photos/p2.jpg"] == ["a bird"]


@pytest.mark.parametrize(
    ("name", "style"),
    [
        ("captions.csv", "csv"),
        ("captions.csv", "csv_header"),
        ("captions.txt", "tabs"),
        ("annotations.json", "csv"),  # the content decides, not the extension
        ("results_20130124.token", "token"),
    ],
)
def test_a_file_of_pairs_named_with_annotations_path_is_read_as_pairs_without_annotations(
    tmp_path, name, style
):
    """`name.jpg, caption` lines, with or without a header, or `name<TAB>caption`, or Flickr's
    `name.jpg#N<TAB>caption`, given with annotations_path: read as pairs, never refused as "not
    JSON", and no --annotations needed."""
    expected = captiongen.flickr8k(tmp_path / "flickr")
    (tmp_path / "flickr" / "captions.txt").unlink()
    given = tmp_path / "elsewhere" / name
    captiongen.pairs_file(given, expected, style)
    out = tmp_path / "out"
    args = ("--task", "captions", "--annotations_path", str(given))
    assert convert(tmp_path / "flickr" / "Images", out, *args) == 0
    assert stored(out) == {k.removeprefix("Images/"): v for k, v in expected.items()}
    assert summary(out)["captions"]["pictures_without_caption"] == 0
    assert summary(out)["captions"]["kind"] == "pairs"


def test_a_coco_captions_file_on_one_line_or_pretty_printed_is_still_coco_s(tmp_path):
    expected = captiongen.coco2017(tmp_path / "coco2017")
    given = tmp_path / "coco2017" / "annotations" / "captions_val2017.json"
    given.write_text(json.dumps(json.loads(given.read_text()), indent=2))
    out = tmp_path / "out"
    args = ("--task", "captions", "--annotations_path", str(given))
    assert convert(tmp_path / "coco2017" / "val2017", out, *args) == 0
    assert stored(out) == {
        k.removeprefix("val2017/"): v for k, v in expected.items() if k.startswith("val2017/")
    }
