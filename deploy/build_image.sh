#!/usr/bin/env bash
# Build and push the worker + Flex Template launcher image (deploy/Dockerfile).
#
#   IMAGE=us-central1-docker.pkg.dev/my-project/beam/beam-tfrecord:0.1.0 deploy/build_image.sh [--gpu]
#
# --gpu builds the variant with CUDA-enabled TensorFlow for GPU workers. Beam's and TensorFlow's
# versions come from requirements.txt, the one place they are pinned. PRINT_ONLY=1 prints the
# commands without running them. Optional: LAUNCHER_IMAGE (the Flex Template launcher base).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "error: $*" >&2; exit 2; }
run() { printf '+'; printf ' %q' "$@"; printf '\n'; [[ "${PRINT_ONLY:-0}" == 1 ]] || "$@"; }
pinned() { sed -n "s/^$1\(\[[a-z,]*\]\)\{0,1\}==\([^ #]*\).*/\2/p" requirements.txt; }

gpu=false
case "${1:-}" in
  --gpu) gpu=true ;;
  "") ;;
  *) fail "unknown argument $1 (only --gpu)" ;;
esac
[[ -n "${IMAGE:-}" ]] || fail "set IMAGE, e.g. IMAGE=us-central1-docker.pkg.dev/my-project/beam/beam-tfrecord:0.1.0"
beam_version="$(pinned apache-beam)"
tensorflow_version="$(pinned tensorflow)"
[[ -n "$beam_version" && -n "$tensorflow_version" ]] || fail "requirements.txt pins no apache-beam or tensorflow"
extras=""
if [[ "$gpu" == true ]]; then extras="and-cuda"; fi
if [[ "${PRINT_ONLY:-0}" != 1 ]]; then
  command -v docker >/dev/null || fail "docker is not installed"
fi

echo "building $IMAGE from apache/beam_python3.11_sdk:$beam_version with tensorflow${extras:+[$extras]}==$tensorflow_version, then pushing it"
build_args=(--build-arg "BEAM_VERSION=$beam_version" --build-arg "TENSORFLOW_EXTRAS=$extras")
if [[ -n "${LAUNCHER_IMAGE:-}" ]]; then build_args+=(--build-arg "LAUNCHER_IMAGE=$LAUNCHER_IMAGE"); fi
run docker build --file deploy/Dockerfile "${build_args[@]}" --tag "$IMAGE" .
run docker push "$IMAGE"
