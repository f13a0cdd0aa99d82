# The two commands of the README. Both create .venv on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: report test lint bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

report: $(STAMP)
	$(BIN)/gradlab report --out reports/latest

test: $(STAMP) lint
	$(BIN)/python -m pytest -n 2

lint: $(STAMP)
	$(BIN)/ruff check gradlab tests benchmarks analyses

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_smoothap.py

clean:
	rm -rf $(VENV) reports
