"""`python -m pipelines.convert`: check options, list and plan, run the Beam pipeline, print the
summary. The same flow on every runner; only the runner and its workers differ.

With no arguments it converts the bundled sample (sample/shapes) into ./output.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import gc
import logging
import os

from pipelines import interrupts

if __name__ == "__main__":
    interrupts.block()  # before any import starts a thread (see pipelines/interrupts.py)
    # The imports below build a heap that lives as long as the process (Beam, protobuf: about
    # 170,000 objects); the cycle collector's passes over it while it loads find nothing, and
    # were a quarter of the start-up's CPU. `main` freezes it and turns the collector back on.
    gc.disable()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads: no C++ info chatter
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions, SetupOptions
from apache_beam.runners.runner import PipelineResult, PipelineState

from beam_tfrecord import compat, gcs, runners, storage, write_failures
from beam_tfrecord.config import ConvertConfig
from beam_tfrecord.config_base import ConfigError
from beam_tfrecord.features import models as feature_models
from beam_tfrecord.features.options import ModelUnavailable
from beam_tfrecord.images import quiet
from beam_tfrecord.output import claim as claims
from beam_tfrecord.output import job_state, outputs
from beam_tfrecord.output.mode import OutputMode
from beam_tfrecord.pipeline import ImagesToTFRecords, prepare
from beam_tfrecord.plan import pages, staging
from beam_tfrecord.plan.listing import list_inputs
from beam_tfrecord.plan.staging import StagedPlan
from beam_tfrecord.summary import RunSummary, read_summary
from pipelines import append as append_cmd
from pipelines import dry_run
from pipelines.dataflow_checks import check_dry_run_input, check_remote_run, name_the_job
from pipelines.options import (
    CommandSettings,
    UsageError,
    check_conflicts,
    check_options,
    given_option_names,
    parse_options,
    usage_text,
)
from pipelines.quiet import BEAM_STAGER, held_back
from pipelines.report import format_table

__all__ = ["EXIT_CLAIMED", "main", "report", "run"]

_LOGGER = logging.getLogger("pipelines.convert")


# sysexits.h's EX_TEMPFAIL ("try again later"): another run is writing --output right now.
EXIT_CLAIMED = 75
CLEAN_RERUN = "the next run of the same command resumes it, keeping every shard finished so far"


def plan_run(
    settings: CommandSettings,
    options: PipelineOptions,
    given: set[str],
    mode: OutputMode,
    claim: claims.Claim | None = None,
    job: append_cmd.AppendJob | None = None,
) -> tuple[StagedPlan, ConvertConfig]:
    """List the input, choose the local workers and their read threads (both depend on its
    size), then `prepare` the run as `mode` says (plan, clear the output, stage the plan; a dry
    run writes nothing); returns the staged plan and the config with those threads and where
    the pipeline writes. An append (`job`) plans only its new files, into its work folder."""
    source = settings.source
    config = dataclasses.replace(settings.config, output=mode.target(settings.config.output))
    files = job.delta.new if job is not None else list_inputs(source.input)
    if runners.is_local(options):
        size = pages.file_bytes(files)  # (an append's new pages are one file's bytes: --pages each)
        local = runners.use_local_runner(options, size, given, features=config.features is not None)
        if "read_threads" not in given:
            config = dataclasses.replace(
                config, read_threads=runners.read_threads(source.input, local.workers)
            )
        config = model_in_one_process(config, local)
    staged = prepare(
        source,
        config,
        mode=mode,
        parallelism=runners.parallelism(options),
        round_robin=runners.deals_round_robin(options),
        label_source=settings.label_source,
        files=files,
        claim=None if mode.appends else claim,  # the claim is on --output, which holds the work folder
    )
    if claim is not None and mode.appends:  # the append's steps are fenced by the claim on --output
        staged = dataclasses.replace(staged, fence=claim.fence)
    return staged, config


def model_in_one_process(config: ConvertConfig, local: runners.LocalWorkers) -> ConvertConfig:
    """A local run in one process has no other process to share its model with: unless
    --model_copies says, the model stays in the process (0 copies), where sharing would only send
    every batch through a local socket (the default shares on a machine with a GPU)."""
    features = config.features
    if features is None or features.model_copies is not None or local.mode == "multi_processing":
        return config
    return dataclasses.replace(config, features=dataclasses.replace(features, model_copies=0))


def run_info(
    settings: CommandSettings, config: ConvertConfig, options: PipelineOptions, started: float
) -> RunSummary:
    """How this run executes, for summary.json and the start-up log."""
    from apache_beam.options.pipeline_options import DirectOptions

    local = runners.is_local(options)
    direct = options.view_as(DirectOptions)
    return RunSummary(
        input=settings.source.input,
        output=config.output,
        runner=runners.runner_name(options),
        direct_running_mode=direct.direct_running_mode if local else None,
        workers=direct.direct_num_workers if local else None,
        parallelism=runners.parallelism(options),
        sink=config.sink,
        read_threads=config.read_threads,
        beam_version=beam.__version__,
        started_at=started,
    )


def log_plan(staged: StagedPlan, splits: dict[str, float | str], info: RunSummary) -> None:
    """One line on what will run, counting inputs as the final table does (a detection dataset's
    own splits, when kept, are the ones planned, not --splits')."""
    if set(splits) != set(staged.shard_counts):
        splits = dict.fromkeys(staged.shard_counts, "declared")
    _LOGGER.info(
        "%d inputs (%d more skipped): %d to read, %d rejected from the listing; splits %s; shards %s",
        staged.input_count,
        staged.skipped,
        staged.inputs,
        staged.rejected,
        splits,
        staging.describe(staged.shard_counts),
    )
    workers = f", {info.direct_running_mode} x {info.workers}" if info.workers else ""
    _LOGGER.info(
        "runner %s%s, %s sink, %d read threads per shard task",
        info.runner,
        workers,
        info.sink,
        info.read_threads,
    )


def run(argv: Sequence[str] | None = None, save_main_session: bool = True) -> int:
    """Run one conversion; returns the process exit code (0 when at least one record is written
    and every input is accounted for, 2 for a usage error, EXIT_CLAIMED when another run is
    writing --output; under `main`, Ctrl-C exits 130)."""
    started = time.time()
    argv = list(sys.argv[1:] if argv is None else argv)
    held = contextlib.ExitStack()  # this run's claim on --output, released however the run ends
    try:
        options = parse_options(argv)
        settings = check_options(options)
        mode = settings.output_mode
        gcs.use_settings(settings.config.gcs)  # before the first gs:// request: the listing
        if mode.dry_run:
            check_dry_run_input(settings.source.input)
        local = runners.is_local(options)
        given = given_option_names(argv)
        check_conflicts(settings, given, local)
        check_remote_run(settings, options, local)
        name_the_job(options, settings.config.output, given)
        if settings.config.features is not None:
            feature_models.check_model(settings.config.features, local)
        # One writer per output, before the listing and before anything under it is touched; a
        # dry run writes nothing, so it takes none.
        claim = held.enter_context(claim_output(settings.config.output)) if mode.writes else None
    except claims.ClaimHeld as busy:
        print(f"error: {busy}", file=sys.stderr)
        return EXIT_CLAIMED
    except write_failures.WriteFailed as failure:  # the claim itself: nothing else was touched
        print(
            f"error: could not claim {settings.config.output}: could not write {failure.path}: "
            f"{failure.reason}. Nothing was written; make it writable (or free space), then run again",
            file=sys.stderr,
        )
        return 1
    except (ConfigError, UsageError, ModelUnavailable) as error:
        print(f"error: {usage_text(error)}", file=sys.stderr)
        return 2
    with held:
        try:
            return _run_claimed(settings, mode, options, given, local, started, save_main_session, claim)
        finally:
            interrupts.set_cleanup(None)


@contextlib.contextmanager
def claim_output(output: str) -> Iterator[claims.Claim]:
    """The library's claim, renewed while the run lives; released on Ctrl-C too (the exit skips
    every `with`); a run whose claim another run took over stops at once."""
    with claims.claim_output(output, claims.timing_from_environment(), on_lost=_claim_lost) as claim:
        interrupts.set_cleanup(claim.release)
        yield claim


def _claim_lost(claim: claims.Claim) -> None:
    """Another run took this run's claim for a dead one's (this run stalled past the stale time),
    or it could not be renewed for half the stale time: two might write one output, so this one
    stops, from the heartbeat's thread (its remote job cancelled by the claim)."""
    job = " (its remote job was cancelled)" if claim.cancels_job else ""
    line = (
        f"error: this run's claim on {claim.output} {claim.lost_why()}; this run stopped so that one "
        f"run writes there{job}"
    )
    if interrupts.watching():
        interrupts.stop(line, 1)
    else:
        _LOGGER.error(line)


class _Planned(NamedTuple):
    """A run planned and staged: the plan, the config the pipeline runs with, the append's job
    (None for a plain run) and the output mode, made whole once an append has read its dataset."""

    staged: StagedPlan
    config: ConvertConfig
    job: append_cmd.AppendJob | None
    mode: OutputMode


def _run_claimed(
    settings: CommandSettings,
    mode: OutputMode,
    options: PipelineOptions,
    given: set[str],
    local: bool,
    started: float,
    save_main_session: bool,
    claim: claims.Claim | None,
) -> int:
    """`run`, once the output is this run's (or a dry run needs none): plan, build the pipeline,
    run it, then report (an append merges first)."""
    planned = _plan_claimed(settings, mode, options, given, claim)
    if isinstance(planned, int):  # refused, or an append's merge alone
        return planned
    staged, config, job, mode = planned
    options.view_as(SetupOptions).save_main_session = save_main_session
    info = run_info(settings, config, options, started)
    log_plan(staged, dict(settings.source.splits), info)
    if mode.dry_run:
        dry_run.enable(options)
    # Local workers count what they read here: the progress line, and what Ctrl-C reports.
    progress_dir = tempfile.mkdtemp(prefix="beam-tfrecord-progress-") if local else None
    pipeline = beam.Pipeline(options=options)
    _ = pipeline | "ImagesToTFRecords" >> ImagesToTFRecords(staged, config, info, progress_dir)
    if mode.dry_run:
        with held_back(BEAM_STAGER):  # the translation stages the --setup_file's sdist too
            translated = dry_run.translate(pipeline, settings.dry_run_output)
        print(dry_run.format_report(translated, staged))
        return 0
    interrupts.set_message(_on_interrupt(config.output, local, progress_dir, staged.inputs))
    try:
        printer = progress_dir if settings.progress else None
        state = execute(pipeline, local, settings.wait, printer, staged.inputs, claim)
    except Exception as error:
        code = _failed_run(error, config.output, local, claim)
        if code is None:  # the traceback is the report: the error happened here
            raise
        return code
    finally:
        if progress_dir:
            shutil.rmtree(progress_dir, ignore_errors=True)
    return _after_run(state, settings, config.output, job, claim)


def _plan_claimed(
    settings: CommandSettings,
    mode: OutputMode,
    options: PipelineOptions,
    given: set[str],
    claim: claims.Claim | None,
) -> _Planned | int:
    """The run planned (`plan_run`), or the exit code: an append whose new files are already
    converted only merges them (a dry run says so and writes nothing), and a refusal is one line."""
    job = None
    try:
        interrupts.set_message(lambda: f"interrupted before the pipeline started; {CLEAN_RERUN}")
        if settings.append:
            job = append_cmd.prepare_append(settings)
            mode = job.mode(mode)
        if job is not None and not mode.converts:  # the new files are converted: merge them
            if mode.dry_run:  # a dry run writes nothing, the merge included
                print(
                    f"dry run: the append's new pictures are converted in {job.work}; "
                    "the same command without --dry_run merges them into the dataset"
                )
                return 0
            _fence(claim, "the append's merge")
            append_cmd.finish_append(job, settings.source.input)
            return report(settings.config.output)
        # A dry run plans where a real run would stage, writing nothing (nor listing gs:// output).
        staged, config = plan_run(settings, options, given, mode, claim, job)
    except (ConfigError, UsageError, ModelUnavailable) as error:
        print(f"error: {usage_text(error)}", file=sys.stderr)
        return 2
    except (append_cmd.AppendFailed, claims.ClaimLost) as error:  # a merge step failed, or was fenced
        print(f"error: {error}", file=sys.stderr)
        return 1
    except write_failures.WriteFailed as failure:  # the plan could not be staged
        print(f"error: {write_failed(failure, settings.config.output)}", file=sys.stderr)
        return 1
    return _Planned(staged, config, job, mode)


def _on_interrupt(output: str, local: bool, progress_dir: str | None, total: int) -> Callable[[], str]:
    """What Ctrl-C says while the pipeline runs: a local run's progress (its counts then removed),
    or that a remote job goes on."""

    def message() -> str:
        if not local:
            return f"stopped waiting; the job goes on, and writes summary.json to {output} when it ends"
        line = interrupted_message(output, progress_dir, total)
        if progress_dir:
            shutil.rmtree(progress_dir, ignore_errors=True)
        return line

    return message


def _failed_run(error: Exception, output: str, local: bool, claim: claims.Claim | None) -> int | None:
    """The exit code of a run whose pipeline raised, its one line printed; None where the error
    itself is the report (a local run's traceback: it happened here)."""
    failed = write_failures.find(error)
    if failed is not None:  # a full disk, a quota, a permission: one line, and space freed
        print(f"error: {write_failed(failed, output)}", file=sys.stderr)
        return 1
    lost = claims.lost_line(error)
    if lost is not None:  # a commit step found the output another run's: it wrote nothing
        print(f"error: {lost}", file=sys.stderr)
        return 1
    if local:
        return None
    if claim is not None and not claim.held:  # handed over: the job may still be running
        print(
            f"error: lost sight of the job ({first_line(error)}); it may still be running, so its "
            f"claim on {output} stays with it until it writes summary.json or its runner "
            f"says it ended (the next run asks); where the runner cannot be asked, check the job "
            f"and, if it has ended without finishing, delete {claim.path}",
            file=sys.stderr,
        )
        return 1
    # A remote runner raises for any state but DONE; its message holds the workers' error.
    print(
        f"error: the job failed, and wrote no summary.json to {output}: {first_line(error)}",
        file=sys.stderr,
    )
    return 1


def _after_run(
    state: str | None,
    settings: CommandSettings,
    output: str,
    job: append_cmd.AppendJob | None,
    claim: claims.Claim | None,
) -> int:
    """The exit code once the pipeline returned: a submitted job's line, or the job's end state;
    an append's new files merged into the dataset, then the report."""
    interrupts.set_message(lambda: "interrupted while reading the summary; the run itself is complete")
    if state is None:
        print(f"submitted; summary.json and the shards appear in {output} when the job ends")
        return 0
    if state != PipelineState.DONE:
        print(f"error: the job ended {state}; nothing final was written to {output}", file=sys.stderr)
        return 1
    if job is not None:
        try:
            _fence(claim, "the append's merge")
            append_cmd.finish_append(
                dataclasses.replace(job, done=read_summary(output)), settings.source.input
            )
        except (append_cmd.AppendFailed, claims.ClaimLost) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        return report(settings.config.output)
    return report(output)


def _fence(claim: claims.Claim | None, what: str) -> None:
    """A commit step of the command's own (an append's merge): ClaimLost unless the output is
    still this run's."""
    if claim is not None:
        claim.fence(what)


def execute(
    pipeline: beam.Pipeline,
    local: bool,
    wait: bool,
    progress_dir: str | None,
    total: int,
    claim: claims.Claim | None = None,
) -> str | None:
    """Run the pipeline; the job's final state, or None when a remote job is only submitted.

    A remote job's id goes into the claim; once this launcher stops waiting for the job (it was
    asked not to wait, or Ctrl-C), the claim is handed over to the job (output.claim)."""
    if progress_dir:
        from beam_tfrecord.progress import ProgressPrinter

        with ProgressPrinter(progress_dir, total=total, stream=sys.stderr):
            return pipeline.run().wait_until_finish()
    facts = job_state.job_facts(pipeline.options) if not local else {}
    if claim is not None and not local:  # Ctrl-C while submitting: a job may have been created
        interrupts.set_cleanup(lambda: claim.hand_over(**facts))
    with held_back(BEAM_STAGER) if not local else contextlib.nullcontext():  # its sdist build's notice
        result = pipeline.run()
    if claim is not None and not local:
        claim.set_job(job_id(result), cancel=result.cancel, **facts)
        interrupts.set_cleanup(claim.hand_over)
        if not wait:
            claim.hand_over()
    if not local and not wait:
        return None
    try:
        return result.wait_until_finish()
    except Exception:
        if claim is not None and not local and not _ended(result):
            claim.hand_over()  # lost sight of a job that may still run: its claim stays with it
        raise


def _ended(result: PipelineResult) -> bool:
    """Whether a remote job is known to have ended (a terminal state the runner reports); False
    when the runner cannot say (a poll error, a lost connection)."""
    try:
        return PipelineState.is_terminal(result.state)
    except Exception:
        return False


def job_id(result: object) -> str | None:
    """The runner's id for a submitted job (Dataflow's `job_id()`, a job service's id), where it
    has one."""
    method = getattr(result, "job_id", None)
    try:
        return str(method()) if callable(method) else compat.portable_job_id(result)
    except Exception:  # a runner without one: the claim names the host and process instead
        return None


def write_failed(failure: write_failures.WriteFailed, output: str) -> str:
    """One line for a file the run could not write: which and why, what was kept (no final
    shard is ever partial), the temporary files removed to free the space, and what to do."""
    freed = _remove_temporary_files(output)
    left = outputs.existing_outputs(output)
    if left:
        kept = (
            f"{len(left)} files of this run are in {output}, but without summary.json it is no "
            "finished output (and no final shard is partial)"
        )
    else:
        kept = f"Nothing final was written to {output}"
    if write_failures.is_full(failure):
        todo = "free space (or choose another --output), then run the same command again"
    elif failure.code in (errno.EACCES, errno.EPERM, errno.EROFS):
        todo = "make it writable, then run the same command again"
    else:
        todo = "fix that, then run the same command again"
    if left:
        todo += " with --overwrite"
    return (
        f"could not write {failure.path}: {failure.reason}. {kept}; "
        f"the run's temporary files were removed ({freed / 1e6:.1f} MB freed). To go on, {todo}"
    )


def _remove_temporary_files(output: str) -> int:
    """Delete this output's temporary folders (the run's own, and Beam's); the bytes they held."""
    try:
        leftovers = outputs.leftover_temp(output)
        size = 0
        for path in leftovers:  # local folders, or objects on a store (outputs.leftover_temp)
            pattern = FileSystems.join(path, "**") if storage.is_folder(path, if_remote=False) else path
            size += sum(m.size_in_bytes for m in storage.match(pattern))
        outputs.clear_temp(output)
        return size
    except Exception:  # the report matters more than the cleanup
        return 0


def first_line(error: BaseException, limit: int = 500) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:limit] if text else ''}"


def interrupted_message(output: str, progress_dir: str | None, total: int) -> str:
    """The one line a Ctrl-C gets: what was done, what is left, and how the next run starts."""
    done = ""
    if progress_dir:
        from beam_tfrecord.progress import total_done

        done = f" after {total_done(progress_dir)} of {total} inputs"
    rerun = CLEAN_RERUN
    return f"interrupted{done}: {output} has no summary.json, so it is not a finished output; {rerun}"


def report(output: str) -> int:
    summary = read_summary(output)
    print(format_table(summary))
    if not summary.consistent or not all(section.accounted() for section in summary.sections.values()):
        print(
            "error: inputs != records + rejects, or annotated objects != stored + dropped: "
            "something is unaccounted for",
            file=sys.stderr,
        )
        return 1
    if summary.records == 0:
        print(f"error: every input was rejected; see {output}/rejects.jsonl for the reasons", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    """The command: logging for a terminal, then `run`'s exit code."""
    # The heap the imports built (Beam, protobuf: about 170,000 objects) lives as long as the
    # process: frozen, the cycle collector never searches it again. Unfrozen, the first full
    # collection of the run (set off by the listing of 10,000 files) took 50-120 ms. Then the
    # collector, paused while they loaded (the top of this module), runs again.
    gc.freeze()
    gc.enable()
    quiet.keep_python_stderr()  # before logging: decoder captures must never take our lines
    interrupts.watch()
    # Ours at INFO; Beam's (much of it logged on the root logger) only from WARNING up.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for ours in ("pipelines", "beam_tfrecord"):
        logging.getLogger(ours).setLevel(logging.INFO)
    compat.quiet_known_beam_noise()
    write_failures.quiet_write_failures()
    code = run(argv)
    # Every output is written and closed: the interpreter's exit need not search the heap the run
    # built (Beam, protobuf, TFDS) for cycles. Frozen, that search is skipped: 0.3-0.4 s of CPU
    # at every run's end (benchmarks/PROFILE_28.md); exit handlers still run.
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    main()
