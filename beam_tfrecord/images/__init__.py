"""Stage 2, read and validate: one planned input's bytes become an image that `tf.io.decode_image`
reads, or a reject with a reason. Pure functions on bytes: no Beam, no TensorFlow.

Takes: a `PlannedInput` (a path, its label and split) and `ImageConfig`.
Gives: a `PendingRecord` (the bytes to store and every fact about them) or a `RejectLine`.

Modules: `inputs` (read and validate one input, each of the run's kinds of label placed in the
stored image: `labels`), `normalize` (decode, EXIF, modes, resize, re-encode; what it did to the
picture's geometry is a `labels.geometry.PixelTransform`), `formats` (which formats are accepted
or refused), `modes` (every pixel mode to L or RGB), `quiet` (decoder chatter kept off the
terminal).
"""

__all__ = [
    "formats",
    "inputs",
    "modes",
    "normalize",
    "options",
    "quiet",
]
