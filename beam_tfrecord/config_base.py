"""What every typed setting shares: the one error a setting that cannot work raises, named by its
field in the library's own terms (`image.jpeg_quality`, `features.pooling`), so a user of the
library reads about the fields they set and the command maps each name onto its option.

Every config class (`plan.source_config.SourceConfig`, `images.options.ImageOptions`,
`features.options.FeatureOptions`, `config.ConvertConfig`) validates itself when made and says
how summary.json records it (`summary_fields`), field by field.
"""

from __future__ import annotations

from collections.abc import Collection

__all__ = ["ConfigError", "check_choice"]


class ConfigError(ValueError):
    """A setting that cannot work. `name` is its field, dotted inside a nested setting
    (`image.jpeg_quality`); `problem` says what is wrong, to be read after the name."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name} {problem}")
        self.name = name
        self.problem = problem

    def within(self, owner: str) -> ConfigError:
        """The same error named from the setting that holds this one (`image` + `jpeg_quality`)."""
        return ConfigError(f"{owner}.{self.name}", self.problem)


def check_choice(name: str, value: object, choices: Collection[object]) -> None:
    if value not in choices:
        raise ConfigError(name, f"must be one of {', '.join(map(str, choices))}, not {value!r}")
