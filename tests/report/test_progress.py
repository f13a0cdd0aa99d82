"""Progress a person can follow: a line per audit paper and per study seed, counts that name what
they count, and nothing said done after Ctrl-C."""

from __future__ import annotations

import re

import pytest

from gradlab.cli import main
from gradlab.experiments import loss_comparison
from gradlab.experiments.runtime import run_tasks
from gradlab.progress import set_progress_mode
from gradlab.report import runner, sections
from gradlab.symbolic.claims import Claim, Form, decide

SECONDS = r"\d+(\.\d)? s"


@pytest.fixture
def lines():
    set_progress_mode("lines")
    yield
    set_progress_mode("auto")


def _matches(patterns: list[str], text: str) -> None:
    found = text.splitlines()
    assert len(found) == len(patterns), found
    for pattern, line in zip(patterns, found, strict=True):
        assert re.fullmatch(pattern, line), (pattern, line)


def test_each_seed_gets_one_line_that_names_it_and_what_it_counts(lines, capsys):
    tasks = [(1, 2), (3, 4), (5, 6), (7, 8)]
    run_tasks(max, tasks, stage="toy study", names=["seed 4", "seed 4", "seed 9", "seed 9"],
              detail="2 losses trained", workers=1)  # fmt: skip
    _matches([
        r"gradlab: toy study: 2 seeds, 4 tasks in this process \.\.\.",
        r"gradlab: toy study: seed 4 done \(2 losses trained, \d+ s; 1 of 2 seeds done\)",
        r"gradlab: toy study: seed 9 done \(2 losses trained, \d+ s; 2 of 2 seeds done\)",
        r"gradlab: toy study done \(2 seeds, \d+ s\)",
    ], capsys.readouterr().err)  # fmt: skip


@pytest.mark.slow
def test_the_loss_comparison_says_it_trained_six_losses_per_seed(lines, capsys, monkeypatch):
    tiny = {"per_class": 4, "batch_size": 16, "steps": 2, "lr": 1e-3, "timing_repeats": 1,
            "test_numbers": 8, "validation_numbers": 8, "sweep": False}  # fmt: skip
    monkeypatch.setattr(loss_comparison, "settings", lambda quick: dict(tiny))
    results = loss_comparison.measure(seeds=(3,), workers=1)
    assert len(results["losses"]) == 6
    _matches([
        r"gradlab: loss comparison: 1 seed, 7 tasks in this process \.\.\.",
        r"gradlab: loss comparison: seed 3 done \(6 training runs of 6 losses, \d+ s; 1 of 1 seed "
        r"done\)",
        r"gradlab: loss comparison done \(1 seed, \d+ s\)",
    ], capsys.readouterr().err)  # fmt: skip


def _claim(seed: str, label: str) -> Claim:
    return Claim(seed, label, "1 + 1 is 2", Form(2),
                 lambda form: decide(form.value == 2, "1 + 1 = 2", "not 2"))  # fmt: skip


def test_the_audit_says_which_paper_it_checks(lines, capsys, monkeypatch, tmp_path):
    import gradlab.symbolic.audit

    brown, he = "002_9d7d2555864f9baa", "003_9ae9ec3ce43e30ad"
    claims = [_claim(brown, "eq1"), _claim(brown, "eq2"), _claim(he, "eq3")]
    monkeypatch.setattr(gradlab.symbolic.audit, "all_claims", lambda **options: claims)
    monkeypatch.setattr(sections, "p_vs_batch_size_measurement", lambda quick, device: {})
    results, _ = sections.audit_section(tmp_path, quick=True)
    assert [r["label"] for r in results["records"]] == ["eq1", "eq2", "eq3"]
    brown_line = r"gradlab: audit: paper 1 of 2, Brown et al\. 2020, supplementary material"
    he_line = r"gradlab: audit: paper 2 of 2, He et al\. 2018, supplementary material"
    _matches([
        rf"{brown_line} \(2 claims\) \.\.\.",
        rf"{brown_line} done \(2 claims, {SECONDS}\)",
        rf"{he_line} \(1 claim\) \.\.\.",
        rf"{he_line} done \(1 claim, {SECONDS}\)",
    ], capsys.readouterr().err)  # fmt: skip


def test_after_ctrl_c_no_section_is_said_done(lines, capsys, monkeypatch, tmp_path):
    def fine(out, quick, device):
        return {}, "## fine"

    def interrupted(out, quick, device):
        raise KeyboardInterrupt

    monkeypatch.setitem(runner.SECTIONS, "verification", fine)
    monkeypatch.setitem(runner.SECTIONS, "tie_aware", interrupted)
    argv = ["report", "--out", str(tmp_path / "r"), "--only", "verification", "--only",
            "tie_aware", "--workers", "1"]  # fmt: skip
    assert main(argv) == 130
    _matches([
        r"gradlab: report section 1 of 2: verification \.\.\.",
        rf"gradlab: report section 1 of 2: verification done \(1 section, {SECONDS}\)",
        r"gradlab: report section 2 of 2: tie_aware \.\.\.",
        r"gradlab: interrupted; nothing was written",
    ], capsys.readouterr().err)  # fmt: skip


@pytest.mark.parametrize("bad", ["0", "9", "two", "-1"])
def test_a_bad_workers_option_is_a_usage_error(bad, capsys, tmp_path):
    with pytest.raises(SystemExit) as stop:
        main(["report", "--out", str(tmp_path / "r"), "--workers", bad])
    assert stop.value.code == 2
    message = f"argument --workers: must be a whole number from 1 to 8; got '{bad}'"
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
