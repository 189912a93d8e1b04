#!/usr/bin/env bash
# Launch a conversion from the Flex Template that deploy/build_template.sh built.
#
#   PROJECT=my-project REGION=us-central1 BUCKET=gs://my-bucket \
#   TEMPLATE=gs://my-bucket/templates/beam-tfrecord.json \
#   IMAGE=us-central1-docker.pkg.dev/my-project/beam/beam-tfrecord:0.1.0 \
#   INPUT=gs://my-bucket/PetImages OUTPUT=gs://my-bucket/tfrecords/pets \
#   deploy/run_template.sh [--gpu] [-- more gcloud flags, e.g. --parameters schema=simple]
#
# gcloud splits --parameters at commas: a value with commas needs another delimiter, e.g.
# --parameters '^~^splits=train=0.8,validation=0.2'.
#
# The template's launcher runs pipelines/convert.py inside IMAGE; the workers start from IMAGE too.
# Optional: MAX_WORKERS (default 10), MACHINE_TYPE. PRINT_ONLY=1 prints the command only.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "error: $*" >&2; exit 2; }
run() { printf '+'; printf ' %q' "$@"; printf '\n'; [[ "${PRINT_ONLY:-0}" == 1 ]] || "$@"; }

gpu=false
if [[ "${1:-}" == --gpu ]]; then gpu=true; shift; fi
if [[ "${1:-}" == -- ]]; then shift; fi
for name in PROJECT REGION BUCKET TEMPLATE IMAGE INPUT OUTPUT; do
  [[ -n "${!name:-}" ]] || fail "set $name (see the header of $0)"
done
[[ "$BUCKET" == gs://* ]] || fail "BUCKET must be gs://BUCKET, not $BUCKET"
if [[ "${PRINT_ONLY:-0}" != 1 ]]; then
  command -v gcloud >/dev/null || fail "gcloud is not installed (https://cloud.google.com/sdk/docs/install)"
fi

job="beam-tfrecord-$(date -u +%Y%m%d-%H%M%S)"
flags=(
  "--project=$PROJECT"
  "--region=$REGION"
  "--template-file-gcs-location=$TEMPLATE"
  "--temp-location=${BUCKET%/}/tmp"
  "--staging-location=${BUCKET%/}/staging"
  "--max-workers=${MAX_WORKERS:-10}"
  --parameters "input=$INPUT"
  --parameters "output=$OUTPUT"
  --parameters "sdk_container_image=$IMAGE"
)
machine_type="${MACHINE_TYPE:-}"
if [[ "$gpu" == true ]]; then
  machine_type="${machine_type:-g2-standard-4}"
  flags+=(--parameters "dataflow_service_options=worker_accelerator=type:nvidia-l4;count:1;install-nvidia-driver")
fi
if [[ -n "$machine_type" ]]; then flags+=("--worker-machine-type=$machine_type"); fi

echo "launching $job from $TEMPLATE: $INPUT -> $OUTPUT in $PROJECT/$REGION (gpu: $gpu)"
run gcloud dataflow flex-template run "$job" "${flags[@]}" "$@"
