"""``gradlab audit --claims FILE``: a user's own claims audited from the command line."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import sympy as sp

from gradlab.cli import main
from gradlab.symbolic import run_audit

ROOT = Path(__file__).resolve().parents[1]

CLAIM = ("from gradlab.symbolic import Claim, Form, decide\n"
         "CLAIMS = [Claim('notes', 'eq1', '1 + 1 is 2', Form({value}),"
         " lambda form: decide(form.value == 2, 'is 2', 'not 2'))]\n")  # fmt: skip


def _run(argv, capsys):
    try:
        code = main([str(arg) for arg in argv])
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _docs_file(tmp_path: Path) -> Path:
    """The audit page's ``my_claims.py``, written as a reader would save it."""
    page = (ROOT / "docs" / "audit.md").read_text()
    (code,) = [block for block in re.findall(r"```python\n(.*?)```", page, re.DOTALL)
               if block.startswith("# my_claims.py")]  # fmt: skip
    file = tmp_path / "my_claims.py"
    file.write_text(code)
    return file


@pytest.mark.slow
def test_the_pages_claims_file_gives_the_table_it_shows_and_the_apis_records(tmp_path, capsys):
    file = _docs_file(tmp_path)
    code, out, err = _run(["audit", "--claims", file, "--mutants", "--no-progress",
                           "--json", tmp_path / "mine.json"], capsys)  # fmt: skip
    assert code == 0, err
    page = (ROOT / "docs" / "audit.md").read_text()
    shown = re.search(r"```console\n\$ gradlab audit --claims my_claims.py[^\n]*\n(.*?)```",
                      page, re.DOTALL).group(1)  # fmt: skip
    assert out.startswith(shown), (shown, out)
    records = json.loads((tmp_path / "mine.json").read_text())
    # the same records as the Python API gives on the file's claims (timings aside)
    namespace: dict = {}
    exec(compile(file.read_text(), str(file), "exec"), namespace)
    direct = run_audit(namespace["CLAIMS"], mutants=True)
    for record in (*records, *direct):
        record.pop("seconds")
    assert records == direct
    # independently of gradlab: sympy.diff of -log softmax_0 w.r.t. s0 is softmax_0 - 1, so the
    # printed softmax_0 is wrong and its correction holds; softmax_1 is dL/ds_1
    s = sp.symbols("s0:3", real=True)
    softmax = [sp.exp(v) / sum(sp.exp(u) for u in s) for v in s]
    truth = [sp.diff(-sp.log(softmax[0]), v) for v in s]
    assert sp.simplify(truth[0] - (softmax[0] - 1)) == 0 and sp.simplify(truth[0] - softmax[0]) != 0
    assert sp.simplify(truth[1] - softmax[1]) == 0
    assert [r["verdict"] for r in records] == ["holds", "holds-with-correction"]
    assert "Not testable here" not in out  # none of these claims is


def test_the_file_runs_as_a_script_with_its_folder_importable_but_not_as_main(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(ROOT)  # not the file's folder: its neighbour is found through sys.path
    (tmp_path / "my_helpers.py").write_text("VALUE = 2\n")
    file = tmp_path / "mine.py"
    file.write_text(CLAIM.format(value="my_helpers.VALUE").replace(
        "from gradlab", "import my_helpers\nfrom gradlab")
        + "if __name__ == '__main__':\n    raise SystemExit(5)\n")  # fmt: skip
    before = list(sys.path)
    code, out, err = _run(["audit", "--claims", file, "--no-progress"], capsys)
    assert code == 0, err
    assert re.search(r"^  eq1 holds +1 \+ 1 is 2$", out, re.MULTILINE), out
    assert sys.path == before  # the file's folder is taken off the path again
    sys.modules.pop("my_helpers", None)


def _error_files(tmp_path: Path) -> list[tuple[list, str]]:
    written = {
        "none.py": "x = 1\n",
        "three.py": "CLAIMS = 3\n",
        "strings.py": CLAIM.format(value=2).replace("CLAIMS = [", "CLAIMS = ['a', "),
        "empty.py": "CLAIMS = []\n",
        "raises.py": "import math\n\nCLAIMS = 1 / 0\n",
        "syntax.py": "def f(:\n",
        "twice.py": CLAIM.format(value=2).replace("]\n", "] * 2\n"),
    }
    for name, text in written.items():
        (tmp_path / name).write_text(text)
    return [
        (["--claims", tmp_path / "missing.py"], "--claims must name a Python file that defines "
         f"CLAIMS; got {str(tmp_path / 'missing.py')!r}, which is not there"),
        (["--claims", tmp_path], "which is a folder"),
        (["--claims", tmp_path / "none.py"], "none.py' defines no CLAIMS"),
        (["--claims", tmp_path / "three.py"], "CLAIMS must be a list of gradlab.symbolic.Claim; "
         "got int 3"),
        (["--claims", tmp_path / "strings.py"], "CLAIMS[0] is str 'a'"),
        (["--claims", tmp_path / "empty.py"], "CLAIMS is empty; there is nothing to audit"),
        (["--claims", tmp_path / "raises.py"], "running it raised ZeroDivisionError at line 3: "
         "division by zero"),
        (["--claims", tmp_path / "syntax.py"], "running it raised SyntaxError at line 1"),
        (["--claims", tmp_path / "twice.py"], "distinct ids"),
        (["--claims", tmp_path / "three.py", "--measure"], "--measure measures P against batch "
         "size for Brown et al.'s built-in claim; with --claims FILE"),
        (["--claims", ""], "--claims: must be a path"),
    ]


def test_every_refused_claims_file_is_one_line_exit_2_naming_what_is_wrong(
    tmp_path, capsys, monkeypatch
):
    import gradlab.experiments.p_vs_batch_size as study

    monkeypatch.setattr(study, "measure", lambda **options: pytest.fail("measured"))
    for argv, named in _error_files(tmp_path):
        code, out, err = _run(["audit", *argv, "--no-progress"], capsys)
        assert code == 2, (argv, err)
        assert err.count("\n") == 1 and named in err and "Traceback" not in err, (argv, err)
        assert out == "", argv
