#!/usr/bin/env bash
# Build the Flex Template spec: a JSON file on GCS naming the image and deploy/metadata.json.
#
#   IMAGE=us-central1-docker.pkg.dev/my-project/beam/beam-tfrecord:0.1.0 \
#   TEMPLATE=gs://my-bucket/templates/beam-tfrecord.json deploy/build_template.sh
#
# The image is the one deploy/build_image.sh pushed (the launcher and the workers share it).
# PRINT_ONLY=1 prints the command without running it.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "error: $*" >&2; exit 2; }
run() { printf '+'; printf ' %q' "$@"; printf '\n'; [[ "${PRINT_ONLY:-0}" == 1 ]] || "$@"; }

[[ $# -eq 0 ]] || fail "no arguments; set IMAGE and TEMPLATE"
[[ -n "${IMAGE:-}" ]] || fail "set IMAGE to the image deploy/build_image.sh pushed"
[[ "${TEMPLATE:-}" == gs://*/*.json ]] || fail "set TEMPLATE to a gs://BUCKET/PATH.json for the template spec"
if [[ "${PRINT_ONLY:-0}" != 1 ]]; then
  command -v gcloud >/dev/null || fail "gcloud is not installed (https://cloud.google.com/sdk/docs/install)"
fi

echo "writing the Flex Template spec $TEMPLATE for image $IMAGE with deploy/metadata.json"
run gcloud dataflow flex-template build "$TEMPLATE" \
  --image "$IMAGE" \
  --sdk-language PYTHON \
  --metadata-file deploy/metadata.json
