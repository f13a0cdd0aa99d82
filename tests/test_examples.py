"""Every script of examples/ runs on CPU (random weights, no network) and prints what the docs'
examples page shows (docs/examples/NAME.txt, written by ``python tools/docs_examples.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.docs_examples import EXAMPLES, OUTPUT, ROOT, run_example

pytestmark = pytest.mark.slow  # each example trains for a few seconds; Lightning starts slowly


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[str, Path]]:
    """Each example run once: its standard output and its ``--out`` folder."""
    results = {}
    for name in EXAMPLES:
        out = tmp_path_factory.mktemp(name)
        completed = run_example(name, out, timeout=120)
        assert completed.returncode == 0, f"{name}: {completed.stderr[-3000:]}"
        results[name] = (completed.stdout, out)
    return results


def test_every_example_is_listed_and_shown():
    scripts = sorted(path.stem for path in (ROOT / "examples").glob("*.py"))
    assert scripts == sorted(EXAMPLES)
    page = (ROOT / "docs" / "examples.md").read_text()
    for name in EXAMPLES:
        assert f"<!-- generated: example-{name} -->" in page, name


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_example_prints_what_the_docs_show(name, runs):
    assert runs[name][0] == (OUTPUT / f"{name}.txt").read_text()


def test_the_smoothap_example_logs_the_default_schedule_and_draws_it(runs):
    out = runs["smoothap_monitor"][1]
    lines = (out / "run" / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(line)["step"] for line in lines if '"step"' in line]
    # dense to step 9, every 10th to 200, and close() adds the last step (59)
    assert steps == [*range(10), 10, 20, 30, 40, 50, 59]
    assert (out / "figures" / "overview.png").stat().st_size > 10_000


def test_the_audit_example_rejects_every_mutant():
    output = (OUTPUT / "audit_derivation.txt").read_text()
    assert output.splitlines()[0].endswith(": holds")
    mutants = [line for line in output.splitlines() if line.lstrip().startswith("mutant ")]
    assert len(mutants) >= 3 and all(line.endswith(", rejected") for line in mutants)
    assert output.splitlines()[-1] == f"{len(mutants)} of {len(mutants)} mutants rejected"
