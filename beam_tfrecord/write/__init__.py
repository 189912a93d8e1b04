"""Stage 4, build and write: records as `tf.train.Example` bytes, streamed into planned shards
that appear under their final names all at once, then the metadata beside them.

Takes: `PendingRecord`s (with features, in a feature run).
Gives: shard files with their `.idx`, labels.txt, rejects.jsonl, changes.jsonl, TFDS's files
and, last, summary.json (the completeness marker).

Modules: `schema` (record keys, parse spec), `messages` and `example.proto` (the Example
messages), `tfrecord_files` (TFRecord framing), `array_record_files` (ArrayRecord through its
package), `records` (a validated image to its record), `shardwriter` (temp-then-rename shards),
`tally` (the run's counts), `summary` (summary.json built from the plan and the tally; its
types are `beam_tfrecord.summary`'s, below every stage), `side_files` (the side files,
summary.json last), `tfds_metadata` (TFDS's files), `output_config` (ConvertConfig: what the
records look like and where they go). What the output
folder already holds, and what a run does with it, is the output room's (`beam_tfrecord.output`).
"""

__all__ = [
    "array_record_files",
    "messages",
    "output_config",
    "records",
    "schema",
    "shardwriter",
    "side_files",
    "summary",
    "tally",
    "tfds_metadata",
    "tfrecord_files",
]
