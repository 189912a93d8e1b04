"""beam-tfrecord: folders of images to sharded TFRecord files, and back.

`load_dataset` is imported on first use, so `import beam_tfrecord` does not load TensorFlow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from beam_tfrecord.reader import load_dataset

__all__ = ["load_dataset"]


def __getattr__(name: str) -> Any:
    if name == "load_dataset":
        from beam_tfrecord.reader import load_dataset

        return load_dataset
    raise AttributeError(f"module 'beam_tfrecord' has no attribute {name!r}")
