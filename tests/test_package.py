"""The package is the library's front door: every public name imports from it, without loading
TensorFlow or Beam's pipeline machinery until used, and every module says what it exports."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import beam_tfrecord


def test_every_public_name_and_submodule_is_reachable_from_the_package():
    assert sorted(beam_tfrecord.__all__) == sorted(beam_tfrecord._EXPORTS)
    for name in beam_tfrecord.__all__:
        assert getattr(beam_tfrecord, name) is not None, name
    # fault_injection is a test-only hook, not part of the library's front door.
    found = {m.name for m in pkgutil.iter_modules(beam_tfrecord.__path__)} - {"fault_injection"}
    assert set(beam_tfrecord.SUBMODULES) == found
    assert beam_tfrecord.write.schema.parse_spec is beam_tfrecord.parse_spec


def test_the_configs_old_names_still_import_as_the_new_ones():
    from beam_tfrecord import FeatureOptions, ImageOptions  # the names before every config ended in Config

    assert ImageOptions is beam_tfrecord.ImageConfig and FeatureOptions is beam_tfrecord.FeatureConfig
    assert "ImageOptions" not in beam_tfrecord.__all__


def test_every_module_declares_its_exports():
    """Every module and stage package, at any depth (a stage's `__all__` lists its modules)."""
    modules = [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(beam_tfrecord.__path__, "beam_tfrecord.")
    ]
    for module in modules:  # after every import: a package's modules are its attributes by then
        info = module.__spec__
        assert isinstance(getattr(module, "__all__", None), list), info.name
        for name in module.__all__:
            assert hasattr(module, name), (info.name, name)


def test_importing_the_package_loads_neither_tensorflow_nor_a_pipeline():
    code = (
        "import sys, beam_tfrecord; "
        "assert 'tensorflow' not in sys.modules and 'apache_beam' not in sys.modules, sorted(sys.modules); "
        "beam_tfrecord.SourceConfig"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
