# fairmon: `make demo` installs everything and runs the demo; `make test` installs and runs the tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LOCK   := requirements.lock

.PHONY: install demo test test-fast lint format wheel-check docs lock clean

# Exactly the tested set from the lock file, then fairmon itself (editable, no dependency resolution).
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/fairmon demo --out fairmon-demo

# Everything: unit tests, Monte-Carlo coverage simulations, end-to-end flow tests, Spark, the installed-wheel check.
test: $(STAMP)
	$(BIN)/python -m pytest

# Unit tests only (no Prefect API, no subprocess runs, no Spark, no Monte-Carlo coverage simulations):
# under a minute on two cores (25 CPU-s; bench/README.md "Test suite cost").
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not spark and not coverage"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Build the wheel, install it with the lock file into a fresh virtualenv and run it from an empty folder.
wheel-check: $(STAMP)
	bash .ci/wheel-check

# The data dictionary, generated from the table registry (a test fails when it is stale).
docs: $(STAMP)
	$(BIN)/python -m fairmon.pipelines.storage.ddl --markdown > docs/tables.md

lock:
	rm -rf .lockenv
	$(PYTHON) -m venv .lockenv
	.lockenv/bin/python -m pip install --quiet --upgrade pip
	.lockenv/bin/python -m pip install --quiet ".[test,dev,spark]"
	{ sed -n '1,3p' $(LOCK); .lockenv/bin/python -m pip freeze --exclude-editable | grep -v '^fairmon'; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)
	rm -rf .lockenv

clean:
	rm -rf $(VENV) fairmon-demo build dist
