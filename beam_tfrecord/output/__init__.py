"""The output room: an output folder's lifecycle around the pipeline, apart from the records and
shards the write stage makes.

Takes: an output path and the run's settings, before and after the pipeline.
Gives: what a run does with its output, decided once (`mode`: fresh, overwrite, append, merge,
dry run), one run at a time per output (`claim`), what an output already holds and whether it is a
finished run (`outputs`), an interrupted run's finished shard tasks kept by a rerun (`resume`),
and a finished dataset grown by new pictures (`append`, with `file_index`, `grown_files` and
`grown_summary`: the index of converted files, the side files of the grown dataset's kinds of
label, and its summary.json, counted over both runs; each kind's summary section merges itself:
`labels.Section.merged`).

Comes after write (it reads summary.json and writes side files with write's modules) and before
read (readers ask `outputs` whether a folder holds a finished run).
"""

__all__ = [
    "append",
    "claim",
    "file_index",
    "grown_files",
    "grown_summary",
    "mode",
    "outputs",
    "resume",
]
