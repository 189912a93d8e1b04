"""Stage 5, read back: a finished output as a training job meets it, described by its own
summary.json so no parse function is written by hand.

Takes: an output folder (local or gs://) and a split.
Gives: a `tf.data.Dataset` (`tf_data`), plain dicts without TensorFlow (`examples`), a PyTorch
IterableDataset and map-style Dataset (`pytorch`), record `i` of a split (`random_access`), a
verification report (`verify`) and pictures of it (`pictures`).
`files` holds what all of them need first: the split's shards, the `.idx` offsets, and how
records are divided between workers.
"""

__all__ = ["examples", "files", "pictures", "pytorch", "random_access", "tf_data", "verify"]
