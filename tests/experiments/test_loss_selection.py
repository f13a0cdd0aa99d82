"""The loss comparison's hyperparameter choice: a validation split of the training numbers that
shares nothing with the test numbers, the selection rule, and losses that do not beat the
untrained network listed apart with their measured reason."""

from __future__ import annotations

import pytest
import torch

from gradlab.errors import GradlabError
from gradlab.experiments import loss_comparison
from gradlab.experiments.statistics import mean_std
from gradlab.report.prose import loss_comparison_text


@pytest.mark.parametrize("quick", [True, False])
def test_the_validation_split_shares_no_number_and_no_image_with_the_test_split(quick):
    split = loss_comparison.study_split(quick, seed=1)
    held, fit, test = (set(split[key][1].tolist()) for key in ("validation", "fit", "test"))
    assert len(held) == loss_comparison.settings(quick)["validation_numbers"]
    assert not held & test and not held & fit and not fit & test
    # No image twice: compare the pixels of every image with every other (all are distinct
    # draws of digits, shifts and noise).
    images = torch.cat([split[key][0] for key in ("validation", "fit", "test")]).flatten(1)
    assert len(torch.unique(images, dim=0)) == len(images)


def test_a_validation_split_is_drawn_from_the_training_numbers_by_its_seed():
    labels = torch.arange(20).repeat_interleave(3)
    first = loss_comparison.validation_split(labels, 5, seed=0)
    again = loss_comparison.validation_split(labels, 5, seed=0)
    other = loss_comparison.validation_split(labels, 5, seed=1)
    assert torch.equal(first[1], again[1]) and not torch.equal(first[1], other[1])
    assert len(labels[first[1]].unique()) == 5
    assert sorted(first[0].tolist() + first[1].tolist()) == list(range(60))


def test_the_selection_rule_takes_the_best_validation_value_and_the_first_on_a_tie():
    assert loss_comparison.select_candidate([0.2, 0.5, 0.1]) == 1
    assert loss_comparison.select_candidate([0.3, 0.1, 0.3]) == 0
    assert loss_comparison.select_candidate([0.1, 0.2, 0.3]) == 2


PLANTED = {  # (validation MAP@R, test MAP@R) per candidate: the test's best is never chosen
    "FastAP": [(0.10, 0.90), (0.30, 0.20)],
    "FAPPY": [(0.25, 0.15), (0.05, 0.95)],
}


def _planted_task(quick, seed, name, index, device):
    if name is None:
        return {"before": {"MAP@R": 0.01}, "score_range": 1.5}
    validation, test = PLANTED[name][index] if name in PLANTED else (0.2, 0.2)
    validation += 0.01 * seed  # each seed's own split: the rule runs per seed
    return {"validation": validation, "metrics": {"MAP@R": test}, "step_seconds": 0.1,
            "loss_seconds": 0.01, "final_loss": 0.5, "initial_loss": 0.9,
            "initial_gradient_norm": 1.0, "early_gradient_norm": 1.0}  # fmt: skip


def test_measure_keeps_the_candidate_with_the_best_validation_value(monkeypatch):
    monkeypatch.setattr(loss_comparison, "seed_task", _planted_task)
    monkeypatch.setitem(loss_comparison.CANDIDATES, "FastAP", [{"bins": 20}, {"bins": 10}])
    results = loss_comparison.measure(quick=False, seeds=(0, 1), workers=1)
    fastap, fappy = results["losses"]["FastAP"], results["losses"]["FAPPY"]
    assert fastap["sweep"]["chosen"] == [1, 1] and fappy["sweep"]["chosen"] == [0, 0]
    assert fastap["metrics"]["MAP@R"] == [0.20, 0.20]  # the test value of the chosen one
    assert fappy["metrics"]["MAP@R"] == [0.15, 0.15]
    assert fastap["sweep"]["validation"] == [[0.10, 0.30], [0.11, 0.31]]
    assert "validation" in results["settings"]["selection_rule"]


def _run(values, gradient, losses=(0.9, 0.5)):
    return {"metrics": {"MAP@R": values}, "initial_gradient_norm": [1.0] * len(values),
            "early_gradient_norm": gradient, "initial_loss": [losses[0]] * len(values),
            "final_loss": [losses[1]] * len(values)}  # fmt: skip


def _results(**runs):
    return {
        "before": {"MAP@R": [0.010, 0.012]},
        "losses": runs,
        "seeds": [0, 1],
        "settings": {"steps": 200, "gradient_steps": 10},
        "initial_score_range": [1.7, 1.8],
    }


def test_a_loss_below_the_untrained_network_is_listed_apart_with_its_measured_reason():
    results = _results(
        good=_run([0.20, 0.22], [9.0, 9.0]),
        below=_run([0.004, 0.006], [0.0021, 0.0041], losses=(0.85, 0.98)),
        within=_run([0.009, 0.021], [5.0, 5.0]),  # mean above, but by less than the spread
    )
    summary = loss_comparison.summarize(results)
    assert summary["best"] == "good" and summary["ranked"] == ["good"]
    assert list(summary["apart"]) == ["below", "within"]
    text = loss_comparison_text(results, summary)
    ranked_part, apart_part = text.split("Listed apart")
    assert "good" in ranked_part and "below" not in ranked_part and "within" not in ranked_part
    gradient = mean_std([0.0021, 0.0041])[0]
    assert "below, 0.005 ± 0.001: " in apart_part
    assert f"first 10 steps {gradient:.3g}" in apart_part  # the measured number, quoted
    assert "training loss rose from 0.850 to 0.980" in apart_part
    gap = mean_std([0.009, 0.021])[0] - mean_std([0.010, 0.012])[0]
    assert f"gap to the untrained network {gap:+.4f}" in apart_part


def test_when_no_loss_beats_the_untrained_network_none_is_ranked():
    results = _results(below=_run([0.004, 0.006], [0.01, 0.01]))
    summary = loss_comparison.summarize(results)
    assert summary["best"] is None and summary["ranked"] == []
    assert loss_comparison_text(results, summary).startswith("No loss beats the untrained")


@pytest.mark.parametrize("batch_size", [32, 112])
def test_studies_on_other_data_start_from_each_papers_recommended_settings(batch_size):
    # The papers' numbers, not the study's table: Blackbox AP lambda = 4 on ranks divided by
    # the candidates (Rolinek et al. 2020) and margin 0.02, FastAP with 20 bins (Cakir et al.
    # 2019, as Brown et al. 2020 take them), FAPPY's Delta_min = 0.01, SmoothAP at the given tau.
    losses = loss_comparison.loss_functions(0.05, batch_size)
    assert losses["Blackbox AP"].interpolation == pytest.approx(4.0 * batch_size)
    assert losses["Blackbox AP"].margin == pytest.approx(0.02)
    assert losses["FastAP"].num_bins == 20
    assert losses["FAPPY"].delta_min == pytest.approx(0.01)
    for name, included in (("SmoothAP (query excluded)", False),
                           ("SmoothAP (query included)", True)):  # fmt: skip
        assert (losses[name].tau, losses[name].include_query) == (0.05, included)
    assert losses["Contrastive"].keywords == {"margin": 0.5}


def test_the_recommended_settings_need_a_positive_batch_size():
    with pytest.raises(GradlabError, match="batch_size must be a positive integer; got 0"):
        loss_comparison.loss_functions(0.01, 0)
