"""Operating region: closed-form width, sorted P, Gaussian expectation, gradient counts."""

import inspect
import math
import re
import warnings

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import brentq

from gradlab import GradlabError
from gradlab.functional import (
    expected_operating_region_proportion,
    gradient_counts,
    operating_region_is_empty,
    operating_region_proportion,
    operating_region_width,
)
from gradlab.functional.operating_region import PAIR_SETS, operating_region_widths
from tests.helpers.default_device import assert_unchanged_under_another_default_device
from tests.reference import operating_region_loops as loops
from tests.reference.smooth_ap_loops import slope


@given(tau=st.floats(1e-4, 10.0), eps=st.floats(1e-4, 10.0))
def test_width_is_the_root_of_slope_minus_threshold(tau, eps):
    width = operating_region_width(tau, eps)
    if eps * tau >= 0.25:
        assert width == 0.0 and operating_region_is_empty(tau, eps)
        return
    root = brentq(lambda d: slope(d, tau) - eps, 0.0, 200.0 * tau, xtol=1e-15, rtol=1e-14)
    assert width == pytest.approx(root, rel=1e-9)
    assert slope(width * 0.999, tau) > eps > slope(width * 1.001, tau)


def test_seed_setting_width():
    # tau = 0.01, eps = 0.005: w = 2 tau artanh(sqrt(1 - 2e-4)), evaluated independently.
    assert operating_region_width() == pytest.approx(0.02 * math.atanh(math.sqrt(1 - 2e-4)))


def _given(pairs: str, positives: torch.Tensor) -> torch.Tensor | None:
    """The positives to pass with ``pairs``: none with ``"all"``, which refuses them."""
    return None if pairs == "all" else positives


def dense_count_proportion(scores: torch.Tensor, tau: float, eps: float) -> torch.Tensor:
    """The O(C^2) path: the full difference matrix per query, slope compared with eps."""
    differences = scores.unsqueeze(2) - scores.unsqueeze(1)
    z = differences / tau
    slopes = torch.sigmoid(z) * torch.sigmoid(-z) / tau
    return (slopes > eps).double().mean(dim=(1, 2))


@given(
    seed=st.integers(0, 2**31 - 1),
    size=st.integers(1, 15),
    spread=st.sampled_from([0.01, 0.05, 0.2]),
    include_diagonal=st.booleans(),
    pairs=st.sampled_from(["all", "positive-rows", "positive-negative"]),
)
def test_proportion_matches_brute_force_count(seed, size, spread, include_diagonal, pairs):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(size, generator=generator, dtype=torch.float64) * spread
    positives = torch.rand(size, generator=generator) < 0.4
    got = operating_region_proportion(
        scores, 0.01, 0.005, include_diagonal, pairs=pairs, positives=_given(pairs, positives)
    )
    expected = loops.proportion(
        scores.tolist(), 0.01, 0.005, include_diagonal, pairs, positives.tolist()
    )
    if math.isnan(expected):
        assert math.isnan(got.item())
    else:
        assert got.item() == pytest.approx(expected, abs=1e-12)


def test_sorted_path_equals_dense_path_on_batches():
    scores = torch.randn(8, 300, dtype=torch.float64) * 0.1
    torch.testing.assert_close(
        operating_region_proportion(scores), dense_count_proportion(scores, 0.01, 0.005)
    )


def test_diagonal_alone_contributes_one_over_c():
    far_apart = torch.arange(10, dtype=torch.float64)  # every off-diagonal |D| >= 1 > w
    assert operating_region_proportion(far_apart).item() == pytest.approx(0.1)
    assert operating_region_proportion(far_apart, include_diagonal=False).item() == 0.0


@pytest.mark.parametrize("pairs", ["all", "positive-rows", "positive-negative"])
@pytest.mark.parametrize("include_diagonal", [True, False])
def test_empty_region_gives_zero_proportion_and_no_gradient_counts(pairs, include_diagonal):
    scores = torch.tensor([[0.0, 0.0, 0.1, 0.3]], dtype=torch.float64)
    positives = torch.tensor([[True, False, True, False]])
    tau, eps = 100.0, 0.005  # eps * tau = 0.5 >= 1/4
    proportion = operating_region_proportion(
        scores, tau, eps, include_diagonal, pairs=pairs, positives=_given(pairs, positives)
    )
    assert proportion.tolist() == [0.0]
    assert gradient_counts(scores, positives, tau, eps).per_query.tolist() == [0]


@pytest.mark.parametrize("spread", [0.02, 0.1, 0.5])
@pytest.mark.parametrize("include_diagonal", [True, False])
def test_gaussian_expectation_matches_simulation(spread, include_diagonal):
    rng = np.random.default_rng(7)
    candidates = 200
    scores = torch.from_numpy(rng.normal(0.0, spread, size=(400, candidates)))
    measured = operating_region_proportion(scores, include_diagonal=include_diagonal).mean().item()
    expected = expected_operating_region_proportion(
        spread, num_candidates=candidates, include_diagonal=include_diagonal
    )
    # 400 queries x ~40k pairs each: the standard error of the mean is far below 0.005.
    assert measured == pytest.approx(expected, abs=0.005)


@given(
    seed=st.integers(0, 2**31 - 1),
    size=st.integers(1, 12),
    weighted=st.booleans(),
    masked=st.booleans(),
    threshold=st.sampled_from([0.005, 0.05, 1.0]),
)
@pytest.mark.slow
def test_gradient_counts_match_brute_force(seed, size, weighted, masked, threshold):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(3, size, generator=generator, dtype=torch.float64) * 0.03
    positives = torch.rand(3, size, generator=generator) < 0.4
    candidates = torch.rand(3, size, generator=generator) < 0.8 if masked else None
    counts = gradient_counts(
        scores, positives, 0.01, threshold, weighted=weighted, candidate_mask=candidates
    )
    for q in range(3):
        expected = loops.gradient_count(
            scores[q].tolist(),
            positives[q].tolist(),
            0.01,
            threshold,
            weighted,
            None if candidates is None else candidates[q].tolist(),
        )
        assert counts.per_query[q].item() == expected
    kept = positives if candidates is None else positives & candidates
    has_positive = kept.any(dim=1)
    assert counts.queries_with_positive == int(has_positive.sum())
    assert counts.queries_without_gradient == int((has_positive & (counts.per_query == 0)).sum())


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: operating_region_width(tau=0.0), "tau must be a positive finite number"),
        (lambda: operating_region_width(tau=-1.0), "tau must be a positive finite number"),
        (lambda: operating_region_width(eps=0.0), "eps must be a positive finite number"),
        (lambda: operating_region_width(eps=float("nan")), "eps must be a positive finite"),
        (
            lambda: operating_region_proportion(torch.tensor([0.0, math.nan])),
            "scores must be finite",
        ),
        (
            lambda: operating_region_proportion(torch.zeros(3, 0)),
            "scores must hold at least one candidate",
        ),
        (lambda: operating_region_proportion(torch.zeros(2, 2, 2)), "scores must be 1-D or 2-D"),
        (lambda: operating_region_proportion(torch.zeros(3), pairs="rows"), "pairs must be one of"),
        (
            lambda: operating_region_proportion(torch.zeros(3), pairs="positive-rows"),
            "positives is required",
        ),
        (
            lambda: operating_region_proportion(
                torch.zeros(3), pairs="positive-rows", positives=torch.ones(4, dtype=torch.bool)
            ),
            r"positives must have shape \(3,\) \(one flag per candidate\); got \(4,\)$",
        ),
        (  # the shapes passed, not the [1, C] and [1, C'] made of them inside
            lambda: operating_region_proportion(
                torch.zeros(2, 3), pairs="positive-rows", positives=torch.ones(2, 4) > 0
            ),
            r"positives must have shape \(2, 3\) \(one flag per score\); got \(2, 4\)$",
        ),
        (  # was accepted with pairs="all" and ignored: Eq. 1's P over every entry
            lambda: operating_region_proportion(torch.zeros(3), positives=torch.ones(3) > 0),
            r"positives applies only with pairs='positive-rows' or 'positive-negative'; got "
            r"positives with pairs='all', which counts every entry: pass pairs too, or leave "
            r"positives out$",
        ),
        (
            lambda: operating_region_proportion(torch.zeros(3), include_diagonal=1),
            "include_diagonal must be True or False",
        ),
        (lambda: expected_operating_region_proportion(-0.1),
         "spread must be a non-negative finite"),
        (
            lambda: expected_operating_region_proportion(0.1, num_candidates=0),
            "num_candidates must be a positive integer",
        ),
        (
            lambda: gradient_counts(torch.zeros(2, 3), torch.ones(2, 3)),
            "positives must be a bool tensor",
        ),
        (
            lambda: gradient_counts(torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool), -1.0),
            "tau must be a positive finite number",
        ),
        (
            lambda: gradient_counts(
                torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool), eps=0.0
            ),
            "eps must be a positive finite number",
        ),
        (
            lambda: gradient_counts(
                torch.full((2, 3), math.inf), torch.ones(2, 3, dtype=torch.bool)
            ),
            "scores must be finite",
        ),
    ],
)
def test_error_table(call, message):
    with pytest.raises(GradlabError, match="^" + message):  # each message starts with its name
        call()


def test_gradient_counts_for_both_cross_modal_directions():
    # Seed 001's setting: an image has 5 positive captions, a caption has 1 positive image.
    generator = torch.Generator().manual_seed(3)
    images = torch.nn.functional.normalize(torch.randn(4, 8, generator=generator), dim=1)
    captions = torch.nn.functional.normalize(torch.randn(20, 8, generator=generator), dim=1)
    image_of_caption = torch.arange(4).repeat_interleave(5)
    image_to_caption = image_of_caption.unsqueeze(0) == torch.arange(4).unsqueeze(1)
    forward = gradient_counts(images @ captions.T, image_to_caption, 0.01)
    backward = gradient_counts(captions @ images.T, image_to_caption.T.contiguous(), 0.01)
    for q in range(4):
        expected = loops.gradient_count(
            (images @ captions.T)[q].tolist(), image_to_caption[q].tolist(), 0.01, 0.005, False
        )
        assert forward.per_query[q].item() == expected
    assert forward.queries_with_positive == 4 and backward.queries_with_positive == 20
    # A caption query has one positive: at most C - 1 = 3 entries can carry gradient.
    assert int(backward.per_query.max()) <= 3


@pytest.mark.parametrize("pairs", ["all", "positive-rows", "positive-negative"])
def test_one_dimensional_scores_are_one_query_with_a_0d_result(pairs):
    """Documented: ``[C]`` is one query (not C queries of one candidate); the result is 0-d and
    equals the ``[1, C]`` batch's entry. Checked against the O(C^2) dense count for "all"."""
    scores = torch.tensor([0.0, 0.004, 0.5, 0.503, 0.9], dtype=torch.float64)
    positives = torch.tensor([True, False, True, False, False])
    kwargs = {} if pairs == "all" else {"positives": positives}
    one = operating_region_proportion(scores, pairs=pairs, **kwargs)
    batch = operating_region_proportion(
        scores[None], pairs=pairs, **({} if pairs == "all" else {"positives": positives[None]})
    )
    assert one.shape == ()
    assert batch.shape == (1,)
    assert one.item() == batch.item()
    if pairs == "all":
        assert one.item() == pytest.approx(dense_count_proportion(scores[None], 0.01, 0.005).item())


def _reference_width(tau, eps):
    """Half-width by bracketing the loop slope's root (0 when the peak slope is not above)."""
    if slope(0.0, tau) <= eps:
        return 0.0
    return brentq(lambda d: slope(d, tau) - eps, 0.0, 200.0 * tau, xtol=1e-15, rtol=1e-14)


@pytest.mark.parametrize("spread", [0.02, 0.1, 0.5])
@pytest.mark.parametrize(("tau", "eps"), [(0.01, 0.005), (0.05, 0.5), (0.1, 2.6)])
@pytest.mark.parametrize("num_candidates", [None, 1, 2, 7, 200])
@pytest.mark.parametrize("include_diagonal", [True, False])
def test_gaussian_expectation_is_the_erf_formula(
    spread, tau, eps, num_candidates, include_diagonal
):
    # D_ij ~ N(0, 2 spread^2) off the diagonal: Pr(|D| < w) = erf(w / (2 spread)); the diagonal
    # (D = 0, inside any non-empty region) adds 1/C of the entries when counted.
    width = _reference_width(tau, eps)
    off_diagonal = float(mpmath.erf(width / (2 * spread)))
    if num_candidates == 1 and not include_diagonal:
        expected = math.nan  # no pair j != i to count
    elif num_candidates is None or not include_diagonal:
        expected = off_diagonal
    else:
        inside = 1.0 if width > 0 else 0.0
        expected = inside / num_candidates + (1 - 1 / num_candidates) * off_diagonal
    got = expected_operating_region_proportion(
        spread, tau, eps, num_candidates=num_candidates, include_diagonal=include_diagonal
    )
    assert got == pytest.approx(expected, abs=1e-12, nan_ok=True)


def test_gaussian_expectation_defaults_are_the_seeds_and_the_large_batch_limit():
    width = _reference_width(0.01, 0.005)
    expected = float(mpmath.erf(width / (2 * 0.1)))
    assert expected_operating_region_proportion(0.1) == pytest.approx(expected, abs=1e-12)
    with_diagonal = expected_operating_region_proportion(0.1, num_candidates=4)
    assert with_diagonal == pytest.approx(0.25 + 0.75 * expected, abs=1e-12)


@pytest.mark.parametrize("bad", [0, -3, 2.0, True, "4"])
def test_gaussian_expectation_refuses_a_bad_candidate_count(bad):
    message = rf"^num_candidates must be a positive integer; got {re.escape(repr(bad))}$"
    with pytest.raises(GradlabError, match="^" + message):  # each message starts with its name
        expected_operating_region_proportion(0.1, num_candidates=bad)


def test_widths_of_a_threshold_tensor_are_the_float64_widths():
    # The weighted counts' per-row widths: float32 thresholds are widened to float64 first;
    # an empty region (eps * tau >= 1/4) has width 0, never a negative one.
    tau = 0.05
    thresholds = torch.tensor([0.01, 0.3, 2.0, 4.9, 5.0, 5.1, 10.0, 24.0], dtype=torch.float32)
    widths = operating_region_widths(tau, thresholds)
    assert widths.dtype == torch.float64
    for width, eps in zip(widths.tolist(), thresholds.double().tolist(), strict=True):
        assert width == pytest.approx(_reference_width(tau, eps), rel=1e-12, abs=0.0)


GOOD_SCORES = torch.zeros(2, 3)
GOOD_MASK = torch.ones(2, 3, dtype=torch.bool)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scores": torch.zeros(2, 3, dtype=torch.long)}, "scores must have a floating dtype"),
        (
            {"positives": torch.ones(2, 4, dtype=torch.bool)},
            r"positives must have shape \(2, 3\) \(one flag per score\); got \(2, 4\)",
        ),
        ({"positives": GOOD_MASK.to("meta")}, "tensors must be on one device; got scores on cpu, "
                                              "positives on meta"),
        ({"weighted": 1}, "weighted must be True or False; got 1"),
        ({"candidate_mask": torch.ones(2, 3)}, "candidate_mask must be a bool tensor"),
        ({"candidate_mask": torch.ones(3, dtype=torch.bool)}, "candidate_mask must be 2-D"),
        (
            {"candidate_mask": torch.ones(2, 4, dtype=torch.bool)},
            r"candidate_mask must have shape \(2, 3\) \(one flag per score\); got \(2, 4\)",
        ),
        ({"candidate_mask": GOOD_MASK.to("meta")},
         "tensors must be on one device; got scores on cpu, candidate_mask on meta$"),
    ],
)  # fmt: skip
def test_gradient_counts_messages_name_the_argument(kwargs, message):
    arguments = {"scores": GOOD_SCORES, "positives": GOOD_MASK, **kwargs}
    with pytest.raises(GradlabError, match=rf"^{message}"):
        gradient_counts(**arguments)


def _around_the_edges(anchor, width):
    """float32 scores: the anchor, then 3 float32 steps either side of anchor -/+ width."""
    values = [np.float32(anchor)]
    for edge in (anchor - width, anchor + width):
        centre = np.float32(edge)
        for steps in range(-3, 4):
            value = centre
            direction = np.float32(np.inf if steps > 0 else -np.inf)
            for _ in range(abs(steps)):
                value = np.nextafter(value, direction)
            values.append(value)
    return torch.tensor([values], dtype=torch.float32)


@pytest.mark.parametrize("anchor", [0.0, 0.1, 0.3, -0.2])
def test_float32_scores_are_compared_with_the_window_in_float64(anchor):
    # Scores within float32 steps of the window's edges: counted as the float64 loops count
    # the same values (a float32 window edge moves some of them across).
    scores = _around_the_edges(anchor, operating_region_width(0.01, 0.005))
    positives = torch.zeros(scores.shape, dtype=torch.bool)
    positives[0, 0] = True
    values = [float(x) for x in scores[0].tolist()]
    expected = loops.gradient_count(values, positives[0].tolist(), 0.01, 0.005, False)
    assert gradient_counts(scores, positives).per_query.item() == expected
    for pairs in ("all", "positive-rows"):
        proportion = operating_region_proportion(scores, pairs=pairs,
                                                 positives=_given(pairs, positives))
        reference = loops.proportion(values, 0.01, 0.005, True, pairs, positives[0].tolist())
        assert proportion.item() == pytest.approx(reference, abs=1e-15)


@pytest.mark.parametrize("weighted", [False, True])
def test_counts_stay_on_the_input_device_whatever_the_default_device(weighted):
    generator = torch.Generator().manual_seed(8)
    scores = torch.randn(4, 9, generator=generator, dtype=torch.float64) * 0.05
    positives = torch.rand(4, 9, generator=generator) < 0.4
    candidates = torch.rand(4, 9, generator=generator) < 0.8
    assert_unchanged_under_another_default_device(
        lambda: (gradient_counts(scores, positives, weighted=weighted, candidate_mask=candidates),
                 [operating_region_proportion(scores, pairs=pairs,
                                              positives=_given(pairs, positives))
                  for pairs in PAIR_SETS]),
        scores.device,
    )  # fmt: skip


@pytest.mark.parametrize("weighted", [False, True])
def test_gradient_counts_of_no_queries_are_empty(weighted):
    counts = gradient_counts(
        torch.zeros(0, 3), torch.zeros(0, 3, dtype=torch.bool), weighted=weighted
    )
    assert counts.per_query.shape == (0,) and counts[1:] == (0, 0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tau": 0.0}, "tau must be a positive finite number"),
        ({"eps": -1.0}, "eps must be a positive finite number"),
        ({"scores": torch.zeros(2, 3, dtype=torch.long)}, "scores must have a floating dtype"),
        ({"scores": torch.zeros(2, 3, 1)}, "scores must be 1-D or 2-D"),
        ({"scores": torch.zeros(2, 0)}, "scores must hold at least one candidate per query; "
                                        "got 0$"),
        ({"positives": torch.ones(2, 3)}, "positives must be a bool tensor"),
        ({"positives": torch.ones(2, 2, 3, dtype=torch.bool)}, "positives must be 1-D or 2-D"),
        (
            {"positives": torch.ones(2, 4, dtype=torch.bool)},
            r"positives must have shape \(2, 3\) \(one flag per score\); got \(2, 4\)$",
        ),
        ({"positives": GOOD_MASK.to("meta")}, "tensors must be on one device; got scores on cpu, "
                                              "positives on meta$"),
    ],
)  # fmt: skip
def test_proportion_messages_name_the_argument(kwargs, message):
    arguments = {"scores": GOOD_SCORES, "pairs": "positive-rows", "positives": GOOD_MASK, **kwargs}
    with pytest.raises(GradlabError, match=rf"^{message}"):
        operating_region_proportion(**arguments)


@pytest.mark.parametrize("pairs", PAIR_SETS)
@pytest.mark.parametrize("include_diagonal", [True, False])
def test_proportion_of_a_batch_is_each_querys_own(pairs, include_diagonal):
    # Queries with different numbers of positives: every count and total is per query.
    generator = torch.Generator().manual_seed(11)
    scores = torch.randn(5, 8, generator=generator, dtype=torch.float64) * 0.06
    positives = torch.rand(5, 8, generator=generator) < torch.linspace(0.1, 0.9, 5)[:, None]
    positives[0] = False  # no positive: NaN for the positive pair sets
    got = operating_region_proportion(
        scores, 0.01, 0.005, include_diagonal, pairs=pairs, positives=_given(pairs, positives)
    )
    for q in range(5):
        expected = loops.proportion(
            scores[q].tolist(), 0.01, 0.005, include_diagonal, pairs, positives[q].tolist()
        )
        if math.isnan(expected):
            assert math.isnan(got[q].item())
        else:
            assert got[q].item() == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize(("tau", "eps", "expected"), [(0.01, 0.005, 1.0), (100.0, 0.005, 0.0)])
def test_one_candidate_is_its_own_diagonal_entry(tau, eps, expected):
    # C = 1: the one entry is the diagonal, inside any non-empty region; NaN without it.
    scores = torch.tensor([[0.3]], dtype=torch.float64)
    assert operating_region_proportion(scores, tau, eps).item() == expected
    assert math.isnan(operating_region_proportion(scores, tau, eps, False).item())


def test_a_difference_of_exactly_the_width_is_outside():
    # Documented: |dG/dD| > eps exactly when |D| < w (strict). With the anchor at 0, the
    # differences are the scores themselves, exactly; the neighbours one float64 step inside.
    width = operating_region_width()
    inside = math.nextafter(width, 0.0)
    scores = torch.tensor([[0.0, width, -width, inside, -inside]], dtype=torch.float64)
    positives = torch.tensor([[True, False, False, False, False]])
    assert gradient_counts(scores, positives).per_query.item() == 2
    proportion = operating_region_proportion(scores, pairs="positive-rows", positives=positives)
    assert proportion.item() == pytest.approx(3 / 5, abs=1e-15)  # the diagonal and the two inside


@pytest.mark.parametrize("pairs", PAIR_SETS)
@pytest.mark.parametrize("include_diagonal", [True, False])
@pytest.mark.parametrize(
    "row",
    [[1e30, -1e30, 0.0, 1e30], [4e15, 4e15, 0.0, 0.05], [-1e20, 3.0, -1e20, 3.05]],
    ids=["1e30", "4e15", "1e20"],
)
def test_huge_scores_keep_each_entry_inside_its_own_window(pairs, include_diagonal, row):
    # Next to |s| ~ 1e30 the window's bounds s +- w round back to s: a score and its ties
    # still lie inside its own window (|D| = 0 < w), so P and the counts match the loops.
    positives = [True, False, True, False]
    scores = torch.tensor([row], dtype=torch.float64)
    got = operating_region_proportion(
        scores, 0.01, 0.005, include_diagonal, pairs=pairs,
        positives=_given(pairs, torch.tensor([positives])),
    )
    expected = loops.proportion(row, 0.01, 0.005, include_diagonal, pairs, positives)
    assert got.item() == pytest.approx(expected, abs=1e-15)
    counts = gradient_counts(scores, torch.tensor([positives])).per_query.item()
    assert counts == loops.gradient_count(row, positives, 0.01, 0.005, weighted=False)


def test_the_slope_threshold_is_eps_in_every_operating_region_function():
    # One concept, one name: operating_region_width, operating_region_proportion,
    # expected_operating_region_proportion and gradient_counts all call it eps.
    for function in (operating_region_width, operating_region_is_empty,
                     operating_region_proportion, expected_operating_region_proportion,
                     gradient_counts):  # fmt: skip
        parameters = inspect.signature(function).parameters
        assert "eps" in parameters and "threshold" not in parameters, function.__name__


def test_gradient_counts_still_reads_threshold_with_a_future_warning():
    # gradlab 0.2.0 called gradient_counts' eps threshold; the brute-force loop decides.
    row, positives = [0.0, 0.02, 0.06, 0.5], [True, False, True, False]
    scores, mask = torch.tensor([row], dtype=torch.float64), torch.tensor([positives])
    with pytest.warns(FutureWarning, match="gradient_counts's threshold is now called eps") as said:
        old = gradient_counts(scores, mask, 0.01, threshold=0.5).per_query.item()
    # at the caller's line: it named gradlab.functional's wrapper of exported functions
    assert [w.filename for w in said] == [__file__]
    assert old == loops.gradient_count(row, positives, 0.01, 0.5, weighted=False)
    assert old == gradient_counts(scores, mask, 0.01, eps=0.5).per_query.item()
    with pytest.raises(GradlabError, match=r"^gradient_counts got eps and threshold, its old name"):
        gradient_counts(scores, mask, 0.01, eps=0.5, threshold=0.5)


@pytest.mark.parametrize(
    ("tau", "eps"), [(1e-200, 1e-200), (1e-300, 1e-30), (1e-30, 1e-290), (1e-10, 1e-313)]
)
def test_width_where_eps_times_tau_underflows_is_the_closed_form(tau, eps):
    """eps tau below float64's smallest normal (0, or a subnormal short of digits): the width
    divided by sqrt(eps tau) (ZeroDivisionError in operating_region_width, inf in the tensor
    form, and in P and the gradient counts). 2 tau artanh(sqrt(1 - 4 eps tau)) at 1000 digits
    (1 - 4 eps tau is 1 below about 1e-450 digits' worth)."""
    with mpmath.workdps(1000):
        product = mpmath.mpf(tau) * mpmath.mpf(eps)
        expected = float(2 * mpmath.mpf(tau) * mpmath.atanh(mpmath.sqrt(1 - 4 * product)))
    assert operating_region_width(tau, eps) == pytest.approx(expected, rel=1e-14, abs=0)
    widths = operating_region_widths(tau, torch.tensor([eps, eps], dtype=torch.float64))
    assert widths.tolist() == pytest.approx([expected, expected], rel=1e-14, abs=0)
    scores = torch.tensor([0.0, 0.5 * expected, 4.0 * expected], dtype=torch.float64)
    assert float(operating_region_proportion(scores, tau, eps)) == pytest.approx(5 / 9)


@pytest.mark.parametrize("tau", [0.05, 0.3, 0.7])
def test_at_the_smallest_normal_product_the_width_is_correctly_rounded(tau):
    # p = eps tau exactly 2^-1022 is still a normal number: the closed form 2 tau artanh(r)
    # applies and rounds correctly there (mpmath at 3000 bits); the underflow branch
    # (-tau ln p, for products below it) would be one ulp off at these tau.
    smallest = float.fromhex("0x1p-1022")
    eps = smallest / tau
    assert eps * tau == smallest  # the product is exactly the threshold
    with mpmath.workprec(3000):  # r = sqrt(1 - 4p) needs more than 1022 bits to differ from 1
        p = mpmath.mpf(eps) * mpmath.mpf(tau)
        exact = float(2 * mpmath.mpf(tau) * mpmath.atanh(mpmath.sqrt(1 - 4 * p)))
    assert operating_region_width(tau, eps) == exact
    thresholds = torch.tensor([eps], dtype=torch.float64)
    assert operating_region_widths(tau, thresholds).item() == exact


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"include_diagonal": "no"}, "include_diagonal must be True or False; got 'no'"),
        ({"include_diagonal": 1, "num_candidates": 4}, "include_diagonal must be True or False"),
        # refused whether or not the diagonal is counted
        ({"num_candidates": 0, "include_diagonal": False},
         "num_candidates must be a positive integer; got 0"),
        ({"num_candidates": 2.0}, r"num_candidates must be a positive integer; got 2\.0"),
    ],
)  # fmt: skip
def test_expected_proportion_options_are_refused_by_name(kwargs, message):
    with pytest.raises(GradlabError, match=rf"^{message}"):
        expected_operating_region_proportion(spread=0.1, **kwargs)


@pytest.mark.parametrize(("tau", "thresholds", "message"), [
    (0.0, torch.tensor([0.005]), "tau must be a positive finite number; got 0.0"),
    (math.nan, torch.tensor([0.005]), "tau must be a positive finite number; got nan"),
    ("a", torch.tensor([0.005]), "tau must be a positive finite number; got 'a'"),
    (0.01, [0.005], "thresholds must be a torch.Tensor; got list"
                    "; pass torch.as_tensor(thresholds)"),
    (0.01, torch.tensor([True]), "thresholds must have a real floating or integer dtype; got "
                                 "torch.bool"),
    (0.01, torch.tensor([0.005, -1.0]), "thresholds must be positive and finite; got -1.0 "
                                        "among them"),
    (0.01, torch.tensor([0.0]), "thresholds must be positive and finite; got 0.0 among them"),
    (0.01, torch.tensor([[math.nan]]), "thresholds must be positive and finite; got nan among "
                                       "them"),
    (0.01, torch.tensor([math.inf]), "thresholds must be positive and finite; got inf among "
                                     "them"),
])  # fmt: skip
def test_per_pair_widths_refuse_what_has_no_width(tau, thresholds, message):
    # a zero threshold gave inf, a negative one NaN, tau 0 a math domain error
    with pytest.raises(GradlabError) as raised:
        operating_region_widths(tau, thresholds)
    assert str(raised.value) == message


def test_per_pair_widths_read_nothing_back_inside_skip_value_checks():
    from gradlab.validation import skip_value_checks

    with skip_value_checks():  # the Monitor's logged step: its thresholds are its own
        widths = operating_region_widths(0.01, torch.tensor([0.005, -1.0], dtype=torch.float64))
    assert widths[0].item() == pytest.approx(operating_region_width(0.01, 0.005), rel=1e-12)
    assert widths[1].isnan()
    assert operating_region_widths(0.01, torch.zeros(0)).shape == (0,)  # nothing to check


def test_the_expected_proportion_takes_a_numpy_integer_as_the_candidates():
    from gradlab.functional import expected_operating_region_proportion

    expected = expected_operating_region_proportion(0.01, 0.005, 0.1, num_candidates=112,
                                                    include_diagonal=True)  # fmt: skip
    assert expected_operating_region_proportion(
        0.01, 0.005, 0.1, num_candidates=np.int64(112), include_diagonal=True) == expected


def test_gradient_counts_of_a_transposed_matrix_are_the_same_and_warn_of_nothing():
    from gradlab.functional import gradient_counts

    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(6, 9, generator=generator)
    positives = torch.rand(6, 9, generator=generator) < 0.3
    positives[:, 0] = True
    strided = scores.t().contiguous().t(), positives.t().contiguous().t()  # column-major
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "boundary tensor is non-contiguous" before
        counts = gradient_counts(*strided)
    assert torch.equal(counts.per_query, gradient_counts(scores, positives).per_query)


def test_per_pair_widths_of_meta_thresholds_are_meta():
    # shapes without values: nothing to check, a meta result (a raw .item() error before)
    widths = operating_region_widths(0.01, torch.full((2, 3), 0.005, device="meta"))
    assert widths.is_meta and widths.shape == (2, 3) and widths.dtype == torch.float64


@pytest.mark.parametrize("pairs", ["positive-rows", "positive-negative"])
def test_one_mask_of_candidates_is_shared_by_every_query(pairs):
    # [C] positives with [Q, C] scores were refused as "(1, C)"; the docstring allowed [C]
    generator = torch.Generator().manual_seed(4)
    scores = torch.rand(3, 6, generator=generator, dtype=torch.float64) * 0.05
    shared = torch.tensor([True, False, True, False, False, True])
    got = operating_region_proportion(scores, pairs=pairs, positives=shared)
    for q in range(3):
        alone = operating_region_proportion(scores[q], pairs=pairs, positives=shared)
        assert got[q].item() == alone.item()


def test_the_expected_p_of_one_candidate_without_the_diagonal_is_undefined_as_measured():
    # no pair j != i to count: the measured P is 0 / 0; the expectation returned erf(...)
    measured = operating_region_proportion(torch.tensor([[0.3]]), include_diagonal=False)
    assert math.isnan(float(measured))
    assert math.isnan(expected_operating_region_proportion(
        0.1, num_candidates=1, include_diagonal=False))
    two = expected_operating_region_proportion(0.1, num_candidates=2, include_diagonal=False)
    assert two == pytest.approx(math.erf(operating_region_width(0.01, 0.005) / 0.2))


@pytest.mark.parametrize("candidates", [None, 1, 7])
@pytest.mark.parametrize("diagonal", [True, False])
def test_a_collapsed_model_expects_the_proportion_it_measures(candidates, diagonal):
    """spread = 0: every score alike, every pair inside the region (P = 1), as measured on a
    constant score row; an empty region (eps past the sigmoid's steepest slope) holds none."""
    size = 7 if candidates is None else candidates
    measured = operating_region_proportion(torch.zeros(size, dtype=torch.float64),
                                           include_diagonal=diagonal)  # fmt: skip
    expected = expected_operating_region_proportion(0.0, num_candidates=candidates,
                                                    include_diagonal=diagonal)  # fmt: skip
    if math.isnan(measured.item()):  # one candidate, no diagonal: no pair
        assert math.isnan(expected)
    else:
        assert expected == measured.item() == 1.0
    assert expected_operating_region_proportion(0.0, tau=0.01, eps=26.0) == 0.0  # 1/(4 tau) = 25


def test_the_diagonal_adds_one_minus_the_off_diagonal_p_over_c():
    # Eq. 1 counts each query's C diagonal entries D_ii = 0 (always inside a non-empty region)
    # among its C^2: P = P_off + (1 - P_off) / C, the relation the report states
    generator = torch.Generator().manual_seed(3)
    for candidates in (2, 7, 40):
        scores = 0.1 * torch.randn(5, candidates, generator=generator, dtype=torch.float64)
        full = operating_region_proportion(scores)
        off = operating_region_proportion(scores, include_diagonal=False)
        assert torch.allclose(full, off + (1 - off) / candidates, rtol=0, atol=1e-15)
        # beyond two candidates (whose two off-diagonal entries agree), not read at 0 or 1 alone
        assert candidates == 2 or ((off > 0) & (off < 1)).any()


def test_weighted_counts_of_a_query_whose_candidates_are_all_positive_use_its_true_ranks():
    # no negative: every positive's R(i, S_Omega) is still 1 + its sigmoid sum (about 2 to 3
    # here, not 1); with eps = 4 the slopes near 25 of these near-ties pass at R = 1, and only
    # some of them over R^2
    scores = torch.tensor([[0.300, 0.301, 0.302, 0.303], [0.1, 0.2, 0.3, 0.4]],
                          dtype=torch.float64)  # fmt: skip
    positives = torch.tensor([[True] * 4, [True, True, False, False]])
    counts = gradient_counts(scores, positives, 0.01, 4.0, weighted=True)
    expected = [loops.gradient_count(scores[q].tolist(), positives[q].tolist(), 0.01, 4.0, True)
                for q in range(2)]  # fmt: skip
    assert counts.per_query.tolist() == expected
    unweighted = gradient_counts(scores, positives, 0.01, 4.0).per_query.tolist()
    assert 0 < expected[0] < unweighted[0]  # the ranks decide, not the slopes alone
