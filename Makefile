# `make demo` converts the bundled sample; `make test` runs lint and the whole suite (`make
# test-torch` adds PyTorch and runs its reader's and feature models' tests).
# Each creates .venv with the pinned requirements on first use (requirements-dev-nodeps.txt without
# their dependencies: see its header). `make proto` recompiles
# beam_tfrecord/write/example.binpb after an edit of beam_tfrecord/write/example.proto (both are checked in).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test test-torch lint format proto docs clean

$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-dev-nodeps.txt setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt -e .
	$(PY) -m pip install --quiet --no-deps -r requirements-dev-nodeps.txt
	touch $@

demo: $(VENV)/.installed
	$(PY) -m pipelines.convert --runner=DirectRunner --output output --overwrite

lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/shellcheck deploy/*.sh
	$(VENV)/bin/hadolint deploy/Dockerfile

test: lint
	$(PY) -m pytest

# The PyTorch tests, apart: torch from PyPI is 5.5 GB with its CUDA libraries, which `make test`
# should not install. tests/test_torch.py: the reading adapter (its sharding is tested without
# torch in tests/test_iter_examples.py); tests/torch_feature_cases.py: torchvision, timm,
# TorchScript, torch.export and torch-exported ONNX feature models (`make test` skips both, or,
# where torch is installed, runs the second in a fresh process: tests/test_features_torch.py).
test-torch: $(VENV)/.installed
	$(PY) -m pip install --quiet -r requirements-torch.txt
	$(PY) -m pytest tests/test_torch.py tests/torch_feature_cases.py

format: $(VENV)/.installed
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

proto: $(VENV)/.installed
	$(PY) -m grpc_tools.protoc --proto_path=. --descriptor_set_out=beam_tfrecord/write/example.binpb beam_tfrecord/write/example.proto

# The generated views of the declarations: docs/options.md's table and deploy/metadata.json (from the
# options' declarations on the config fields) and docs/reasons.md (from beam_tfrecord/reasons.py);
# tests fail when they differ from what this writes.
docs: $(VENV)/.installed
	$(PY) -m pipelines.option_docs --write
	$(PY) -m beam_tfrecord.reasons > docs/reasons.md

clean:
	rm -rf $(VENV) output
