"""Stage 1, list and plan: from a listing of paths and sizes to a plan, without reading a byte of
an image (dedupe aside, which hashes candidates' bytes on purpose).

Takes: a `SourceConfig` (where the inputs are, where labels come from, how they split).
Gives: a `Plan` (each input's label, split and shard; the rejects known from the listing; class
names; shard counts), staged as files under the output so the job graph never holds it.

Modules: `listing` (paths and sizes), `labels` and `columns` (classes and manifest values),
`splits` and `dedupe` (deterministic splits that cannot leak), `sharding` (shard counts),
`planner` (the plan itself: `make_plan` composes the steps listing -> labels -> splits ->
shards), its steps `labelling` (a file's label from the label source), `annotating` (an
annotated run's labels: its annotations loaded and matched) and `splitting` (declared or hashed
splits), `known` (what an append's plan takes from the dataset it grows), `staging` (the plan as
files), `bulk` (the cycle collector paused while millions of objects are planned).
"""

__all__ = [
    "annotating",
    "annotations",
    "bulk",
    "columns",
    "dedupe",
    "known",
    "labelling",
    "labels",
    "listing",
    "planner",
    "sharding",
    "source_config",
    "splits",
    "splitting",
    "staging",
]
