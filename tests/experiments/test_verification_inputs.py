"""The random cases the gradient checks draw: what the docstrings of
``gradlab.experiments.verification`` promise about them (float64, shapes, classes, ranges, the
seed), read from the arguments each check hands to the function it checks."""

from __future__ import annotations

import pytest
import torch

import gradlab.experiments.verification as study
from gradlab.experiments.verification import gradient_error_table

# the function each check calls once per trial (or once per trial and variant) with the drawn case
CHECKED = (
    "smooth_ap_decomposition",
    "minibatch_gradient_matrix_form",
    "relaxed_tie_aware_ap",
    "false_positive_probability",
    "fastap",
)


def _spied(monkeypatch) -> dict[str, list[tuple]]:
    """Record every call's positional tensors (detached copies) and keyword arguments."""
    calls: dict[str, list[tuple]] = {name: [] for name in CHECKED}
    for name in CHECKED:
        real = getattr(study, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            copies = tuple(a.detach().clone() if torch.is_tensor(a) else a for a in args)
            calls[_name].append((copies, kwargs))
            return _real(*args, **kwargs)

        monkeypatch.setattr(study, name, spy)
    return calls


def _cases(recorded: list[tuple]) -> list[tuple]:
    """The drawn cases among one function's calls: a finite-difference call moves one entry of
    the previous call's first argument by 1e-6, a new case moves it further."""
    cases, previous = [], None
    for args, _ in recorded:
        if previous is None or (args[0] - previous).abs().max() > 1e-5:
            cases.append(args)
        previous = args[0]
    return cases


@pytest.mark.slow
def test_every_case_is_drawn_in_float64(monkeypatch):
    calls = _spied(monkeypatch)
    gradient_error_table(seed=0, trials=1)
    for name, recorded in calls.items():
        assert recorded, name
        for args, _ in recorded:
            floats = [a for a in args if torch.is_tensor(a) and a.is_floating_point()]
            assert floats and all(a.dtype == torch.float64 for a in floats), name


def _inputs(monkeypatch, seed: int) -> dict[str, list[tuple]]:
    calls = _spied(monkeypatch)
    gradient_error_table(seed=seed, trials=1)
    return {name: [args for args, _ in recorded] for name, recorded in calls.items()}


def _equal(a: list[tuple], b: list[tuple]) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(torch.equal(u, v) if torch.is_tensor(u) else u == v
                                 for u, v in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True)
    )  # fmt: skip


@pytest.mark.slow
def test_the_seed_alone_decides_every_case(monkeypatch):
    torch.manual_seed(1)
    first = _inputs(monkeypatch, seed=0)
    torch.manual_seed(2)  # the global generator plays no part
    torch.rand(5)
    again = _inputs(monkeypatch, seed=0)
    other = _inputs(monkeypatch, seed=1)
    for name in CHECKED:
        assert _equal(first[name], again[name]), name
        assert not torch.equal(first[name][0][0], other[name][0][0]), name


@pytest.mark.slow
def test_smooth_ap_cases_keep_the_sigmoid_in_its_active_region(monkeypatch):
    calls = _spied(monkeypatch)
    study.smoothap_gradient_errors(torch.Generator().manual_seed(0), 3)
    assert len(calls["smooth_ap_decomposition"]) == 3
    for (query, vectors, positives), kwargs in calls["smooth_ap_decomposition"]:
        assert query.shape == (4, 8) and vectors.shape == (20, 8)
        assert positives.shape == (4, 20) and positives.any(dim=1).all()
        scores = query @ vectors.T
        differences = (scores[:, :, None] - scores[:, None, :]).abs()
        # where |s_ij - s_ik| < 2 tau the sigmoid's slope is at least a tenth of its peak;
        # a check run where nearly every pair is saturated compares gradients near zero
        active = (differences < 2 * kwargs["tau"]).double().mean().item()
        assert active > 0.25


@pytest.mark.slow
def test_smooth_ap_cases_make_the_first_vector_positive_for_every_query(monkeypatch):
    calls = _spied(monkeypatch)
    study.smoothap_gradient_errors(torch.Generator().manual_seed(0), 10)
    masks = torch.stack([positives for (_, _, positives), _ in calls["smooth_ap_decomposition"]])
    assert masks[:, :, 0].all()
    # the others drawn: about a quarter positives (760 draws: 0.25 +- 0.016 one sigma)
    assert 0.18 < masks[:, :, 1:].double().mean().item() < 0.32


@pytest.mark.slow
def test_tie_aware_cases_are_eight_six_bit_codes_in_three_classes(monkeypatch):
    calls = _spied(monkeypatch)
    study.tie_aware_gradient_errors(torch.Generator().manual_seed(0), 4)
    cases = [args for args, _ in calls["minibatch_gradient_matrix_form"]]
    assert len(cases) == 4 * 2 * 3  # trials x objectives x harmonic methods
    seen = set()
    for codes, labels, _, _ in cases:
        assert codes.shape == (8, 6) and labels.shape == (8,)
        assert codes.abs().max() < 1
        assert set(labels.tolist()) <= {0, 1, 2}
        seen |= set(labels.tolist())
    assert seen == {0, 1, 2}


@pytest.mark.slow
def test_relaxed_ap_cases_have_positive_counts_within_each_bin(monkeypatch):
    calls = _spied(monkeypatch)
    study.tie_aware_gradient_errors(torch.Generator().manual_seed(0), 3)
    for (positive, counts, _), _ in calls["relaxed_tie_aware_ap"]:
        assert positive.shape == counts.shape == (1, 7)
        assert (counts >= 0).all() and (counts < 3).all()
        assert (positive >= 0).all() and (positive <= counts + 1e-5).all()
    for positive, counts, _ in _cases(calls["relaxed_tie_aware_ap"]):
        # a share drawn per bin, not one share for all
        assert (positive / counts).unique().numel() == 7


@pytest.mark.slow
def test_relaxed_ap_counts_spread_over_zero_to_three_with_float64_shares(monkeypatch):
    calls = _spied(monkeypatch)
    study.tie_aware_gradient_errors(torch.Generator().manual_seed(0), 3)
    cases = _cases(calls["relaxed_tie_aware_ap"])
    assert len(cases) == 3
    counts = torch.cat([c for _, c, _ in cases], dim=1)
    shares = torch.cat([p / c for p, c, _ in cases], dim=1)
    # 21 uniform draws on [0, 3): below 1 and above 2 both reached
    assert counts.min() < 1 and counts.max() > 2
    # a float32 draw is a multiple of 2**-24; float64 draws (53 bits) fall between those steps
    steps = shares * 2**24
    assert (steps - steps.round()).abs().max() > 1e-3


@pytest.mark.slow
def test_histogram_cases_are_cosine_similarities_reaching_every_bin(monkeypatch):
    calls = _spied(monkeypatch)
    trials = 20
    study.histogram_loss_gradient_errors(torch.Generator().manual_seed(0), trials)
    recorded = calls["false_positive_probability"]
    assert len(recorded) == trials
    off_diagonal = []
    for (similarities, labels, delta), _ in recorded:
        assert similarities.shape == (7, 7)
        assert torch.equal(similarities, similarities.T)
        assert torch.equal(similarities.diagonal(), torch.ones(7, dtype=torch.float64))
        assert similarities.abs().max() <= 1
        counts = torch.bincount(labels)
        assert labels.shape == (7,) and counts.numel() == 3 and (counts >= 2).all()
        rows, cols = torch.triu_indices(7, 7, offset=1)
        off_diagonal.append(similarities[rows, cols])
        bins = torch.arange(-1, 1, delta, dtype=torch.float64)
    values = torch.cat(off_diagonal)
    reached = {int(b) for b in torch.bucketize(values, bins, right=True) - 1}
    assert reached == set(range(len(bins)))
    for (embeddings, labels), _ in calls["fastap"]:
        assert embeddings.shape == (7, 4) and torch.bincount(labels).min() >= 2


@pytest.mark.parametrize("section", [study.tie_aware_gradient_errors,
                                     study.histogram_loss_gradient_errors])  # fmt: skip
@pytest.mark.slow
def test_more_trials_keep_the_worst_error_of_every_check(section):
    one = section(torch.Generator().manual_seed(0), 1)
    two = section(torch.Generator().manual_seed(0), 2)
    assert set(one) == set(two)
    for key, error in one.items():
        assert two[key] >= error, key
