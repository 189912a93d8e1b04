# `make demo` converts the bundled sample; `make test` runs lint (ruff, mypy, shellcheck, hadolint)
# and the whole suite (`make test-fast` most of it in about half the time; `make test-torch` adds
# PyTorch and runs its reader's and feature models' tests, and the docs' PyTorch examples).
# Each creates .venv on first use: `make demo` with what the converter needs (requirements.txt and the
# project), `make test` with the test and lint tools too (requirements-dev-nodeps.txt without their
# dependencies: see its header). `make proto` recompiles beam_tfrecord/write/example.binpb after an
# edit of beam_tfrecord/write/example.proto (both are checked in).
# The interpreter .venv is made with: the system's /usr/bin/python3.11 where there is one that can make
# a venv (Debian's and Ubuntu's are built with profile-guided and link-time optimization), else
# python3.11 from PATH, else python3. pyenv builds without those unless asked
# (PYTHON_CONFIGURE_OPTS="--enable-optimizations --with-lto"): on the project's 2-core machine the whole
# suite took 16% more CPU on pyenv's 3.11.7 than on Debian's 3.11.2, a conversion of sample/shapes 9%
# more (benchmarks/NOTES.md).
SYSTEM_PYTHON = $(shell /usr/bin/python3.11 -c 'import ensurepip; ensurepip.version()' >/dev/null 2>&1 && echo /usr/bin/python3.11)
PYTHON ?= $(or $(SYSTEM_PYTHON),$(shell command -v python3.11 || command -v python3))
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test test-fast test-torch lint format proto docs pictures clean

# setup.py takes Python 3.11 only (>=3.11,<3.12): where .venv is still to be made, any other
# Python stops make here in one line, before a venv or a pip install is half done.
ifeq ($(wildcard $(PY)),)
ifneq ($(filter-out clean,$(or $(MAKECMDGOALS),demo)),)
PYTHON_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
ifneq ($(PYTHON_VERSION),3.11)
$(error beam-tfrecord needs Python 3.11 (setup.py says >=3.11,<3.12), and $(or $(PYTHON),python3) is $(or $(PYTHON_VERSION),not there): install Python 3.11, or name it: make PYTHON=/path/to/python3.11 $(MAKECMDGOALS))
endif
endif
endif

# The converter alone (requirements.txt and the project, editable): what `make demo` needs.
$(VENV)/.installed-run: requirements.txt setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -e .
	touch $@

# The converter and the test and lint tools: what `make test` needs (it marks both as installed).
$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-grain.txt requirements-dicom.txt requirements-dev-nodeps.txt setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt -e .
	$(PY) -m pip install --quiet --no-deps -r requirements-dev-nodeps.txt
	touch $@ $(VENV)/.installed-run

demo: $(VENV)/.installed-run
	$(PY) -m pipelines.convert --runner=DirectRunner --output output --overwrite

# mypy checks beam_tfrecord/ and pipelines/ as pyproject.toml's [tool.mypy] says: about 10 s on
# the project's 2-core machine, half a second once .mypy_cache holds the last run's.
lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/shellcheck deploy/*.sh
	$(VENV)/bin/hadolint deploy/Dockerfile

# The project byte-compiled before a suite: the tests start some 150 Python processes that import
# it (the commands run as shown, killed and racing runs, Beam's worker processes), and where
# PYTHONDONTWRITEBYTECODE is set (as in many CI containers) none of them keeps what it compiled,
# so each compiled it again: 0.13 s of CPU for a conversion of sample/shapes, 0.5 s here for all.
BYTECODE := $(PY) -m compileall -q -j 0 beam_tfrecord pipelines tests benchmarks

# The whole suite on pytest-xdist workers, one more than the cores (tests/conftest.py says why);
# each test file runs whole in one worker (--dist loadfile), so a module's fixtures (outputs built
# once and shared) are built once, and the longest files are dealt first (tests/conftest.py's
# LONGEST_FILES, --no-loadscope-reorder).
test: lint
	$(BYTECODE)
	$(PY) -m pytest -n auto --dist loadfile --no-loadscope-reorder

# The inner loop: ruff's lint and the suite without the files whose tests mostly wait on other
# processes (tests/conftest.py's PROCESS_FILES): about half the time. `make test` stays the whole
# suite, which CI runs.
test-fast: $(VENV)/.installed
	$(PY) -m ruff check .
	$(BYTECODE)
	$(PY) -m pytest -n auto --dist loadfile --no-loadscope-reorder --fast

# The PyTorch tests, apart: torch from PyPI is 5.5 GB with its CUDA libraries, which `make test`
# should not install. tests/test_torch.py: the reading adapter (its sharding is tested without
# torch in tests/test_iter_examples.py); tests/torch_feature_cases.py: torchvision, timm,
# TorchScript, torch.export and torch-exported ONNX feature models (`make test` skips both, or,
# where torch is installed, runs the second in a fresh process: tests/test_features_torch.py).
test-torch: $(VENV)/.installed
	$(PY) -m pip install --quiet -r requirements-torch.txt
	$(PY) -m pytest tests/test_torch.py tests/torch_feature_cases.py
	$(PY) -m pytest tests/test_readme_example.py -m torch

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

# The contact sheets of docs/segmentation.md, keypoints.md and captions.md, drawn by inspect from
# the bundled sample: its YOLO tree as a segmentation run, its COCO pictures with their shapes'
# corners as keypoints and a caption each (sample/make_pictures.py writes those two trees).
PICTURES := build/pictures
pictures: $(VENV)/.installed-run
	rm -rf $(PICTURES) && $(PY) sample/make_pictures.py $(PICTURES)
	$(PY) -m pipelines.convert --input sample/detection/yolo --output $(PICTURES)/out/segmentation --task segmentation
	$(PY) -m pipelines.convert --input $(PICTURES)/keypoints --output $(PICTURES)/out/keypoints --task keypoints
	$(PY) -m pipelines.convert --input $(PICTURES)/captions --output $(PICTURES)/out/captions --task captions
	for task in segmentation keypoints captions; do \
	  $(PY) -m pipelines.inspect $(PICTURES)/out/$$task --pictures $(PICTURES)/$$task-sheet && \
	  cp $(PICTURES)/$$task-sheet/contact_sheet.png docs/$${task}_contact_sheet.png || exit 1; \
	done

clean:
	rm -rf $(VENV) output
