#!/usr/bin/env bash
# Wheels for running the plain conversion (benchmarks/scaling.py) on a lent accelerator machine,
# whose image has Python 3.12, PyTorch, JAX, numpy, pyarrow, grpcio and requests but no Beam, and
# takes at most 64 MiB of carried files a call. Run here (pip reaches a mirror here, not there):
#
#   benchmarks/device_wheels.sh            # -> .whl/ (git-ignored through .git/info/exclude)
#
# then name .whl in the run's carry and begin its command with
#
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
#       .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1;
#
# The versions are this checkout's (.venv); the list is Beam's own requirements that the image
# lacks, plus ours (Pillow, google-crc32c, protobuf). numpy stays the image's (2.5.2 there, one
# minor above Beam's pin; 16 MB that would not fit). TensorFlow does not fit at all (about 600 MB
# and CUDA 12 libraries; the image has CUDA 13), so a Keras feature model cannot run there; a
# PyTorch one (--feature_model torchvision:NAME, benchmarks/gpu_model.py and features.py) runs on
# the image's own torch and torchvision, which these wheels leave alone (docs/features.md, GPU).
set -euo pipefail
cd "$(dirname "$0")/.."

python="${PYTHON:-.venv/bin/python}"
limit_mib=58 # 64 MiB a call, less the working tree
packages=(apache-beam pillow protobuf google-crc32c cryptography fastavro fasteners httplib2
  jsonpickle objsize pymongo proto-plus pytz zstandard beartype orjson)

wheels="${WHEELS:-.whl}" # another folder for a trial; the run tool carries only the repo's
if [[ "$wheels" == .whl ]]; then
  exclude="$(git rev-parse --git-path info/exclude)"
  grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >>"$exclude"
fi
rm -rf "$wheels" && mkdir -p "$wheels"
pins=()
for package in "${packages[@]}"; do
  version="$("$python" -c "import importlib.metadata as m; print(m.version('$package'))")"
  pins+=("$package==$version")
done
echo "downloading ${pins[*]}"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$wheels" "${pins[@]}"
total_kib="$(du -sk "$wheels" | cut -f1)"
echo "$(find "$wheels" -name '*.whl' | wc -l) wheels, $((total_kib / 1024)) MiB in $wheels/"
if ((total_kib > limit_mib * 1024)); then
  echo "error: more than $limit_mib MiB: a call carries 64 MiB with the working tree" >&2
  exit 1
fi
