"""The examples of docs/equivalence.md run as written: the in-process blocks here, the
two-process example (a step module and the script that checks it) in a subprocess."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "equivalence.md"


def _blocks():
    """(file name or None, code) of each python block of the page, in order."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    named = [re.match(r"# file: (\S+)\n", code) for code in blocks]
    return [(m.group(1) if m else None, code) for m, code in zip(named, blocks, strict=True)]


def test_the_page_has_its_examples():
    names = [name for name, _ in _blocks()]
    assert names.count(None) == 3 and {"my_steps.py", "check_gather.py"} <= set(names)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_each_in_process_example_runs(index, capsys):
    code = [code for name, code in _blocks() if name is None][index]
    exec(compile(code, f"{PAGE.name} block {index}", "exec"), {"__name__": "docs_example"})
    assert "verdict:" in capsys.readouterr().out


@pytest.mark.slow
def test_the_two_process_example_runs(tmp_path):
    for name, code in _blocks():
        if name is not None:
            (tmp_path / name).write_text(code)
    # the example's folder first, then whatever made gradlab importable here
    path = os.pathsep.join(filter(None, (str(tmp_path), os.environ.get("PYTHONPATH"))))
    completed = subprocess.run(
        [sys.executable, "check_gather.py"], cwd=tmp_path, capture_output=True, text=True,
        timeout=300, env={**os.environ, "PYTHONPATH": path},
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "verdict: NOT EQUIVALENT" in completed.stdout
