"""Relaxed tie-aware AP / DCG: Eq. 37 against autograd, integer limits, edge behaviour."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gradlab import GradlabError
from gradlab.functional import (
    HARMONIC_METHODS,
    minibatch_gradient_matrix_form,
    minibatch_objective_terms,
    relaxed_hamming_distances,
    relaxed_tie_aware_ap,
    relaxed_tie_aware_dcg,
    soft_histogram,
    tie_aware_ap,
    tie_aware_dcg,
    triangular_kernel,
)
from gradlab.validation import skip_value_checks
from tests.helpers.default_device import assert_unchanged_under_another_default_device
from tests.helpers.refusals import wide_unsigned_refusal
from tests.reference.relaxed_ranking_loops import relaxed_ap, relaxed_dcg
from tests.reference.tie_aware_loops import dcg, expected_over_ties


def batch(seed, size, bits, scale=2.0):
    generator = torch.Generator().manual_seed(seed)
    raw = torch.randn(size, bits, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, 3, (size,), generator=generator)
    return torch.tanh(scale * raw), labels


@pytest.mark.slow
@given(
    seed=st.integers(0, 2**31 - 1),
    size=st.integers(3, 10),
    bits=st.integers(2, 8),
    objective=st.sampled_from(["ap", "dcg"]),
    method=st.sampled_from(HARMONIC_METHODS),
)
def test_eq37_matrix_form_equals_autograd(seed, size, bits, objective, method):
    codes, labels = batch(seed, size, bits)
    leaf = codes.clone().requires_grad_(True)
    _, terms = minibatch_objective_terms(leaf, labels, objective, method)
    (expected,) = torch.autograd.grad(terms.nan_to_num(0.0).sum() / size, leaf)
    got = minibatch_gradient_matrix_form(codes, labels, objective, method)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)


@pytest.mark.slow
@given(seed=st.integers(0, 2**31 - 1), size=st.integers(3, 10), bits=st.integers(2, 8))
def test_exact_method_equals_tie_aware_metrics_at_binary_codes(seed, size, bits):
    codes, labels = batch(seed, size, bits)
    binary = torch.sign(codes)
    distances = relaxed_hamming_distances(binary)
    _, ap = minibatch_objective_terms(binary, labels, "ap", "exact")
    _, dcg = minibatch_objective_terms(binary, labels, "dcg", "exact")
    for i in range(size):
        keep = torch.arange(size) != i
        relevant = labels[keep] == labels[i]
        expected_ap = tie_aware_ap(-distances[i, keep], relevant).item()
        if math.isnan(expected_ap):
            assert math.isnan(ap[i].item())
        else:
            assert ap[i].item() == pytest.approx(expected_ap, abs=1e-12)
        expected_dcg = tie_aware_dcg(-distances[i, keep], relevant.double()).item()
        assert dcg[i].item() == pytest.approx(expected_dcg, abs=1e-12)


def test_soft_histogram_conserves_items():
    codes, labels = batch(0, 9, 6)
    distances = relaxed_hamming_distances(codes)
    levels = (labels.unsqueeze(0) == labels.unsqueeze(1)).long()
    not_self = ~torch.eye(9, dtype=torch.bool)
    counts = soft_histogram(distances, levels, 7, 2, candidate_mask=not_self)
    torch.testing.assert_close(counts.sum(dim=(1, 2)), torch.full((9,), 8.0, dtype=torch.float64))
    torch.testing.assert_close(
        counts[..., 1].sum(dim=1), (levels.bool() & not_self).sum(1).double()
    )


@pytest.mark.parametrize("method", HARMONIC_METHODS)
def test_relaxed_ap_is_finite_and_differentiable_at_every_edge(method):
    # First bin, empty bins, a bin of exactly one item with a fractional positive count.
    positive = torch.tensor([[0.5, 0.0, 0.0, 1.0, 0.3]], dtype=torch.float64, requires_grad=True)
    total = torch.tensor([[1.0, 0.0, 0.0, 2.0, 0.6]], dtype=torch.float64, requires_grad=True)
    value = relaxed_tie_aware_ap(positive, total, method)
    assert bool(torch.isfinite(value).all())
    grads = torch.autograd.grad(value.sum(), (positive, total))
    assert all(bool(torch.isfinite(g).all()) for g in grads)


@pytest.mark.parametrize("method", HARMONIC_METHODS)
def test_relaxed_ap_has_no_pole_near_one_item(method):
    # The printed (c+ - 1)/(c - 1) blows up as c -> 1 with c+ = 0.5; with the clamp, AP is
    # continuous there: it approaches its value at exactly one item linearly in the gap.
    positive = torch.tensor([[0.5, 1.0]], dtype=torch.float64)

    def ap_at(count):
        total = torch.tensor([[count, 2.0]], dtype=torch.float64)
        return relaxed_tie_aware_ap(positive, total, method).item()

    at_one = ap_at(1.0)
    assert math.isfinite(at_one)
    slope = abs(ap_at(1.0 + 1e-3) - at_one) / 1e-3
    for gap in (1e-3, 1e-6, 1e-9, 1e-12):
        assert abs(ap_at(1.0 + gap) - at_one) <= 2 * slope * gap + 1e-15
        assert abs(ap_at(1.0 - gap) - at_one) <= 2 * slope * gap + 1e-15


@pytest.mark.parametrize("method", HARMONIC_METHODS)
@pytest.mark.parametrize("count", [0.5, 1.0 - 1e-3, 1.0, 1.0 + 1e-3, 1.5, 2.0])
def test_relaxed_ap_value_at_and_near_a_one_item_bin(method, count):
    # The pole of (c+ - 1)/(c - 1) at c = 1: the value, not only its range, against Eq. 13
    # evaluated bin by bin with mpmath (the same counts as the continuity test below).
    positive = torch.tensor([[0.5, 1.0]], dtype=torch.float64)
    total = torch.tensor([[count, 2.0]], dtype=torch.float64)
    expected = relaxed_ap([0.5, 1.0], [count, 2.0], method)
    assert relaxed_tie_aware_ap(positive, total, method).item() == pytest.approx(
        expected, abs=1e-14
    )


@given(
    seed=st.integers(0, 2**31 - 1),
    bins=st.integers(1, 7),
    method=st.sampled_from(HARMONIC_METHODS),
    empty=st.floats(0.0, 0.6),
)
@pytest.mark.slow
def test_relaxed_ap_matches_the_printed_formula(seed, bins, method, empty):
    generator = torch.Generator().manual_seed(seed)
    counts = torch.rand(2, bins, generator=generator, dtype=torch.float64) * 4.0
    counts[torch.rand(2, bins, generator=generator) < empty] = 0.0  # empty bins are common
    positive = counts * torch.rand(2, bins, generator=generator, dtype=torch.float64)
    got = relaxed_tie_aware_ap(positive, counts, method)
    for q in range(2):
        expected = relaxed_ap(positive[q].tolist(), counts[q].tolist(), method)
        if math.isnan(expected):
            assert math.isnan(got[q].item())
        else:
            assert got[q].item() == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("method", ["exact", "log", "midpoint"])
def test_relaxed_ap_of_fractional_counts_can_exceed_one_as_the_printed_formula_does(method):
    # 0.9 of a relevant item alone in the first bin, then 0.1 relevant among 1.1 items: Eq. 13
    # evaluated bin by bin (mpmath) is above 1 for every stand-in; the docstring says so
    positive = torch.tensor([[0.9, 0.1]], dtype=torch.float64)
    counts = torch.tensor([[0.9, 1.1]], dtype=torch.float64)
    expected = relaxed_ap([0.9, 0.1], [0.9, 1.1], method)
    assert expected > 1
    assert relaxed_tie_aware_ap(positive, counts, method).item() == pytest.approx(expected,
                                                                                rel=1e-12)
    # at integer counts "exact" is tie-aware AP, at most 1 (the first bin holds one positive)
    whole = relaxed_tie_aware_ap(torch.tensor([[1.0, 0.0]], dtype=torch.float64),
                                 torch.tensor([[1.0, 1.0]], dtype=torch.float64), "exact")
    assert whole.item() == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize("method", HARMONIC_METHODS)
def test_relaxed_dcg_gradcheck(method):
    counts = torch.tensor(
        [[[0.3, 0.8], [1.2, 0.0], [0.0, 0.0], [2.4, 1.1]]], dtype=torch.float64, requires_grad=True
    )
    gains = torch.tensor([0.0, 1.0], dtype=torch.float64)
    # Finite differences step the empty bins' 0 counts to -eps, which the counts >= 0 check
    # refuses: the derivative at the boundary is what is checked here, not user input.
    with skip_value_checks():
        assert torch.autograd.gradcheck(
            lambda c: relaxed_tie_aware_dcg(c, gains, method), (counts,)
        )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: relaxed_tie_aware_ap(torch.ones(1, 3), torch.ones(1, 4)),
            r"counts must have shape",
        ),
        (
            lambda: relaxed_tie_aware_ap(torch.ones(1, 3), torch.ones(1, 3), "log2"),
            "method must be",
        ),
        (
            lambda: relaxed_tie_aware_ap(torch.ones(1, 2), torch.tensor([[1.0, math.nan]])),
            "counts must be finite",
        ),
        (
            lambda: relaxed_tie_aware_dcg(torch.ones(1, 3, 2), torch.ones(3)),
            r"level_gains must have one gain per level \(2\); got 3$",
        ),
        # positive counts above the counts gave AP 3.56; negative counts gave NaN
        (
            lambda: relaxed_tie_aware_ap(torch.ones(2, 4) * 5, torch.ones(2, 4)),
            "positive_counts must be <= counts",
        ),
        (
            lambda: relaxed_tie_aware_ap(-torch.ones(2, 4), -torch.ones(2, 4)),
            "positive_counts must be >= 0",
        ),
        (
            lambda: relaxed_tie_aware_ap(torch.zeros(1, 3), torch.tensor([[1.0, -0.5, 1.0]])),
            "positive_counts must be <= counts",  # counts < 0 <= positive_counts
        ),
        (
            lambda: relaxed_tie_aware_ap(torch.tensor([[math.inf, 0.0]]), torch.ones(1, 2)),
            "positive_counts must be finite",
        ),
        (
            lambda: relaxed_tie_aware_dcg(-torch.ones(1, 3, 2), torch.ones(2)),
            "level_counts must be >= 0",
        ),
        (
            lambda: relaxed_tie_aware_dcg(torch.ones(1, 3, 2), torch.tensor([0.0, math.nan])),
            "level_gains must be finite",
        ),
        (
            lambda: soft_histogram(torch.ones(2, 3), torch.full((2, 3), 2), 4, 2),
            r"levels must lie in 0 .. num_levels - 1 = 1; got levels\[0, 0\] = 2 \(6 of 6 "
            r"entries\)$",
        ),
        (
            lambda: soft_histogram(torch.ones(2, 3), -torch.ones(2, 3, dtype=torch.long), 4, 2),
            "levels must lie in",
        ),
        (
            lambda: soft_histogram(torch.full((2, 3), math.nan), torch.zeros(2, 3).long(), 4, 2),
            "distances must be finite",
        ),
        (lambda: soft_histogram(torch.ones(2, 3), torch.zeros(2, 3), 4, 2), "levels must have"),
        (lambda: soft_histogram(torch.ones(3), torch.zeros(3).long(), 4, 2), "distances must be"),
        (lambda: soft_histogram(torch.ones(2, 3), torch.zeros(2, 3).long(), 0, 2), "num_bins"),
        (
            lambda: soft_histogram(
                torch.ones(2, 3), torch.zeros(2, 3).long(), 4, 2, candidate_mask=torch.ones(2, 3)
            ),
            "candidate_mask must be a bool tensor",
        ),
        (lambda: relaxed_hamming_distances(torch.ones(3)), "codes must be 2-D"),
        (
            lambda: minibatch_objective_terms(
                torch.ones(3, 2), torch.zeros(3, dtype=torch.long), "map"
            ),
            "objective must be 'ap' or 'dcg'",
        ),
        (
            lambda: minibatch_objective_terms(torch.ones(3, 2), torch.zeros(4, dtype=torch.long)),
            r"labels must have shape \(3,\) \(one label per code\); got \(4,\)$",
        ),
        (  # a distance outside [0, b]: it had named soft_histogram's distances, not the codes
            lambda: minibatch_objective_terms(torch.tensor([[0.5, 1.0], [-1.0, -1.5]]),
                                              torch.zeros(2, dtype=torch.long)),
            r"codes must lie in \[-1, 1\] \(relaxed bits, a tanh of the outputs\); got "
            r"codes\[1, 1\] = -1.5 \(1 of 4 entries\)$",
        ),
        (  # (b - phi . phi) / 2 = (2 - 4.25) / 2 < 0: a negative "distance", in silence
            lambda: relaxed_hamming_distances(torch.tensor([[0.5, 2.0]])),
            r"codes must lie in \[-1, 1\] \(relaxed bits, a tanh of the outputs\); got "
            r"codes\[0, 1\] = 2 \(1 of 2 entries\)$",
        ),
    ],
)  # fmt: skip
def test_error_table(call, message):
    # Anchored: every message starts with the argument it names.
    with pytest.raises(GradlabError, match="^" + message):
        call()


@pytest.mark.parametrize("objective", ["ap", "dcg"])
def test_result_stays_on_the_input_device_whatever_the_default_device(objective):
    # The default DCG gains are made on the codes' device: with torch's default device
    # elsewhere (here "meta"; "cuda" with CPU codes in practice), the result is unchanged.
    codes, labels = batch(3, 6, 4)
    assert_unchanged_under_another_default_device(
        lambda: (minibatch_objective_terms(codes, labels, objective, "log"),
                 minibatch_gradient_matrix_form(codes, labels, objective, "log")),
        codes.device,
    )  # fmt: skip


def _autograd_of_terms(codes, labels, *options):
    leaf = codes.clone().requires_grad_(True)
    _, terms = minibatch_objective_terms(leaf, labels, *options)
    (gradient,) = torch.autograd.grad(terms.nan_to_num(0.0).sum() / len(labels), leaf)
    return gradient


def test_matrix_form_with_explicit_gains_equals_autograd():
    codes, labels = batch(5, 7, 5)
    gains = torch.tensor([0.25, 3.0], dtype=torch.float64)
    got = minibatch_gradient_matrix_form(codes, labels, "dcg", "midpoint", gains)
    expected = _autograd_of_terms(codes, labels, "dcg", "midpoint", gains)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)
    default_gains = minibatch_gradient_matrix_form(codes, labels, "dcg", "midpoint")
    assert not torch.allclose(got, default_gains)


@pytest.mark.parametrize("objective", ["ap", "dcg"])
def test_matrix_form_of_a_batch_without_relevant_pairs(objective):
    # All labels distinct: every level is 0 (one level of the two present).
    codes, _ = batch(6, 5, 4)
    labels = torch.arange(5)
    got = minibatch_gradient_matrix_form(codes, labels, objective, "exact")
    expected = _autograd_of_terms(codes, labels, objective, "exact")
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)


def test_minibatch_defaults_are_relaxed_ap_with_the_printed_log_form():
    codes, labels = batch(7, 6, 4)
    counts, terms = minibatch_objective_terms(codes, labels)
    for i in range(6):
        expected = relaxed_ap(counts[i, :, 1].tolist(), counts[i].sum(dim=1).tolist(), "log")
        assert terms[i].item() == pytest.approx(expected, abs=1e-12, nan_ok=True)
    gradient = minibatch_gradient_matrix_form(codes, labels)
    torch.testing.assert_close(gradient, _autograd_of_terms(codes, labels, "ap", "log"))


@pytest.mark.parametrize(
    ("codes", "message"),
    [
        (torch.ones(3, 2, dtype=torch.long), "codes must have a floating dtype; got torch.int64"
                                             "; pass codes.float()"),
        (torch.full((3, 2), math.nan), "codes must be finite; got (NaN|inf) in .*"),
        (torch.ones(3), "codes must be 2-D"),
    ],
)
def test_matrix_form_messages_name_the_codes(codes, message):
    with pytest.raises(GradlabError, match="^" + message):
        minibatch_gradient_matrix_form(codes, torch.zeros(3, dtype=torch.long))


def test_minibatch_dcg_with_explicit_gains_is_the_brute_force_dcg_at_binary_codes():
    # Binary codes: integer distances, so the exact relaxation is tie-aware DCG, the average
    # over every ordering consistent with the ties (brute force), with the given gains.
    codes, labels = batch(8, 6, 3)
    binary = torch.sign(codes)
    distances = relaxed_hamming_distances(binary)
    gains = torch.tensor([0.25, 3.0], dtype=torch.float64)
    _, dcg_terms = minibatch_objective_terms(binary, labels, "dcg", "exact", gains)
    for i in range(6):
        others = [j for j in range(6) if j != i]
        scores = [-distances[i, j].item() for j in others]
        per_item = [gains[int(labels[j] == labels[i])].item() for j in others]
        expected = expected_over_ties(dcg, scores, per_item)
        assert dcg_terms[i].item() == pytest.approx(expected, abs=1e-12)


def test_float32_codes_give_float32_terms_whatever_the_gains_dtype():
    codes, labels = batch(9, 5, 4)
    gains = torch.tensor([0.25, 3.0], dtype=torch.float64)
    _, terms = minibatch_objective_terms(codes.float(), labels, "dcg", "log", gains)
    assert terms.dtype == torch.float32


def test_minibatch_labels_must_be_integers():
    with pytest.raises(
        GradlabError, match=r"^labels must have an integer dtype; got torch.float32"
                            r" \(whole-number ids: pass labels\.long\(\)\)"
    ):
        minibatch_objective_terms(torch.ones(3, 2), torch.zeros(3))


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_soft_histogram_refuses_levels_wider_than_a_byte_before_any_work(dtype):
    # torch has no "<" for them: the level check ended in torch's "lt_cpu" error
    levels = torch.tensor([[0, 1, 1]], dtype=dtype)
    with pytest.raises(GradlabError) as raised:
        soft_histogram(torch.tensor([[0.5, 1.25, 2.0]]), levels, 4, 2)
    assert str(raised.value) == wide_unsigned_refusal("levels", dtype)


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
@pytest.mark.parametrize("function", [minibatch_objective_terms, minibatch_gradient_matrix_form])
def test_minibatch_labels_follow_the_package_rule_for_unsigned_labels(function, dtype):
    labels = torch.tensor([0, 0, 1], dtype=dtype)
    with pytest.raises(GradlabError) as raised:
        function(torch.ones(3, 2), labels)
    assert str(raised.value) == wide_unsigned_refusal("labels", dtype)


def test_byte_levels_count_as_int64_levels_do():
    # by hand: 0.5 -> bins 0, 1 (0.5 each); 1.25 -> 1 (0.75), 2 (0.25); 2 -> 2
    levels = torch.tensor([[0, 1, 1]], dtype=torch.uint8)
    counts = soft_histogram(torch.tensor([[0.5, 1.25, 2.0]], dtype=torch.float64), levels, 4, 2)
    assert counts[0].T.tolist() == [[0.5, 0.5, 0.0, 0.0], [0.0, 0.75, 1.25, 0.0]]


D23 = torch.ones(2, 3)
L23 = torch.zeros(2, 3, dtype=torch.long)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: relaxed_hamming_distances(torch.ones(3, 2, dtype=torch.long)),
         r"codes must have a floating dtype; got torch.int64; pass codes\.float\(\)$"),
        (lambda: relaxed_hamming_distances(torch.full((3, 2), math.nan)),
         "codes must be finite; got (NaN|inf) in .*$"),
        (lambda: soft_histogram(D23.long(), L23, 4, 2), "distances must have a floating dtype"),
        (lambda: soft_histogram(torch.full((2, 3), math.nan), L23, 4, 2),
         "distances must be finite; got (NaN|inf) in .*$"),
        (lambda: soft_histogram(D23, L23[:, :2], 4, 2),
         r"levels must have shape \(2, 3\) \(one level per distance\); got \(2, 2\)$"),
        (lambda: soft_histogram(D23, L23, 0, 2), "num_bins must be a positive integer"),
        (lambda: soft_histogram(D23, L23, 4, 0), "num_levels must be a positive integer"),
        (lambda: soft_histogram(D23, L23, 4, 2, candidate_mask=torch.ones(2, 2, dtype=torch.bool)),
         r"candidate_mask must have shape \(2, 3\) \(one flag per distance\); got \(2, 2\)$"),
        (lambda: soft_histogram(D23, L23, 4, 2,
                                candidate_mask=torch.ones(2, 3, dtype=torch.bool, device="meta")),
         "tensors must be on one device; got distances on cpu, candidate_mask on meta$"),
        (lambda: soft_histogram(torch.tensor([[2.0, -1.5, 3.0], [3.5, 0.0, 1.0]]), L23, 4, 2),
         r"distances must lie in \[0, num_bins - 1\] = \[0, 3\] \(a distance outside loses "
         r"part of its unit count\); got -1.5 .. 3.5 among those outside$"),
        (lambda: relaxed_tie_aware_ap(torch.ones(1, 2), torch.ones(1, 2),
                                      num_positives=torch.tensor([-1.0])),
         r"num_positives must be >= 0 \(a count of relevant items\); got -1$"),
        (lambda: relaxed_tie_aware_ap(torch.ones(1, 2), torch.ones(1, 2),
                                      num_positives=torch.tensor([math.nan])),
         r"num_positives must be finite; got NaN in entry 0 \(1 entry of 1\)$"),
        (lambda: triangular_kernel(torch.tensor([1, 2]), 3),
         "distances must have a floating dtype"),
        (lambda: triangular_kernel([0.5], 3),
         r"distances must be a torch.Tensor; got list; pass torch\.as_tensor\(distances\)$"),
        (lambda: triangular_kernel(torch.tensor([1.0]), 0), "num_bins must be a positive integer"),
        (lambda: triangular_kernel(torch.tensor([1.0]), 2.5),
         "num_bins must be a positive integer"),
        (lambda: relaxed_tie_aware_dcg(torch.ones(3, 2), torch.ones(2)),
         "level_counts must be 3-D"),
        (lambda: relaxed_tie_aware_dcg(torch.ones(1, 3, 2), torch.ones(2, dtype=torch.long)),
         "level_gains must have a floating dtype"),
        (lambda: relaxed_tie_aware_ap(torch.ones(1, 2, dtype=torch.long), torch.ones(1, 2)),
         "positive_counts must have a floating dtype"),
        (lambda: relaxed_tie_aware_ap(torch.ones(1, 2), torch.ones(1, 3)),
         r"counts must have shape \(1, 2\) \(one count per bin\); got \(1, 3\)$"),
    ],
)  # fmt: skip
def test_messages_name_the_argument(call, message):
    with pytest.raises(GradlabError, match="^" + message):
        call()


def test_soft_histogram_has_every_level_even_when_absent():
    distances = torch.tensor([[0.5, 1.25, 2.0]], dtype=torch.float64)
    levels = torch.tensor([[0, 1, 1]])
    counts = soft_histogram(distances, levels, 4, 3)
    assert counts.shape == (1, 4, 3)
    assert counts[..., 2].abs().sum().item() == 0.0
    # Triangular kernel by hand: 0.5 -> bins 0, 1 (0.5 each); 1.25 -> 1 (0.75), 2 (0.25); 2 -> 2.
    expected_level1 = [0.0, 0.75, 1.25, 0.0]
    assert counts[0, :, 1].tolist() == pytest.approx(expected_level1, abs=1e-15)
    assert counts[0, :, 0].tolist() == pytest.approx([0.5, 0.5, 0.0, 0.0], abs=1e-15)


@pytest.mark.parametrize(
    ("codes", "message"),
    [
        (torch.ones(3, 2, dtype=torch.long), r"codes must have a floating dtype; got torch.int64"
                                             r"; pass codes\.float\(\)$"),
        (torch.full((3, 2), math.inf), "codes must be finite; got (NaN|inf) in .*$"),
    ],
)
def test_matrix_form_checks_the_codes_before_the_labels_and_objective(codes, message):
    # The codes are the first argument: refused before float labels or an unknown objective.
    with pytest.raises(GradlabError, match="^" + message):
        minibatch_gradient_matrix_form(codes, torch.zeros(3), "map")


@pytest.mark.parametrize("objective", ["ap", "dcg"])
def test_matrix_form_of_an_empty_batch_is_empty(objective):
    codes = torch.zeros(0, 4, dtype=torch.float64)
    got = minibatch_gradient_matrix_form(codes, torch.zeros(0, dtype=torch.long), objective)
    assert got.shape == (0, 4)
    assert got.dtype == torch.float64


@pytest.mark.parametrize("objective", ["ap", "dcg"])
def test_matrix_form_takes_the_kernel_slope_as_zero_at_its_kinks(objective):
    # Binary codes: every relaxed distance is an integer, so each pair sits on a kink of every
    # kernel it touches (|x - d| = 0, the peak, or 1, the edge of the support). Eq. 28's
    # delta'_d is the slope inside the open support and 0 at the kinks: the gradient is 0.
    codes, labels = batch(10, 7, 5)
    got = minibatch_gradient_matrix_form(torch.sign(codes), labels, objective, "midpoint")
    assert got.abs().max().item() == 0.0
    # Just off the kinks the slopes are +-1 again and the gradient is not 0.
    moved = minibatch_gradient_matrix_form(0.9 * torch.sign(codes), labels, objective, "midpoint")
    assert moved.abs().max().item() > 0.0


def test_relaxed_ap_divides_by_the_given_number_of_positives():
    positive = torch.tensor([[0.5, 1.25, 0.25]], dtype=torch.float64)
    total = torch.tensor([[1.5, 2.0, 3.0]], dtype=torch.float64)
    given = torch.tensor([4.0], dtype=torch.float64)  # e.g. positives outside the histogram
    # relaxed_ap divides by the counts' own N+ = 2: rescale the reference to N+ = 4.
    expected = relaxed_ap([0.5, 1.25, 0.25], [1.5, 2.0, 3.0], "log") * 2.0 / 4.0
    got = relaxed_tie_aware_ap(positive, total, "log", given)
    assert got.item() == pytest.approx(expected, abs=1e-14)


@pytest.mark.parametrize("method", HARMONIC_METHODS)
@pytest.mark.parametrize("gap", [-5e-10, 5e-10, 2e-9])
def test_relaxed_ap_of_an_all_relevant_bin_within_the_one_item_band(method, gap):
    # c+ = c = 1 + gap: (c+ - 1)/(c - 1) is 1 for every c > 1, but a bin within 1e-9 of one
    # item holds no other item (A = 0, the documented band); from 2e-9 on, A = 1 again.
    count = 1.0 + gap
    positive = torch.tensor([[0.25, count]], dtype=torch.float64)
    total = torch.tensor([[1.5, count]], dtype=torch.float64)
    expected = relaxed_ap([0.25, count], [1.5, count], method)
    assert relaxed_tie_aware_ap(positive, total, method).item() == pytest.approx(
        expected, abs=1e-14
    )


@pytest.mark.parametrize("method", HARMONIC_METHODS)
def test_relaxed_dcg_matches_the_printed_formula(method):
    counts = [
        [[0.3, 0.8], [1.2, 0.0], [0.0, 0.0], [2.4, 1.1]],
        [[0.0, 0.5], [0.7, 2.0], [1.0, 1.0], [0.0, 0.0]],
    ]
    gains = [0.25, 3.0]
    got = relaxed_tie_aware_dcg(
        torch.tensor(counts, dtype=torch.float64), torch.tensor(gains, dtype=torch.float64), method
    )
    expected = [relaxed_dcg(query, gains, method) for query in counts]
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float64), atol=1e-13, rtol=0)


def test_relaxed_dcg_is_computed_in_the_counts_dtype_whatever_the_gains_dtype():
    counts = torch.tensor([[[0.3, 0.8], [1.2, 0.0], [2.4, 1.1]]])
    gains = torch.tensor([0.25, 3.0], dtype=torch.float64)
    got = relaxed_tie_aware_dcg(counts, gains, "log")
    assert got.dtype == torch.float32
    expected = relaxed_dcg(counts[0].tolist(), gains.tolist(), "log")
    assert got.item() == pytest.approx(expected, abs=8 * torch.finfo(torch.float32).eps)


ONE_BY_TWO = torch.ones(1, 2)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: relaxed_tie_aware_ap(ONE_BY_TWO, torch.ones(2)),
         r"counts must be 2-D; got shape \(2,\)$"),
        (lambda: relaxed_tie_aware_ap(ONE_BY_TWO, ONE_BY_TWO.long()),
         r"counts must have a floating dtype; got torch.int64; pass counts\.float\(\)$"),
        (lambda: relaxed_tie_aware_ap(ONE_BY_TWO, torch.ones(1, 2, device="meta")),
         "tensors must be on one device; got positive_counts on cpu, counts on meta$"),
        (lambda: relaxed_tie_aware_ap(torch.tensor([[math.nan, 0.0]]), ONE_BY_TWO),
         "positive_counts must be finite; got (NaN|inf) in .*$"),
        (lambda: relaxed_tie_aware_ap(ONE_BY_TWO, torch.tensor([[1.0, math.inf]])),
         "counts must be finite; got (NaN|inf) in .*$"),
        (lambda: relaxed_tie_aware_ap(torch.tensor([[1.0, 2.5]]), ONE_BY_TWO),
         r"positive_counts must be <= counts bin by bin \(relevant items are among all "
         r"items\); got positive_counts\[0, 1\] = 2.5 above counts\[0, 1\] = 1 \(1 of 2 "
         r"entries\)$"),
        (lambda: relaxed_tie_aware_ap(torch.tensor([[0.0, -0.25]]), ONE_BY_TWO),  # 0 is a count
         r"positive_counts must be >= 0 \(soft counts\); got positive_counts\[0, 1\] = -0.25 "
         r"\(1 of 2 entries\)$"),
        (lambda: relaxed_tie_aware_ap(torch.tensor([[0.5, 1.0]]), ONE_BY_TWO,
                                      num_positives=torch.tensor([1.25])),
         r"num_positives must be at least the relevant items the soft counts hold, "
         r"positive_counts.sum\(-1\) per query \(fewer would give an AP above 1\); got "
         r"num_positives\[0\] = 1.25 \(1 of 1 queries\) below 1.5$"),
        (lambda: relaxed_tie_aware_dcg(torch.tensor([[[1.0, 0.0], [0.0, -2.0]]]), torch.ones(2)),
         r"level_counts must be >= 0; got level_counts\[0, 1, 1\] = -2 \(1 of 4 entries\)$"),
        (lambda: relaxed_tie_aware_dcg(torch.ones(1, 2, 2, dtype=torch.long), torch.ones(2)),
         r"level_counts must have a floating dtype; got torch.int64"
         r"; pass level_counts\.float\(\)$"),
        (lambda: relaxed_tie_aware_dcg(torch.full((1, 2, 2), math.nan), torch.ones(2)),
         "level_counts must be finite; got (NaN|inf) in .*$"),
        (lambda: relaxed_tie_aware_dcg(torch.ones(1, 2, 2), torch.tensor([1.0, math.inf])),
         "level_gains must be finite; got (NaN|inf) in .*$"),
        (lambda: relaxed_tie_aware_dcg(torch.tensor([[[1e7, 1.0], [0.0, 1e7]]]), torch.ones(2)),
         r"level_counts must hold at most 1e\+07 items per query \(the discount stand-ins are "
         r"defined up to that many\); got 2e\+07$"),  # named discount_rate's "a + count"
    ],
)  # fmt: skip
def test_count_checks_give_the_whole_message(call, message):
    with pytest.raises(GradlabError, match="^" + message):
        call()


def test_a_positional_candidate_mask_is_still_read_with_a_future_warning():
    # gradlab 0.2.0 took the mask as the fifth positional argument; it is keyword-only now.
    # The masked third item (distance 1, level 1) would add 1 to bin 1 of level 1.
    distances, levels = torch.tensor([[0.5, 2.0, 1.0]]), torch.tensor([[1, 0, 1]])
    mask = torch.tensor([[True, True, False]])
    with pytest.warns(FutureWarning, match="soft_histogram takes candidate_mask by keyword"):
        counts = soft_histogram(distances, levels, 3, 2, mask)
    expected = torch.tensor([[[0.0, 0.5], [0.0, 0.5], [1.0, 0.0]]], dtype=counts.dtype)
    torch.testing.assert_close(counts, expected)
    keyword = soft_histogram(distances, levels, 3, 2, candidate_mask=mask)
    torch.testing.assert_close(keyword, expected)


_ONES = torch.ones(2, 3, dtype=torch.float64)


@pytest.mark.parametrize(("num_positives", "message"), [
    (3, "num_positives must be a torch.Tensor; got int; pass torch.as_tensor(num_positives)"),
    (torch.ones(5), "num_positives must have shape (2,) (one count per query); got (5,)"),
    (torch.ones(2, 1), "num_positives must be 1-D; got shape (2, 1)"
                       "; pass num_positives.reshape(-1)"),
    (torch.ones(2, dtype=torch.bool), "num_positives must have a real floating or integer "
                                      "dtype; got torch.bool"),
    (torch.ones(2, device="meta"),
     "tensors must be on one device; got positive_counts on cpu, num_positives on meta"),
])  # fmt: skip
def test_the_number_of_positives_is_checked_by_name(num_positives, message):
    """It had met torch.where (a bare TypeError for an int) or a broadcast (a RuntimeError
    for a wrong length) inside the computation."""
    with pytest.raises(GradlabError) as caught:
        relaxed_tie_aware_ap(_ONES * 0.5, _ONES, num_positives=num_positives)
    assert str(caught.value) == message


META_MESSAGE = ("{} is a meta tensor (a shape without values); pass a tensor on a real device "
                "(cpu, cuda, ...)")


@pytest.mark.parametrize(("call", "name"), [
    (lambda: relaxed_tie_aware_ap(torch.ones(1, 2, device="meta"),
                                  torch.ones(1, 2, device="meta")), "positive_counts"),
    (lambda: relaxed_tie_aware_dcg(torch.ones(1, 2, 2, device="meta"),
                                   torch.ones(2, device="meta")), "level_counts"),
    (lambda: relaxed_tie_aware_dcg(torch.ones(1, 2, 2, device="meta"), torch.ones(2)),
     "level_counts"),
    (lambda: relaxed_tie_aware_dcg(torch.ones(1, 2, 2), torch.ones(2, device="meta")),
     "level_gains"),
])  # fmt: skip
def test_meta_tensors_are_refused_by_name_before_their_values_are_read(call, name):
    # The value checks read the counts back, which a meta tensor cannot give; the first meta
    # argument is named (the AP's two counts share one device, checked before).
    with pytest.raises(GradlabError) as caught:
        call()
    assert str(caught.value) == META_MESSAGE.format(name)


def test_a_distance_outside_the_bins_of_a_column_that_does_not_count_is_not_refused():
    distances = torch.tensor([[7.0, 1.0, 2.0]])  # column 0 left out: its distance is not read
    keep = torch.tensor([[False, True, True]])
    counts = soft_histogram(distances, torch.tensor([[0, 1, 0]]), 4, 2, candidate_mask=keep)
    assert counts.sum().item() == 2.0


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_triangular_kernel_is_the_loop_of_its_definition_in_the_input_dtype(dtype):
    distances = torch.tensor([[0.0, 0.25, 1.5], [2.0, 2.75, 3.0]], dtype=dtype)
    weights = triangular_kernel(distances, 4)
    assert weights.shape == (2, 3, 4) and weights.dtype == dtype
    expected = [[[max(0.0, 1.0 - abs(x - d)) for d in range(4)] for x in row]
                for row in distances.double().tolist()]  # fmt: skip
    assert weights.double().tolist() == expected
    # any number of dimensions, ten included
    assert triangular_kernel(torch.zeros([1] * 10, dtype=dtype), 2).shape == (*[1] * 10, 2)


def test_num_positives_may_differ_from_the_soft_counts_sum_by_rounding_and_no_more():
    # soft counts summed in another order (or in float32) differ from N+ by rounding, which is
    # accepted up to sqrt(eps) of the sum; a count short by more is refused (an AP above 1)
    positive = torch.full((1, 4), 250.0, dtype=torch.float64)  # N+ = 1000
    total = torch.full((1, 4), 500.0, dtype=torch.float64)
    exact = relaxed_tie_aware_ap(positive, total, "exact")
    below = torch.tensor([1000.0 - 1e-6], dtype=torch.float64)  # float32 would round it to 1000
    assert below.item() < 1000.0
    within = relaxed_tie_aware_ap(positive, total, "exact", num_positives=below)
    assert within.item() == pytest.approx(exact.item(), rel=1e-8)
    short = 1000.0 - 1e-3  # 1e-6 of the sum, past sqrt(eps) = 1.5e-8 of it
    with pytest.raises(GradlabError, match=r"^num_positives must be at least the relevant items"):
        relaxed_tie_aware_ap(positive, total, "exact",
                             num_positives=torch.tensor([short], dtype=torch.float64))


def test_a_nan_distance_is_refused_and_an_infinite_one_weighs_no_bin():
    # a NaN distance gave a row of NaN weights, silently
    with pytest.raises(GradlabError) as refused:
        triangular_kernel(torch.tensor([[0.5, math.nan], [math.nan, 1.0]]), 3)
    assert str(refused.value) == (
        "distances must not be NaN (a NaN distance has no bin); got 2 NaN of 4")
    weights = triangular_kernel(torch.tensor([math.inf, -math.inf, 0.5]), 3)
    assert weights.tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.5, 0.0]]


def test_the_nan_check_reads_no_meta_tensor_and_nothing_inside_skip_value_checks():
    with pytest.raises(GradlabError) as refused:
        triangular_kernel(torch.empty(3, device="meta"), 3)
    assert str(refused.value) == ("distances is a meta tensor (a shape without values); pass a "
                                  "tensor on a real device (cpu, cuda, ...)")
    with skip_value_checks():  # no value read: a NaN passes as NaN weights
        weights = triangular_kernel(torch.tensor([math.nan]), 2)
    assert all(math.isnan(value) for value in weights.flatten().tolist())


_CODES = torch.tanh(torch.linspace(-2.0, 2.0, 12).reshape(4, 3))
_LABELS = torch.tensor([0, 0, 1, 1])


@pytest.mark.parametrize(("change", "message"), [
    ({"codes": _CODES.tolist()}, "codes must be a torch.Tensor; got list"
                                 "; pass torch.as_tensor(codes)"),
    ({"codes": _CODES[0]}, "codes must be 2-D; got shape (3,)"),
    ({"labels": _LABELS.to("meta")}, "tensors must be on one device; got codes on cpu, labels "
                                     "on meta"),
    ({"objective": "dcg", "level_gains": [0.0, 1.0]}, "level_gains must be a torch.Tensor; "
                                                      "got list"
                                                      "; pass torch.as_tensor(level_gains)"),
    ({"level_gains": torch.tensor([0.0, math.nan])},
     "level_gains are the gains of objective='dcg'; objective='ap' has binary relevance and no "
     "gains, so pass none; got Tensor"),
    ({"objective": "dcg", "level_gains": torch.tensor([0.0, 1.0, 2.0])},
     "level_gains must have one gain per affinity level (2: a different label, the same "
     "label); got 3"),
    ({"objective": "dcg", "level_gains": torch.tensor([0.0, math.nan])},
     "level_gains must be finite; got NaN in entry 1 (1 entry of 2)"),
])  # fmt: skip
@pytest.mark.parametrize("function", [minibatch_objective_terms, minibatch_gradient_matrix_form])
def test_the_minibatch_arguments_are_checked_by_name_before_any_work(function, change, message):
    # codes met labels' shape check unchecked (a list: an AttributeError; 1-D: labels blamed),
    # meta labels were named "levels", list gains failed inside, gains of 'ap' were ignored
    arguments = {"codes": _CODES, "labels": _LABELS, **change}
    with pytest.raises(GradlabError) as raised:
        function(**arguments)
    assert str(raised.value) == message


@pytest.mark.parametrize("function", [minibatch_objective_terms, minibatch_gradient_matrix_form])
def test_a_bad_method_or_gain_is_refused_before_the_histograms_are_built(function, monkeypatch):
    import gradlab.functional.relaxed_ranking as module

    def never(*args, **kwargs):
        raise AssertionError("the histograms were built before the arguments were checked")

    monkeypatch.setattr(module, "soft_histogram", never)
    for change in ({"method": "bogus"}, {"objective": "dcg", "level_gains": torch.ones(3)}):
        with pytest.raises(GradlabError):
            function(_CODES, _LABELS, **change)


@pytest.mark.parametrize(("change", "message"), [
    ({"labels": _LABELS.float()}, "labels must have an integer dtype; got torch.float32"
                                  " (whole-number ids: pass labels.long())"),
    ({"objective": "dcg", "level_gains": torch.tensor([0, 1])},
     "level_gains must have a floating dtype; got torch.int64; pass level_gains.float()"),
    ({"objective": "dcg", "level_gains": torch.tensor([0.0, math.inf])},
     "level_gains must be finite; got inf in entry 1 (1 entry of 2)"),
])  # fmt: skip
def test_minibatch_labels_and_gains_of_the_wrong_kind_are_refused_first(monkeypatch, change,
                                                                        message):
    import gradlab.functional.relaxed_ranking as module

    def never(*args, **kwargs):
        raise AssertionError("the histograms were built before the arguments were checked")

    monkeypatch.setattr(module, "soft_histogram", never)
    with pytest.raises(GradlabError) as raised:
        minibatch_objective_terms(**{"codes": _CODES, "labels": _LABELS, **change})
    assert str(raised.value) == message


def test_the_dcg_count_limit_is_per_query_and_inclusive():
    # two queries of 1e7 items each: 2e7 in all, within the limit of each; exactly 1e7 is taken
    counts = torch.tensor([[[5e6, 0.0], [0.0, 5e6]]] * 2, dtype=torch.float64)
    assert relaxed_tie_aware_dcg(counts, torch.ones(2, dtype=torch.float64)).shape == (2,)
    over = counts.clone()
    over[1, 0, 0] += 1.0
    with pytest.raises(GradlabError) as raised:
        relaxed_tie_aware_dcg(over, torch.ones(2, dtype=torch.float64))
    assert str(raised.value) == (
        "level_counts must hold at most 1e+07 items per query (the discount stand-ins are "
        "defined up to that many); got 10000001")


@pytest.mark.parametrize("num_bins", [2**40, 2**62])
def test_triangular_kernel_refuses_weights_beyond_the_free_memory_before_allocating(num_bins):
    # an allocator's RuntimeError ("enforce fail at alloc_cpu.cpp"), or a storage size overflow
    from gradlab.memory import available_bytes

    free = available_bytes("cpu")
    if free is None:
        pytest.skip("this system does not say how much memory is free")
    distances = torch.rand(5)
    need = 6 * num_bins * 4  # the 5 x num_bins float32 weights and the centres
    assert need > free
    with pytest.raises(GradlabError) as raised:
        triangular_kernel(distances, num_bins)
    said = str(raised.value)
    assert said.startswith(f"num_bins = {num_bins} asks for 5 x {num_bins} weights "
                           f"({need / 2**30:.1f} GiB), more than cpu has free (")
    assert said.endswith(" GiB): pass fewer bins or fewer distances")


def test_triangular_kernel_refuses_an_allocation_that_fails_below_the_free_memory_check(
    monkeypatch,
):
    # weights under 1 GiB are not compared with the free memory first; the allocator failing
    # anyway (a fragmented or limited process) is the same one message, not its RuntimeError
    def failing(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't "
                           "allocate memory: you tried to allocate 67108864 bytes")

    num_bins = 2**24  # 6 x 2**24 float32 numbers: 0.375 GiB, below the free-memory check
    distances = torch.rand(5)
    monkeypatch.setattr(torch, "arange", failing)
    with pytest.raises(GradlabError) as raised:
        triangular_kernel(distances, num_bins)
    assert str(raised.value) == (
        f"num_bins = {num_bins} asks for 5 x {num_bins} weights ({6 * num_bins * 4 / 2**30:.1f} "
        "GiB), more than cpu could allocate: pass fewer bins or fewer distances")


def test_the_first_bad_level_is_named_and_level_zero_is_none():
    """Level 0 is a level (the lowest): the message names the first level outside
    0 .. num_levels - 1, not a 0 before it."""
    distances = torch.tensor([[0.5, 1.0, 2.0]])
    with pytest.raises(GradlabError) as caught:
        soft_histogram(distances, torch.tensor([[0, 5, 1]]), num_bins=4, num_levels=2)
    assert str(caught.value) == (
        "levels must lie in 0 .. num_levels - 1 = 1; got levels[0, 1] = 5 (1 of 3 entries)")


@pytest.mark.parametrize("meta", ["distances", "levels"])
def test_a_meta_tensor_is_refused_by_name_before_its_values_are_read(meta):
    tensors = {"distances": torch.tensor([[0.5, 1.0]]), "levels": torch.tensor([[0, 1]])}
    tensors[meta] = tensors[meta].to("meta")
    with pytest.raises(GradlabError) as caught:
        soft_histogram(tensors["distances"], tensors["levels"], num_bins=4, num_levels=2)
    assert str(caught.value) == (f"{meta} is a meta tensor (a shape without values); pass a "
                                 "tensor on a real device (cpu, cuda, ...)")
