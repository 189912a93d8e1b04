"""Pascal VOC XMLs read against a listing: where each image's XML is found, what is kept of each
object, and hostile or broken XML rejecting only its own image, with nothing expanded or
fetched (a real HTTP server on 127.0.0.1 counts any request)."""

from __future__ import annotations

import dataclasses
import http.server
import threading
from typing import ClassVar

import pytest
from annotationgen import load_annotations, voc_xml
from imagegen import jpeg, png, write_tree

from beam_tfrecord.plan.listing import list_inputs


def load(root, annotations_path=None, files=None, **kwargs):
    return load_annotations("voc", files or list_inputs(str(root)), annotations_path, **kwargs)


@pytest.fixture
def voc_tree(tmp_path):
    root = tmp_path / "VOCdevkit"
    flags = "<pose>Left</pose><truncated>1</truncated><difficult>0</difficult>"
    write_tree(
        root,
        {
            "VOC2012/JPEGImages/2008_000001.jpg": jpeg(48, 32),
            "VOC2012/Annotations/2008_000001.xml": voc_xml(
                "2008_000001.jpg",
                [("dog", (3, 4, 20, 30), flags), ("person", (10, 1, 47.5, 31), "<difficult>1</difficult>")],
            ),
            "VOC2012/JPEGImages/2008_000002.jpg": jpeg(48, 32),
            "VOC2012/Annotations/2008_000002.xml": voc_xml("2008_000002.jpg", [("bird", (1, 1, 9, 9), "")]),
            "VOC2012/JPEGImages/2008_000003.jpg": jpeg(48, 32),  # no XML: a negative
            "VOC2012/Annotations/2008_000099.xml": voc_xml(
                "2008_000099.jpg", [("cat", (1, 1, 9, 9), "")] * 3
            ),
            "VOC2012/ImageSets/Main/train.txt": b"2008_000001\n2008_000002\n",
        },
    )
    return root


def test_the_standard_tree_gives_boxes_flags_pose_and_size(voc_tree):
    found = load(voc_tree)
    assert found.class_names == ("bird", "dog", "person")  # sorted names
    first = found.images["VOC2012/JPEGImages/2008_000001.jpg"]
    assert (first.source_id, first.width, first.height, first.normalized) == (
        "2008_000001.jpg",
        48,
        32,
        False,
    )
    dog, person = first.objects
    assert (dog.class_name, dog.xmin, dog.ymin, dog.xmax, dog.ymax) == ("dog", 3, 4, 20, 30)
    assert (dog.pose, dog.truncated, dog.difficult) == ("Left", True, False)
    assert (person.xmax, person.difficult, person.truncated, person.pose) == (47.5, True, False, "")
    assert dog.source_ref == "VOC2012/Annotations/2008_000001.xml#object 1"
    assert not found.problems and not found.dropped


def test_images_without_xml_are_negatives_and_xml_without_images_are_listed(voc_tree):
    found = load(voc_tree)
    assert found.unannotated == {"VOC2012/JPEGImages/2008_000003.jpg"}
    assert found.images["VOC2012/JPEGImages/2008_000003.jpg"].objects == ()
    (orphan,) = found.unmatched
    assert (orphan.annotation, orphan.name, orphan.reason, orphan.objects) == (
        "VOC2012/Annotations/2008_000099.xml",
        "2008_000099.jpg",
        "missing_image",
        3,
    )
    assert found.annotated_objects == 6


def test_every_xml_and_text_file_is_a_source(voc_tree):
    found = load(voc_tree)
    assert set(found.sources) == {
        "VOC2012/Annotations/2008_000001.xml",
        "VOC2012/Annotations/2008_000002.xml",
        "VOC2012/Annotations/2008_000099.xml",
        "VOC2012/ImageSets/Main/train.txt",
    }
    assert found.sources["VOC2012/Annotations/2008_000001.xml"] == (
        "Pascal VOC annotations of VOC2012/JPEGImages/2008_000001.jpg"
    )
    assert set(found.images) == {f"VOC2012/JPEGImages/2008_00000{i}.jpg" for i in (1, 2, 3)}


def test_xml_beside_the_image_or_under_annotations_path(tmp_path):
    write_tree(
        tmp_path,
        {
            "photos/a.jpg": jpeg(),
            "photos/a.xml": voc_xml("a.jpg", [("cat", (1, 1, 5, 5), "")]),
            "photos/b.png": png(),
            "elsewhere/b.xml": voc_xml("b.png", [("dog", (2, 2, 6, 6), "")]),
        },
    )
    found = load(tmp_path / "photos", str(tmp_path / "elsewhere"))
    assert [o.class_name for o in found.images["a.jpg"].objects] == ["cat"]
    assert [o.class_name for o in found.images["b.png"].objects] == ["dog"]
    assert found.images["b.png"].objects[0].source_ref == f"{tmp_path}/elsewhere/b.xml#object 1"
    assert not found.unannotated and not found.unmatched


def test_a_malformed_xml_rejects_its_image_alone_with_its_line(voc_tree):
    (voc_tree / "VOC2012/Annotations/2008_000002.xml").write_bytes(
        b"<annotation>\n<filename>x</filename>\n<object><name>dog</object>\n</annotation>"
    )
    found = load(voc_tree)
    (problem,) = found.problems
    assert (problem.relpath, problem.reason) == ("VOC2012/JPEGImages/2008_000002.jpg", "bad_annotation")
    assert problem.detail == (
        "VOC2012/Annotations/2008_000002.xml is not valid XML: mismatched tag at line 3 column 20"
    )
    assert len(found.images["VOC2012/JPEGImages/2008_000001.jpg"].objects) == 2


def test_objects_that_are_not_boxes_are_dropped_with_a_reason(tmp_path):
    objects = [
        ("cat", (1, 1, 5, 5), ""),
        ("cat", (1, "one", 5, 5), ""),
        ("cat", (5, 1, 5, 9), ""),
        ("", (1, 1, 5, 5), ""),
        ("cat", (1, 1, 5, 5), "<difficult>maybe</difficult>"),
    ]
    xml = voc_xml("a.jpg", objects).replace(
        b"</annotation>", b"<object><name>cat</name></object></annotation>"
    )
    write_tree(tmp_path, {"a.jpg": jpeg(), "a.xml": xml, "b.jpg": jpeg(), "b.xml": b"<other/>"})
    found = load(tmp_path)
    assert len(found.images["a.jpg"].objects) == 1
    assert [(n.reason, n.detail) for n in found.dropped] == [
        ("bad_object", "a.xml#object 2: <ymin> 'one' is not a number"),
        ("zero_area", "a.xml#object 3: box 5,1 to 5,9 has no area"),
        ("bad_object", "a.xml#object 4: no <name>"),
        ("bad_object", "a.xml#object 5: <difficult> 'maybe' is not 0 or 1"),
        ("bad_object", "a.xml#object 6: no <bndbox>"),
    ]
    (problem,) = found.problems
    assert (problem.relpath, problem.reason) == ("b.jpg", "bad_annotation")
    assert "root element is <other>" in problem.detail


def test_fixed_class_names_set_the_order_and_drop_the_rest(voc_tree):
    found = load(voc_tree, class_names=["person", "dog"])
    assert found.class_names == ("person", "dog")
    (note,) = found.dropped
    assert (note.relpath, note.reason) == ("VOC2012/JPEGImages/2008_000002.jpg", "unknown_category")
    assert note.detail == "VOC2012/Annotations/2008_000002.xml#object 1: class 'bird' is not in class_names"


def test_two_images_with_one_stem_cannot_share_an_xml(tmp_path):
    write_tree(
        tmp_path, {"x.jpg": jpeg(), "x.png": png(), "x.xml": voc_xml("x.jpg", [("cat", (1, 1, 5, 5), "")])}
    )
    found = load(tmp_path)
    assert [(p.relpath, p.reason) for p in found.problems] == [
        ("x.jpg", "ambiguous_annotation"),
        ("x.png", "ambiguous_annotation"),
    ]
    assert not found.unmatched  # the XML is claimed, if ambiguously: not an orphan


def test_an_xml_too_large_to_be_an_annotation_is_not_read(tmp_path):
    write_tree(tmp_path, {"a.jpg": jpeg(), "a.xml": voc_xml("a.jpg", [])})
    files = [
        dataclasses.replace(f, size=2**30) if f.relpath == "a.xml" else f for f in list_inputs(str(tmp_path))
    ]
    (problem,) = load(tmp_path, files=files).problems
    assert problem.detail == "a.xml is 1024 MiB: too large, not read"


class _Counting(http.server.BaseHTTPRequestHandler):
    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Counting.requests.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'<!ENTITY leaked "FETCHED">')

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def listener():
    """A real HTTP server on 127.0.0.1 that records every request it gets."""
    _Counting.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Counting.requests
    server.shutdown()
    server.server_close()


def test_hostile_xml_is_refused_per_image_with_nothing_expanded_or_fetched(tmp_path, listener):
    url, requests = listener
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE")
    laughs = "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10))
    head = '<?xml version="1.0"?><!DOCTYPE '
    body = "<annotation><filename>{}</filename></annotation>"
    bomb = f'{head}a [<!ENTITY lol0 "lol">{laughs}]>' + body.format("&lol9;")
    local = f'{head}a [<!ENTITY x SYSTEM "file://{secret}">]>' + body.format("&x;")
    remote = f'{head}a [<!ENTITY x SYSTEM "{url}/entity">]>' + body.format("&x;")
    parameter = f'{head}a [<!ENTITY % p SYSTEM "{url}/param"> %p;]><annotation/>'
    dtd = f'{head}annotation SYSTEM "{url}/voc.dtd">' + body.format("d.jpg")
    files = {"input/ok.jpg": jpeg(), "input/ok.xml": voc_xml("ok.jpg", [("cat", (1, 1, 5, 5), "")])}
    for name, text in {
        "bomb": bomb,
        "local": local,
        "remote": remote,
        "parameter": parameter,
        "dtd": dtd,
    }.items():
        files[f"input/{name}.jpg"] = jpeg()
        files[f"input/{name}.xml"] = text.encode()
    write_tree(tmp_path, files)
    found = load(tmp_path / "input")
    problems = {p.relpath: p for p in found.problems}
    assert set(problems) == {"bomb.jpg", "local.jpg", "remote.jpg", "parameter.jpg"}
    assert {p.reason for p in problems.values()} == {"unsafe_annotation"}
    assert problems["bomb.jpg"].detail.startswith("bomb.xml: refused, it declares the XML entity 'lol0'")
    assert f"(external: {url}/entity)" in problems["remote.jpg"].detail
    assert found.images["dtd.jpg"].source_id == "d.jpg"  # an external DTD is neither fetched nor needed
    assert [o.class_name for o in found.images["ok.jpg"].objects] == ["cat"]
    assert requests == []
    assert "TOP-SECRET" not in repr(found) and "lol" * 3 not in repr(found)
