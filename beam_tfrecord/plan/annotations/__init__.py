"""Annotation sources (COCO, Pascal VOC, YOLO) as plan facts: boxes, classes and masks per image,
parsed and checked on the launcher; see `objects` for what every source gives."""

__all__ = ["objects"]
