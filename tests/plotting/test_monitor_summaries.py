"""What the Monitor's figures say about a run without drawing it, on hand-written records
(seconds, no training): which logged key gets which legend label, when a quantity goes on a log
axis, which families are stated as a sentence instead of flat lines, and where figures go.
Expected sentences are written out from the records by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gradlab import GradlabError
from gradlab.plotting.monitor import default_out, flat_families, key_label, spans_decades


@pytest.mark.parametrize(
    ("key", "label"),
    [
        ("p_off_diagonal", "P without the diagonal"),
        ("loss", "loss"),
        ("some_new_norm_q50", "some new norm (median)"),
        ("hard_10pct_share", "hard 10 % share"),
        ("a__b_", "a b"),
    ],
)
def test_a_logged_key_gets_its_declared_label_or_readable_words(key, label):
    assert key_label(key) == label


def test_labels_given_by_the_caller_win():
    assert key_label("loss", {"loss": "training loss"}) == "training loss"
    assert key_label("p_off_diagonal", {}) == "p off diagonal"


@pytest.mark.parametrize(
    ("values", "decades", "expected"),
    [
        ([1000.0, 1.0], 3, True),  # exactly three decades
        ([999.0, 1.0], 3, False),
        ([1.4, 0.4, 2e-6, 5e-10], 3, True),
        ([5.0, math.nan, 5e-4, math.inf], 3, True),  # non-finite entries are ignored
        ([1.0, 0.0, 1e-9], 3, False),  # a zero cannot go on a log axis
        ([10.0, -1.0], 1, False),
        ([], 3, False),
        ([math.nan], 3, False),
        ([100.0, 1.0], 2, True),
        ([100.0, 1.1], 2, False),
    ],
)
def test_a_quantity_goes_on_a_log_axis_when_it_spans_decades(values, decades, expected):
    assert spans_decades(values, decades) is expected


def test_spans_decades_defaults_to_three():
    assert spans_decades([1000.0, 1.0]) and not spans_decades([999.0, 1.0])


def _run(name, **series):
    steps = len(next(iter(series.values())))
    return (name, [{"step": s, **{k: v[s] for k, v in series.items()}} for s in range(steps)])


def test_a_constant_series_is_a_sentence_with_its_value_and_step_count():
    flat = flat_families([_run("a", loss=[0.5, 0.5, 0.5])])
    assert flat == {"loss": "Loss: loss 0.5 at each of the 3 logged steps"}


def test_steps_are_counted_per_run():
    runs = [_run("a", loss=[0.25, 0.25]), _run("b", loss=[0.25, 0.25])]
    assert flat_families(runs)["loss"] == "Loss: loss 0.25 at each of the 2 logged steps"


def test_a_series_moving_less_than_the_tolerance_says_by_how_much():
    flat = flat_families([_run("a", loss=[0.5, 0.500002, 0.5])])
    assert flat["loss"] == "Loss: loss 0.5 (to within 2e-06)"


def test_a_series_moving_visibly_within_a_wide_tolerance_gives_its_range():
    runs = [_run("a", loss=[0.5, 0.75])]
    # 0.25 is exact in binary: a move of exactly the tolerance is still flat
    assert flat_families(runs, tolerance=0.25)["loss"] == "Loss: loss between 0.5 and 0.75"
    assert "loss" not in flat_families(runs, tolerance=0.2499)
    assert "loss" not in flat_families(runs)


def test_a_family_is_flat_only_when_every_series_is():
    moving = _run("a", degenerate_batches=[0, 0, 0], degenerate_batch=[0, 1, 0])
    assert "degenerate_batches" not in flat_families([moving])
    moving_first = _run("a", degenerate_batches=[0, 1, 1], degenerate_batch=[0, 0, 0])
    assert "degenerate_batches" not in flat_families([moving_first])
    still = _run("a", degenerate_batches=[0, 0], degenerate_batch=[0, 0])
    assert flat_families([still]) == {
        "degenerate_batches": "Batches without ranking signal (no query has both a positive "
        "and a negative): batches without ranking signal (counted by the loss) 0 at each of the "
        "2 logged steps; this batch without ranking signal (0/1) 0 at each of the 2 logged steps"
    }


def test_non_numbers_are_skipped_and_absent_families_are_not_stated():
    run = _run("a", loss=[0.5, math.nan, True, "x", 0.5])
    assert flat_families([run]) == {"loss": "Loss: loss 0.5 at each of the 2 logged steps"}
    assert flat_families([_run("a", step_time=[1.0, 1.0])]) == {}


def test_figures_go_next_to_one_run_or_into_the_common_parent(tmp_path):
    one = tmp_path / "runs" / "a"
    assert default_out([one]) == one / "figures"
    two = [tmp_path / "runs" / "a", tmp_path / "runs" / "b" / "c"]
    assert default_out(two) == (tmp_path / "runs").resolve() / "figures"


def test_runs_that_share_only_the_root_name_no_default_folder():
    # /tmp/x/run and /srv/y/run went to /figures
    with pytest.raises(GradlabError) as raised:
        default_out([Path("/tmp/x/run"), Path("/srv/y/run")])
    assert str(raised.value) == (
        "the runs ['/tmp/x/run', '/srv/y/run'] share no folder but the file system's root '/', "
        "where their figures would go by default: name the output folder (--out, or out=)")
    assert default_out([Path("/tmp/x/run"), Path("/tmp/y/run")]) == Path("/tmp/figures")


def test_runs_whose_common_figures_folder_is_not_a_plot_s_name_no_default_folder(tmp_path):
    # gradlab plot scratch/run runs/exp1 from a project's root wrote into its own figures/
    runs = [tmp_path / "scratch" / "run", tmp_path / "runs" / "exp1"]
    project = tmp_path / "figures"
    project.mkdir()
    (project / "paper_figure.png").write_bytes(b"not ours")
    with pytest.raises(GradlabError) as raised:
        default_out(runs)
    assert str(raised.value) == (
        f"the runs {[str(path) for path in runs]} would put their figures in "
        f"{str(project.resolve())!r}, their common parent's figures folder, which holds files "
        "gradlab plot did not write: name the output folder (--out, or out=)")
    from gradlab.run_dirs import FIGURE_LIST

    (project / FIGURE_LIST).write_text("[]")  # an earlier plot's folder: its own
    assert default_out(runs) == project.resolve()
    assert default_out([tmp_path / "new" / "a", tmp_path / "new" / "b"]) == (
        tmp_path / "new" / "figures").resolve()  # no folder yet: made by the plot
