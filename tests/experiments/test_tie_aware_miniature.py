"""The tie-aware analyses (He et al. 2018) on small grids and miniature codes, against exact
harmonic sums (fractions) and tie-aware metrics averaged over every tie-consistent order."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from gradlab.errors import GradlabError
from gradlab.experiments.tie_aware import harmonic_error_surface, relaxation_gap_against_scale
from gradlab.functional import minibatch_objective_terms
from tests.reference.tie_aware_loops import average_precision, dcg


def _harmonic_gap(a: int, n: int) -> float:
    """H(a + n) - H(a), exactly."""
    return float(sum(Fraction(1, k) for k in range(a + 1, a + n + 1)))


def test_the_error_surface_is_ln_and_midpoint_minus_the_harmonic_sum_on_an_integer_grid():
    result = harmonic_error_surface(max_before=9, max_in_bin=6)
    assert result["before"] == [float(a) for a in range(1, 10)]
    assert result["in_bin"] == [float(n) for n in range(1, 7)]
    ratios = []
    for i, a in enumerate(range(1, 10)):
        for j, n in enumerate(range(1, 7)):
            truth = _harmonic_gap(a, n)
            log = math.log((a + n) / a) - truth
            midpoint = math.log((a + n + 0.5) / (a + 0.5)) - truth
            bound = n / (2 * a**2)  # He et al. (2018, suppl.), Eq. 21
            asymptotic = n / (2 * a * (a + n)) - (1 / a**2 - 1 / (a + n) ** 2) / 12
            assert result["surfaces"]["log"]["error"][i][j] == pytest.approx(log, abs=1e-14)
            assert result["surfaces"]["midpoint"]["error"][i][j] == pytest.approx(
                midpoint, abs=1e-14
            )
            assert result["paper_bound"][i][j] == pytest.approx(bound, rel=1e-14)
            assert result["asymptotic"][i][j] == pytest.approx(asymptotic, rel=1e-12, abs=1e-15)
            ratios.append(log / bound)
    assert result["largest_error_over_bound"] == pytest.approx(max(ratios), rel=1e-12)
    assert result["bound_holds"] is (max(ratios) <= 1)
    assert set(result["surfaces"]) == {"log", "midpoint"}


def test_the_report_s_surface_spans_1_to_512_on_at_most_48_points_a_side():
    result = harmonic_error_surface()
    for key in ("before", "in_bin"):
        values = result[key]
        assert values[0] == 1 and values[-1] == 512 and len(values) <= 48
        assert values == sorted(set(values)) and all(v == round(v) for v in values)
        assert len(values) > 24  # geometric: dense at the small end, every integer to 8
        assert values[:8] == list(range(1, 9))
    assert np.shape(result["surfaces"]["log"]["error"]) == (len(result["before"]),) * 2


def _codes(seed: int, items: int, classes: int, bit_counts):
    """The study's codes drawn again: per code length, class centres then noise of scale 1.2."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(items) % classes
    for bits in bit_counts:
        centres = torch.randn(classes, bits, generator=generator, dtype=torch.float64)
        noise = torch.randn(items, bits, generator=generator, dtype=torch.float64)
        yield bits, centres[labels] + 1.2 * noise, labels


def _expected_over_ties(metric, distances, relevant):
    """The metric averaged over every order that lists the candidates by distance."""
    levels = sorted(set(distances))
    groups = [[c for c, d in enumerate(distances) if d == level] for level in levels]
    values = [
        metric([c for part in parts for c in part], relevant)
        for parts in itertools.product(*(itertools.permutations(g) for g in groups))
    ]
    return sum(values) / len(values)


def _exact(raw, labels):
    signs = [[1 if x > 0 else -1 for x in row] for row in raw.tolist()]
    aps, dcgs = [], []
    for q, code in enumerate(signs):
        others = [c for c in range(len(signs)) if c != q]
        distances = [sum(a != b for a, b in zip(code, signs[c], strict=True)) for c in others]
        relevant = [bool(labels[c] == labels[q]) for c in others]
        if any(relevant):
            aps.append(_expected_over_ties(average_precision, distances, relevant))
        dcgs.append(_expected_over_ties(dcg, distances, [float(r) for r in relevant]))
    return {"ap": sum(aps) / len(aps), "dcg": sum(dcgs) / len(dcgs)}


@pytest.mark.slow
def test_the_gap_is_relaxed_minus_exact_on_the_seed_s_codes_and_settles_where_it_stays_small():
    result = relaxation_gap_against_scale(quick=True, seed=3, items=8, classes=2)
    scales = result["scales"]
    assert scales == pytest.approx(list(np.geomspace(0.5, 1e5, len(scales))), rel=1e-12)
    assert len(scales) >= 10 and result["bits"] == [12, 24]
    assert (result["items"], result["classes"], result["tolerance"]) == (8, 2, 1e-3)
    runs = iter(result["runs"])
    for bits, raw, labels in _codes(3, 8, 2, result["bits"]):
        exact = _exact(raw, labels)
        for objective in ("ap", "dcg"):
            for method in ("log", "midpoint", "exact"):
                run = next(runs)
                assert (run["bits"], run["objective"], run["method"]) == (bits, objective, method)
                assert run["exact"] == pytest.approx(exact[objective], abs=1e-12)
                for k in (0, len(scales) // 2, len(scales) - 1):
                    _, terms = minibatch_objective_terms(
                        torch.tanh(scales[k] * raw), labels, objective, method
                    )
                    gap = abs(terms.nanmean().item() - exact[objective])
                    assert run["gaps"][k] == pytest.approx(gap, abs=1e-12)
                assert run["gap_at_largest_scale"] == run["gaps"][-1]
                stays = [
                    k
                    for k in range(len(scales))
                    if all(g <= result["tolerance"] for g in run["gaps"][k:])
                ]
                assert run["settles_at"] == (scales[stays[0]] if stays else None)
    assert next(runs, None) is None
    # saturated codes are binary: the exact stand-in settles, the logarithm never does
    settled = {run["method"]: run["settles_at"] is not None for run in result["runs"]}
    assert settled == {"log": False, "midpoint": False, "exact": True}


@pytest.mark.slow
def test_a_gap_exactly_at_the_tolerance_counts_as_settled(monkeypatch):
    import gradlab.experiments.tie_aware as study

    first = relaxation_gap_against_scale(quick=True, seed=3, items=8, classes=2)["runs"][0]
    monkeypatch.setattr(study, "TOLERANCE", first["gaps"][-1])
    again = relaxation_gap_against_scale(quick=True, seed=3, items=8, classes=2)
    scales, tolerance = again["scales"], first["gaps"][-1]
    stays = [k for k in range(len(scales)) if all(g <= tolerance for g in first["gaps"][k:])]
    assert again["runs"][0]["settles_at"] == scales[stays[0]]  # the last scale at least
    assert again["tolerance"] == tolerance


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"items": 0}, "items"),
        ({"classes": 1.5}, "classes"),
        ({"items": 3, "classes": 4}, "classes"),
    ],
)
def test_miniature_sizes_are_checked_before_any_work(options, argument):
    with pytest.raises(GradlabError, match=f"^{argument} must"):
        relaxation_gap_against_scale(quick=True, **options)


class _StopError(Exception):
    pass


def test_the_report_s_run_is_64_codes_of_4_classes_from_seed_0_at_four_code_lengths(monkeypatch):
    """The report calls the study with its defaults: 12, 24, 32 and 48 bits (12 and 24 when
    quick), 64 codes of 4 classes drawn from seed 0. The progress line names the study; the
    first code length's sign codes are caught where the exact metrics start, then it stops."""
    import gradlab.experiments.tie_aware as study

    seen = {}

    def progress(items, desc):
        seen.setdefault("progress", []).append((list(items), desc))
        return iter(items)

    def distances(codes):
        seen["codes"] = codes
        raise _StopError

    monkeypatch.setattr(study, "progress", progress)
    monkeypatch.setattr(study, "relaxed_hamming_distances", distances)
    with pytest.raises(_StopError):
        relaxation_gap_against_scale()
    ((bits, desc),) = seen["progress"]
    assert bits == [12, 24, 32, 48]
    assert desc == "tie-aware: relaxed vs exact AP/DCG per code length"  # as the user reads it
    _, raw, _ = next(_codes(0, 64, 4, [12]))
    assert torch.equal(seen["codes"], torch.sign(raw))
    monkeypatch.setattr(study, "relaxed_hamming_distances", lambda codes: 1 / 0)
    monkeypatch.setattr(study, "progress", lambda items, desc: iter(()))  # no code length run
    full = relaxation_gap_against_scale()
    quick = relaxation_gap_against_scale(quick=True, items=3, classes=3)  # one code per class
    assert (full["items"], full["classes"], full["runs"]) == (64, 4, [])
    assert (full["bits"], quick["bits"]) == ([12, 24, 32, 48], [12, 24])
    for result in (full, quick):
        assert result["scales"] == pytest.approx(np.geomspace(0.5, 1e5, len(result["scales"])))
    assert len(quick["scales"]) < 20 < len(full["scales"])
