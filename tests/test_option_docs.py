"""Each option is declared once, on its config field: the command's options, `--help`, the error
messages, the Flex Template's parameters, docs/options.md and summary.json's options all follow
that declaration, and a config field nobody declared is caught."""

from __future__ import annotations

import dataclasses
import json

import pytest

from beam_tfrecord.config import AnnotationConfig, ConvertConfig, FeatureConfig, GcsConfig, ImageConfig
from beam_tfrecord.config_base import ConfigError, declared, setting
from beam_tfrecord.plan.source_config import SourceConfig
from pipelines import option_docs
from pipelines.options import CommandSettings, option_fields, our_option_names, usage_text

CONFIGS = (SourceConfig, AnnotationConfig, ConvertConfig, ImageConfig, FeatureConfig, GcsConfig)


def test_the_template_metadata_is_the_declarations():
    with open(option_docs.TEMPLATE_METADATA, encoding="utf-8") as handle:
        assert json.load(handle) == option_docs.template_metadata(), (
            "run python -m pipelines.option_docs --write"
        )


def test_the_options_page_is_the_declarations():
    with open(option_docs.OPTIONS_DOC, encoding="utf-8") as handle:
        text = handle.read()
    assert text == option_docs.updated_options_doc(text), "run python -m pipelines.option_docs --write"
    for name in our_option_names():
        assert f"| `--{name}` |" in text, name


@pytest.mark.parametrize("cls", CONFIGS)
def test_every_field_of_every_config_is_declared(cls):
    """A field added without `setting(...)` would be a setting no option, doc or summary knows."""
    names = {item.name for item in declared(cls)}
    assert names == {f.name for f in dataclasses.fields(cls)}, cls.__name__


def test_an_undeclared_field_is_noticed():
    @dataclasses.dataclass(frozen=True)
    class Probe:
        declared_one: int = setting(1, group="images", help="x")
        forgotten: int = 2

    assert [item.name for item in declared(Probe)] == ["declared_one"]


def test_options_are_unique_and_every_one_has_help_group_and_label():
    fields = option_fields()
    names = [found.name for found in fields]
    assert len(names) == len(set(names))
    for found in fields:
        spec = found.field.spec
        assert spec.help and spec.group and spec.label, found.name


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (ConfigError("features.pooling", "must be one of none, avg, max"), "--feature_pooling must be"),
        (ConfigError("pooling", "must be one of none, avg, max"), "--feature_pooling must be"),
        (ConfigError("gcs.timeout_s", "must be positive"), "--gcs_timeout_s must be"),
        (ConfigError("image.jpeg_quality", "must be in 1..100"), "--jpeg_quality must be"),
        (ConfigError("read_threads", "must be at least 1"), "--read_threads must be"),
        (
            ConfigError("model_weights", "is for feature_model; a model_path model"),
            "--model_weights is for --feature_model; a --model_path model",
        ),
    ],
)
def test_messages_name_the_option_a_field_is_set_by(error, said):
    assert usage_text(error).startswith(said)


def test_summary_options_round_trip_through_the_configs():
    from beam_tfrecord.summary import OptionsSummary

    source = SourceConfig(
        input="/in",
        label_source="manifest",
        manifest="/m.csv",
        extra_columns="caption,score:float",
        class_names=("a", "b"),
        splits={"train": 0.8, "validation": 0.2},
    )
    output = ConvertConfig(output="/out", image=ImageConfig(resize=(32, 24), channels=3), compression="gzip")
    options = OptionsSummary.of(source, output)
    again = OptionsSummary.from_json(json.loads(json.dumps(options.to_json())))
    assert again.config(SourceConfig) == source
    assert again.config(ConvertConfig) == dataclasses.replace(output, gcs=GcsConfig())
    assert options.to_json()["resize"] == "32x24" and options.to_json()["extra_columns"] == [
        "caption:str",
        "score:float",
    ]


def test_run_settings_declares_only_the_commands_own_options():
    assert {item.option for item in declared(CommandSettings)} == {
        "overwrite",
        "append",
        "no_resume",
        "no_progress",
        "no_wait",
        "dry_run_output",
    }


def test_each_config_field_is_described_once_on_its_declaration():
    """No config class writes its fields' meanings in its own docstring (a third copy beside
    `help` and `details`): its `Args:` are made from the declarations, one line per field."""
    import ast
    import inspect

    for cls in (ConvertConfig, SourceConfig, ImageConfig, FeatureConfig, AnnotationConfig, GcsConfig):
        source = ast.parse(inspect.getsource(inspect.getmodule(cls)))
        written = next(
            ast.get_docstring(n)
            for n in ast.walk(source)
            if isinstance(n, ast.ClassDef) and n.name == cls.__name__
        )
        assert "Args:" not in written, cls.__name__
        args = cls.__doc__.split("Args:\n", 1)[1].splitlines()
        assert [line.split(":", 1)[0].strip() for line in args if line.strip()] == [
            item.name for item in declared(cls)
        ]
