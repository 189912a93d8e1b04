"""Masks equal pycocotools' `annToMask` (`frPyObjects`, `merge`, `decode`) pixel for pixel: run
lengths, and polygons over many generated outlines shaped like COCO's (many points, two
decimals, parts, slivers, outlines past the edge) and over hand-made hard cases, through the
port (`polygon_raster`) and through `geometry.rasterize_mask`, which the pipeline calls."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pycocotools import mask as coco_mask

from beam_tfrecord.elements import Polygon, RunLengths
from beam_tfrecord.labels import geometry
from beam_tfrecord.labels.polygon_raster import fill_polygons
from beam_tfrecord.plan.annotations import rle


def ann_to_mask(rings: list[list[float]], width: int, height: int) -> np.ndarray:
    """What `COCO.annToMask` gives for a polygon segmentation (its two calls, as it makes them)."""
    return coco_mask.decode(coco_mask.merge(coco_mask.frPyObjects(rings, height, width)))


def assert_same(rings: list[list[float]], width: int, height: int) -> None:
    expected = ann_to_mask(rings, width, height)
    got = fill_polygons(rings, width, height)
    assert got.dtype == np.uint8 and got.shape == (height, width)
    mismatch = np.argwhere(got != expected)
    assert not mismatch.size, f"{len(mismatch)} pixels differ, first at (row, col) {mismatch[0].tolist()}"
    image = geometry.rasterize_mask(tuple(Polygon(tuple(r)) for r in rings), width, height)
    assert np.array_equal(np.asarray(image), expected)


@st.composite
def coco_outlines(draw) -> tuple[list[list[float]], int, int]:
    """An image size and 1-3 rings as annotators' tools save them: a walk around a centre (so
    convex, concave and self-crossing outlines all come), its coordinates at two decimals, half
    pixels or whole pixels, anywhere from wholly inside to past an edge; later rings may be of
    one or two points (pycocotools refuses those only as the first ring). A ring's steps come
    from a drawn seed: drawing each coordinate from Hypothesis was most of the test's time."""
    width, height = draw(st.integers(1, 48)), draw(st.integers(1, 48))
    rings = []
    for index in range(draw(st.integers(1, 3))):
        count = draw(st.integers(3 if index == 0 else 1, 24))
        radius = draw(st.sampled_from([0.3, 1.0, 2.5, 8.0, 30.0]))
        cx = draw(st.floats(-4, width + 4, allow_nan=False))
        cy = draw(st.floats(-4, height + 4, allow_nan=False))
        digits = draw(st.sampled_from([2, 1, 0]))
        steps = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).uniform(-radius, radius, (count, 2))
        rings.append([round(float(value), digits) for dx, dy in steps for value in (cx + dx, cy + dy)])
    return rings, width, height


@settings(max_examples=1500, deadline=None)
@given(coco_outlines())
def test_generated_outlines_fill_as_pycocotools_fills_them(case):
    rings, width, height = case
    assert_same(rings, width, height)


def test_a_thousand_seeded_outlines_at_coco_image_sizes():
    """Real COCO sizes (640x480 and the odd 427 width), objects of every COCO size class."""
    rng = np.random.default_rng(26)
    for _ in range(200):
        width, height = int(rng.choice([640, 427, 333])), int(rng.choice([480, 640, 500]))
        rings = []
        for _ in range(int(rng.integers(1, 4))):
            count = int(rng.integers(3, 60))
            angles = np.sort(rng.uniform(0, 2 * np.pi, count))
            radius = rng.choice([1.5, 6, 40, 300]) * rng.uniform(0.4, 1, count)
            cx, cy = rng.uniform(-20, width + 20), rng.uniform(-20, height + 20)
            ring = np.column_stack([cx + radius * np.cos(angles), cy + radius * np.sin(angles)])
            rings.append(np.round(ring, 2).ravel().tolist())
        assert_same(rings, width, height)


HARD_CASES = {
    "one pixel square": ([[3, 3, 4, 3, 4, 4, 3, 4]], 8, 8),
    "tiny off grid": ([[2.3, 2.4, 3.1, 2.2, 2.9, 3.3]], 8, 8),
    "a pixel's centre only": ([[2.4, 2.4, 2.6, 2.4, 2.6, 2.6, 2.4, 2.6]], 6, 6),
    "two pixel sliver": ([[1.0, 1.0, 3.0, 1.2, 3.0, 1.4, 1.0, 1.1]], 6, 6),
    "three pixel triangle": ([[0.5, 0.5, 3.5, 0.5, 0.5, 3.5]], 5, 5),
    "whole image": ([[0, 0, 7, 0, 7, 5, 0, 5]], 7, 5),
    "touches every edge": ([[0, 2.5, 3.5, 0, 7, 2.5, 3.5, 5]], 7, 5),
    "past every edge": ([[-3.2, -1.7, 12.4, -2.0, 11.9, 9.6, -2.5, 8.8]], 9, 7),
    "crosses the bottom edge": ([[1, 3, 5, 3, 5, 9, 1, 9]], 6, 6),
    "crosses the right edge": ([[3, 1, 9, 1, 9, 4, 3, 4]], 6, 6),
    "left of the picture just": ([[-0.4, 1, -0.1, 1, -0.1, 4]], 5, 5),
    "just below zero": ([[-0.15, -0.15, 2.05, -0.19, 2.11, 2.13]], 4, 4),
    "half pixels": ([[0.5, 0.5, 4.5, 0.5, 4.5, 2.5, 0.5, 2.5]], 6, 4),
    "repeated points": ([[1, 1, 1, 1, 4, 1, 4, 1, 4, 4, 4, 4.01, 1, 4]], 6, 6),
    "bow tie": ([[0, 0, 6, 6, 6, 0, 0, 6]], 7, 7),
    "star crossing itself": ([[3, 0, 4.8, 6, 0, 2.2, 6, 2.2, 1.2, 6]], 7, 7),
    "two parts": ([[0, 0, 2, 0, 2, 2, 0, 2], [4.2, 4.1, 6.8, 4.3, 5.5, 6.9]], 8, 8),
    "overlapping parts": ([[0, 0, 4, 0, 4, 4, 0, 4], [2, 2, 6, 2, 6, 6, 2, 6]], 8, 8),
    "hole as a second ring": ([[0, 0, 8, 0, 8, 8, 0, 8], [2, 2, 6, 2, 6, 6, 2, 6]], 8, 8),
    "part of two points": ([[1, 1, 5, 1, 5, 5], [0, 0, 7, 7]], 8, 8),
    "part of one point": ([[1, 1, 5, 1, 5, 5], [3, 3]], 8, 8),
    "points on one line": ([[0, 0, 3, 3, 6, 6]], 8, 8),
    "all points equal": ([[2, 2, 2, 2, 2, 2]], 4, 4),
    "one pixel image": ([[0, 0, 1, 0, 1, 1, 0, 1]], 1, 1),
    "one column image": ([[0, 0.5, 1, 0.5, 1, 3.5, 0, 3.5]], 1, 5),
    "steep and shallow edges": ([[0.1, 0.1, 30.9, 1.3, 29.2, 2.9, 0.4, 1.9]], 32, 4),
    "vertical needle": ([[2.1, 0, 2.3, 0, 2.9, 19.7]], 5, 20),
}


@pytest.mark.parametrize("name", sorted(HARD_CASES))
def test_hard_outlines_fill_as_pycocotools_fills_them(name):
    rings, width, height = HARD_CASES[name]
    assert_same([[float(v) for v in ring] for ring in rings], width, height)


def test_an_outline_that_reaches_the_foot_carries_into_the_next_column_as_in_coco():
    """pycocotools' runs go down each column in turn; an outline that leaves the bottom edge is
    clamped to its foot, and the run then starts at the top of the next column. Not what a
    scanline fill gives, but what COCO's evaluation scores against."""
    rings = [[1.0, 2.0, 3.0, 2.0, 3.0, 9.0, 1.0, 9.0]]
    mask = fill_polygons(rings, 5, 5)
    assert np.array_equal(mask, ann_to_mask(rings, 5, 5))
    assert mask[2:, 1:3].all() and not mask[:2, 1:3].any()


def test_yolo_fractions_fill_as_the_same_outline_in_pixels():
    """YOLO's segmentation lines are fractions of the size; they are filled by the same rule."""
    width, height = 64, 48
    pixels = [3.2, 4.8, 40.0, 9.6, 33.6, 40.8, 6.4, 28.8]
    fractions = [v / (width if i % 2 == 0 else height) for i, v in enumerate(pixels)]
    image = geometry.rasterize_mask((Polygon(tuple(fractions)),), width, height, normalized=True)
    expected = ann_to_mask(
        [[f * (width if i % 2 == 0 else height) for i, f in enumerate(fractions)]], width, height
    )
    assert np.array_equal(np.asarray(image), expected) and expected.sum() > 500


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 24), st.integers(1, 24), st.integers(0, 2**32 - 1), st.floats(0, 1))
def test_run_lengths_decode_as_pycocotools_decodes_them(width, height, seed, density):
    """Crowd masks, compressed (COCO's string) or not (a list of counts), give annToMask's pixels."""
    pixels = (np.random.default_rng(seed).random((height, width)) < density).astype(np.uint8)
    encoded = coco_mask.encode(np.asfortranarray(pixels))
    counts = rle.decode_counts(encoded["counts"].decode())
    uncompressed = {"size": [height, width], "counts": list(counts)}
    expected = coco_mask.decode(coco_mask.frPyObjects(uncompressed, height, width))
    assert np.array_equal(expected, pixels)
    image = geometry.rasterize_mask(RunLengths(height, width, counts), width, height)
    assert np.array_equal(np.asarray(image), expected)
