"""`gradlab report --studies DIR`: a user's `gradlab study` results as sections of the report.

The studies run on the synthetic class-halves folder of the image-study tests (the bundled digits
written as images), at their small sizes. Expected numbers are computed here from the study's JSON
(means and population stds with :mod:`statistics`, the best loss by its mean MAP@R); the verdict
words come from the studies' own ``summarize`` functions, which the report must carry unchanged.
"""

from __future__ import annotations

import json
import re
import statistics

import pytest

from gradlab.cli import main
from gradlab.errors import GradlabError
from gradlab.experiments import loss_comparison, p_vs_batch_size

pytest.importorskip("PIL.Image")
from tests.helpers.study_images import SMALL, digit_images

REPORT = ["report", "--quick", "--only", "tie_aware", "--workers", "1", "--no-progress"]
"""The cheapest report: one bundled section (seconds), then the user's studies."""


def _mean_std(values, digits):
    if len(values) == 1:  # one seed: no spread to show
        return f"{values[0]:.{digits}f}"
    return f"{statistics.fmean(values):.{digits}f} ± {statistics.pstdev(values):.{digits}f}"


def _backbone():
    return SMALL[SMALL.index("--backbone") + 1]


@pytest.fixture(scope="module")
def study_folder(tmp_path_factory):
    """`gradlab study p-vs-batch-size` and `gradlab study losses` on the class-halves folder,
    each into its own --out (a run refuses a folder holding another's), the losses JSON then
    copied beside the P study's (a folder may hold several studies)."""
    root = tmp_path_factory.mktemp("data") / "halves"
    for label, number, picture in digit_images():
        (root / f"digit_{label}").mkdir(parents=True, exist_ok=True)
        picture.save(root / f"digit_{label}" / f"{number}.png")
    out = tmp_path_factory.mktemp("studies") / "mine"
    common = ["--data", str(root), "--out", str(out), *SMALL]
    assert main(["study", "p-vs-batch-size", *common]) == 0
    losses = out.with_name("losses")
    common[common.index("--out") + 1] = str(losses)
    assert main(["study", "losses", *common, "--batch-sizes", "8", "--seeds", "0"]) == 0
    copied = losses / "loss_comparison_m8.json"
    (out / copied.name).write_text(copied.read_text())
    return out


@pytest.mark.slow
def test_the_report_renders_a_users_studies_with_their_numbers_and_figures(
    study_folder, tmp_path
):
    out = tmp_path / "report"
    assert main([*REPORT, "--studies", str(study_folder), "--out", str(out)]) == 0
    summary = (out / "summary.md").read_text()
    p = json.loads((study_folder / "p_vs_batch_size.json").read_text())
    losses = json.loads((study_folder / "loss_comparison_m8.json").read_text())
    on = f"your study on halves with {_backbone()}"

    # After the bundled section, one section per study, headed with the data and the backbone.
    p_heading = f"## P against the batch size (Brown et al., 2020, Fig. S7a), {on}"
    loss_heading = f"## Ranking losses at m = 8, {on}"
    assert summary.index("## Harmonic sums") < summary.index(p_heading) < summary.index(
        loss_heading
    )
    p_part = summary[summary.index(p_heading) : summary.index(loss_heading)]
    loss_part = summary[summary.index(loss_heading) :]
    assert str(study_folder / "p_vs_batch_size.json") in p_part

    # P per m: mean ± std over the seeds, computed here from the JSON.
    setting = p["settings"]["trained_at_m"]
    for index, size in enumerate(p["batch_sizes"]):
        column = [run[index] for run in setting["P"]]
        assert f"| {size} | {setting['steps'][index]} | {_mean_std(column, 4)} |" in p_part
    trend = p_vs_batch_size.summarize(p)["settings"]["trained_at_m"]["trend"]
    sizes = p["batch_sizes"]
    assert f"P from m = {sizes[0]} to m = {sizes[-1]}: {trend} (paired t-test" in p_part

    # The losses: each loss's MAP@R row and the best loss by mean MAP@R among those that train.
    for name, run in losses["losses"].items():
        assert f"| {name} | " in loss_part and _mean_std(run["metrics"]["MAP@R"], 3) in loss_part
    # Ranked: gradient not 0 and mean above the untrained network's by more than the two stds.
    before = losses["before"]["MAP@R"]

    def beats(values):
        gap = statistics.fmean(values) - statistics.fmean(before)
        return gap > statistics.pstdev(values) + statistics.pstdev(before)

    stuck = loss_comparison.summarize(losses)["no_gradient"]
    trained = [name for name, run in losses["losses"].items()
               if name not in stuck and beats(run["metrics"]["MAP@R"])]  # fmt: skip
    mean_map = {name: statistics.fmean(losses["losses"][name]["metrics"]["MAP@R"])
                for name in trained}  # fmt: skip
    if len(before) < 2:  # one seed measures no spread: no loss is ranked
        assert (f"One seed: the losses are not ranked against the untrained network's MAP@R "
                f"({_mean_std(before, 3)}) or one another") in loss_part
    else:
        best = max(trained, key=mean_map.__getitem__)
        best_cell = _mean_std(losses["losses"][best]["metrics"]["MAP@R"], 3)
        assert (f"Best MAP@R among the losses that beat the untrained network "
                f"({_mean_std(before, 3)}) by more than the seed spread: {best} ({best_cell})"
                ) in loss_part  # fmt: skip

    # Figures: drawn into the report's folder, cited by the sections, embedded in the page.
    figures = re.findall(r"^!\[[^\]]*\]\(([^)]+)\)\s*$", summary, flags=re.M)
    study_figures = [f for f in figures if f.startswith("figures/study")]
    assert study_figures == ["figures/study1_p_vs_batch_size.png",
                             "figures/study2_loss_comparison_m8.png"]  # fmt: skip
    for figure in study_figures:
        assert (out / figure).read_bytes()[:4] == b"\x89PNG"
    assert (out / "index.html").read_text().count("data:image/png;base64,") == len(figures)

    # Key findings: the P trend and the best loss, each linked to its figure by number.
    findings = summary[summary.index("## Key findings") : summary.index("## Harmonic sums")]
    p_number = figures.index("figures/study1_p_vs_batch_size.png") + 1
    loss_number = figures.index("figures/study2_loss_comparison_m8.png") + 1
    assert re.search(rf"- In your study on halves with {re.escape(_backbone())}, P from m = "
                     rf"{sizes[0]} to m = {sizes[-1]}: {trend} .*\[Figure {p_number}\]",
                     findings)  # fmt: skip
    if len(before) < 2:
        finding = (rf"at m = 8, one seed: the losses are not ranked against the untrained "
                   rf"network's MAP@R \({re.escape(_mean_std(before, 3))}\)")
    else:
        finding = (rf"at m = 8, best MAP@R among the losses that beat the untrained network "
                   rf"\({re.escape(_mean_std(before, 3))}\) by more than the seed spread: "
                   rf"{re.escape(best)} \({re.escape(best_cell)}\)")
    assert re.search(rf"{finding}.*\[Figure {loss_number}\]", findings)

    # results.json keeps each study's JSON and where it came from.
    results = json.loads((out / "results.json").read_text())
    kept = {section["study"]: section for name, section in results["sections"].items()
            if name.startswith("study ")}  # fmt: skip
    assert set(kept) == {"p-vs-batch-size", "losses"}
    # (results.json rounds floats to 12 significant digits, as for every section)
    for kept_row, row in zip(kept["p-vs-batch-size"]["results"]["settings"]["trained_at_m"]["P"],
                             setting["P"], strict=True):  # fmt: skip
        assert kept_row == pytest.approx(row, rel=1e-11)
    assert list(kept["losses"]["results"]) == ["8"]
    assert kept["losses"]["results"]["8"]["settings"] == losses["settings"]
    assert kept["losses"]["files"] == [str(study_folder / "loss_comparison_m8.json")]
    assert kept["losses"]["folder"] == str(study_folder)


def _rising_measurement(rows):
    """A saved p-vs-batch-size result over three seeds with P per seed at m = 8, 16."""
    parts = {"P_diagonal": [[1 / 8, 1 / 16]] * 3, "P_own_row_column": [[0.0, 0.0]] * 3,
             "P_positive_rows": [[0.1, 0.1]] * 3, "P_negative_rows": [[0.1, 0.2]] * 3}  # fmt: skip
    return {
        "batch_sizes": [8, 16], "data": "sop, train split (24 images, 4 classes)",
        "model": "timm:resnet50 with a linear head to 512 dimensions, random initial weights",
        "per_class": 4, "seeds": [0, 1, 2], "tau": 0.01, "eps": 0.005,
        "settings": {"trained_at_m": {"P": rows, "P_positive_negative": rows,
                                      "P_negative_negative": rows, **parts, "steps": [3, 2],
                                      "epochs": 1}},
    }  # fmt: skip


@pytest.mark.parametrize(
    "rows",
    [[[0.30, 0.40], [0.31, 0.42], [0.29, 0.41]], [[0.40, 0.30], [0.42, 0.31], [0.41, 0.29]]],
    ids=["rising", "falling"],
)
def test_a_saved_p_study_becomes_a_section_and_a_finding_with_summarizes_trend(tmp_path, rows):
    """Driven directly (no bundled section): the trend word is summarize's, and it differs
    between a rising and a falling P, so a finding with a fixed word fails one of the two."""
    from gradlab.report.findings import findings_markdown
    from gradlab.report.user_studies import (
        check_study_folders,
        study_findings,
        study_report_section,
    )

    folder = tmp_path / "sop_p"
    folder.mkdir()
    measurement = _rising_measurement(rows)
    (folder / "p_vs_batch_size.json").write_text(json.dumps(measurement))
    (run,) = check_study_folders([folder])
    out = tmp_path / "report"
    results, markdown = study_report_section(run, out, 3)
    assert markdown.startswith("## P against the batch size (Brown et al., 2020, Fig. S7a), "
                               "your study on sop with timm:resnet50\n")  # fmt: skip
    assert (out / "figures" / "study3_p_vs_batch_size.png").read_bytes()[:4] == b"\x89PNG"
    mean_16 = _mean_std([row[1] for row in rows], 4)
    assert f"| 16 | 2 | {mean_16} |" in markdown
    trend = p_vs_batch_size.summarize(measurement)["settings"]["trained_at_m"]["trend"]
    assert trend == ("rises" if rows[0][1] > rows[0][0] else "falls")  # the fixture is clear-cut
    findings = findings_markdown({"study 3": (results, markdown)}, {"study 3": study_findings})
    assert f"P from m = 8 to m = 16: {trend} (paired t-test over the seeds; 3 seeds" in findings
    assert "[Figure 1](#figure-1)" in findings
    assert findings_markdown({"study 3": (results, markdown)}) == ""  # no finder, no finding


def _write(folder, name, text):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda tmp: tmp / "no_such_folder", r"--studies: '.*no_such_folder' is not a folder"),
        (lambda tmp: _write(tmp / "notes", "notes.txt", "hello\n"),
         r"--studies: '.*notes' holds no study JSON \(p_vs_batch_size.json, "
         r"loss_comparison_m\*.json, gradient_anatomy.json\)"),
        (lambda tmp: _write(tmp / "odd", "p_vs_batch_size.json", json.dumps({"P": [0.5]})),
         r"--studies: '.*p_vs_batch_size.json' is not the JSON of gradlab study p-vs-batch-size: "
         r"it lacks batch_sizes, data, model"),
        (lambda tmp: _write(tmp / "bundled", "loss_comparison_m8.json",
                            json.dumps({"settings": {"batch_size": 8}, "seeds": [0],
                                        "before": {}, "losses": {}})),
         r"'.*loss_comparison_m8.json' is not the JSON of gradlab study losses: it lacks "
         r"settings.classes_per_batch"),
        (lambda tmp: _write(tmp / "list", "gradient_anatomy.json", "[1, 2]"),
         r"'.*gradient_anatomy.json' is not the JSON of gradlab study anatomy: it lacks settings"),
        (lambda tmp: _write(tmp / "cut", "p_vs_batch_size.json", '{"batch_sizes": [8,'),
         r"'.*p_vs_batch_size.json' is not JSON \(Expecting value, line 1\)"),
        # hand-merged JSON (seeds of two machines) ended in a traceback from the figure
        (lambda tmp: _write(tmp / "two_seeds", "p_vs_batch_size.json",
                            json.dumps(_rising_measurement([[0.3, 0.4]] * 2))),
         r"'.*p_vs_batch_size.json' is not the JSON of gradlab study p-vs-batch-size: "
         r"settings.trained_at_m.P must hold one entry per seed of \[0, 1, 2\] of 2 values "
         r"\(one per batch size\); got \[\[0.3, 0.4\], \[0.3, 0.4\]\]"),
        (lambda tmp: _write(tmp / "one_size", "p_vs_batch_size.json",
                            json.dumps(_rising_measurement([[0.3]] * 3))),
         r"settings.trained_at_m.P must hold one entry per seed of \[0, 1, 2\] of 2 values"),
        (lambda tmp: _write(tmp / "losses", "loss_comparison_m8.json", json.dumps(
            {"settings": {"batch_size": 8, "classes_per_batch": 2, "steps": 3, "data": "d",
                          "model": "m", "test_data": "t"},
             "seeds": [0, 1], "before": {"MAP@R": [0.1]}, "losses": {}})),
         r"'.*loss_comparison_m8.json' is not the JSON of gradlab study losses: before.MAP@R "
         r"must hold one entry per seed of \[0, 1\]; got \[0.1\]"),
    ],
    ids=["missing", "no-study-json", "wrong-schema", "wrong-settings", "not-an-object", "cut",
         "seeds-merged", "row-short", "losses-seeds"],
)
def test_bad_studies_are_one_line_and_exit_code_2_before_any_work(tmp_path, capsys, make,
                                                                  message):  # fmt: skip
    folder = make(tmp_path)
    out = tmp_path / "report"
    assert main([*REPORT, "--studies", str(folder), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(message, err), err
    assert not out.exists() and not (tmp_path / ".report.partial").exists()


def test_a_bad_folder_after_a_good_one_is_refused_too(tmp_path, capsys):
    good = _write(tmp_path / "good", "p_vs_batch_size.json",
                  json.dumps(_rising_measurement([[0.3, 0.4]] * 3)))  # fmt: skip
    argv = [*REPORT, "--studies", str(good), str(tmp_path / "gone"), "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    assert "'" + str(tmp_path / "gone") + "' is not a folder" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_a_folder_named_twice_is_refused_not_reported_twice(tmp_path, capsys):
    # each was a section of its own, with the same heading and the same numbers
    good = _write(tmp_path / "good", "p_vs_batch_size.json",
                  json.dumps(_rising_measurement([[0.3, 0.4]] * 3)))  # fmt: skip
    again = tmp_path / "good" / ".." / "good"
    argv = [*REPORT, "--studies", str(good), str(again), "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    assert capsys.readouterr().err == (f"gradlab: --studies: {str(again)!r} names the folder "
                                       f"{str(good)!r} again; give each folder once\n")  # fmt: skip
    assert not (tmp_path / "r").exists()


def test_run_report_checks_the_studies_before_any_section_runs(tmp_path):
    from gradlab.report import run_report

    with pytest.raises(GradlabError, match="holds no study JSON"):
        run_report(tmp_path / "report", quick=True, only=["tie_aware"], studies=[tmp_path])
    assert not (tmp_path / "report").exists()


def test_render_refuses_a_study_json_of_another_schema(tmp_path, capsys):
    _write(tmp_path, "gradient_anatomy.json", json.dumps({"settings": {}, "seeds": [0]}))
    assert main(["study", "anatomy", "--render", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not the JSON of gradlab study anatomy: it lacks runs" in err


def test_run_report_names_a_study_it_cannot_draw_in_one_message(tmp_path):
    # the library's own report: the command draws the studies first, run_report when it
    # reaches them (a KeyError traceback after the report's sections)
    from gradlab.report import run_report

    folder = tmp_path / "mine"
    folder.mkdir()
    result = {"settings": {"data": "cars, train split (30 images, 6 classes)",
                           "model": "resnet18 with a linear head to 32 dimensions", "epochs": 3,
                           "test_data": "test split (12 images)"},
              "seeds": [0], "runs": {"m = 8": {"SmoothAP": {"recall": {}, "anatomy": {
                  "steps": [0], "in_batch": {"active_negatives": [[1.0]]}}}}}}  # fmt: skip
    (folder / "gradient_anatomy.json").write_text(json.dumps(result))
    with pytest.raises(GradlabError) as refused:
        run_report(tmp_path / "report", quick=True, only=["tie_aware"], studies=[folder])
    assert str(refused.value) == (
        f"--studies: {str(folder / 'gradient_anatomy.json')!r} cannot be rendered as gradlab "
        "study anatomy (KeyError: 'share_without_gradient'): its values are not of the kinds "
        "the study writes (was it edited by hand?); restore the file or run the study again")
