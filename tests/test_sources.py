"""The seam of the annotation formats: one registry lists them, and everything that chooses a
format asks it. A format defined here, added to the registry for one test, is found by the
layout search and converted into records by the real command, with no edit to any stage."""

from __future__ import annotations

import ast
import pathlib
import posixpath

import pytest
import tensorflow as tf
from conftest import convert
from imagegen import jpeg, write_tree
from outputcheck import rejects, shard_files, summary

import beam_tfrecord
from beam_tfrecord.config_base import ConfigError, declared
from beam_tfrecord.elements import ImageAnnotations, ObjectBox
from beam_tfrecord.keys import RecordLayout
from beam_tfrecord.plan.annotations.catalog import partition, stem
from beam_tfrecord.plan.annotations.options import AnnotationConfig
from beam_tfrecord.plan.annotations.paths import AnnotationPath
from beam_tfrecord.plan.annotations.results import AnnotationSet
from beam_tfrecord.plan.listing import list_inputs
from beam_tfrecord.plan.planner import make_plan
from beam_tfrecord.plan.source_config import SourceConfig
from beam_tfrecord.plan.sources import registry
from beam_tfrecord.plan.sources.base import CERTAIN, Listing, LoadRequest, SourceError, SourceFormat
from beam_tfrecord.write import schema as schema_lib

PACKAGE = pathlib.Path(beam_tfrecord.__file__).parent


class Toy(SourceFormat):
    """A toy format: `x.boxes.txt` beside `x.jpg`, a line `name xmin ymin xmax ymax` an object."""

    name = "toy"
    title = "Toy"
    tasks = ("detection",)
    help = "a name.boxes.txt beside each picture"
    looked_for = {"detection": "a .boxes.txt beside each picture"}  # noqa: RUF012
    options = ("path",)
    suffixes = (".txt",)

    def claims(self, relpath: str, task: str) -> bool:
        return relpath.endswith(".boxes.txt")

    def score(self, task: str, listing: Listing) -> float:
        return CERTAIN if any(self.claims(r, task) for r in listing.catalog.annotation_files) else 0.0

    def load(self, request: LoadRequest) -> AnnotationSet:
        listed = partition(request.files)
        images = {}
        for relpath in listed.images:
            boxes = listed.annotation_files.get(stem(relpath) + ".boxes.txt")
            objects = ()
            if boxes is not None:
                lines = pathlib.Path(boxes.path).read_text().splitlines()
                objects = tuple(
                    ObjectBox(*map(float, values), name, source_ref=f"{boxes.relpath}:{number}")
                    for number, (name, *values) in enumerate((line.split() for line in lines), 1)
                )
            images[relpath] = ImageAnnotations(objects, posixpath.basename(relpath))
        names = sorted({obj.class_name for found in images.values() for obj in found.objects})
        return AnnotationSet(
            self.name,
            tuple(names),
            images,
            unannotated=frozenset(r for r, found in images.items() if not found.objects),
            sources={r: "a toy boxes file, read" for r in listed.annotation_files},
            found_at="Toy annotations under --input",
            looked_for=self.looked_for[request.task],
        )


@pytest.fixture
def toy(monkeypatch):
    """The toy format in the registry for one test (restored after it)."""
    fmt = Toy()
    monkeypatch.setattr(registry, "FORMATS", (*registry.FORMATS, fmt))
    return fmt


def test_the_annotations_choices_and_help_are_the_registrys():
    (spec,) = [d.spec for d in declared(AnnotationConfig) if d.name == "format"]
    assert (
        spec.choices
        == registry.names()
        == (
            "coco",
            "cvat",
            "voc",
            "yolo",
            "label_studio",
            "labelme",
            "cityscapes",
            "ade20k",
            "folders",
            "pairs",
        )
    )
    for task in registry.annotation_tasks():
        assert f"{', '.join(f.name for f in registry.reading(task))} ({task})" in spec.help
    assert [f.name for f in registry.reading("segmentation")] == [
        "cvat",
        "voc",
        "yolo",
        "label_studio",
        "labelme",
        "cityscapes",
        "ade20k",
        "folders",
    ]
    assert registry.task_of("pairs") == "captions" and registry.task_of("yolo") == "detection"
    # A run given neither --task nor --annotations is told of the formats a format alone stands
    # for (detection's), never of classification's, which need --task.
    with pytest.raises(ConfigError, match=r"is needed: coco, cvat, voc, yolo, label_studio or labelme"):
        AnnotationConfig()


def test_every_format_declares_what_the_interface_asks():
    fields = {d.name for d in declared(AnnotationConfig)}
    for fmt in registry.FORMATS:
        assert fmt.tasks and set(fmt.tasks) <= set(beam_tfrecord.tasks.TASK_NAMES), fmt
        assert set(fmt.looked_for) == set(fmt.tasks), fmt
        assert set(fmt.options) <= fields, fmt
        assert fmt.title and fmt.help, fmt


def test_a_format_added_to_the_registry_is_found_and_converted(tmp_path, toy):
    write_tree(
        tmp_path / "data",
        {
            "a.jpg": jpeg(40, 30, seed=1),
            "a.boxes.txt": b"cat 2 3 20 25\ndog 5 5 30 28\n",
            "b.jpg": jpeg(40, 30, seed=2),
            "b.boxes.txt": b"dog 1 1 10 10\n",
        },
    )
    files = list_inputs(str(tmp_path / "data"))
    assert registry.find("detection", files) is toy
    out = tmp_path / "out"
    assert convert(tmp_path / "data", out, "--task", "detection") == 0
    assert summary(out)["objects"]["kind"] == "toy"
    assert summary(out)["objects"]["stored"] == 3
    assert [r["reason"] for r in rejects(out)] == ["skipped", "skipped"]
    spec = schema_lib.parse_spec(RecordLayout("tfds", labeled=False, groups=("objects",)))
    names = {}
    for raw in tf.data.TFRecordDataset(shard_files(out, "train")):
        record = tf.io.parse_single_example(raw, spec)
        names[record["image/filename"].numpy().decode()] = record["image/object/class/text"].numpy().tolist()
    assert names == {"a.jpg": [b"cat", b"dog"], "b.jpg": [b"dog"]}


def test_a_typed_error_carries_its_field_and_file(tmp_path):
    write_tree(tmp_path / "data", {"a.jpg": jpeg(20, 20, seed=1), "data.yaml": b"names: [a, a]\n"})
    files = list_inputs(str(tmp_path / "data"))
    missing = str(tmp_path / "nowhere")
    with pytest.raises(SourceError) as error:
        registry.named("voc").load(LoadRequest("detection", files, (AnnotationPath(missing),)))
    assert (error.value.field, error.value.file, error.value.detail) == (
        "annotations_path",
        missing,
        f"{missing} does not exist",
    )
    with pytest.raises(SourceError) as error:
        registry.named("yolo").load(LoadRequest("detection", files))
    assert (error.value.field, error.value.file) == ("annotations", "data.yaml")
    assert error.value.detail == "YOLO class names: data.yaml names 'a' twice"
    # The planner turns each into a ConfigError by its field, never by reading its text.
    source = SourceConfig(str(tmp_path / "data"), annotations=AnnotationConfig("yolo"))
    with pytest.raises(ConfigError) as config_error:
        make_plan(files, source)
    assert (config_error.value.name, config_error.value.problem) == (
        "annotations",
        "(yolo): YOLO class names: data.yaml names 'a' twice",
    )
    source = SourceConfig(str(tmp_path / "data"), annotations=AnnotationConfig("voc", missing))
    with pytest.raises(ConfigError) as config_error:
        make_plan(files, source)
    assert (config_error.value.name, config_error.value.problem) == (
        "annotations_path",
        f"{missing} does not exist",
    )


def test_the_shared_steps_import_no_format():
    """plan.annotations is what the formats share (the locator among them): it imports the
    interface (plan.sources.base), never a format. The registry is asked only by the options
    (their choices and help) and by the objects steps, inside a function, for their hint."""
    wrong = []
    for path in sorted((PACKAGE / "plan" / "annotations").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(
                "beam_tfrecord.plan.sources"
            ):
                continue
            names = (
                {node.module}
                if node.module != "beam_tfrecord.plan.sources"
                else {f"{node.module}.{a.name}" for a in node.names}
            )
            allowed = {"beam_tfrecord.plan.sources.base"}
            if path.name in ("objects.py", "options.py"):
                allowed.add("beam_tfrecord.plan.sources.registry")
            wrong += [f"{path.name}: {name}" for name in sorted(names - allowed)]
    assert wrong == []


class Tags(SourceFormat):
    """A toy format of image-level classes (as CVAT's tags): `x.tags.txt` beside `x.jpg`, a tag a
    line; it reads detection too (a format given alone stands for that)."""

    name = "tags"
    title = "Tags"
    tasks = ("classification", "detection")
    help = "a name.tags.txt beside each picture"
    looked_for = {"classification": "a .tags.txt beside each picture", "detection": "nowhere"}  # noqa: RUF012
    suffixes = (".txt",)

    def score(self, task: str, listing: Listing) -> float:
        return 0.0

    def load(self, request: LoadRequest) -> AnnotationSet:
        listed = partition(request.files)
        images = {}
        for relpath in listed.images:
            tags = listed.annotation_files.get(stem(relpath) + ".tags.txt")
            found = pathlib.Path(tags.path).read_text().split() if tags is not None else []
            images[relpath] = ImageAnnotations((), stem(relpath), values={"class": found} if found else {})
        return AnnotationSet(
            self.name,
            ("bird", "cat", "dog"),
            images,
            unannotated=frozenset(r for r, found in images.items() if not found.values),
            sources={r: "a tags file, read" for r in listed.annotation_files},
            found_at="Tags under --input",
        )


def test_a_format_s_image_level_classes_label_a_classification_run(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "FORMATS", (*registry.FORMATS, Tags()))
    write_tree(
        tmp_path / "data" / "folder",
        {
            "a.jpg": jpeg(20, 20, seed=1),
            "a.tags.txt": b"dog\n",
            "b.jpg": jpeg(20, 20, seed=2),
            "b.tags.txt": b"cat\n",
            "c.jpg": jpeg(20, 20, seed=3),  # no tag: unlabeled, never the folder's name
            "d.jpg": jpeg(20, 20, seed=4),
            "d.tags.txt": b"cat\ndog\n",
        },
    )
    source = SourceConfig(
        str(tmp_path / "data"), annotations=AnnotationConfig(task="classification", format="tags")
    )
    plan = make_plan(list_inputs(str(tmp_path / "data")), source)
    assert plan.class_names == ["bird", "cat", "dog"]
    assert {item.relpath: (item.label, item.label_text) for item in plan.inputs} == {
        "folder/a.jpg": (2, "dog"),
        "folder/b.jpg": (1, "cat"),
    }
    by_reason = {r.path: r.reason for r in plan.rejects if r.reason != "skipped"}
    assert by_reason == {"folder/c.jpg": "unlabeled", "folder/d.jpg": "bad_annotation"}
    # Given alone, the format stands for its other task; `--task classification` alone, the folders.
    assert registry.task_of("tags") == "detection"
    assert SourceConfig("data", annotations=AnnotationConfig(task="classification")).annotations is None
