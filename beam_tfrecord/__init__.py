"""beam-tfrecord: folders of images to sharded TFRecord files, and back.

The reader is imported on first use, so `import beam_tfrecord` does not load TensorFlow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from beam_tfrecord.reader import class_names, load_dataset

__all__ = ["class_names", "load_dataset"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from beam_tfrecord import reader

        return getattr(reader, name)
    raise AttributeError(f"module 'beam_tfrecord' has no attribute {name!r}")
