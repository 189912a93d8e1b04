"""Stage 2, read and validate: one planned input's bytes become an image that `tf.io.decode_image`
reads, or a reject with a reason. Pure functions on bytes: no Beam, no TensorFlow.

Takes: a `PlannedInput` (a path, its label and split) and `ImageConfig`.
Gives: a `PendingRecord` (the bytes to store and every fact about them) or a `RejectLine`.

Modules: `inputs` (read and validate one input), `normalize` (decode, EXIF, modes, resize,
re-encode), `geometry` (what normalize did to the picture's geometry, and the same moves for
boxes and masks), `polygon_raster` (polygon masks filled as COCO fills them), `placement` (an
image's annotated objects placed in its stored image, or dropped with a reason), `formats`
(which formats are accepted or refused), `modes` (every pixel mode to L or RGB), `quiet`
(decoder chatter kept off the terminal).
"""

__all__ = [
    "formats",
    "geometry",
    "inputs",
    "modes",
    "normalize",
    "options",
    "placement",
    "polygon_raster",
    "quiet",
]
