"""Image-level classes from a labelling tool's export (CVAT's tags, Label Studio's choices) as a
classification run's labels: the format loads its pictures as for detection (matching, declared
splits, what every listed file is), and this module keeps each picture's classes instead of its
objects, as the class kind reads them (`labels.class_label`: `ImageAnnotations.values["class"]`).

Class names are the classes the pictures are given, in the order the format lists its labels
(CVAT's meta), then any other in sorted order; `class_names` given fixes them, and a class
outside it is dropped `unknown_category`. A picture given no class is unannotated: the planner
makes it an `unlabeled` reject.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from beam_tfrecord import reasons
from beam_tfrecord.labels.class_label import CLASS
from beam_tfrecord.plan.annotations.results import AnnotationSet, ObjectNote
from beam_tfrecord.plan.sources.base import LoadRequest

__all__ = ["picture_classes_of"]


def picture_classes_of(
    found: AnnotationSet, classes: Mapping[str, tuple[str, ...]], request: LoadRequest
) -> AnnotationSet:
    """`found` (a format's detection load) with each picture's `classes` (relpath -> class
    names) in place of its objects."""
    used = {name for names in classes.values() for name in names}
    if request.class_names:
        names = tuple(request.class_names)
    else:
        listed = [name for name in found.class_names if name in used]
        names = (*listed, *sorted(used - set(listed)))
    known = set(names)
    images = {}
    dropped = []
    for relpath, picture in found.images.items():
        given = classes.get(relpath, ())
        for name in given:
            if name not in known:
                detail = f"{found.format}: class {name!r} is not in class_names"
                dropped.append(ObjectNote(relpath, reasons.UNKNOWN_CATEGORY.code, detail))
        kept = [name for name in given if name in known]
        images[relpath] = dataclasses.replace(picture, objects=(), values={CLASS.name: kept} if kept else {})
    return dataclasses.replace(
        found,
        class_names=names,
        images=images,
        unannotated=frozenset(r for r, picture in images.items() if not picture.values),
        dropped=tuple(dropped),
        changed=(),
        task="classification",
        found_at=f"{found.found_at}; classes of the pictures themselves",
    )
