# The two commands of the README. Both create .venv on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: report report-check audit docs docs-check test test-fast lint bench mutants mutants-full clean

# The tests write bytecode even where the environment sets PYTHONDONTWRITEBYTECODE: each xdist
# worker then reads the compiled and assertion-rewritten modules instead of compiling them again
# (about 9 of a worker's 24 CPU-seconds of collection; __pycache__/ is ignored by git).
test test-fast: export PYTHONDONTWRITEBYTECODE =

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	# open_clip without its dependencies: the wrapper's tests load its loss.py by file (it
	# imports only torch); `import open_clip` needs torchvision, whose wheel does not load
	# against the CPU torch build and breaks `import lightning` (so no torchvision here).
	$(BIN)/python -m pip install --quiet --no-deps -c constraints.txt open_clip_torch
	touch $(STAMP)

report: $(STAMP)
	$(BIN)/gradlab report --out reports/latest

# Render reports/latest in headless Chromium (Debian: apt-get install chromium): screenshots
# into reports/latest/screenshots; fails on broken anchors, missing images, console errors.
report-check: $(STAMP)
	$(BIN)/python -m gradlab.report.browser_check reports/latest

# The derivation audit's records (README's audit block is rendered from them by `make docs`).
audit: $(STAMP)
	$(BIN)/gradlab audit --measure --mutants --json benchmarks/results/audit.json

# The docs site: the examples' outputs (tools/docs_examples.py runs examples/, about a minute),
# the generated blocks of README.md and docs/ from the JSON that produced them
# (tests/test_readme.py checks them), then `mkdocs build --strict` into site/ (offline; broken
# links, references and anchors fail it; tests/test_docs.py runs the same build).
docs: $(STAMP)
	$(BIN)/python tools/docs_examples.py
	$(BIN)/python tools/readme_blocks.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# Render the built site in headless Chromium (Debian: apt-get install chromium): a screenshot of
# each top-level page into site/screenshots; fails on broken links, missing images, console errors.
docs-check: docs
	$(BIN)/python tools/docs_check.py site

# CI: every test, the slow tier included. --dist loadgroup: the tests that share one costly
# session fixture (the whole audit, the quick report) run on one worker, which builds it once.
test: $(STAMP) lint
	$(BIN)/python -m pytest -n 2 --dist loadgroup

# The edit loop: every test but those marked slow, and without the test modules that import
# Lightning, Hugging Face or sentence-transformers when collected, nor two tests that import
# them when run (importing those frameworks costs a worker seconds; `make test` runs them; the
# two are deselected here rather than marked slow because mutation groups that run their files
# with -m 'not slow' need them). Slow: what takes about a fifth of a second or more on a 2-core
# CPU, such as most of the audit's claim records (the fast tier reproduces one or two quick
# claims of each claim module), all but one Chromium start, all but one W&B run, whole
# figures, the tiny study runs, and the checks that start a Python process or read every
# module. A test that a mutation group runs under -m 'not slow' keeps no slow mark.
FRAMEWORK_MODULES = --ignore-glob='*/integrations/*lightning*' \
	--ignore-glob='*/integrations/*transformers*' \
	--ignore-glob='*/integrations/test_readme_example.py' \
	--ignore-glob='*/equivalence/test_cached_mnrl_step.py' \
	--deselect=tests/monitor/test_watched.py::test_the_lightning_callback_s_watched_loss_is_a_module_that_pickles \
	--deselect=tests/equivalence/test_builtin.py::test_cached_mnrl_is_checked_against_its_own_loss
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 -m "not slow" $(FRAMEWORK_MODULES)

# ruff, then the import contract of pyproject.toml ([tool.importlinter]): the library never
# imports the studies or the CLI.
lint: $(STAMP)
	$(BIN)/ruff check gradlab tests benchmarks analyses tools
	$(BIN)/lint-imports --no-cache

# Mutation testing (mutmut) of functional/, losses, monitor/ and symbolic/ (tools/mutation.py).
# `mutants` is incremental: only the mutants of functions whose source changed since the run
# recorded in benchmarks/results/mutation.json (`python tools/mutation.py --dry-run` lists them).
# `mutants-full` runs every mutant again: several hours on two cores. Not part of CI.
mutants: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[mutation]'
	$(BIN)/python tools/mutation.py
	$(BIN)/python tools/readme_blocks.py

mutants-full: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[mutation]'
	$(BIN)/python tools/mutation.py --full
	$(BIN)/python tools/readme_blocks.py

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_smoothap.py

clean:
	rm -rf $(VENV) reports site
