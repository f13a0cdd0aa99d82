"""README numbers agree with the JSON that produced them (``make docs`` regenerates them)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tools.readme_blocks import BLOCKS, ROOT, render, stale_blocks

README = (ROOT / "README.md").read_text()


def test_every_generated_readme_block_matches_its_json():
    assert stale_blocks(README) == [], "run `make docs` and commit README.md"


def test_every_registered_block_stands_in_the_readme():
    render(README)  # loads the renderers
    for name in BLOCKS:
        assert f"<!-- generated: {name} -->" in README, name


def test_a_changed_result_makes_its_block_stale(tmp_path):
    root = tmp_path / "repo"
    tracked = subprocess.run(["git", "ls-files", "*.json"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()  # fmt: skip
    for relative in tracked:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / relative, root / relative)
    losses = root / "benchmarks" / "results" / "losses.json"
    result = json.loads(losses.read_text())
    result["timings"][0]["median_seconds"] *= 3
    losses.write_text(json.dumps(result))
    assert stale_blocks(README, Path(root)) == ["loss-cost"]
