"""gradlab report: sections, selection, outputs."""


import pytest

from gradlab import GradlabError
from gradlab.cli import main
from gradlab.report import SECTIONS, run_report


def test_unknown_section_is_refused(tmp_path):
    with pytest.raises(GradlabError, match="only must name report sections"):
        run_report(tmp_path, only=["nonsense"])


def test_cli_reports_bad_section_with_exit_code_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["report", "--out", str(tmp_path / "r"), "--only", "nonsense"])
    assert stop.value.code == 2
    assert "argument --only: invalid choice: 'nonsense'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_sections_follow_the_report_order():
    # Issue 8's order, then issue 13's studies: losses on digit strings, digit scenes.
    order = ["audit", "verification", "tie_aware", "operating_region", "training", "losses",
             "scenes"]  # fmt: skip
    assert list(SECTIONS) == order  # every section, none missing, in this order


def test_a_section_with_a_missing_dependency_is_skipped_with_a_note(tmp_path, monkeypatch):
    from gradlab.report import runner

    def needs_wandb(out, quick, device):
        raise ModuleNotFoundError("No module named 'wandb'")

    monkeypatch.setitem(runner.SECTIONS, "verification", needs_wandb)
    results = run_report(tmp_path, quick=True, only=["verification"])
    assert "wandb" in results["skipped"]["verification"]
    assert "Skipped: a dependency is missing" in (tmp_path / "summary.md").read_text()
    assert (tmp_path / "index.html").exists()
