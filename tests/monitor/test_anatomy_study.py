"""The anatomy comparison study (analyses/anatomy.py): reproducible, closed-form shapes hold."""

import copy
import math

import pytest

import gradlab.plotting.anatomy as plot_module
from gradlab.experiments.gradient_anatomy import measure
from gradlab.jsonio import dumps
from gradlab.plotting.anatomy import plot_anatomy_comparison
from tests.helpers.figure_layout import captured_figures, layout_problems


@pytest.fixture(scope="module")
def quick():
    return measure(quick=True)


@pytest.mark.slow
def test_a_rerun_reproduces_the_json_exactly(quick):
    assert dumps(measure(quick=True)) == dumps(quick)


def test_each_loss_has_its_closed_form_anatomy(quick):
    for checkpoint in quick["checkpoints"]:
        losses = checkpoint["losses"]
        for direction in ("i2t", "t2i"):
            vse = losses["VSE++ max-violation"][direction]
            assert set(vse["active_negatives"]) <= {0, 1}  # the hardest negative or nothing
            nt_xent = losses["NT-Xent"][direction]
            assert nt_xent["queries_without_gradient"] == 0  # softmax weights never vanish
            shares = nt_xent["mass_share_by_rank"]
            assert math.isclose(sum(shares), 1.0, rel_tol=1e-9)
        assert losses["SmoothAP"]["i2t"]["negatives_per_query"] == 45
        assert losses["SmoothAP"]["t2i"]["queries"] == 50


@pytest.mark.slow  # seconds: left out of make test-fast
def test_the_figure_draws_each_loss_and_direction_share_by_rank(quick, tmp_path, monkeypatch):
    with captured_figures(monkeypatch, plot_module) as figures:
        plot_anatomy_comparison(quick, tmp_path / "anatomy.png")
    assert layout_problems(figures[0]) == []
    panels = figures[0].axes
    checkpoints = quick["checkpoints"]
    names = list(checkpoints[0]["losses"])
    assert len(panels) == len(checkpoints) * len(names)
    for row, checkpoint in enumerate(checkpoints):
        for column, name in enumerate(names):
            axis = panels[row * len(names) + column]
            assert name in axis.get_title() and str(checkpoint["steps"]) in axis.get_title()
            expected = []
            for direction in ("i2t", "t2i"):  # solid, then dashed: the finite shares by rank
                part = checkpoint["losses"][name][direction]
                if part["largest_abs_grad"] < quick["settings"]["absolute_threshold"]:
                    continue  # rounding noise below the stated floor is not drawn
                shares = part["mass_share_by_rank"]
                points = [(rank, share) for rank, share in enumerate(shares, 1)
                          if isinstance(share, (int, float)) and math.isfinite(share)]  # fmt: skip
                if points:
                    expected.append(points)
            drawn = [list(zip(line.get_xdata(), line.get_ydata(), strict=True))
                     for line in axis.get_lines()]  # fmt: skip
            assert drawn == expected, (name, checkpoint["steps"])


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [(dict(quick=1), "quick"), (dict(seed=-1), "seed"), (dict(seed=1.5), "seed"),
     (dict(seed=2**64), "seed must be a whole number from 0 to 2")],
)
def test_bad_study_options_name_the_argument(kwargs, argument):
    from gradlab.errors import GradlabError

    with pytest.raises(GradlabError, match=argument):
        measure(**kwargs)


@pytest.mark.slow  # draws the whole figure again (seconds); the fast tier draws it once above
def test_gradients_below_the_floor_are_not_drawn_as_a_distribution(quick, tmp_path, monkeypatch):
    """A SmoothAP checkpoint whose largest |dL/dS| is 4e-14 (rounding noise) once drew how that
    noise spreads over the negatives; below the anatomy's absolute threshold it is not drawn."""
    noisy = copy.deepcopy(quick)
    record = noisy["checkpoints"][-1]["losses"]["SmoothAP"]
    floor = noisy["settings"]["absolute_threshold"]
    for direction, largest in (("i2t", 4e-14), ("t2i", 0.3)):
        record[direction]["largest_abs_grad"] = largest
        record[direction]["mass_share_by_rank"] = [0.5, 0.3, 0.2]
    with captured_figures(monkeypatch, plot_module) as figures:
        plot_anatomy_comparison(noisy, tmp_path / "anatomy.png")
    names = list(noisy["checkpoints"][0]["losses"])
    axis = figures[0].axes[(len(noisy["checkpoints"]) - 1) * len(names) + names.index("SmoothAP")]
    assert [line.get_label() for line in axis.get_lines()] == ["caption -> image"]
    summary = " ".join(text.get_text() for text in axis.texts)
    assert "4e-14 < floor: not drawn" in summary
    assert f"below {floor:g} not drawn" in figures[0].get_suptitle()
    assert layout_problems(figures[0]) == []
