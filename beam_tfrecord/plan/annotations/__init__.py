"""Annotation sources as plan facts, parsed and checked on the launcher: what every format
(plan.sources: COCO, Pascal VOC, YOLO, Cityscapes, ADE20K, a pair of folders, image, caption
pairs) shares. What every format gives is `results.AnnotationSet`, each picture's
`beam_tfrecord.elements`' `ImageAnnotations`.

Modules: `objects` (the steps of the per-picture objects formats: locate, read, bring back,
declared splits, a label map), `segmentation` (a segmentation run's masks, paired as each layout
keeps them), `captions` (a captions run's sentences, from its format's files), `results` (what
loading gives: `AnnotationSet` and its problem records), `paths` (`annotations_path` as
written), `coco_json` (COCO's JSON files, read in one pass), `rle` (COCO's compressed masks),
`catalog` (the listing as the parsers see it), `locate` (what finding the files beside the input
takes, for every format), `declared` (the splits a dataset declares), `matching` (the plan-time
check that the annotations match the pictures), `label_map` (a given label map's names and
ids), `growing` (an `--append`'s share of them: the new pictures', with the dataset's class
ids), `segmentation_classes` (the class tables of the datasets whose masks name none) and
`options` (`AnnotationConfig`).
"""

__all__ = [
    "captions",
    "catalog",
    "coco_json",
    "declared",
    "growing",
    "label_map",
    "locate",
    "matching",
    "objects",
    "options",
    "paths",
    "results",
    "rle",
    "segmentation",
    "segmentation_classes",
]
