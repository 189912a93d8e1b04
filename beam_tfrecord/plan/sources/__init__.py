"""The annotation formats, one module each behind one interface (`base.SourceFormat`: its name,
the tasks it reads, how strongly a listing looks like it, how it loads into the common
`AnnotationSet`, the settings it honours), and the one registry that lists them (`registry`).

Modules: `base` (the interface, `LoadRequest`, `Listing`, `SourceError`), `registry` (the list,
the layout search), and the formats: `coco`, `voc`, `yolo`, `cityscapes`, `ade20k`, `folders`,
`pairs`. Adding a format is a module here and its line in `registry.FORMATS` (docs/code-layout.md).
"""

__all__ = ["ade20k", "base", "cityscapes", "coco", "folders", "pairs", "registry", "voc", "yolo"]
