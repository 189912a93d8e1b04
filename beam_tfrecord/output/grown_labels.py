"""A segmentation, captions or keypoints dataset grown by `--append` (output.append): each task's
summary section counted over old and new records, as a run over every picture would count it
(a detection dataset's objects are `grown_objects`'). Plain arithmetic on the sections."""

from __future__ import annotations

import dataclasses

from beam_tfrecord.write.summary import CaptionSummary, KeypointSummary, SegmentationSummary

__all__ = ["merged_captions", "merged_keypoints", "merged_segmentation"]


def merged_segmentation(
    old: SegmentationSummary | None, new: SegmentationSummary | None
) -> SegmentationSummary | None:
    """Pixels and pictures per class summed, shares of the labelled pixels recomputed."""
    if old is None or new is None:
        return old or new
    names = list(dict.fromkeys([*old.per_class, *new.per_class]))
    pixels = {
        n: old.per_class.get(n, {}).get("pixels", 0) + new.per_class.get(n, {}).get("pixels", 0)
        for n in names
    }
    labelled = sum(pixels.values())
    per_class = {
        name: {
            "pixels": pixels[name],
            "share": round(pixels[name] / labelled, 6) if labelled else 0.0,
            "pictures": old.per_class.get(name, {}).get("pictures", 0)
            + new.per_class.get(name, {}).get("pictures", 0),
        }
        for name in names
    }
    return dataclasses.replace(
        new,
        per_class=per_class,
        ignored_pixels=old.ignored_pixels + new.ignored_pixels,
        pictures_without_mask=old.pictures_without_mask + new.pictures_without_mask,
    )


def merged_captions(old: CaptionSummary | None, new: CaptionSummary | None) -> CaptionSummary | None:
    """Captions and pictures summed; the fewest, mean and most captions a picture recomputed."""
    if old is None or new is None:
        return old or new
    records = (
        old.pictures_with_captions
        + old.pictures_without_caption
        + new.pictures_with_captions
        + new.pictures_without_caption
    )
    captions = old.captions + new.captions
    lows = [s.per_picture.get("min", 0) for s in (old, new) if s.pictures_with_captions]
    return dataclasses.replace(
        new,
        captions=captions,
        pictures_with_captions=old.pictures_with_captions + new.pictures_with_captions,
        pictures_without_caption=old.pictures_without_caption + new.pictures_without_caption,
        per_picture={
            "min": min(lows, default=0),
            "mean": round(captions / records, 2) if records else 0.0,
            "max": max(old.per_picture.get("max", 0), new.per_picture.get("max", 0)),
        },
    )


def merged_keypoints(old: KeypointSummary | None, new: KeypointSummary | None) -> KeypointSummary | None:
    """Points summed; the names and skeletons are the dataset's (an append keeps its classes)."""
    if old is None or new is None:
        return old or new
    return dataclasses.replace(
        old,
        labelled=old.labelled + new.labelled,
        visible=old.visible + new.visible,
        made_unlabelled=old.made_unlabelled + new.made_unlabelled,
    )
