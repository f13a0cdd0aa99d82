# The two commands of the README. Both create .venv on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: report report-check audit docs test lint bench mutants clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

report: $(STAMP)
	$(BIN)/gradlab report --out reports/latest

# Render reports/latest in headless Chromium (Debian: apt-get install chromium): screenshots
# into reports/latest/screenshots; fails on broken anchors, missing images, console errors.
report-check: $(STAMP)
	$(BIN)/python -m gradlab.report.browser_check reports/latest

# The derivation audit's records (README's audit block is rendered from them by `make docs`).
audit: $(STAMP)
	$(BIN)/gradlab audit --mutants --json benchmarks/results/audit.json

# README tables and numbers from the JSON that produced them (tests/test_readme.py checks them).
docs: $(STAMP)
	$(BIN)/python tools/readme_blocks.py

test: $(STAMP) lint
	$(BIN)/python -m pytest -n 2

# ruff, then the import contract of pyproject.toml ([tool.importlinter]): the library never
# imports the studies or the CLI.
lint: $(STAMP)
	$(BIN)/ruff check gradlab tests benchmarks analyses tools
	$(BIN)/lint-imports --no-cache

# Mutation testing (mutmut) of functional/, losses, monitor/ and symbolic/; several hours on
# two cores (see benchmarks/mutation.py: one module with --only runs in minutes);
# writes benchmarks/results/mutation.json. Not part of CI.
mutants: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[mutation]'
	$(BIN)/python benchmarks/mutation.py
	$(BIN)/python tools/readme_blocks.py

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_smoothap.py

clean:
	rm -rf $(VENV) reports
