"""Rerunning a fast analysis reproduces its committed JSON byte for byte.

Every ``analyses/`` script fixes its seeds and writes through :func:`gradlab.jsonio.write_json`,
so a rerun on this machine must give the file in ``figures/`` exactly. The slow scripts
(operating region, tie-aware, studies) are rerun by hand: ``python analyses/NAME.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAST_ANALYSES = {"fappy_lemma1.py": ["fappy_lemma1_gradient.json"]}
"""Script -> the JSON files it writes into figures/ (each rerun takes seconds)."""


@pytest.mark.parametrize("script", sorted(FAST_ANALYSES))
@pytest.mark.slow
def test_rerun_reproduces_the_committed_json(script, tmp_path):
    subprocess.run([sys.executable, str(ROOT / "analyses" / script), "--out", str(tmp_path)],
                   cwd=ROOT, check=True, capture_output=True, timeout=300)  # fmt: skip
    for name in FAST_ANALYSES[script]:
        assert (tmp_path / name).read_bytes() == (ROOT / "figures" / name).read_bytes(), name


@pytest.mark.slow
def test_rerun_of_the_accumulation_study_reproduces_its_committed_json(tmp_path):
    out = tmp_path / "accumulation.json"
    subprocess.run([sys.executable, str(ROOT / "analyses" / "accumulation.py"), "--out-json",
                    str(out), "--figure", str(tmp_path / "accumulation.png")],
                   cwd=ROOT, check=True, capture_output=True, timeout=300)  # fmt: skip
    committed = ROOT / "benchmarks" / "results" / "accumulation.json"
    rerun, recorded = json.loads(out.read_text()), json.loads(committed.read_text())
    # The machine block names the kernel and versions it ran on (a fresh machine may differ);
    # every measured number must be the same, and the file's text apart from that block too.
    rerun.pop("machine"), recorded.pop("machine")
    assert rerun == recorded
    assert out.read_text().split('"machine"')[0] == committed.read_text().split('"machine"')[0]
