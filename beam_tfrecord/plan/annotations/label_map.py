"""A label map the user already has (`--label_map`): the class names and the ids a detection run
stores, so a model trained with that map is fine-tuned on ids it knows.

Two forms are read, local or gs://:
- the Object Detection API's `label_map.pbtxt` (`string_int_label_map.proto` as text: `item {
  id: 1 name: 'cat' display_name: 'Cat' }`, either quote style, comments, its other fields);
  parsed by protobuf's own text format (Beam already needs protobuf) against the message
  declared here, not by the OD API's package (which needs TensorFlow and the OD API installed);
- the `labels.txt` this project writes: line i is id i + 1.

A class is the item's `display_name` where it has one, else its `name` (COCO's own
`mscoco_label_map.pbtxt` names its classes `/m/01g317` and displays them `person`, the name COCO's
instances files use); an object matches an item by either. Ids may have gaps (COCO's map uses
80 ids of 1..90): every output counts ids by position from 1 (labels.txt line i, TFDS's
ClassLabel, the readers' labels), so each missing id holds a placeholder class, `(unused id
N)`, which no object has and which label_map.pbtxt leaves out.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

from beam_tfrecord import storage
from beam_tfrecord.labels.objects.label_map import is_unused, unused_name
from beam_tfrecord.plan.sources.base import SourceError

__all__ = ["LabelMap", "is_unused", "parse_label_map", "read_label_map", "unused_name"]

# More ids than any detection dataset's (Open Images: 601, LVIS: 1,203): a typo, not a map.
MAX_ID = 100_000
_PBTXT = re.compile(r"\A(?:\s|#[^\n]*\n)*item\s*:?\s*[{<]")
_PBTXT_SUFFIXES = (".pbtxt", ".pb.txt", ".prototxt")


@dataclass(frozen=True)
class LabelMap:
    """A label map as read.

    Args:
      names: id -> class name (the item's display_name, else its name), ids from 1.
      aliases: every name an object may carry (name and display_name) -> its class name.
      path: where it was read, for messages.
    """

    names: dict[int, str]
    aliases: dict[str, str]
    path: str

    @property
    def class_names(self) -> tuple[str, ...]:
        """The classes in id order from 1, a placeholder at each missing id."""
        return tuple(self.names.get(i, unused_name(i)) for i in range(1, max(self.names) + 1))


@functools.cache
def _item_message() -> type:
    """`string_int_label_map.proto`'s two messages, declared here (names, numbers and types as
    the OD API's), so protobuf's text parser reads the file and refuses what is not one."""
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="beam_tfrecord_label_map.proto", package="beam_tfrecord.label_map", syntax="proto2"
    )
    keypoint = proto.message_type.add(name="KeypointMap")
    keypoint.field.add(name="id", number=1, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    keypoint.field.add(name="label", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    frequency = proto.enum_type.add(name="LVISFrequency")
    for number, value in enumerate(("UNSPECIFIED", "FREQUENT", "COMMON", "RARE")):
        frequency.value.add(name=value, number=number)
    item = proto.message_type.add(name="StringIntLabelMapItem")
    optional, repeated = field.LABEL_OPTIONAL, field.LABEL_REPEATED
    for name, number, field_type, label, type_name in (
        ("name", 1, field.TYPE_STRING, optional, None),
        ("id", 2, field.TYPE_INT32, optional, None),
        ("display_name", 3, field.TYPE_STRING, optional, None),
        ("keypoints", 4, field.TYPE_MESSAGE, repeated, ".beam_tfrecord.label_map.KeypointMap"),
        ("ancestor_ids", 5, field.TYPE_INT32, repeated, None),
        ("descendant_ids", 6, field.TYPE_INT32, repeated, None),
        ("frequency", 7, field.TYPE_ENUM, optional, ".beam_tfrecord.label_map.LVISFrequency"),
        ("instance_count", 8, field.TYPE_INT32, optional, None),
    ):
        item.field.add(name=name, number=number, type=field_type, label=label, type_name=type_name)
    whole = proto.message_type.add(name="StringIntLabelMap")
    whole.field.add(
        name="item",
        number=1,
        type=field.TYPE_MESSAGE,
        label=repeated,
        type_name=".beam_tfrecord.label_map.StringIntLabelMapItem",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("beam_tfrecord.label_map.StringIntLabelMap")
    )


def _pbtxt_items(text: str, path: str) -> list[tuple[int, str, str]]:
    """(id, name, display_name) of each item; SourceError (label_map) naming the line that does not parse."""
    message = _item_message()()
    try:
        text_format.Parse(text, message)
    except text_format.ParseError as error:
        raise SourceError(f"{path} is not a label_map.pbtxt: {error}", field="label_map", file=path) from None
    items = []
    for index, item in enumerate(message.item, 1):
        if not item.HasField("id") or not (item.name or item.display_name):
            raise SourceError(f"{path}: item {index} needs an id and a name", field="label_map", file=path)
        items.append((item.id, item.name, item.display_name))
    return items


def _labels_txt_items(text: str) -> list[tuple[int, str, str]]:
    """labels.txt's lines as (id, name, ""): line i is id i + 1; a placeholder or blank line is a
    missing id."""
    lines = text.splitlines()
    return [(i, line, "") for i, line in enumerate(lines, 1) if line.strip() and not is_unused(line)]


def parse_label_map(text: str, path: str = "label_map") -> LabelMap:
    """A label_map.pbtxt's or a labels.txt's text (told apart by the name's `.pbtxt`, or an
    `item {` first) -> LabelMap. SourceError (field `label_map`) for a map that cannot give
    each object one id."""
    pbtxt = path.lower().endswith(_PBTXT_SUFFIXES) or _PBTXT.match(text) is not None
    items = _pbtxt_items(text, path) if pbtxt else _labels_txt_items(text)
    names: dict[int, str] = {}
    aliases: dict[str, str] = {}
    for label_id, name, display_name in items:
        if label_id == 0 and (display_name or name).lower() == "background":
            continue  # the OD API's optional explicit background
        if not 0 < label_id <= MAX_ID:
            raise SourceError(
                f"{path}: id {label_id} of {name!r} is not between 1 and {MAX_ID:,}",
                field="label_map",
                file=path,
            )
        if label_id in names:
            raise SourceError(f"{path}: id {label_id} is given twice", field="label_map", file=path)
        class_name = display_name or name
        if is_unused(class_name):
            raise SourceError(
                f"{path}: {class_name!r} is the name of a missing id", field="label_map", file=path
            )
        if class_name in names.values():
            raise SourceError(f"{path}: class {class_name!r} has two ids", field="label_map", file=path)
        names[label_id] = class_name
    if not names:
        raise SourceError(f"{path} names no class", field="label_map", file=path)
    for label_id, name, _ in items:
        named = names.get(label_id)
        if named is not None and name and name not in names.values():
            aliases.setdefault(name, named)  # an item's own class name wins over an alias
    aliases.update({name: name for name in names.values()})
    return LabelMap(dict(sorted(names.items())), aliases, path)


def read_label_map(path: str) -> LabelMap:
    """The label map at `path` (local or gs://); SourceError (field `label_map`) when it is
    missing or unreadable."""
    try:
        data = storage.read_bytes(path)
    except Exception as error:  # OSError locally; the storage client raises its own for gs://
        raise SourceError(f"{path} cannot be read: {error}", field="label_map", file=path) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SourceError(f"{path} is not UTF-8 text", field="label_map", file=path) from None
    return parse_label_map(text, storage.normalize(path))
