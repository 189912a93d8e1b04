"""Installs beam_tfrecord and pipelines; also Dataflow's --setup_file, so workers get the same code.

Versions are pinned in requirements files only: requirements.txt (what everyone gets),
requirements-torch.txt (the optional `[torch]` extra), requirements-grain.txt (`[grain]`) and
requirements-dicom.txt (`[dicom]`).
"""

import os

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def pinned_requirements(name: str = "requirements.txt") -> list[str]:
    with open(os.path.join(HERE, name)) as handle:
        lines = (line.split("#", 1)[0].strip() for line in handle)
        return [line for line in lines if line]


setup(
    name="beam-tfrecord",
    version="0.1.0",
    description="Images on disk or GCS to sharded TFRecord files of tf.train.Example, with Apache Beam",
    packages=find_packages(include=["beam_tfrecord", "beam_tfrecord.*", "pipelines", "pipelines.*"]),
    # The compiled record schema (beam_tfrecord/write/messages.py loads it) and its source.
    package_data={"beam_tfrecord.write": ["example.binpb", "example.proto"]},
    python_requires=">=3.11,<3.12",
    install_requires=pinned_requirements(),
    extras_require={
        "torch": pinned_requirements("requirements-torch.txt"),
        "grain": pinned_requirements("requirements-grain.txt"),
        "dicom": pinned_requirements("requirements-dicom.txt"),
    },
)
