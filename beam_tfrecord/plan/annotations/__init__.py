"""Annotation sources as plan facts, parsed and checked on the launcher: boxes, classes and masks
per image (COCO, Pascal VOC, YOLO), a class-id mask file per picture (Pascal VOC, Cityscapes,
ADE20K, a pair of folders); what every source gives is `beam_tfrecord.elements`'s
`ImageAnnotations`.

Modules: `load` (`load_annotations`, the planner's
entry point), `results` (what it returns: `AnnotationSet` and its problem records), `paths`
(`annotations_path` as written), `coco`, `voc`, `yolo` (the formats), `rle` (COCO's compressed
masks), `catalog` (the listing as the parsers see it), `locate` (where each format's files are,
beside the input too), `declared` (the splits a dataset declares), `matching` (the plan-time
check that the annotations match the pictures), `label_map` (a given label map's names and ids),
`growing` (an `--append`'s share of them: the new pictures', with the dataset's class ids),
`segmentation` (a segmentation run's masks, found as each layout keeps them),
`segmentation_classes` (the class tables of the datasets whose masks name none) and `captions`
(a captions run's sentences, from COCO's captions files or image, caption pairs).
"""

__all__ = [
    "captions",
    "catalog",
    "coco",
    "declared",
    "growing",
    "label_map",
    "load",
    "locate",
    "matching",
    "options",
    "paths",
    "results",
    "rle",
    "segmentation",
    "segmentation_classes",
    "voc",
    "yolo",
]
