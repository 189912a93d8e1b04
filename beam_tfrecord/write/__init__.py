"""Stage 4, build and write: records as `tf.train.Example` bytes, streamed into planned shards
that appear under their final names all at once, then the metadata beside them.

Takes: `PendingRecord`s (with features, in a feature run).
Gives: shard files with their `.idx`, labels.txt, rejects.jsonl, changes.jsonl, TFDS's files
and, last, summary.json (the completeness marker).

Modules: `claim` (one run per output), `schema` (record keys, parse spec), `messages` and `example.proto`
(the Example messages), `tfrecord_files` (TFRecord framing), `records` (a validated image to its record),
`shardwriter` (temp-then-rename shards), `tally` (the run's counts), `summary` (summary.json
as a typed object, and how it is built), `side_files` (the side files, summary.json last),
`tfds_metadata` (TFDS's files), `outputs` (the output folder's guard and completeness check),
`output_config` (ConvertConfig: what the records look like and where they go).
"""

__all__ = [
    "claim",
    "messages",
    "output_config",
    "outputs",
    "records",
    "schema",
    "shardwriter",
    "side_files",
    "summary",
    "tally",
    "tfds_metadata",
    "tfrecord_files",
]
