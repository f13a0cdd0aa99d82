"""FAPPY Lemma 1 measured: the support is two bins and the printed value does not match."""

import numpy as np
import pytest

import gradlab.plotting.losses as plot_module
from gradlab.experiments.fappy_lemma import lemma1_gradient_support
from gradlab.plotting.losses import plot_lemma1
from gradlab.report.prose import lemma1_verdict
from tests.helpers.figure_layout import captured_figures, layout_problems


def _assert_bin_shares(results, nonzero, positions):
    """The study's shares of non-zero derivatives per bin, against the flags counted here."""

    def share(inside):
        flags = [n for n, p in zip(nonzero, positions, strict=True) if inside(p)]
        return sum(flags) / len(flags)

    assert results["nonzero_share_in_pair_bin"] == share(lambda p: 0 <= p < 1)
    assert results["nonzero_share_in_bin_below"] == share(lambda p: -1 <= p < 0)
    assert results["nonzero_share_elsewhere"] == share(lambda p: not -1 <= p < 1)

@pytest.mark.slow
def test_lemma1_measurement(tmp_path, monkeypatch):
    results = lemma1_gradient_support(configurations=80)
    assert results["max_abs_closed_form_error"] < 1e-12
    assert results["nonzero_share_in_pair_bin"] > 0.9
    assert results["nonzero_share_in_bin_below"] > 0.9
    assert results["nonzero_share_elsewhere"] == 0.0
    assert results["sign_of_nonzero"] == "positive"
    assert results["lemma_value_matches"] is False
    assert "bin below" in lemma1_verdict(results)
    with captured_figures(monkeypatch, plot_module) as figures:
        plot_lemma1(results, tmp_path / "l.png")
    assert layout_problems(figures[0]) == []
    # The three point sets drawn are the measured, closed-form and printed values at their
    # positions (compared as sets of points: the closed form is drawn in sorted order).
    drawn = [
        sorted(map(tuple, c.get_offsets().tolist()))
        for c in figures[0].axes[0].collections
        if len(c.get_offsets())
    ]
    position = results["position"]
    expected = [
        sorted(zip(position, results[key], strict=True))
        for key in ("measured", "closed_form", "lemma_as_printed")
    ]
    assert len(drawn) == 3
    for got, want in zip(drawn, expected, strict=True):
        assert np.allclose(got, want, rtol=0, atol=0)


def _configurations(count, delta, negatives, seed):
    """The study's configurations drawn again: a symmetric similarity matrix in [-0.9, 0.9]
    with ones on its diagonal, then the swept negative s_02 uniform in [-1, 1]."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    size = negatives + 2
    for _ in range(count):
        raw = torch.rand(size, size, generator=generator, dtype=torch.float64) * 1.8 - 0.9
        matrix = ((raw + raw.T) / 2).tolist()
        for k in range(size):
            matrix[k][k] = 1.0
        target = torch.rand(1, generator=generator).item() * 2 - 1
        matrix[0][2] = matrix[2][0] = target
        yield matrix, target


def test_each_configuration_s_derivative_is_a_finite_difference_of_the_printed_probability():
    """Against FAPPY's Eq. 1-7 by loops (tests/reference): dP_01/ds_02 by central differences,
    the position (s_02 - b_t)/Delta of the pair's lower bin edge b_t, and the summaries."""
    import math

    from gradlab.functional import fappy_gradient_closed_form, fappy_lemma1_as_printed
    from tests.reference.histogram_losses_loops import fappy_pair

    delta, negatives, seed = 0.2, 3, 5
    results = lemma1_gradient_support(
        configurations=40, delta=delta, negatives=negatives, seed=seed
    )
    labels = [0, 0] + [1] * negatives
    positions, slopes = [], []
    for matrix, target in _configurations(40, delta, negatives, seed):
        pair = matrix[0][1]
        positions.append((target - (-1 + math.floor((pair + 1) / delta) * delta)) / delta)
        up = [row[:] for row in matrix]
        down = [row[:] for row in matrix]
        up[0][2] += 1e-7
        down[0][2] -= 1e-7
        slope = (fappy_pair(up, labels, 0, 1, delta) - fappy_pair(down, labels, 0, 1, delta)) / 2e-7
        slopes.append(slope)
        index = len(positions) - 1
        assert results["closed_form"][index] == fappy_gradient_closed_form(
            pair, target, delta, negatives
        )
        assert results["lemma_as_printed"][index] == fappy_lemma1_as_printed(pair, target, delta)
    assert results["position"] == pytest.approx(positions, abs=1e-12)
    assert results["measured"] == pytest.approx(slopes, abs=1e-6)
    assert (results["delta"], results["negatives"], results["configurations"]) == (0.2, 3, 40)
    errors = [abs(m - c) for m, c in zip(results["measured"], results["closed_form"], strict=True)]
    assert results["max_abs_closed_form_error"] == max(errors)
    nonzero = [abs(s) > 1e-6 for s in slopes]

    _assert_bin_shares(results, nonzero, positions)
    assert results["sign_of_nonzero"] == (
        "positive" if all(s > 0 for s, n in zip(slopes, nonzero, strict=True) if n) else "mixed"
    )
    printed_matches = all(
        abs(m - p) <= 1e-6
        for m, p in zip(results["measured"], results["lemma_as_printed"], strict=True)
    )
    assert results["lemma_value_matches"] is printed_matches


def test_a_negative_derivative_or_a_matching_lemma_is_reported(monkeypatch):
    import gradlab.experiments.fappy_lemma as study

    closed = study.fappy_gradient_closed_form
    monkeypatch.setattr(
        study, "fappy_lemma1_as_printed", lambda pair, target, delta: closed(pair, target, delta, 3)
    )
    results = lemma1_gradient_support(configurations=20, delta=0.2, negatives=3, seed=5)
    assert results["lemma_value_matches"] is True
    real = study.false_positive_probability

    def flipped(leaf, labels, delta, pairs):
        probability, rest = real(leaf, labels, delta, pairs=pairs)
        return -probability, rest

    monkeypatch.setattr(study, "false_positive_probability", flipped)
    results = lemma1_gradient_support(configurations=20, delta=0.2, negatives=3, seed=5)
    assert results["sign_of_nonzero"] == "mixed" and results["lemma_value_matches"] is False


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value")  # 5 points
def test_the_published_figure_is_drawn_from_the_defaults():
    """figures/fappy_lemma1_gradient.json (the report's figure) starts with the configurations
    that the defaults draw: Delta, |N| and the seed are the report's."""
    import json
    from pathlib import Path

    published = json.loads(
        (Path(__file__).resolve().parents[2] / "figures" / "fappy_lemma1_gradient.json").read_text()
    )
    first = lemma1_gradient_support(configurations=5)
    assert (first["delta"], first["negatives"]) == (published["delta"], published["negatives"])
    for key in ("position", "measured", "closed_form", "lemma_as_printed"):
        assert first[key] == pytest.approx(published[key][:5], rel=1e-9, abs=1e-12), key


def _scripted_draws(monkeypatch, pair_similarity, targets):
    """torch.rand scripted: every similarity matrix (float64) has all entries 0 but the pair's
    (raw draw 0.5: 0.5 * 1.8 - 0.9), and the swept negative's draws are ``targets``."""
    import torch

    raw_pair = (pair_similarity + 0.9) / 1.8
    queue = [(target + 1) / 2 for target in targets]

    def scripted(*shape, generator=None, dtype=None):
        if dtype == torch.float64:
            size = shape[0]
            matrix = torch.full((size, size), 0.5, dtype=torch.float64)
            matrix[0, 1] = matrix[1, 0] = raw_pair
            return matrix
        return torch.tensor([queue.pop(0)], dtype=torch.float32)

    monkeypatch.setattr(torch, "rand", scripted)


def test_a_target_on_a_bin_edge_is_counted_in_the_bin_it_opens(monkeypatch):
    """Bins are [b, b + Delta): with the pair at 0 (its bin [0, 0.25)), a target at 0 is in the
    pair's bin, at 0.25 it is in neither, at -0.25 it is in the bin below. The other targets
    fill each region; the shares are read from the measured values at the exact positions.
    At -0.125 the probability is stood in by one without gradient, so that the bin below
    holds a zero as well as non-zero values."""
    import gradlab.experiments.fappy_lemma as study

    delta = 0.25
    targets = [0.0, 0.25, -0.25, 0.125, 0.0625, -0.125, -0.1875, -0.375, 0.5]
    _scripted_draws(monkeypatch, 0.0, targets)
    real = study.false_positive_probability

    def flat_at_one_target(leaf, labels, delta, pairs):
        probability, rest = real(leaf, labels, delta, pairs=pairs)
        if leaf[0, 2].item() == -0.125:
            probability = probability.detach() + 0.0 * leaf.sum()
        return probability, rest

    monkeypatch.setattr(study, "false_positive_probability", flat_at_one_target)
    results = lemma1_gradient_support(configurations=len(targets), delta=delta, negatives=2)
    positions = [target / delta for target in targets]  # the pair's bin starts at 0
    assert results["position"] == positions
    nonzero = [abs(m) > 1e-12 for m in results["measured"]]
    assert not nonzero[targets.index(-0.125)] and nonzero[targets.index(-0.25)]

    _assert_bin_shares(results, nonzero, positions)


def test_a_printed_value_off_by_rounding_only_matches_and_one_off_by_more_does_not(monkeypatch):
    """The closed form agrees with autograd to 1e-12: a printed lemma within 1e-10 of it
    matches; one that claims 5e-9 where the derivative is 0 does not."""
    import gradlab.experiments.fappy_lemma as study

    closed = study.fappy_gradient_closed_form
    for offset, matches in ((1e-10, True), (5e-9, False)):
        monkeypatch.setattr(
            study,
            "fappy_lemma1_as_printed",
            lambda pair, target, delta, offset=offset: closed(pair, target, delta, 3) or offset,
        )
        results = lemma1_gradient_support(configurations=20, delta=0.2, negatives=3, seed=5)
        assert 0.0 in results["measured"]  # some targets are outside both bins
        assert results["lemma_value_matches"] is matches, offset


@pytest.mark.slow
def test_the_default_measures_the_documented_200_configurations_of_the_report_s_draws():
    import json
    from pathlib import Path

    published = json.loads(
        (Path(__file__).resolve().parents[2] / "figures" / "fappy_lemma1_gradient.json").read_text()
    )
    default = lemma1_gradient_support()  # the docstring: 200 configurations by default
    assert default["configurations"] == 200 == len(default["measured"])
    assert default["measured"] == pytest.approx(published["measured"][:200], rel=1e-9, abs=1e-12)
