#!/usr/bin/env bash
# Submit a conversion to Dataflow from this machine (python -m pipelines.convert).
#
#   PROJECT=my-project REGION=us-central1 BUCKET=gs://my-bucket \
#   INPUT=gs://my-bucket/PetImages OUTPUT=gs://my-bucket/tfrecords/pets \
#   deploy/run_job.sh [--gpu] [-- more pipelines.convert or Beam options]
#
# Without IMAGE the workers install the project from setup.py (--setup_file); with IMAGE (from
# deploy/build_image.sh) they start from that image. --gpu asks for one NVIDIA L4 per worker on
# g2-standard-4 and needs IMAGE from build_image.sh --gpu. Optional: MAX_WORKERS (default 10),
# MACHINE_TYPE, PYTHON (default .venv/bin/python). PRINT_ONLY=1 prints the command only.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "error: $*" >&2; exit 2; }
run() { printf '+'; printf ' %q' "$@"; printf '\n'; [[ "${PRINT_ONLY:-0}" == 1 ]] || "$@"; }

gpu=false
if [[ "${1:-}" == --gpu ]]; then gpu=true; shift; fi
if [[ "${1:-}" == -- ]]; then shift; fi
for name in PROJECT REGION BUCKET INPUT OUTPUT; do
  [[ -n "${!name:-}" ]] || fail "set $name (see the header of $0)"
done
[[ "$BUCKET" == gs://* ]] || fail "BUCKET must be gs://BUCKET, not $BUCKET"
python="${PYTHON:-.venv/bin/python}"
[[ -x "$python" ]] || fail "$python not found: run 'make demo' once or set PYTHON"

options=(
  --runner=DataflowRunner
  "--project=$PROJECT"
  "--region=$REGION"
  "--temp_location=${BUCKET%/}/tmp"
  "--staging_location=${BUCKET%/}/staging"
  "--input=$INPUT"
  "--output=$OUTPUT"
  "--max_num_workers=${MAX_WORKERS:-10}"
)
if [[ -n "${IMAGE:-}" ]]; then
  options+=("--sdk_container_image=$IMAGE" --sdk_location=container)
else
  options+=(--setup_file=./setup.py)
fi
machine_type="${MACHINE_TYPE:-}"
if [[ "$gpu" == true ]]; then
  [[ -n "${IMAGE:-}" ]] || fail "--gpu needs IMAGE built by deploy/build_image.sh --gpu"
  machine_type="${machine_type:-g2-standard-4}"
  options+=("--dataflow_service_options=worker_accelerator=type:nvidia-l4;count:1;install-nvidia-driver")
fi
if [[ -n "$machine_type" ]]; then options+=("--machine_type=$machine_type"); fi

echo "submitting $INPUT -> $OUTPUT to Dataflow in $PROJECT/$REGION (gpu: $gpu, workers up to ${MAX_WORKERS:-10})"
run "$python" -m pipelines.convert "${options[@]}" "$@"
