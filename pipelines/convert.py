"""`python -m pipelines.convert`: list, plan, run the Beam pipeline, print the summary.

With no arguments it converts the bundled sample (sample/shapes) into ./output.
"""

from __future__ import annotations

import logging
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads: no C++ info chatter
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence

import apache_beam as beam
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, SetupOptions, StandardOptions

from beam_tfrecord import decodepool, faults, gcs, metadata, outputs
from beam_tfrecord import features as features_lib
from beam_tfrecord.listing import list_inputs
from beam_tfrecord.pipeline import ConvertConfig, ImagesToTFRecords
from beam_tfrecord.plan import Plan, make_plan
from pipelines import dry_run
from pipelines.dataflow_checks import check_dry_run_paths, check_remote_run
from pipelines.options import ConvertArgs, UsageError, build_parser, check_args, default_decode_processes

LOCAL_RUNNERS = (None, "DirectRunner", "direct", "FnApiRunner")


def is_local(options: PipelineOptions) -> bool:
    return options.view_as(StandardOptions).runner in LOCAL_RUNNERS


def local_runner(options: PipelineOptions) -> beam.runners.PipelineRunner:
    """Beam's Python FnApiRunner, as the DirectRunner picks it, without first trying Prism.

    Beam 2.77's DirectRunner tries to download the Prism binary on every run; the outcome (and
    so the speed and behaviour) would depend on the network. This keeps local runs on one runner.
    """
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle

    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    provision = fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)
    )
    return fn_runner.FnApiRunner(provision_info=provision)


def prepare_output(args: ConvertArgs) -> None:
    """Refuse to mix runs: shards already in --output need --overwrite, which removes them first
    (summary.json first); temporary files of interrupted runs are removed in any case."""
    existing = outputs.existing_outputs(args.output)
    if existing and not args.overwrite:
        names = {os.path.basename(p) for p in existing}
        what = "an earlier run" if metadata.SUMMARY_FILE in names else "an interrupted run (no summary.json)"
        raise UsageError(
            f"--output {args.output} already holds {len(existing)} files of {what} "
            f"(e.g. {os.path.basename(existing[0])}); pass --overwrite to replace them"
        )
    gcs.check_writable("--output", args.output)  # before deleting anything: a read-only bucket fails here
    outputs.clear_outputs(existing)
    for leftover in outputs.clear_temp(args.output):
        logging.info("removed %s, left by an interrupted run", leftover)


def plan_run(args: ConvertArgs) -> Plan:
    try:
        files = list_inputs(args.input)
    except ValueError as error:
        raise UsageError(str(error)) from None
    faults.pause_point("listed")
    plan = make_plan(
        files,
        args.label_source,
        args.splits,
        split_seed=args.split_seed,
        stratify=args.stratify,
        num_shards=args.num_shards,
        shard_size_mb=args.shard_size_mb,
        fixed_class_names=args.class_names,
    )
    if not plan.inputs and not plan.rejects:
        raise UsageError(f"--input {args.input} holds no files")
    return plan


def run(argv: Sequence[str] | None = None, save_main_session: bool = True) -> int:
    """Run one conversion; returns the process exit code (0 when at least one record is written
    and every input is accounted for)."""
    started = time.time()
    parser = build_parser()
    known, pipeline_args = parser.parse_known_args(argv)
    options = PipelineOptions(pipeline_args)
    local = is_local(options)
    try:
        if known.dry_run:
            check_dry_run_paths(known.input, known.manifest)
        args = check_args(known)
        may_fork = (args.decode_processes or default_decode_processes(args.input)) > 1
        if local and may_fork and args.sink in ("auto", "paths") and not args.dry_run:
            decodepool.start_server()  # imports in the background while we list and plan
        check_remote_run(args, options, local)
        if args.features is not None:
            features_lib.check_weights(args.features, local)
        plan = plan_run(args)
        if not args.dry_run:  # a dry run writes nothing there, and must not list gs:// offline
            prepare_output(args)
    except (UsageError, gcs.StorageError, features_lib.ModelUnavailable) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    faults.pause_point("cleared")

    options.view_as(SetupOptions).save_main_session = save_main_session
    if args.dry_run:
        dry_run.enable(options)
    progress_dir = tempfile.mkdtemp(prefix="beam-tfrecord-progress-") if local and args.progress else None
    config = ConvertConfig(
        output=args.output,
        schema=args.schema,
        image_options=args.image_options,
        compression=args.compression,
        progress_dir=progress_dir,
        sink=choose_sink(args, local),
        threads=args.decode_threads,
        processes=(args.decode_processes or default_decode_processes(args.input, len(plan.inputs)))
        if local
        else 1,
        split_seed=args.split_seed,
        features=args.features,
        # Local feature runs stream records to shards unless --num_shards asks for a fixed count.
        stream_shards=args.features is not None and local and args.num_shards is None,
    )
    run_info = {
        "input": args.input,
        "output": args.output,
        "options": args.raw,
        "runner": "FnApiRunner" if local else options.view_as(StandardOptions).runner,
        "direct_running_mode": options.view_as(DirectOptions).direct_running_mode if local else None,
        "sink": config.sink,
        "decode_threads": config.threads if config.sink == "paths" else None,
        "decode_processes": config.processes if config.sink == "paths" else None,
        "beam_version": beam.__version__,
        "started_at": started,
    }
    if args.features is not None:
        run_info["features"] = feature_run_info(args.features)
    logging.info(
        "%d inputs planned (%d skipped or unlabeled from the listing), splits %s, shards %s",
        len(plan.inputs),
        len(plan.rejects),
        args.splits,
        plan.shard_counts,
    )
    if local:
        direct = options.view_as(DirectOptions)
        logging.info(
            "local run on Beam's FnApiRunner (%s, %s worker(s)), %s sink, %d read/decode processes "
            "x %d threads per shard writer",
            direct.direct_running_mode,
            direct.direct_num_workers or 1,
            config.sink,
            config.processes,
            config.threads,
        )
    pipeline = beam.Pipeline(runner=local_runner(options) if local else None, options=options)
    _ = pipeline | "ImagesToTFRecords" >> ImagesToTFRecords(
        plan, config, run_info, stage_plan=not args.dry_run
    )
    if args.dry_run:
        print(dry_run.format_report(dry_run.translate(pipeline, args.dry_run_output)))
        return 0
    try:
        if progress_dir:
            from beam_tfrecord.progress import ProgressPrinter

            with ProgressPrinter(progress_dir, total=len(plan.inputs)):
                pipeline.run().wait_until_finish()
        else:
            result = pipeline.run()
            if not local:
                logging.info("submitted; the summary is written to %s when the job ends", args.output)
                return 0
            result.wait_until_finish()
    finally:
        if progress_dir:
            shutil.rmtree(progress_dir, ignore_errors=True)
    return report(args.output)


def choose_sink(args: ConvertArgs, local: bool) -> str:
    """`paths` writes whole shards in one DoFn, which cannot batch across RunInference: feature
    runs always take the per-image flow and WriteToTFRecord (`beam`)."""
    if args.features is not None:
        return "beam"
    return args.sink if args.sink != "auto" else ("paths" if local else "beam")


def feature_run_info(options: features_lib.FeatureOptions) -> dict[str, object]:
    """What summary.json says about the features; the reader restores them from this and the shape."""
    return {
        "model": options.feature_model or options.model_path,
        "weights": options.model_weights if options.feature_model else None,
        "pooling": options.pooling,
        "dtype": options.dtype,
        "features_only": options.features_only,
        "batch_size": options.batch_size,
    }


def report(output: str) -> int:
    summary = metadata.read_summary(output)
    print(metadata.format_table(summary))
    if not summary["consistent"]:
        print("error: inputs != records + rejects; some input is unaccounted for", file=sys.stderr)
        return 1
    if summary["records"] == 0:
        print(f"error: every input was rejected; see {output}/rejects.jsonl for the reasons", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("apache_beam", "absl"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    sys.exit(run())
