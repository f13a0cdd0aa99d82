"""The analyses/ scripts the docs tell users to run refuse a bad output path in one line on
stderr with exit code 2, before any work (they ended in a traceback, the accumulation study's
after its measurement)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["fappy_lemma1.py", "--quick", "--out", "{file}"],
         "fappy_lemma1.py: --out must be a folder or a path where one can be created; got "
         "'{file}', which is an existing file"),
        (["accumulation.py", "--out-json", "{tmp}/missing/a.json", "--figure", "{tmp}/a.png"],
         "accumulation.py: --out-json must be a file in an existing folder; got "
         "'{tmp}/missing/a.json', but the folder '{tmp}/missing' does not exist (gradlab "
         "creates no folder for a file: create it first)"),
        (["accumulation.py", "--plot-only", "--out-json", "{tmp}/a.json", "--figure",
          "{tmp}/a.png"],
         "accumulation.py: --out-json must be the JSON an earlier run wrote (--plot-only draws "
         "from it); got '{tmp}/a.json', which is no file"),
        (["accumulation.py", "--plot-only", "--figure", "{tmp}"],
         "accumulation.py: --figure must be a .png file path; got '{tmp}', which is a folder"),
        (["accumulation.py", "--plot-only", "--figure", "{tmp}/figure"],
         "accumulation.py: --figure must be a .png file path; got '{tmp}/figure'"),
        (["accumulation.py", "--plot-only", "--figure", "{file}/a.png"],
         "accumulation.py: the folder of --figure '{file}/a.png' must be a folder or a path "
         "where one can be created; got '{file}', which is an existing file"),
    ],
)  # fmt: skip
@pytest.mark.slow
def test_a_bad_output_path_is_one_line_and_exit_2_before_any_work(tmp_path, argv, message):
    (tmp_path / "notes.txt").write_text("a file")
    fill = {"{file}": str(tmp_path / "notes.txt"), "{tmp}": str(tmp_path)}

    def filled(text):
        for key, value in fill.items():
            text = text.replace(key, value)
        return text

    script, *options = argv
    result = subprocess.run([sys.executable, str(ROOT / "analyses" / script),
                             *map(filled, options)], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == filled(message) + "\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # nothing written
