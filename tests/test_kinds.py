"""The seam of the kinds of label: every stage loops over a run's kinds and asks each its part. A
kind defined here (free-text tags per picture), with its key group in the table, a task made of
it and a format that reads it, each added for one test, goes through the planner, the workers,
the writer, the tally, the summary, the readers and inspect with no edit to any stage."""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from conftest import local_pipeline
from imagegen import jpeg, write_tree

import beam_tfrecord
from beam_tfrecord import keys, labels, tasks
from beam_tfrecord.elements import ImageAnnotations, PlannedInput, RecordFields
from beam_tfrecord.keys import RecordKey, RecordLayout
from beam_tfrecord.labels import (
    Checked,
    Checks,
    FileReader,
    KindTally,
    LabelKind,
    PictureFit,
    Placed,
    ReadContext,
    Section,
    SectionInputs,
    TargetOptions,
    TfTarget,
)
from beam_tfrecord.labels.geometry import PixelTransform
from beam_tfrecord.output.mode import OutputKind, OutputMode
from beam_tfrecord.plan.annotations.catalog import partition, stem
from beam_tfrecord.plan.annotations.options import AnnotationConfig
from beam_tfrecord.plan.annotations.results import AnnotationSet
from beam_tfrecord.plan.sources import registry
from beam_tfrecord.plan.sources.base import CERTAIN, Listing, LoadRequest, SourceFormat

TAG = RecordKey("tag", "image/tag", "bytes", text=True, ragged=True, tfds="text")


@dataclasses.dataclass
class TagTally(KindTally):
    per_picture: Counter = dataclasses.field(default_factory=Counter)

    def add(self, facts: Any, split: str, labels_seen: Counter) -> None:
        self.per_picture[facts] += 1


@dataclasses.dataclass
class TagSummary(Section):
    tags: int = 0
    pictures_with_tags: int = 0

    def rows(self) -> list[tuple[str, str]]:
        return [("tags", f"{self.tags} on {self.pictures_with_tags} pictures")]


class _Tags(TfTarget):
    ragged = True

    def pair(self, record: dict[str, Any], image: Any, source_hw: Any, fit: PictureFit) -> Any:
        return image, record[TAG.key]


class _TagChecks(Checks):
    def record(
        self, facts: Mapping[str, Any], shape: tuple[int, ...], where: str, errors: list[str]
    ) -> Checked:
        return Checked(shown=",".join(t.decode() for t in facts["tag"]) or "(no tag)")


class TagsKind(LabelKind):
    """Free-text tags per picture, stored as `image/tag` as the plan gives them."""

    name = "tags"
    section_key = "tags"
    section_type = TagSummary

    def key_groups(self, setting: Any) -> tuple[str, ...]:
        return ("tags",)

    def encoders(self) -> Mapping[str, Callable[[RecordFields], Any]]:
        return {"tag": lambda fields: fields.labels["tags"]}

    def place(
        self,
        item: PlannedInput,
        transform: PixelTransform,
        setting: Any,
        placed: Mapping[str, Placed],
        read: FileReader,
    ) -> Placed:
        found = tuple(item.annotations.values.get("tags", ())) if item.annotations else ()
        return Placed(found, len(found))

    def new_tally(self) -> TagTally:
        return TagTally()

    def section(self, facts: Any, tally: KindTally, inputs: SectionInputs) -> TagSummary:
        assert isinstance(tally, TagTally)
        stored = sum(k * n for k, n in tally.per_picture.items())
        return TagSummary(stored, sum(n for k, n in tally.per_picture.items() if k))

    def holds_lists(self, layout: RecordLayout) -> bool:
        return True

    def tf_target(self, context: ReadContext, options: TargetOptions, channels: int | None) -> TfTarget:
        return _Tags()

    def checks(self, class_names: tuple[str, ...] | None, section: Section | None) -> Checks:
        return _TagChecks()


class TagFiles(SourceFormat):
    """`x.tags.txt` beside `x.jpg`: one tag a line."""

    name = "tagfiles"
    title = "Tag files"
    tasks = ("tagging",)
    help = "a name.tags.txt beside each picture"
    looked_for = {"tagging": "a .tags.txt beside each picture"}  # noqa: RUF012
    options = ("path",)
    suffixes = (".txt",)

    def claims(self, relpath: str, task: str) -> bool:
        return relpath.endswith(".tags.txt")

    def score(self, task: str, listing: Listing) -> float:
        return CERTAIN if any(self.claims(r, task) for r in listing.catalog.annotation_files) else 0.0

    def load(self, request: LoadRequest) -> AnnotationSet:
        listed = partition(request.files)
        images = {}
        for relpath in listed.images:
            found = listed.annotation_files.get(stem(relpath) + ".tags.txt")
            tags = pathlib.Path(found.path).read_text().split() if found is not None else []
            images[relpath] = ImageAnnotations((), stem(relpath), values={"tags": tags} if tags else {})
        return AnnotationSet(
            self.name,
            (),
            images,
            unannotated=frozenset(r for r, found in images.items() if not found.values),
            sources={r: "a tags file, read" for r in listed.annotation_files},
            found_at="tag files under --input",
            task="tagging",
        )


@pytest.fixture
def tags_kind(monkeypatch):
    """The tags kind, its key group, the tagging task and the tag files format, for one test."""
    kind = TagsKind()
    monkeypatch.setitem(labels.KINDS, kind.name, kind)
    monkeypatch.setitem(keys.TABLES["tfds"].groups, "tags", (TAG,))
    task = tasks.Task("tagging", "free-text tags per picture", ("tags",), "usage.md")
    monkeypatch.setitem(tasks.TASKS, task.name, task)
    monkeypatch.setattr(tasks, "TASK_NAMES", (*tasks.TASK_NAMES, task.name))
    monkeypatch.setattr(registry, "FORMATS", (*registry.FORMATS, TagFiles()))
    return kind


def test_a_kind_added_with_its_task_and_format_goes_through_every_stage(tmp_path, tags_kind):
    write_tree(
        tmp_path / "data",
        {
            "a.jpg": jpeg(40, 30, seed=1),
            "a.tags.txt": b"sunny beach\n",
            "b.jpg": jpeg(40, 30, seed=2),
            "b.tags.txt": b"night\n",
        },
    )
    source = beam_tfrecord.SourceConfig(
        str(tmp_path / "data"), annotations=AnnotationConfig(task="tagging", format="tagfiles")
    )
    out = tmp_path / "out"
    config = beam_tfrecord.ConvertConfig(output=str(out))
    staged = beam_tfrecord.prepare(source, config, mode=OutputMode(OutputKind.OVERWRITE))
    with local_pipeline() as pipeline:
        _ = pipeline | beam_tfrecord.ImagesToTFRecords(staged, config)

    written = json.loads((out / "summary.json").read_text())
    assert written["tags"] == {"tags": 3, "pictures_with_tags": 2}
    assert written["records"] == 2 and written["consistent"]
    found = {r["filename"]: r["tag"] for r in beam_tfrecord.iter_examples(str(out), "train")}
    assert found == {"a.jpg": ["sunny", "beach"], "b.jpg": ["night"]}
    dataset = beam_tfrecord.load_dataset(str(out), "train", batch_size=None, shuffle=False)
    read = sorted(sorted(t.decode() for t in tags.numpy()) for _, tags in dataset)
    assert read == [["beach", "sunny"], ["night"]]
    from beam_tfrecord.read.verify import verify_output

    report = verify_output(str(out))
    assert report.errors == [] and {s.class_name for s in report.samples} == {"sunny,beach", "night"}
