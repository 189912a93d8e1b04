"""A runner given by its module path (`--runner=runner_plugin.NotingRunner`), with an option of its
own, as a third-party runner package declares one: tests/test_runners.py checks that the command
loads the module before parsing, so that `--plugin_note` is known. Imported by the command only."""

from __future__ import annotations

from pathlib import Path

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

__all__ = ["NotingRunner", "PluginOptions"]


class PluginOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser) -> None:
        parser.add_argument("--plugin_note", help="a file NotingRunner writes before it runs")


class NotingRunner(FnApiRunner):
    """Beam's in-process runner, which first writes the runner name to `--plugin_note`: proof that
    the option reached the runner that was named."""

    def run_pipeline(self, pipeline, options):
        Path(options.view_as(PluginOptions).plugin_note).write_text(type(self).__name__)
        return super().run_pipeline(pipeline, options)
