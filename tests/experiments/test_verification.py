"""The report's gradient table: every analytic gradient agrees with its independent check, and
each check notices a wrong gradient planted in the function it checks, under its own row."""

from __future__ import annotations

import pytest
import torch

import gradlab.experiments.verification as study
from gradlab.experiments.verification import gradient_error_table

SECTIONS = {
    "SmoothAP (Brown et al., 2020; Bleeker & de Rijke, 2022)": {
        "decomposition_vs_autograd",
        "exact_vs_autograd",
        "exact_vs_fd",
    },
    "tie-aware relaxations (He et al., 2018)": {
        *(f"eq37_{o}_{m}_vs_autograd" for o in ("ap", "dcg") for m in ("log", "midpoint", "exact")),
        *(f"relaxed_ap_{m}_vs_fd" for m in ("log", "midpoint", "exact")),
    },
    "FAPPY (Zhong, Li & Li, Lemma 1 corrected) and FastAP (Cakir et al., 2019)": {
        "fappy_closed_form_vs_autograd",
        "fastap_vs_fd",
    },
}

SMOOTH_AP = study.smoothap_gradient_errors
TIE_AWARE = study.tie_aware_gradient_errors
HISTOGRAM = study.histogram_loss_gradient_errors

# a wrong gradient is off by 0.01 or more; rounding and central differences (step 1e-6 in
# float64) stay below 1e-6
WRONG = 1e-3


def _flat(table: dict) -> dict[str, float]:
    return {key: value for section in table.values() for key, value in section.items()}


def _gradient_only(function, offset=0.01, when=lambda *a, **k: True):
    """``function`` with the same values but ``offset`` added to the gradient of each input
    tensor that requires it (the first argument), where ``when(*args, **kwargs)`` holds."""

    def planted(*args, **kwargs):
        value = function(*args, **kwargs)
        leaf = args[0]
        if not (when(*args, **kwargs) and leaf.requires_grad):
            return value
        extra = offset * leaf.sum()
        return value + (extra - extra.detach())

    return planted


@pytest.fixture(scope="module")
def table():
    return gradient_error_table(seed=0, trials=1)


@pytest.mark.slow
def test_every_gradient_agrees_with_its_check(table):
    assert {name: set(rows) for name, rows in table.items()} == SECTIONS
    errors = _flat(table)
    assert max(errors.values()) < 1e-6
    for key, error in errors.items():
        if key.endswith("_vs_fd"):  # a central difference is never exact
            assert 0 < error, key


@pytest.mark.slow
def test_more_trials_take_the_worst_and_another_seed_draws_other_cases(table):
    # one generator for the whole table: only the first section sees the same first trial
    first = next(iter(SECTIONS))
    more = SMOOTH_AP(torch.Generator().manual_seed(0), 2)
    generator = torch.Generator().manual_seed(0)
    one, two = SMOOTH_AP(generator, 1), SMOOTH_AP(generator, 1)  # trial 1, then trial 2
    assert one == table[first]
    # the worst of the two trials, key by key (whichever trial it comes from on this machine)
    assert more == {key: max(one[key], two[key]) for key in one}
    assert two != one  # the second trial draws another case
    assert gradient_error_table(trials=1) == table  # the report's default seed is 0
    other = _flat(gradient_error_table(seed=1, trials=1))
    assert all(other[key] != error for key, error in _flat(table).items() if key.endswith("fd"))


def _wrong_rows(monkeypatch, name, replacement, section) -> set[str]:
    """The rows of one section (its function, one trial) that a planted error makes wrong."""
    monkeypatch.setattr(study, name, replacement)
    errors = section(torch.Generator().manual_seed(0), 1)
    return {key for key, error in errors.items() if error > WRONG}


@pytest.mark.slow
def test_a_wrong_smooth_ap_gradient_shows_in_its_rows(monkeypatch):
    decomposition = study.smooth_ap_decomposition

    def scaled(*args, **kwargs):
        parts = decomposition(*args, **kwargs)
        return parts._replace(grad=parts.grad * 1.5)

    assert _wrong_rows(monkeypatch, "smooth_ap_decomposition", scaled, SMOOTH_AP) == {
        "decomposition_vs_autograd"
    }
    monkeypatch.setattr(study, "smooth_ap_decomposition", decomposition)
    exact = _gradient_only(study.smooth_ap, when=lambda *a, **k: "backward" not in k)
    assert _wrong_rows(monkeypatch, "smooth_ap", exact, SMOOTH_AP) == {
        "decomposition_vs_autograd",
        "exact_vs_autograd",
        "exact_vs_fd",
    }


@pytest.mark.slow
def test_a_wrong_tie_aware_gradient_shows_in_its_own_row(monkeypatch):
    matrix_form = study.minibatch_gradient_matrix_form

    def wrong_dcg_midpoint(codes, labels, objective, method):
        got = matrix_form(codes, labels, objective, method)
        return got * 1.5 if (objective, method) == ("dcg", "midpoint") else got

    assert _wrong_rows(
        monkeypatch, "minibatch_gradient_matrix_form", wrong_dcg_midpoint, TIE_AWARE
    ) == {"eq37_dcg_midpoint_vs_autograd"}
    monkeypatch.setattr(study, "minibatch_gradient_matrix_form", matrix_form)
    real_terms = study.minibatch_objective_terms

    def planted_ap_terms(codes, labels, objective, method):
        distances, values = real_terms(codes, labels, objective, method)
        if objective == "ap" and codes.requires_grad:
            extra = 0.01 * codes.sum()
            values = values + (extra - extra.detach())
        return distances, values

    assert _wrong_rows(monkeypatch, "minibatch_objective_terms", planted_ap_terms, TIE_AWARE) == {
        f"eq37_ap_{m}_vs_autograd" for m in ("log", "midpoint", "exact")
    }
    monkeypatch.setattr(study, "minibatch_objective_terms", real_terms)
    relaxed = _gradient_only(
        study.relaxed_tie_aware_ap, when=lambda positive, counts, method: method == "log"
    )
    assert _wrong_rows(monkeypatch, "relaxed_tie_aware_ap", relaxed, TIE_AWARE) == {
        "relaxed_ap_log_vs_fd"
    }


def test_a_wrong_histogram_loss_gradient_shows_in_its_own_row(monkeypatch):
    closed = study.fappy_gradient_closed_form
    assert _wrong_rows(
        monkeypatch, "fappy_gradient_closed_form", lambda *a: closed(*a) * 1.5 + 0.01, HISTOGRAM
    ) == {"fappy_closed_form_vs_autograd"}
    monkeypatch.setattr(study, "fappy_gradient_closed_form", closed)
    probability = study.false_positive_probability

    def planted(leaf, labels, delta):
        values, pairs = probability(leaf, labels, delta)
        extra = 0.01 * leaf.sum()
        return values + (extra - extra.detach()), pairs

    assert _wrong_rows(monkeypatch, "false_positive_probability", planted, HISTOGRAM) == {
        "fappy_closed_form_vs_autograd"
    }
    monkeypatch.setattr(study, "false_positive_probability", probability)
    assert _wrong_rows(monkeypatch, "fastap", _gradient_only(study.fastap), HISTOGRAM) == {
        "fastap_vs_fd"
    }
