"""A saved `gradlab study` result rendered: its tables, verdicts, figures and findings.

Hand-built study JSON (no network trained): every number a reader sees is recomputed here
from the JSON with :mod:`statistics` (means and population stds), the figure a section cites
is read back from the folder, and the verdict words are written out for fixtures chosen so
that each verdict is clear-cut.
"""

from __future__ import annotations

import json
import re
import statistics

import pytest

from gradlab.errors import GradlabError
from gradlab.report.user_studies import (
    STUDY_FILES,
    anatomy_markdown,
    check_study_folders,
    load_study,
    loss_comparison_markdown,
    p_vs_batch_size_markdown,
    render_study_folder,
    study_findings,
    study_report_section,
    write_study_report,
)


def _cell(values, digits=3):
    return f"{statistics.fmean(values):.{digits}f} ± {statistics.pstdev(values):.{digits}f}"


def _losses(size: int) -> dict:
    """A losses result at one m: A best, B within A's spread, C behind, D below the
    untrained network (listed apart); four of the seven metrics measured."""
    metric = {"A": [0.60, 0.62, 0.61], "B": [0.59, 0.61, 0.60], "C": [0.40, 0.41, 0.42],
              "D": [0.10, 0.11, 0.12]}  # fmt: skip

    def run(name, shift):
        values = metric[name]
        return {"metrics": {"recall@1": [v + 0.1 for v in values],
                            "mAP": [v + 0.05 for v in values],
                            "R-Precision": [v - 0.01 for v in values], "MAP@R": values},
                "loss_seconds": [0.0512 * shift, 0.0716 * shift, 0.0615 * shift],
                "step_seconds": [0.821 * shift, 0.927 * shift, 0.877 * shift]}  # fmt: skip

    return {
        "settings": {"batch_size": size, "classes_per_batch": size // 4, "steps": 7,
                     "data": "cub, train split (40 images, 10 classes)",
                     "model": "resnet18 with a linear head to 64 dimensions, random weights",
                     "test_data": "test split (20 images)"},
        "seeds": [0, 1, 2],
        "before": {"recall@1": [0.3, 0.31, 0.32], "mAP": [0.25, 0.26, 0.27],
                   "R-Precision": [0.2, 0.21, 0.2], "MAP@R": [0.2, 0.2, 0.21]},
        "losses": {name: run(name, shift) for shift, name in enumerate("ABCD", start=1)},
    }  # fmt: skip


def _p(rows) -> dict:
    """A p-vs-batch-size result over three seeds at m = 8, 16, 32."""
    diagonal = [[1 / 8, 1 / 16, 1 / 32]] * 3
    return {
        "batch_sizes": [8, 16, 32], "data": "sop, train split (24 images, 4 classes)",
        "model": "timm:resnet50 with a linear head to 512 dimensions, random initial weights",
        "per_class": 4, "seeds": [0, 1, 2], "tau": 0.01, "eps": 0.005,
        "settings": {"trained_at_m": {
            "P": rows, "P_diagonal": diagonal,
            "P_positive_negative": [[v / 2 for v in row] for row in rows],
            "P_negative_negative": [[v / 3 for v in row] for row in rows],
            "P_own_row_column": [[0.0] * 3] * 3, "P_positive_rows": [[0.1] * 3] * 3,
            "P_negative_rows": [[0.1, 0.2, 0.3]] * 3, "steps": [5, 3, 2], "epochs": 2}},
    }  # fmt: skip


RISING = [[0.30, 0.40, 0.50], [0.31, 0.42, 0.52], [0.29, 0.41, 0.51]]


def _anatomy() -> dict:
    """An anatomy result: two batch sizes, two losses, two seeds, three logged steps."""

    def run(offset):
        return {"recall": {"MAP@R": [0.3 + offset, 0.34 + offset]},
                "anatomy": {"steps": [0, 4, 9], "in_batch": {
                    "active_negatives": [[9.0, 6.0, 3.0 + offset], [8.0, 5.0, 5.0 + offset]],
                    "share_without_gradient": [[0.0, 0.1, 0.2], [0.0, 0.2, 0.4]],
                    "hardest_10pct_share": [[0.5, 0.6, 0.7], [0.5, 0.6, 0.9]]}}}  # fmt: skip

    return {
        "settings": {"data": "cars, train split (30 images, 6 classes)",
                     "model": "resnet18 with a linear head to 32 dimensions", "epochs": 3,
                     "test_data": "test split (12 images)"},
        "seeds": [0, 1],
        "runs": {"m = 8": {"SmoothAP": run(0.0), "triplet": run(0.1)},
                 "m = 16": {"SmoothAP": run(0.2), "triplet": run(0.3)}},
    }  # fmt: skip


def _rows(markdown: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")]
            for line in markdown.splitlines() if line.startswith("|")]  # fmt: skip


def test_the_loss_table_quotes_every_loss_and_the_untrained_network_from_the_json():
    results = _losses(8)
    text = loss_comparison_markdown(results, "figures/x.png", where=", here")
    lines = text.splitlines()
    assert lines[0] == "## Ranking losses at m = 8, here"
    assert ("cub, train split (40 images, 10 classes); resnet18 with a linear head to 64 "
            "dimensions, random weights. The same initialization and batches (8 images: 4 of "
            "each of 2 classes) and 7 Adam steps for every loss; retrieval on the test split "
            "(20 images), every image querying all the others (the means run over the images "
            "with another of their class). Mean ± std (population) over 3 "
            "seeds:"
            ) in text  # fmt: skip
    metrics = ["recall@1", "mAP", "R-Precision", "MAP@R"]  # in the report's order
    rows = _rows(text)
    assert rows[0] == ["loss", *metrics, "loss fwd+bwd (ms)", "training step (ms)"]
    assert rows[1] == ["---"] * 7
    assert rows[2] == ["untrained", *(_cell(results["before"][m]) for m in metrics), "", ""]
    for row, (name, run) in zip(rows[3:], results["losses"].items(), strict=True):
        assert row == [name, *(_cell(run["metrics"][m]) for m in metrics),
                       _cell([1000 * s for s in run["loss_seconds"]], 2),
                       _cell([1000 * s for s in run["step_seconds"]], 1)]  # fmt: skip
    assert lines[-1].endswith("and its own cost per step](figures/x.png)")
    assert text.count("](") == 1
    assert "wall-clock" not in text  # a result recorded without its conditions says nothing


def test_the_loss_table_says_where_its_times_were_taken():
    results = _losses(8)
    results["settings"]["timing"] = {"clock": "wall", "device": "cpu", "processor": "Ryzen",
                                     "cores": 8, "threads": 3, "processes": 1}  # fmt: skip
    paragraphs = loss_comparison_markdown(results, "x.png").split("\n\n")
    table = next(i for i, p in enumerate(paragraphs) if p.startswith("| loss |"))
    assert paragraphs[table + 1] == (
        "Times are wall-clock on Ryzen (8 cores), 3 torch threads per process, one training "
        "process at a time; other load on the machine moves them.")


def test_the_loss_verdicts_name_the_best_the_tied_the_behind_and_those_apart():
    results = _losses(16)
    text = loss_comparison_markdown(results, "f.png")
    assert text.splitlines()[0] == "## Ranking losses at m = 16, on your data"
    before = _cell(results["before"]["MAP@R"])
    best = _cell(results["losses"]["A"]["metrics"]["MAP@R"])
    verdict = (f"Best MAP@R among the losses that beat the untrained network ({before}) by more "
               f"than the seed spread: A ({best}). Within the seed spread of it (gap below the "
               "sum of the two stds): B. Behind it by more than the spread: C. Listed apart, "
               "not ranked (MAP@R not above the untrained network's by more than the seed "
               f"spread): D, {_cell(results['losses']['D']['metrics']['MAP@R'])}: ")  # fmt: skip
    assert verdict in text
    # without a tied or a behind loss, neither sentence is written
    del results["losses"]["B"], results["losses"]["C"]
    alone = loss_comparison_markdown(results, "f.png")
    assert f"A ({best}). Listed apart" in alone
    assert "Within the seed spread" not in alone and "Behind it" not in alone


def test_the_p_table_quotes_p_without_the_diagonal_and_its_parts_per_m():
    measurement = _p(RISING)
    text = p_vs_batch_size_markdown(measurement, "figures/p.png", where=", there")
    assert text.splitlines()[0] == ("## P against the batch size (Brown et al., 2020, Fig. S7a), "
                                    "there")  # fmt: skip
    assert ("sop, train split (24 images, 4 classes); timm:resnet50 with a linear head to 512 "
            "dimensions, random initial weights. For each m one network from the same weights, "
            "2 epochs of Smooth-AP (tau = 0.01) with 4 images per class; P (slope above 0.005) "
            "averaged over the last epoch's batches. Mean ± std (population) over 3 seeds. P is "
            "a share of "
            "all m² score pairs, and so is P minus its diagonal part: the off-diagonal pairs in "
            "the region over m² (the Monitor's p_off_diagonal divides the same pairs by "
            "m(m - 1)). The positive-negative and negative-negative columns are shares of their "
            "own kind of pair (the query left out): how many of those pairs lie in the "
            "region.") in text
    setting = measurement["settings"]["trained_at_m"]
    rows = _rows(text)
    assert rows[0] == ["m", "steps", "P", "P minus its diagonal part", "positive-negative",
                       "negative-negative"]  # fmt: skip
    assert len(rows) == 2 + 3
    for index, (row, size) in enumerate(zip(rows[2:], measurement["batch_sizes"], strict=True)):
        column = lambda key, i=index: [run[i] for run in setting[key]]  # noqa: E731
        without = [p - d for p, d in zip(column("P"), column("P_diagonal"), strict=True)]
        assert row == [str(size), str(setting["steps"][index]), _cell(column("P"), 4),
                       _cell(without, 4), _cell(column("P_positive_negative"), 4),
                       _cell(column("P_negative_negative"), 4)]  # fmt: skip
    # the t-test's numbers follow its reading (setting_trend's detail)
    assert re.search(r"P from m = 8 to m = 32: rises \(paired t-test over the seeds; 3 seeds; "
                     r"mean P \S+ -> \S+, change \S+ \+/- \S+ \(standard error over 3 seeds\), "
                     r"t = \S+ against 4\.30 \(df = 2, two-sided 0\.05\)\)\. Its parts, each a "
                     r"share of the m² pairs: ", text), text
    assert text.splitlines()[-1].endswith("every seed faint, mean and std as error bars]"
                                          "(figures/p.png)")  # fmt: skip


def test_the_trends_of_p_s_parts_are_named_in_the_report_s_words_not_its_keys():
    from gradlab.experiments.p_vs_batch_size import summarize

    measurement = _p(RISING)
    text = p_vs_batch_size_markdown(measurement, "figures/p.png")
    words = summarize(measurement)["settings"]["trained_at_m"]["parts"]
    assert ("Its parts, each a share of the m² pairs: "
            f"the diagonal: {words['P_diagonal']}; "
            f"the query's own row and column: {words['P_own_row_column']}; "
            f"the positive rows: {words['P_positive_rows']}; "
            f"the negative-only rows: {words['P_negative_rows']}; "
            f"and P minus its diagonal part: {words['P without the diagonal']}.") in text
    assert not re.search(r"\bP_[a-z]", text)  # no key of the JSON (P_own_row_column ...)


def _first_batch_sizes(count: int) -> dict:
    """The rising P study cut to its first ``count`` batch sizes (m = 8, 16, ...)."""
    cut = _p([row[:count] for row in RISING])
    cut["batch_sizes"] = cut["batch_sizes"][:count]
    setting = cut["settings"]["trained_at_m"]
    for key, runs in setting.items():
        if isinstance(runs, list) and runs and isinstance(runs[0], list):
            setting[key] = [run[:count] for run in runs]
    setting["steps"] = setting["steps"][:count]
    return cut


def _one_batch_size():
    """The rising P study cut to its first batch size, m = 8 (its first step alone)."""
    return _first_batch_sizes(1)


def _saved_p_finding(tmp_path, data: dict):
    """The one finding of a P study saved as ``gradlab study`` saves it, read as the report
    reads it."""
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "p_vs_batch_size.json").write_text(json.dumps(data))
    (run,) = check_study_folders([folder])
    results, _ = study_report_section(run, tmp_path / "report", 1)
    (finding,) = study_findings(results)
    return finding


def test_the_trend_sentence_says_what_the_run_lacked_for_a_trend():
    one_seed = _p([RISING[0]])
    one_seed["seeds"] = [0]
    for key, runs in one_seed["settings"]["trained_at_m"].items():
        if isinstance(runs, list) and runs and isinstance(runs[0], list):
            one_seed["settings"]["trained_at_m"][key] = runs[:1]
    text = p_vs_batch_size_markdown(one_seed, "figures/p.png")
    assert "(paired t-test over the seeds; one seed cannot show a trend; mean P " in text
    assert "(1 seed): no seed spread, no t-test)" in text
    text = p_vs_batch_size_markdown(_one_batch_size(), "figures/p.png")
    assert "P at m = 8 alone: no trend (a trend needs P at two or more batch sizes).\n\n![" in text
    assert "m = 8 to m = 8" not in text and "Its parts" not in text  # none has a trend


def _first_seed(runs):
    """Each per-seed list of a result cut to its first seed."""
    if isinstance(runs, dict):
        return {key: _first_seed(value) for key, value in runs.items()}
    return runs[:1] if isinstance(runs, list) and runs and isinstance(runs[0], list) else runs


def test_a_run_of_one_seed_one_epoch_and_one_step_is_counted_in_the_singular():
    # the pages read "1 epoch(s) of Smooth-AP", "over 1 seed(s)"
    p = _p([RISING[0]])
    p["seeds"] = [0]
    p["settings"] = _first_seed(p["settings"])
    p["settings"]["trained_at_m"]["epochs"] = 1
    text = p_vs_batch_size_markdown(p, "p.png")
    assert "same weights, 1 epoch of Smooth-AP (tau = 0.01)" in text
    assert "Mean ± std (population) over 1 seed. P is" in text
    losses = _losses(8)
    losses["seeds"] = [0]
    losses["settings"]["steps"] = 1
    losses["before"] = {key: values[:1] for key, values in losses["before"].items()}
    for run in losses["losses"].values():
        run["metrics"] = {key: values[:1] for key, values in run["metrics"].items()}
        run["loss_seconds"], run["step_seconds"] = run["loss_seconds"][:1], run["step_seconds"][:1]
    text = loss_comparison_markdown(losses, "x.png")
    assert "and 1 Adam step for every loss;" in text
    assert "Mean ± std (population) over 1 seed:" in text
    anatomy = _anatomy()
    anatomy["seeds"] = [0]
    anatomy["settings"]["epochs"] = 1
    for runs in anatomy["runs"].values():
        for run in runs.values():
            run["recall"] = {key: values[:1] for key, values in run["recall"].items()}
            run["anatomy"] = _first_seed(run["anatomy"])
    text = anatomy_markdown(anatomy, "a.png")
    assert "4-per-class batches for 1 epoch; dL/dS" in text
    assert "mean ± std (population) over 1 seed; MAP@R" in text


def test_the_anatomy_table_quotes_the_last_logged_step_per_batch_and_loss():
    results = _anatomy()
    text = anatomy_markdown(results, "figures/a.png", where=", yours")
    assert text.splitlines()[0] == ("## Gradient anatomy over training (Bleeker & de Rijke, "
                                    "2022), yours")  # fmt: skip
    assert ("cars, train split (30 images, 6 classes); resnet18 with a linear head to 32 "
            "dimensions. Each loss trains its own network from the same weights on the same "
            "4-per-class batches for 3 epochs;") in text
    assert ("At the last logged step, mean ± std (population) over 2 seeds; MAP@R on the test "
            "split (12 images):") in text
    rows = _rows(text)
    assert rows[0] == ["batch", "loss", "active negatives", "queries without gradient",
                       "hardest-10 % share", "MAP@R"]  # fmt: skip
    expected = []
    for encoder, runs in results["runs"].items():
        for loss, run in runs.items():
            quantities = run["anatomy"]["in_batch"]
            expected.append([encoder, loss, *(_cell([seed[-1] for seed in quantities[key]], 2)
                                              for key in ("active_negatives",
                                                          "share_without_gradient",
                                                          "hardest_10pct_share")),
                             _cell(run["recall"]["MAP@R"])])  # fmt: skip
    assert rows[2:] == expected
    assert text.splitlines()[-1].endswith("hardest negatives' share, over training](figures/a.png)")


def _png(path) -> bool:
    return path.read_bytes()[:4] == b"\x89PNG"


@pytest.fixture
def plots(monkeypatch):
    """The study figures stood in by a PNG header (the figures have tests of their own in
    tests/plotting/): ``(figure function, the results it drew, path)`` per call."""
    from pathlib import Path

    from gradlab.plotting import studies

    drawn: list = []
    for name in ("plot_p_vs_batch_size", "plot_loss_comparison", "plot_scene_anatomy"):
        def stand_in(results, path, name=name):
            drawn.append((name, results, Path(path)))
            Path(path).parent.mkdir(parents=True, exist_ok=True)  # as the figures do
            Path(path).write_bytes(b"\x89PNG stand-in")
            return Path(path)

        monkeypatch.setattr(studies, name, stand_in)
    return drawn


@pytest.mark.parametrize("name", ["p-vs-batch-size", "anatomy"])
def test_a_study_page_has_its_heading_its_section_and_its_figure(tmp_path, request, name):
    results = _p(RISING) if name == "p-vs-batch-size" else _anatomy()
    if name == "anatomy":  # the p figure is drawn for real (a second), this one stood in
        drawn = request.getfixturevalue("plots")
    written = write_study_report(name, results, tmp_path)
    if name == "anatomy":
        assert drawn == [("plot_scene_anatomy", results, tmp_path / "gradient_anatomy.png")]
    figure = {"p-vs-batch-size": "p_vs_batch_size.png", "anatomy": "gradient_anatomy.png"}[name]
    assert written == [tmp_path / figure, tmp_path / "summary.md", tmp_path / "index.html"]
    assert _png(tmp_path / figure)
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith(f"# gradlab study: {name}\n\n## ")
    assert summary.endswith(f"]({figure})\n")
    assert re.findall(r"\]\(([^)]+\.png)\)", summary) == [figure]
    page = (tmp_path / "index.html").read_text()
    assert f"<title>gradlab study {name}</title>" in page
    assert page.count("data:image/png;base64,") == 1


def test_a_losses_page_has_one_section_and_figure_per_batch_size(tmp_path, plots):
    for size in (16, 8):
        (tmp_path / f"loss_comparison_m{size}.json").write_text(json.dumps(_losses(size)))
    written = render_study_folder("losses", tmp_path)
    # drawn in a folder beside the JSON, then moved into place
    assert [(name, result, path.name) for name, result, path in plots] == [
        ("plot_loss_comparison", _losses(size), f"loss_comparison_m{size}.png")
        for size in (8, 16)]
    assert all(path.parent.parent == tmp_path for _, _, path in plots)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [p.name for p in written] + ["loss_comparison_m8.json", "loss_comparison_m16.json"])
    assert [p.name for p in written] == ["loss_comparison_m8.png", "loss_comparison_m16.png",
                                         "summary.md", "index.html"]  # fmt: skip
    assert all(_png(p) for p in written[:2])
    summary = (tmp_path / "summary.md").read_text()
    headings = re.findall(r"^## .*$", summary, flags=re.M)
    assert headings == ["## Ranking losses at m = 8, on your data",
                        "## Ranking losses at m = 16, on your data"]  # fmt: skip
    assert re.findall(r"\]\(([^)]+\.png)\)", summary) == ["loss_comparison_m8.png",
                                                         "loss_comparison_m16.png"]  # fmt: skip


def test_an_unknown_study_is_refused_naming_the_studies():
    expected = re.escape(f"study must be one of {list(STUDY_FILES)}; got 'speed'")
    with pytest.raises(GradlabError, match=f"^{expected}$"):
        write_study_report("speed", {}, ".")
    with pytest.raises(GradlabError, match=f"^{expected}$"):
        load_study("speed", ".")


def test_a_folder_without_the_studys_file_is_refused_naming_it(tmp_path):
    folder = str(tmp_path)
    with pytest.raises(GradlabError, match=f"^{re.escape(repr(folder))} holds no "
                                           r"gradient_anatomy\.json of a gradlab study$"):
        load_study("anatomy", tmp_path)
    with pytest.raises(GradlabError, match=r"^--data: .* holds no loss_comparison_m\*\.json "):
        load_study("losses", tmp_path, "--data")


def test_a_bad_json_is_refused_naming_the_argument_the_file_and_what_is_missing(tmp_path):
    (tmp_path / "gradient_anatomy.json").write_text(json.dumps({"settings": [], "seeds": [],
                                                                "runs": {}}))  # fmt: skip
    path = repr(str(tmp_path / "gradient_anatomy.json"))
    with pytest.raises(GradlabError, match=re.escape(
            f"{path} is not the JSON of gradlab study anatomy: it lacks settings.data, "
            "settings.model, settings.epochs, settings.test_data")):  # fmt: skip
        load_study("anatomy", tmp_path)
    (tmp_path / "gradient_anatomy.json").write_text("[\n\n")
    with pytest.raises(GradlabError, match=r"^--x: .* is not JSON \(Expecting value, line 3\); "
                                           r"expected the JSON of gradlab study anatomy$"):
        load_study("anatomy", tmp_path, "--x")


def test_a_folder_with_several_studies_gives_them_in_the_studies_order(tmp_path):
    (tmp_path / "gradient_anatomy.json").write_text(json.dumps(_anatomy()))
    (tmp_path / "loss_comparison_m8.json").write_text(json.dumps(_losses(8)))
    (tmp_path / "p_vs_batch_size.json").write_text(json.dumps(_p(RISING)))
    other = tmp_path / "other"
    other.mkdir()
    (other / "loss_comparison_m4.json").write_text(json.dumps(_losses(4)))
    runs = check_study_folders([other, tmp_path])
    assert [(run.name, run.folder) for run in runs] == [
        ("losses", other), ("p-vs-batch-size", tmp_path), ("losses", tmp_path),
        ("anatomy", tmp_path)]  # fmt: skip
    assert runs[0].paths == [other / "loss_comparison_m4.json"]
    assert list(runs[2].results) == [8]
    assert runs[3].results == _anatomy()


def test_a_saved_losses_study_is_a_report_section_with_its_findings_per_m(tmp_path, plots):
    folder = tmp_path / "mine"
    folder.mkdir()
    for size in (8, 4):
        (folder / f"loss_comparison_m{size}.json").write_text(json.dumps(_losses(size)))
    (run,) = check_study_folders([folder])
    out = tmp_path / "report"
    results, markdown = study_report_section(run, out, 2)
    on = "your study on cub with resnet18"
    assert re.findall(r"^## .*$", markdown, flags=re.M) == [
        f"## Ranking losses at m = 4, {on}", f"## Ranking losses at m = 8, {on}"]
    # each section names the one file it was read from, right after its heading
    for size in (4, 8):
        source = (f"Read from `{folder / f'loss_comparison_m{size}.json'}`, written by "
                  "`gradlab study losses` at its own settings (the report's --quick does not "
                  "change them).")  # fmt: skip
        assert markdown.count(source) == 1
        assert f"## Ranking losses at m = {size}, {on}\n\n{source}\n\ncub, " in markdown
    figures = ["figures/study2_loss_comparison_m4.png", "figures/study2_loss_comparison_m8.png"]
    assert re.findall(r"\]\(([^)]+\.png)\)", markdown) == figures
    assert all(_png(out / figure) for figure in figures)
    assert plots == [("plot_loss_comparison", _losses(size),
                      out / "figures" / f"study2_loss_comparison_m{size}.png") for size in (4, 8)]
    assert results == {"study": "losses", "folder": str(folder), "data": "cub",
                       "backbone": "resnet18", "files": [str(p) for p in run.paths],
                       "figures": figures, "results": run.results}  # fmt: skip
    findings = study_findings(results)
    best = _cell(_losses(4)["losses"]["A"]["metrics"]["MAP@R"])
    before = _cell(_losses(4)["before"]["MAP@R"])
    assert [f.figure for f in findings] == figures
    assert [f.text for f in findings] == [
        f"In your study on cub with resnet18 at m = {size}, best MAP@R among the losses that "
        f"beat the untrained network ({before}) by more than the seed spread: A ({best})."
        for size in (4, 8)]  # fmt: skip


def test_a_saved_p_study_finding_quotes_the_trend_and_the_first_and_last_mean(tmp_path):
    finding = _saved_p_finding(tmp_path, _p(RISING))
    first, last = _cell([row[0] for row in RISING]), _cell([row[-1] for row in RISING])
    assert finding.text == ("In your study on sop with timm:resnet50, P from m = 8 to m = 32: "
                            f"rises (paired t-test over the seeds; 3 seeds; mean P {first} to "
                            f"{last}).")  # fmt: skip
    assert finding.figure == "figures/study1_p_vs_batch_size.png"


def test_a_saved_p_study_of_one_batch_size_finds_no_trend_and_quotes_its_one_mean(tmp_path):
    finding = _saved_p_finding(tmp_path, _one_batch_size())
    mean = _cell([row[0] for row in RISING])
    assert finding.text == ("In your study on sop with timm:resnet50, P at m = 8 alone: no trend "
                            "(a trend needs P at two or more batch sizes; mean P "
                            f"{mean}).")  # fmt: skip


def test_a_saved_anatomy_study_is_a_section_without_a_finding(tmp_path, plots):
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "gradient_anatomy.json").write_text(json.dumps(_anatomy()))
    (run,) = check_study_folders([folder])
    results, markdown = study_report_section(run, tmp_path / "report", 4)
    assert markdown.startswith("## Gradient anatomy over training (Bleeker & de Rijke, 2022), "
                               "your study on cars with resnet18\n\nRead from")  # fmt: skip
    assert results["figures"] == ["figures/study4_gradient_anatomy.png"]
    assert study_findings(results) == []


def test_several_tied_or_behind_losses_are_listed_with_commas():
    import copy

    results = _losses(16)
    losses = results["losses"]
    losses["E"], losses["F"] = copy.deepcopy(losses["B"]), copy.deepcopy(losses["C"])
    text = loss_comparison_markdown(results, "f.png")
    assert ("(gap below the sum of the two stds): B, E. Behind it by more than the spread: "
            "C, F.") in text


def test_check_study_folders_refuses_what_is_no_study_folder_in_whole_sentences(tmp_path):
    missing, empty = tmp_path / "gone", tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(GradlabError) as refused:
        check_study_folders([missing])
    assert str(refused.value) == (f"--studies: {str(missing)!r} is not a folder; give folders "
                                  "written by gradlab study")  # fmt: skip
    with pytest.raises(GradlabError) as refused:
        check_study_folders([empty], "--from")
    assert str(refused.value) == (
        f"--from: {str(empty)!r} holds no study JSON (p_vs_batch_size.json, "
        "loss_comparison_m*.json, gradient_anatomy.json); give a folder written by gradlab study")


def test_a_bad_json_read_without_an_argument_is_named_by_its_path_alone(tmp_path):
    path = tmp_path / "p_vs_batch_size.json"
    path.write_text(json.dumps({"batch_sizes": [8]}))
    with pytest.raises(GradlabError) as refused:
        render_study_folder("p-vs-batch-size", tmp_path)
    assert str(refused.value) == (
        f"{str(path)!r} is not the JSON of gradlab study p-vs-batch-size: it lacks data, model, "
        "per_class, seeds, tau, eps, settings")
    path.write_text("{")
    with pytest.raises(GradlabError) as refused:
        load_study("p-vs-batch-size", tmp_path)
    assert str(refused.value).startswith(f"{str(path)!r} is not JSON (")


@pytest.mark.parametrize(("model", "backbone"), [
    # a backbone as a user named it, with a space (a hand-edited or renamed JSON)
    ("my net with a linear head to 8 dimensions, random initial weights", "my net"),
    # a checkpoint whose file name repeats the phrase
    ("timm:resnet50 with a linear head to 8 dimensions, from r50 with a linear head.pt",
     "timm:resnet50"),
])  # fmt: skip
def test_a_saved_studys_backbone_is_its_model_line_before_the_first_linear_head(
    tmp_path, plots, model, backbone
):
    folder = tmp_path / "a"
    folder.mkdir()
    saved = _anatomy()
    saved["settings"]["model"] = model
    (folder / "gradient_anatomy.json").write_text(json.dumps(saved))
    (run,) = check_study_folders([folder])
    results, markdown = study_report_section(run, tmp_path / "report", 1)
    assert results["backbone"] == backbone
    assert markdown.startswith("## Gradient anatomy over training (Bleeker & de Rijke, 2022), "
                               f"your study on cars with {backbone}\n")  # fmt: skip


def test_a_losses_section_with_a_figure_missing_is_refused_rather_than_losing_a_finding(
    tmp_path, plots
):
    folder = tmp_path / "mine"
    folder.mkdir()
    for size in (8, 4):
        (folder / f"loss_comparison_m{size}.json").write_text(json.dumps(_losses(size)))
    (run,) = check_study_folders([folder])
    results, _ = study_report_section(run, tmp_path / "report", 2)
    with pytest.raises(ValueError, match="zip"):
        study_findings({**results, "figures": results["figures"][:1]})


@pytest.mark.parametrize("name", ["p-vs-batch-size", "losses", "anatomy"])
def test_a_section_called_alone_reads_as_on_the_studys_own_page(tmp_path, plots, name):
    """Each markdown function without ``where``: the section ``gradlab study`` writes into
    summary.md (its heading ending ", on your data")."""
    results = {"p-vs-batch-size": lambda: _p(RISING), "losses": lambda: {8: _losses(8)},
               "anatomy": _anatomy}[name]()  # fmt: skip
    write_study_report(name, results, tmp_path)
    page = (tmp_path / "summary.md").read_text()
    if name == "p-vs-batch-size":
        section = p_vs_batch_size_markdown(results, "p_vs_batch_size.png")
    elif name == "losses":
        section = loss_comparison_markdown(results[8], "loss_comparison_m8.png")
    else:
        section = anatomy_markdown(results, "gradient_anatomy.png")
    assert page == f"# gradlab study: {name}\n\n{section}\n"
    assert section.split("\n", 1)[0].endswith(", on your data")


LEFT_OUT = {"min_images_per_class": 4, "classes": 5, "images": 30, "left_out_classes": 2,
            "left_out_images": 5, "left_out_examples": {"17": 2, "23": 3}}  # fmt: skip
"""A training split of 7 classes and 35 images, 2 classes (5 images) too small for a batch."""


@pytest.mark.parametrize("name", ["p-vs-batch-size", "losses", "anatomy"])
def test_each_section_says_which_classes_were_left_out_of_training(name):
    said = (" Left out of training: 2 of the training split's 7 classes (5 of its 35 images), "
            "those with fewer than 4 images, as a batch takes 4 distinct images of each of its "
            "classes ('17' has 2, '23' has 3).")  # fmt: skip
    tested = (" The test split keeps every image (a test image with no other image of its class "
              "is ranked for the other queries but is no query itself).")  # fmt: skip
    if name == "p-vs-batch-size":
        results = {**_p(RISING), "training_classes": LEFT_OUT}
        text = p_vs_batch_size_markdown(results, "f.png")
        expected = said  # trained only: no test split
    else:
        results = _losses(8) if name == "losses" else _anatomy()
        results["settings"]["training_classes"] = LEFT_OUT
        render = loss_comparison_markdown if name == "losses" else anatomy_markdown
        text = render(results, "f.png")
        expected = said + tested
    described = text.split("\n")[2]  # the paragraph under the heading
    model = (results if name == "p-vs-batch-size" else results["settings"])["model"]
    assert described.startswith(f"{results.get('data') or results['settings']['data']}; "
                                f"{model}.{expected} ")  # fmt: skip
    assert ("keeps every image" in text) == (name != "p-vs-batch-size")
    without = {"p-vs-batch-size": lambda: p_vs_batch_size_markdown(_p(RISING), "f.png"),
               "losses": lambda: loss_comparison_markdown(_losses(8), "f.png"),
               "anatomy": lambda: anatomy_markdown(_anatomy(), "f.png")}[name]()
    assert "Left out" not in without and "keeps every image" not in without


def _blocks(section: str) -> list[str]:
    """The section's markdown blocks: heading, paragraph, table, ..., figure, one blank line
    between each two."""
    assert "\n\n\n" not in section and not section.endswith("\n")
    return section.split("\n\n")


def test_each_section_is_its_heading_paragraph_table_verdict_and_figure_apart():
    p = _blocks(p_vs_batch_size_markdown(_p(RISING), "p.png"))
    assert [block[:2] for block in p] == ["##", "so", "| ", "P ", "!["]
    losses = _blocks(loss_comparison_markdown(_losses(8), "l.png"))
    assert [block[:2] for block in losses] == ["##", "cu", "| ", "Be", "!["]
    anatomy = _blocks(anatomy_markdown(_anatomy(), "a.png"))
    assert [block[:2] for block in anatomy] == ["##", "ca", "| ", "!["]
    for blocks in (p, losses, anatomy):
        table = blocks[2].split("\n")
        assert all(line.startswith("| ") and line.endswith(" |") for line in table)


def test_the_anatomy_section_says_which_gradient_it_reads_and_shows():
    from gradlab.functional.gradient_anatomy import DEFAULT_RELATIVE_THRESHOLD

    text = anatomy_markdown(_anatomy(), "figures/a.png")
    share = f"{100 * DEFAULT_RELATIVE_THRESHOLD:g}"
    assert ("for 3 epochs; dL/dS of the batch's in-batch scores (each image querying the "
            "others) read by gradlab.functional.gradient_anatomy (an entry is active above "
            f"{share} % of its query's largest |dL/dS|). At the last logged step") in text
    assert text.split("\n")[-1] == (
        "![How many negatives per query receive gradient, the share of queries without gradient "
        "and the hardest negatives' share, over training](figures/a.png)")


def test_the_loss_table_has_the_image_studies_metrics_in_the_reports_order():
    from gradlab.experiments.image_studies import LOSS_METRICS

    results = _losses(8)
    for block in (results["before"], *(run["metrics"] for run in results["losses"].values())):
        mine = dict(block)
        block.clear()
        block.update({metric: [v * 0.9 for v in mine["MAP@R"]] for metric in LOSS_METRICS})
    rows = _rows(loss_comparison_markdown(results, "f.png"))
    # the image studies' order: recall@1/2/4/8, R-Precision, MAP@R (no tie-aware mAP)
    assert rows[0] == ["loss", *LOSS_METRICS, "loss fwd+bwd (ms)", "training step (ms)"]
    assert rows[2][1:-2] == [_cell(results["before"][m]) for m in LOSS_METRICS]


def _shrunk(sizes: int, seeds: int) -> dict:
    measurement = _p([row[:sizes] for row in RISING[:seeds]])
    measurement["batch_sizes"] = measurement["batch_sizes"][:sizes]
    measurement["seeds"] = measurement["seeds"][:seeds]
    setting = measurement["settings"]["trained_at_m"]
    for key, runs in setting.items():
        if isinstance(runs, list) and runs and isinstance(runs[0], list):
            setting[key] = [run[:sizes] for run in runs[:seeds]]
    setting["steps"] = setting["steps"][:sizes]
    return measurement


@pytest.mark.parametrize(("sizes", "seeds", "why"), [
    (2, 3, "3 seeds"), (3, 2, "2 seeds"), (2, 2, "2 seeds"),
])  # fmt: skip
def test_two_batch_sizes_and_two_seeds_can_show_a_trend(sizes, seeds, why):
    from gradlab.experiments.p_vs_batch_size import summarize

    measurement = _shrunk(sizes, seeds)
    text = p_vs_batch_size_markdown(measurement, "p.png")
    trend = summarize(measurement)["settings"]["trained_at_m"]
    words = trend["parts"]
    last = measurement["batch_sizes"][-1]
    assert (f"P from m = 8 to m = {last}: {trend['trend']} (paired t-test over the seeds; "
            f"{why}; {trend['trend_detail']}). Its parts, each a share of the m² pairs: the "
            f"diagonal: {words['P_diagonal']}; the query's own row and column: "
            f"{words['P_own_row_column']}; the positive rows: {words['P_positive_rows']}; the "
            f"negative-only rows: {words['P_negative_rows']}; and P minus its diagonal part: "
            f"{words['P without the diagonal']}.") in text
    assert len(trend["parts"]) > 1  # the parts are listed apart


def test_a_saved_p_study_whose_diagonal_lacks_seeds_is_not_rendered():
    """One seed's diagonal for three seeds' P (the summary's arrays broadcast it): the table
    would quote P minus the diagonal over one seed."""
    measurement = _p(RISING)
    measurement["settings"]["trained_at_m"]["P_diagonal"] = [[1 / 8, 1 / 16, 1 / 32]]
    with pytest.raises(ValueError, match="zip"):
        p_vs_batch_size_markdown(measurement, "p.png")


def test_a_missing_folder_is_named_as_missing_with_the_file_it_should_hold(tmp_path):
    gone = tmp_path / "gone"
    for argument, prefix in (("", ""), ("--studies", "--studies: ")):
        with pytest.raises(GradlabError) as refused:
            load_study("anatomy", gone, argument)
        assert str(refused.value) == (f"{prefix}{str(gone)!r} does not exist; give the folder a "
                                      "gradlab study run wrote its gradient_anatomy.json into")


def test_a_bad_losses_json_is_refused_naming_the_argument(tmp_path):
    (tmp_path / "loss_comparison_m8.json").write_text(json.dumps({"settings": {}}))
    with pytest.raises(GradlabError) as refused:
        check_study_folders([tmp_path], "--studies")
    assert str(refused.value) == (
        f"--studies: {str(tmp_path / 'loss_comparison_m8.json')!r} is not the JSON of gradlab "
        "study losses: it lacks seeds, before, losses")


def _cut_recall(data):
    data["runs"]["m = 8"]["SmoothAP"]["recall"]["MAP@R"] = [0.3]


def _cut_step(data):
    data["runs"]["m = 16"]["triplet"]["anatomy"]["in_batch"]["share_without_gradient"][1] = [0.0]


def _one_seed_of_anatomy(data):
    del data["runs"]["m = 16"]["triplet"]["anatomy"]["in_batch"]["hardest_10pct_share"][1]


@pytest.mark.parametrize(
    ("cut", "where", "rows", "got"),
    [
        (_cut_recall, "runs.m = 8.SmoothAP.recall.MAP@R", "", "[0.3]"),
        (_cut_step, "runs.m = 16.triplet.anatomy.in_batch.share_without_gradient",
         " of 3 values (one per logged step)", "[[0.0, 0.1, 0.2], [0.0]]"),
        (_one_seed_of_anatomy, "runs.m = 16.triplet.anatomy.in_batch.hardest_10pct_share",
         " of 3 values (one per logged step)", "[[0.5, 0.6, 0.7]]"),
    ],
    ids=["recall-one-seed", "anatomy-short-row", "anatomy-one-seed"],
)  # fmt: skip
def test_a_saved_anatomy_study_with_a_list_that_does_not_fit_its_seeds_is_named(
    tmp_path, cut, where, rows, got
):
    # a hand-merged JSON: its table would pair a value with the wrong seed or logged step
    (tmp_path / "gradient_anatomy.json").write_text(json.dumps(_anatomy()))
    check_study_folders([tmp_path], "--studies")  # the whole study reads
    data = _anatomy()
    cut(data)
    (tmp_path / "gradient_anatomy.json").write_text(json.dumps(data))
    with pytest.raises(GradlabError) as refused:
        check_study_folders([tmp_path], "--studies")
    path = str(tmp_path / "gradient_anatomy.json")
    assert str(refused.value) == (
        f"--studies: {path!r} is not the JSON of gradlab study anatomy: {where} must hold one "
        f"entry per seed of [0, 1]{rows}; got {got}")


def test_losses_that_all_moved_alike_are_said_not_told_apart():
    results = _losses(16)
    results["settings"]["lr"] = 1e-12
    alike = {"recall@1": [0.5, 0.4, 0.45], "mAP": [0.2, 0.2, 0.3], "R-Precision": [0.1] * 3,
             "MAP@R": [0.2, 0.19, 0.2]}  # fmt: skip
    for run in results["losses"].values():
        run["metrics"] = {metric: list(values) for metric, values in alike.items()}
    text = loss_comparison_markdown(results, "figures/l.png")
    note = ("Every loss gave the same retrieval in every seed, other than the untrained "
            "network's: these 7 steps at lr 1e-12 did not tell the losses apart. Training runs "
            "in train mode, where a backbone's batch normalization updates its running "
            "statistics from the training images whatever the loss, which alone can move the "
            "retrieval so; train longer or at a larger lr to compare the losses.")  # fmt: skip
    assert note in text
    results["before"] = {metric: list(values) for metric, values in alike.items()}
    unmoved = loss_comparison_markdown(results, "l.png")  # the untrained network's, every loss
    assert "Every loss gave the same" not in unmoved
    assert ("Every loss gave the untrained network's retrieval in every seed: these 7 steps at "
            "lr 1e-12 did not move it, so they did not tell the losses apart; train longer or "
            "at a larger lr to compare the losses.") in unmoved  # fmt: skip
    results["before"]["MAP@R"] = [0.2, 0.19, 0.21]  # one seed's MAP@R moved: the first note
    assert note in loss_comparison_markdown(results, "l.png")
    assert "Every loss gave the same" not in loss_comparison_markdown(_losses(16), "l.png")


def _alike(results, names, apart=None):
    """``results`` with the losses ``names`` (the others dropped) all given one set of metrics,
    but for the one at index ``apart``."""
    results["losses"] = {name: results["losses"][name] for name in names}
    for index, run in enumerate(results["losses"].values()):
        shift = 0.01 if index == apart else 0.0
        run["metrics"] = {"recall@1": [0.5 + shift] * 3, "mAP": [0.2] * 3,
                          "R-Precision": [0.1] * 3, "MAP@R": [0.2] * 3}  # fmt: skip
    return results


def _losses_paragraph(results):
    return loss_comparison_markdown(results, "l.png").split("\n\n")[-2]


def test_the_alike_note_needs_two_losses_all_alike_and_ends_the_paragraph():
    note = "Every loss gave the same retrieval in every seed"
    two = _losses_paragraph(_alike(_losses(16), "AB"))  # no lr in the settings: none said
    assert f"{note}, other than the untrained network's: these 7 steps did not tell" in two
    assert two.endswith("train longer or at a larger lr to compare the losses.")
    assert note not in _losses_paragraph(_alike(_losses(16), "A"))  # one loss: nothing to tell
    for apart in range(3):  # one loss differs, the two others agree: not alike
        one_apart = _losses_paragraph(_alike(_losses(16), "ABC", apart))
        assert note not in one_apart and one_apart.endswith(".")
    unmoved = _alike(_losses(16), "AB")
    unmoved["before"] = {m: list(v) for m, v in unmoved["losses"]["A"]["metrics"].items()}
    paragraph = _losses_paragraph(unmoved)
    assert note not in paragraph and paragraph.endswith(".")
    assert _losses_paragraph(_losses(16)).endswith(".")


def _refusal(tmp_path, file, data):
    """The message check_study_folders refuses ``data`` saved as ``file`` with, and the path."""
    (tmp_path / file).write_text(json.dumps(data))
    with pytest.raises(GradlabError) as refused:
        check_study_folders([tmp_path], "--studies")
    return str(refused.value), str(tmp_path / file)


def _no_object(run):
    return ["not", "a", "run"]


def _without(key):
    def cut(run):
        del run[key]
        return run

    return cut


def test_a_saved_losses_study_with_a_metric_that_does_not_fit_its_seeds_is_named(tmp_path):
    # B's mAP lost a seed
    data = _losses(8)
    data["losses"]["B"]["metrics"]["mAP"] = [0.5, 0.6]
    message, path = _refusal(tmp_path, "loss_comparison_m8.json", data)
    assert message == (
        f"--studies: {path!r} is not the JSON of gradlab study losses: losses.B.metrics.mAP "
        "must hold one entry per seed of [0, 1, 2]; got [0.5, 0.6]")


def _losses_run(change):
    def make():
        data = _losses(8)
        data["losses"]["A"] = change(data["losses"]["A"])
        return data

    return make


def _anatomy_run(change, loss="SmoothAP"):
    def make():
        data = _anatomy()
        data["runs"]["m = 8"][loss] = change(data["runs"]["m = 8"][loss])
        return data

    return make


def _anatomy_of(change):
    return _anatomy_run(lambda run: {**run, "anatomy": change(run["anatomy"])})


def _steps(value):
    def put(anatomy):
        anatomy = dict(anatomy)
        if value is None:
            del anatomy["steps"]
        else:
            anatomy["steps"] = value
        return anatomy

    return put


# What a renderer would read and fail on with a KeyError or a TypeError: named before any work.
MALFORMED = {
    "loss-no-object": ("loss_comparison_m8.json", _losses_run(_no_object), "losses.A.metrics "
                       "(an object), losses.A.loss_seconds (a list), losses.A.step_seconds "
                       "(a list)"),
    "loss-without-metrics": ("loss_comparison_m8.json", _losses_run(_without("metrics")),
                             "losses.A.metrics (an object)"),
    "loss-without-timing": ("loss_comparison_m8.json", _losses_run(_without("step_seconds")),
                            "losses.A.step_seconds (a list)"),
    "losses-no-object": ("loss_comparison_m8.json",
                         lambda: {**_losses(8), "losses": ["A", "B"]}, "losses (an object)"),
    "run-no-object": ("gradient_anatomy.json", _anatomy_run(_no_object),
                      "runs.m = 8.SmoothAP.recall (an object), runs.m = 8.SmoothAP.anatomy "
                      "(an object)"),
    "run-without-anatomy": ("gradient_anatomy.json", _anatomy_run(_without("anatomy")),
                            "runs.m = 8.SmoothAP.anatomy (an object)"),
    "run-without-recall": ("gradient_anatomy.json", _anatomy_run(_without("recall")),
                           "runs.m = 8.SmoothAP.recall (an object)"),
    "steps-missing": ("gradient_anatomy.json", _anatomy_of(_steps(None)),
                      "runs.m = 8.SmoothAP.anatomy.steps (a list)"),
    "steps-no-list": ("gradient_anatomy.json", _anatomy_of(_steps({"first": 0, "last": 9})),
                      "runs.m = 8.SmoothAP.anatomy.steps (a list)"),
    "steps-object-alone": ("gradient_anatomy.json",
                           _anatomy_of(lambda anatomy: {"steps": {"first": 0, "last": 9}}),
                           "runs.m = 8.SmoothAP.anatomy.steps (a list), runs.m = 8.SmoothAP."
                           "anatomy's tables (an object per direction)"),  # steps is no table
    "no-direction": ("gradient_anatomy.json",
                     _anatomy_of(lambda anatomy: {"steps": anatomy["steps"]}),
                     "runs.m = 8.SmoothAP.anatomy's tables (an object per direction)"),
    "encoder-no-object": ("gradient_anatomy.json",
                          lambda: {**_anatomy(), "runs": {**_anatomy()["runs"], "m = 8": 3}},
                          "runs.m = 8 (an object)"),
    "runs-no-object": ("gradient_anatomy.json", lambda: {**_anatomy(), "runs": []},
                       "runs (an object)"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_run_is_named_by_what_it_lacks_before_any_work(tmp_path, case):
    file, make, lacks = MALFORMED[case]
    message, path = _refusal(tmp_path, file, make())
    study = "losses" if file.startswith("loss") else "anatomy"
    assert message == (f"--studies: {path!r} is not the JSON of gradlab study {study}: it lacks "
                       f"{lacks}")  # fmt: skip


def test_a_p_study_whose_batch_sizes_are_no_list_fits_no_row(tmp_path):
    data = _p([[0.3], [0.31], [0.29]])  # one m per seed, but batch_sizes is no list
    data["batch_sizes"] = 8
    setting = data["settings"]["trained_at_m"]
    for key, runs in setting.items():
        if isinstance(runs, list) and runs and isinstance(runs[0], list):
            setting[key] = [run[:1] for run in runs]
    message, path = _refusal(tmp_path, "p_vs_batch_size.json", data)
    assert message == (  # named itself: it was blamed on P ("of 0 values")
        f"--studies: {path!r} is not the JSON of gradlab study p-vs-batch-size: batch_sizes "
        "must be a non-empty list of whole numbers >= 1; got 8")


def test_a_list_that_does_not_fit_is_quoted_to_its_first_80_characters(tmp_path):
    data = _anatomy()
    data["runs"]["m = 8"]["SmoothAP"]["recall"]["MAP@R"] = [0.1234567891] * 10  # 2 seeds
    message, path = _refusal(tmp_path, "gradient_anatomy.json", data)
    quoted = "[" + "0.1234567891, " * 5 + "0.1234567"  # 1 + 5 x 14 + 9 = 80 characters
    assert message == (
        f"--studies: {path!r} is not the JSON of gradlab study anatomy: runs.m = 8.SmoothAP."
        f"recall.MAP@R must hold one entry per seed of [0, 1]; got {quoted}")


@pytest.mark.parametrize(("prefix", "call"), [
    ("--studies: ", lambda folder: check_study_folders([folder])),
    ("", lambda folder: load_study("losses", folder)),  # from Python: no option to name
])  # fmt: skip
def test_two_losses_files_of_one_batch_size_are_refused_naming_both(tmp_path, prefix, call):
    # loss_comparison_m*.json also matches a copy (loss_comparison_m8_old.json): the second
    # file of a batch size replaced the first without a word, one run silently left out.
    for name in ("loss_comparison_m8.json", "loss_comparison_m8_old.json"):
        (tmp_path / name).write_text(json.dumps(_losses(8)))
    expected = (f"{prefix}{str(tmp_path / 'loss_comparison_m8.json')!r} and "
                f"{str(tmp_path / 'loss_comparison_m8_old.json')!r} both hold the losses study "
                "at batch size 8; keep one of them in the folder")  # fmt: skip
    with pytest.raises(GradlabError, match=f"^{re.escape(expected)}$"):
        call(tmp_path)


def test_an_undefined_share_is_read_back_from_its_string_and_shown_as_undefined(tmp_path):
    # gradlab study writes NaN as the string "NaN" (standard JSON); the page showed nan ± nan
    data = _anatomy()
    shares = data["runs"]["m = 8"]["triplet"]["anatomy"]["in_batch"]["hardest_10pct_share"]
    shares[0][-1] = shares[1][-1] = "NaN"  # no negative with gradient at the last step
    data["runs"]["m = 16"]["triplet"]["anatomy"]["in_batch"]["hardest_10pct_share"][1][-1] = "NaN"
    (tmp_path / "gradient_anatomy.json").write_text(json.dumps(data))
    run = load_study("anatomy", tmp_path)
    read = run.results["runs"]["m = 8"]["triplet"]["anatomy"]["in_batch"]["hardest_10pct_share"]
    assert [value != value for value in (read[0][-1], read[1][-1])] == [True, True]  # NaN
    rows = _rows(anatomy_markdown(run.results, "figure.png"))
    shares_shown = {(row[0], row[1]): row[4] for row in rows}
    assert shares_shown[("m = 8", "triplet")] == "undefined (every seed)"
    assert shares_shown[("m = 16", "triplet")] == "0.70 (1 of 2 seeds)"  # no spread of one


@pytest.mark.parametrize(("prefix", "call"), [
    ("--studies: ", lambda folder: check_study_folders([folder])),
    ("", lambda folder: load_study("losses", folder)),  # from Python: no option to name
])  # fmt: skip
def test_losses_files_of_two_runs_are_refused_naming_both_and_what_each_ran_on(
    tmp_path, prefix, call
):
    # was: a section headed with the first file's data and backbone over both batch sizes,
    # though the second file ran on other data with another backbone
    other = _losses(16)
    other["settings"].update(data="sop, train split (40 images, 10 classes)",
                             model="gradlab.backbones:tiny_resnet with a linear head to 8 "
                             "dimensions, random weights")  # fmt: skip
    (tmp_path / "loss_comparison_m8.json").write_text(json.dumps(_losses(8)))
    (tmp_path / "loss_comparison_m16.json").write_text(json.dumps(other))
    expected = (f"{prefix}{str(tmp_path / 'loss_comparison_m16.json')!r} and "
                f"{str(tmp_path / 'loss_comparison_m8.json')!r} hold losses studies of "
                "different runs (sop with gradlab.backbones:tiny_resnet; cub with resnet18); "
                "keep one run's files in the folder")  # fmt: skip
    with pytest.raises(GradlabError, match=f"^{re.escape(expected)}$"):
        call(tmp_path)


def _no_p(data):
    del data["settings"]["trained_at_m"]["P"]


def _p_scalar(data):
    data["settings"]["trained_at_m"]["P"] = 0.5


def _no_metric(data):
    del data["losses"]["A"]["metrics"]["MAP@R"]


def _timing_text(data):
    data["losses"]["A"]["step_seconds"] = ["x", "y", "z"]


def _no_recall_metric(data):
    data["runs"]["m = 8"]["SmoothAP"]["recall"] = {}


def _no_runs(data):
    data["runs"] = {}


# (study file, a valid result, a hand edit, the failure named): each was a traceback (exit 1),
# in gradlab report --studies only after the report's own sections had run
HAND_EDITS = {
    "p-missing": ("p_vs_batch_size.json", lambda: _p(RISING), _no_p, "KeyError: 'P'"),
    "p-scalar": ("p_vs_batch_size.json", lambda: _p(RISING), _p_scalar, None),
    "losses-metric": ("loss_comparison_m8.json", lambda: _losses(8), _no_metric,
                      "KeyError: 'MAP@R'"),
    "losses-timing": ("loss_comparison_m8.json", lambda: _losses(8), _timing_text, None),
    "anatomy-recall": ("gradient_anatomy.json", _anatomy, _no_recall_metric,
                       "KeyError: 'MAP@R'"),
    "anatomy-runs": ("gradient_anatomy.json", _anatomy, _no_runs, "StopIteration"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(HAND_EDITS))
def test_a_hand_edited_study_is_refused_in_one_message_before_the_report_runs(tmp_path, case):
    file, valid, edit, failure = HAND_EDITS[case]
    (tmp_path / file).write_text(json.dumps(valid()))
    check_study_folders([tmp_path], "--studies", rendered=True)  # the whole study renders
    data = valid()
    edit(data)
    (tmp_path / file).write_text(json.dumps(data))
    check_study_folders([tmp_path], "--studies")  # the keys the checks know are all there
    with pytest.raises(GradlabError) as refused:
        check_study_folders([tmp_path], "--studies", rendered=True)
    said = str(refused.value)
    name = {"p_vs_batch_size.json": "p-vs-batch-size", "gradient_anatomy.json": "anatomy"}.get(
        file, "losses")
    assert said.startswith(f"--studies: {str(tmp_path / file)!r} cannot be rendered as gradlab "
                           f"study {name} (")
    assert said.endswith("): its values are not of the kinds the study writes (was it edited "
                         "by hand?); restore the file or run the study again")
    if failure is not None:
        assert f"({failure})" in said
    assert list(tmp_path.iterdir()) == [tmp_path / file]  # nothing drawn beside it


@pytest.mark.parametrize(("content", "said"), [
    (b"\xff\xfe\x00{", "is not UTF-8 text (byte 0)"),  # a UnicodeDecodeError traceback
    (b"[" * 100_000 + b"]" * 100_000, "nests its lists or objects too deeply to be read"),
])  # a RecursionError traceback  # fmt: skip
def test_a_study_json_that_cannot_be_read_is_refused_in_one_line(tmp_path, content, said):
    (tmp_path / "gradient_anatomy.json").write_bytes(content)
    with pytest.raises(GradlabError) as refused:
        check_study_folders([tmp_path], "--studies")
    assert str(refused.value) == (f"--studies: {str(tmp_path / 'gradient_anatomy.json')!r} "
                                  f"{said}; expected the JSON of gradlab study anatomy")


def test_render_refuses_a_study_it_cannot_draw_naming_out_and_leaves_no_figure(tmp_path):
    data = _anatomy()
    data["runs"] = {}
    (tmp_path / "gradient_anatomy.json").write_text(json.dumps(data))
    with pytest.raises(GradlabError) as refused:
        render_study_folder("anatomy", tmp_path)
    assert str(refused.value) == (
        f"--out: {str(tmp_path / 'gradient_anatomy.json')!r} cannot be rendered as gradlab study "
        "anatomy (StopIteration): its values are not of the kinds the study writes (was it "
        "edited by hand?); restore the file or run the study again")
    assert [path.name for path in tmp_path.iterdir()] == ["gradient_anatomy.json"]


def test_a_folder_holding_only_a_stopped_run_s_files_says_where_they_are(tmp_path):
    # a run killed while staging left its complete JSON in a hidden folder, unmentioned
    from gradlab.report.user_studies import STUDY_STAGING

    stopped = tmp_path / f"{STUDY_STAGING}abc123"
    stopped.mkdir()
    (stopped / "gradient_anatomy.json").write_text(json.dumps(_anatomy()))
    but = (f" (but {stopped.name} holds the files of a run stopped before moving them into "
           "place: move them out to use them)")
    with pytest.raises(GradlabError) as refused:
        check_study_folders([tmp_path], "--studies")
    assert str(refused.value) == (
        f"--studies: {str(tmp_path)!r} holds no study JSON ({', '.join(STUDY_FILES.values())})"
        f"{but}; give a folder written by gradlab study")
    (tmp_path / f"{STUDY_STAGING}xyz").mkdir()  # a second one: both named
    with pytest.raises(GradlabError) as refused:
        load_study("anatomy", tmp_path, "--out")
    assert str(refused.value) == (
        f"--out: {str(tmp_path)!r} holds no gradient_anatomy.json of a gradlab study (but "
        f"{stopped.name}, {STUDY_STAGING}xyz hold the files of runs stopped before moving them "
        "into place: move them out to use them)")


@pytest.mark.parametrize(("key", "value", "least"), [
    ("batch_sizes", "8,16", 1), ("batch_sizes", [8.5, 16, 32], 1), ("batch_sizes", [], 1),
    ("seeds", "0", 0), ("seeds", [0, -1, 2], 0), ("seeds", [True, 1, 2], 0),
    ("batch_sizes", ",".join(map(str, range(8, 400, 8))), 1),  # shown to 80 characters
])  # fmt: skip
def test_the_lists_a_study_is_laid_out_by_are_named_when_they_are_not_whole_numbers(
    tmp_path, key, value, least
):
    # batch_sizes "8,16" was blamed on P ("one entry per seed ... of 0 values"); 8.5 was drawn
    data = _p(RISING)
    data[key] = value
    message, path = _refusal(tmp_path, "p_vs_batch_size.json", data)
    assert message == (
        f"--studies: {path!r} is not the JSON of gradlab study p-vs-batch-size: {key} must be a "
        f"non-empty list of whole numbers >= {least}; got {json.dumps(value)[:80]}")


@pytest.mark.parametrize(("value", "shown"), [
    (5.0, "5.0"), (1.5, "1.5"), (-0.25, "-0.25"), ("a", '"a"'), (None, "null"), (True, "true"),
    ("a" * 60, '"' + "a" * 39),  # shown to its first 40 characters
])  # fmt: skip
def test_a_share_of_pairs_outside_0_to_1_is_named_not_drawn(tmp_path, value, shown):
    # P = 5.0 and -3.0 rendered as a table of P (a proportion of pairs)
    data = _p([row[:] for row in RISING])
    data["settings"]["trained_at_m"]["P_diagonal"][1] = [0.1, value, 0.2]
    message, path = _refusal(tmp_path, "p_vs_batch_size.json", data)
    assert message == (
        f"--studies: {path!r} is not the JSON of gradlab study p-vs-batch-size: "
        f"settings.trained_at_m.P_diagonal holds {shown}, which is no proportion (a number from "
        "0 to 1, or NaN)")
    data["settings"]["trained_at_m"]["P_diagonal"][1] = [0.1, float("nan"), 1.0]  # both allowed
    (tmp_path / "p_vs_batch_size.json").write_text(json.dumps(data).replace("NaN", '"NaN"'))
    check_study_folders([tmp_path], "--studies")


@pytest.mark.parametrize(("file", "where"), [
    ("loss_comparison_m8.json", ("losses", "A", "metrics", "MAP@R")),
    ("loss_comparison_m8.json", ("before", "recall@1")),
    ("gradient_anatomy.json", ("runs", "m = 16", "triplet", "recall", "MAP@R")),
])  # fmt: skip
@pytest.mark.parametrize(("value", "shown"), [(5.0, "5.0"), (-0.5, "-0.5"), ("high", '"high"')])
def test_a_retrieval_metric_outside_0_to_1_is_named_not_tabled(tmp_path, file, where, value,
                                                               shown):  # fmt: skip
    # a hand-edited MAP@R of 5.0 was tabled, ranked best and written into the findings
    data = _losses(8) if file.startswith("loss") else _anatomy()
    holder = data
    for key in where[:-1]:
        holder = holder[key]
    holder[where[-1]] = [0.2, value, 0.3][: len(holder[where[-1]])]
    message, path = _refusal(tmp_path, file, data)
    study = "losses" if file.startswith("loss") else "anatomy"
    assert message == (
        f"--studies: {path!r} is not the JSON of gradlab study {study}: {'.'.join(where)} holds "
        f"{shown}, which is no proportion (a number from 0 to 1, or NaN)")
    holder[where[-1]] = [0.0, float("nan"), 1.0][: len(holder[where[-1]])]  # the bounds: kept
    (tmp_path / file).write_text(json.dumps(data).replace("NaN", '"NaN"'))
    check_study_folders([tmp_path], "--studies")


def test_drawing_a_study_ahead_of_the_report_says_no_warning_the_report_will_say(tmp_path):
    # a NaN share warned in the check and again in the report (numpy's empty-slice mean); the
    # figures now draw a share that is NaN in every seed as a gap, without numpy's warning
    import warnings

    data = _p([row[:] for row in RISING])
    data["settings"]["trained_at_m"]["P"] = [[0.3, "NaN", 0.5]] * 3  # "NaN": a study's NaN
    (tmp_path / "p_vs_batch_size.json").write_text(json.dumps(data))
    with warnings.catch_warnings(record=True) as drawn:
        warnings.simplefilter("always")
        (run,) = check_study_folders([tmp_path], "--studies")
        study_report_section(run, tmp_path / "report", 1)  # as the report draws it
    ahead = len(drawn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_study_folders([tmp_path], "--studies", rendered=True)
    assert ahead == 0 and caught == []


@pytest.mark.parametrize(("device", "precision"), [
    ("cpu", "bfloat16"), ("cuda", "float16 with loss scaling"), ("cuda:1", "float16 with loss "
                                                                "scaling"),
    ("mps", "float16")])  # fmt: skip
def test_a_study_run_with_amp_says_so_after_its_model(device, precision):
    # an --amp run's page read as a float32 run's: only its JSON said "amp": true, though its
    # numbers differ a little from a float32 run's
    sentence = (f"The backbone ran under torch.autocast in {precision} (--amp on {device}); the "
                "losses and measurements took its embeddings in float32.")
    losses, anatomy, measurement = _losses(8), _anatomy(), _p(RISING)
    for settings in (losses["settings"], anatomy["settings"],
                     measurement["settings"]["trained_at_m"]):  # fmt: skip
        settings.update(amp=True, device=device)
    pages = [loss_comparison_markdown(losses, "f.png"), anatomy_markdown(anatomy, "f.png"),
             p_vs_batch_size_markdown(measurement, "f.png")]  # fmt: skip
    for page, model in zip(pages, (losses["settings"]["model"], anatomy["settings"]["model"],
                                   measurement["model"]), strict=True):  # fmt: skip
        assert f"{model}. {sentence}" in page
    for settings in (losses["settings"], anatomy["settings"],
                     measurement["settings"]["trained_at_m"]):  # fmt: skip
        settings.update(amp=False)
    for page in (loss_comparison_markdown(losses, "f.png"), anatomy_markdown(anatomy, "f.png"),
                 p_vs_batch_size_markdown(measurement, "f.png")):  # fmt: skip
        assert "autocast" not in page


def test_a_render_of_another_study_names_every_file_it_holds_and_its_folder_quoted(tmp_path):
    # the folder (with a space) and both files of a losses run, so that the command it gives
    # renders what is there
    folder = tmp_path / "my runs"
    folder.mkdir()
    for name in ("loss_comparison_m16.json", "loss_comparison_m8.json", "p_vs_batch_size.json"):
        (folder / name).write_text("{}")
    with pytest.raises(GradlabError) as refused:
        load_study("anatomy", folder)
    assert str(refused.value) == (
        f"{str(folder)!r} holds no gradient_anatomy.json of a gradlab study; it holds "
        "p_vs_batch_size.json: render it with gradlab study p-vs-batch-size --render --out "
        f"'{folder}'; it holds loss_comparison_m16.json, loss_comparison_m8.json: render it "
        f"with gradlab study losses --render --out '{folder}'")


def test_an_amp_run_without_its_device_recorded_is_said_to_have_run_on_the_cpu():
    # a JSON written before the device was recorded: the study's default device
    losses = _losses(8)
    losses["settings"].update(amp=True)
    losses["settings"].pop("device", None)
    assert ("The backbone ran under torch.autocast in bfloat16 (--amp on cpu); the losses and "
            "measurements took its embeddings in float32.") in loss_comparison_markdown(
        losses, "f.png")  # fmt: skip


def test_a_saved_p_study_of_two_batch_sizes_quotes_its_first_and_last_mean(tmp_path):
    finding = _saved_p_finding(tmp_path, _first_batch_sizes(2))
    first, last = _cell([row[0] for row in RISING]), _cell([row[1] for row in RISING])
    assert f"mean P {first} to {last})." in finding.text
