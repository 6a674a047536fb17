# fairmon: `make demo` installs what the demo uses and runs it; `make test` installs everything and runs the tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
LOCK   := requirements.lock
# setuptools notes on every editable install that it is one ("Editable installation. Please be careful with
# folders ... with the same name as your package"): information, not a problem of the package; not printed.
EDITABLE := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install --quiet --no-deps -e .
# The extras `fairmon demo` uses (pyproject.toml; docs "Getting started"): not PySpark, ruff, pytest or pre-commit.
DEMO_EXTRAS := pipeline,report,audit

$(BIN)/python:
	@echo "==> [make] creating the virtualenv $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "==> [make] upgrading pip"
	$(BIN)/python -m pip install --quiet --upgrade pip

# Exactly the tested set from the lock file (tests, lint, Spark), then fairmon itself (editable, no dependency
# resolution). It holds the demo's set too.
$(STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	@echo "==> [make] installing the tested set of $(LOCK) (a few minutes on a first install; pip lists each package)"
	$(BIN)/python -m pip install -r $(LOCK)
	@echo "==> [make] installing fairmon itself (editable)"
	$(EDITABLE)
	touch $(STAMP) $(DEMO_STAMP)

# Only what the demo uses: fairmon with the extras $(DEMO_EXTRAS), each package at its version in the lock file;
# then fairmon itself made editable, so the demo runs the working tree's code.
$(DEMO_STAMP): pyproject.toml $(LOCK) | $(BIN)/python
	@echo "==> [make] installing fairmon[$(DEMO_EXTRAS)] at the versions of $(LOCK) (pip lists each package)"
	$(BIN)/python -m pip install -c $(LOCK) ".[$(DEMO_EXTRAS)]"
	@echo "==> [make] installing fairmon itself (editable)"
	$(EDITABLE)
	touch $(DEMO_STAMP)

install: $(STAMP)

demo: $(DEMO_STAMP)
	@echo "==> [make] fairmon demo --out fairmon-demo"
	$(BIN)/fairmon demo --out fairmon-demo

# The demo with every audit family: labelers, envy-freeness and Coat reachability too (two to three times as long).
demo-full: $(DEMO_STAMP)
	@echo "==> [make] fairmon demo --full --out fairmon-demo"
	$(BIN)/fairmon demo --full --out fairmon-demo

# Everything: unit tests, Monte-Carlo coverage simulations, end-to-end flow tests, Spark, the installed-wheel check.
# One pytest worker per core (at most 4), a test file's tests on one worker (its module fixtures made once):
# the suite is CPU-bound, so two cores take about 60 % of one process's wall time (bench/README.md "Test suite cost").
test: $(STAMP)
	$(BIN)/python -m pytest -n auto --maxprocesses 4 --dist loadfile

# Unit tests only (no Prefect API, no subprocess runs, no Spark, no Monte-Carlo coverage simulations):
# under a minute on two cores (26 CPU-s; bench/README.md "Test suite cost").
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

# The docs site into site/ (MkDocs Material; --strict: a broken link or page fails), after the data dictionary,
# generated from the table registry (a test fails when it is stale). The notebook runs as the site builds.
docs: $(STAMP)
	$(BIN)/python -m fairmon.pipelines.storage.ddl --markdown > docs/tables.md
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lock:
	rm -rf .lockenv
	$(PYTHON) -m venv .lockenv
	.lockenv/bin/python -m pip install --quiet --upgrade pip
	.lockenv/bin/python -m pip install ".[all,test,dev,docs]"
	{ sed -n '1,3p' $(LOCK); .lockenv/bin/python -m pip freeze --exclude-editable | grep -v '^fairmon'; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)
	rm -rf .lockenv

clean:
	rm -rf $(VENV) fairmon-demo build dist site
