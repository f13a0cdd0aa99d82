"""Seed 002's supplementary audit pinned piece by piece: the operation counters behind Table S2's
complexity claims, the Table S1 executor, and the edges of the checks.

The complexity checks only ask whether ``count / order`` stays within a factor 3 on a grid, so a
counter off by a constant factor (or by one) passes them; the counters are pinned here against
independent counts: hand-derived closed forms for small sizes, and for the merge sort a count
taken from Python's own stable sort (a merge of two sorted runs compares until one run is used
up, so it makes ``n - t`` comparisons, t the trailing run of the merged order from one side).
"""

import math
from fractions import Fraction

import numpy as np
import pytest

from gradlab.symbolic import Form
from gradlab.symbolic import supplementary_claims as supplementary
from gradlab.symbolic.claims import Verdict
from gradlab.symbolic.supplementary_claims import (
    TABLE_S1,
    TABLE_S1_CORRECTED,
    check_batch_size_conjecture,
    check_overhead,
    check_table_s1,
    count_blackbox,
    count_fastap,
    count_smooth_ap,
    fastap_with_operation_count,
    merge_sort_comparisons,
    order_check,
    run_pseudocode,
)


def comparisons_from_sorted(values) -> int:
    """Comparisons of a top-down merge sort (left half ``n // 2``, descending, ties to the left)
    from the merged orders alone: each node's order is Python's stable sort of its items."""

    def node(lo: int, hi: int) -> int:
        size = hi - lo
        if size <= 1:
            return 0
        middle = lo + size // 2
        order = sorted(range(lo, hi), key=lambda k: -values[k])  # stable: ties keep left first
        from_left = [k < middle for k in order]
        tail = 1  # the run of the merged order, from its end, drawn from one side only
        while tail < size and from_left[-tail - 1] == from_left[-1]:
            tail += 1
        return node(lo, middle) + node(middle, hi) + size - tail

    return node(0, len(values))


def merges_left_first(size: int) -> int:
    """Descending (already sorted) input: every merge uses up its left run, ``floor(n/2)`` each."""
    if size <= 1:
        return 0
    return merges_left_first(size // 2) + merges_left_first(size - size // 2) + size // 2


def merges_right_first(size: int) -> int:
    """Ascending input: every merge uses up its right run first, ``ceil(n/2)`` comparisons each."""
    if size <= 1:
        return 0
    return merges_right_first(size // 2) + merges_right_first(size - size // 2) + size - size // 2


def worst_case(size: int) -> int:
    """Knuth's bound for top-down merge sort: ``n ceil(lg n) - 2^ceil(lg n) + 1``."""
    depth = math.ceil(math.log2(size))
    return size * depth - 2**depth + 1


# --- Eq. 1 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("threshold", ["49/10000", "51/10000"])
def test_eq1_with_the_threshold_two_percent_off_fails(threshold):
    # |dG/dD| = 0.005 at |D| ~ 0.099 (tau = 0.01): the check's score differences must reach the
    # edge of the operating region, or a wrong threshold goes unnoticed.
    import sympy as sp

    from gradlab.symbolic.claims import with_parameters

    eq1 = next(c for c in supplementary.claims() if c.label == "eq1").printed
    off = with_parameters(eq1, "threshold off", threshold=sp.Rational(threshold))
    assert supplementary.check_operating_region(off).verdict == "fails"


# --- the merge sort behind Blackbox AP's count ------------------------------------------------


def test_closed_forms_by_hand_for_small_sizes():
    # n = 2: one comparison. n = 3 = 1 + 2: the pair (1), then 1 (left used up) or 2 (right).
    # n = 5 = 2 + 3: 1 + 2 + 2 = 5 descending, 1 + 3 + 3 = 7 ascending. n = 8: 4 + 4 + 4 = 12.
    assert [merges_left_first(n) for n in (1, 2, 3, 5, 8)] == [0, 1, 2, 5, 12]
    assert [merges_right_first(n) for n in (1, 2, 3, 5, 8)] == [0, 1, 3, 7, 12]


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 8, 13, 33])
def test_sorted_inputs_give_the_closed_forms(size):
    descending = list(range(size, 0, -1))
    assert merge_sort_comparisons(descending) == merges_left_first(size)
    assert merge_sort_comparisons(descending[::-1]) == merges_right_first(size)


@pytest.mark.parametrize("size", [3, 5, 7, 11])
def test_ties_go_to_the_left_run(size):
    # Equal items are taken from the left run first (a stable sort): counted like sorted input.
    assert merge_sort_comparisons([0.5] * size) == merges_left_first(size)


@pytest.mark.parametrize("size", [2, 4, 6, 9, 16, 31, 64, 100])
def test_random_inputs_match_the_count_from_stable_sorts(size):
    rng = np.random.default_rng(size)
    for values in (rng.random(size), rng.integers(0, 3, size).astype(float)):  # distinct, tied
        got = merge_sort_comparisons(values)
        assert got == comparisons_from_sorted(list(values))
        assert merges_left_first(size) <= got <= worst_case(size)


@pytest.mark.parametrize(("positives", "negatives"), [(4, 8), (5, 11), (64, 128)])
def test_blackbox_counts_a_merge_sort_of_the_whole_retrieval_set(positives, negatives):
    total = positives + negatives
    got = count_blackbox(positives, negatives)
    assert got == count_blackbox(positives, negatives)  # a fixed draw: the audit is reproducible
    assert merges_left_first(total) <= got <= worst_case(total)
    assert got > worst_case(max(positives, negatives))  # all M items sorted, not one side


# --- FastAP --------------------------------------------------------------------------------


def fastap_sum_by_loops(distances, positive, bins: int) -> float:
    """``sum_l h+_l H+_l / H_l`` with the triangular kernel of width 2/(L-1), float64 loops."""
    width = 2.0 / (bins - 1)
    hist_pos, hist_all = [0.0] * bins, [0.0] * bins
    for level in range(bins):
        for distance, is_positive in zip(distances, positive, strict=True):
            weight = max(0.0, 1.0 - abs(distance - level * width) / width)
            hist_all[level] += weight
            hist_pos[level] += weight if is_positive else 0.0
    total, cumulative_pos, cumulative_all = 0.0, 0.0, 0.0
    for level in range(bins):
        cumulative_pos += hist_pos[level]
        cumulative_all += hist_all[level]
        if cumulative_all > 0:
            total += hist_pos[level] * cumulative_pos / cumulative_all
    return total


@pytest.mark.parametrize(("items", "bins"), [(5, 3), (12, 5), (40, 9), (7, 2)])
def test_fastap_executes_the_histogram_sum(items, bins):
    rng = np.random.default_rng(items + bins)
    distances, positive = rng.random(items) * 2, rng.random(items) < 0.4
    distances[0] = 2.0  # the last centre, exactly
    value, _ = fastap_with_operation_count(distances, positive, bins)
    assert value == pytest.approx(fastap_sum_by_loops(distances, positive, bins), rel=1e-12)


def test_fastap_value_with_empty_leading_bins():
    # All mass in the last bin: the empty prefixes (H_l = 0) add nothing; h+ = H+ = 1, H = 2.
    value, _ = fastap_with_operation_count(np.array([2.0, 2.0]), np.array([True, False]), 5)
    assert value == pytest.approx(0.5, rel=1e-12)


@pytest.mark.parametrize(("items", "bins", "by_hand"), [(3, 2, 22), (5, 4, 60), (1, 10, 70)])
def test_fastap_operations_by_hand(items, bins, by_hand):
    # Per bin, one kernel weight per item into each histogram (2 M); two cumulative sums (2 L);
    # three operations per AP term (product, quotient, sum: 3 L). (3, 2): 12 + 4 + 6 = 22.
    rng = np.random.default_rng(0)
    _, operations = fastap_with_operation_count(
        rng.random(items) * 2, rng.random(items) < 0.5, bins
    )
    assert operations == by_hand
    assert count_fastap(items, bins) == by_hand


# --- Smooth-AP (Table S1 executed) -----------------------------------------------------------


@pytest.mark.parametrize("items", [4, 5, 9, 16])
def test_smooth_ap_count_is_one_sigmoid_per_entry_of_the_m_by_m_difference_matrix(items):
    assert count_smooth_ap(items) == items * items


def test_t_sigmoid_defaults_to_the_plain_logistic_and_counts_every_call():
    scores, counter = np.array([[-1.0, 0.0, 2.0]]), []
    code = "loss = t_sigmoid(scores) + 0 * t_sigmoid(repeat(scores, m, 0), tau=0.5).sum()"
    got = run_pseudocode(code, scores, np.ones((1, 3)), counter)
    assert np.allclose(
        got, [[1 / (1 + math.exp(1.0)), 0.5, 1 / (1 + math.exp(-2.0))]], rtol=0, atol=1e-15
    )
    assert counter == [3, 9]


def test_table_s1_as_corrected_is_one_minus_smooth_ap_by_hand():
    # Two items, the first positive, s = (0.5, 0.5): D = 0, sigmoid 1/2 off the diagonal.
    # R_1 = 1 + 1/2, R_pos_1 = 1 (no other positive): AP = 1 / 1.5, loss = 1/3.
    loss = run_pseudocode(TABLE_S1_CORRECTED, np.array([[0.5, 0.5]]), np.array([[1.0, 0.0]]))
    assert float(np.squeeze(loss)) == pytest.approx(1 / 3, rel=1e-14)
    printed = run_pseudocode(TABLE_S1, np.array([[0.5, 0.5]]), np.array([[1.0, 0.0]]))
    assert np.allclose(printed, 1 - 2)  # R_pos / R = gt_i broadcast over m = 2 columns


def test_table_s1_check_notices_a_pseudocode_off_by_a_small_amount():
    # A temperature of 0.011 instead of 0.01 moves the loss by far less than 1, yet it is wrong.
    off = Form(TABLE_S1_CORRECTED.replace("tau=0.01", "tau=0.011"), render=str)
    verdict = check_table_s1(off)
    assert verdict.verdict == "fails", verdict.detail
    assert check_table_s1(Form(TABLE_S1_CORRECTED, render=str)).verdict == "holds"


# --- the order check -----------------------------------------------------------------------


def test_order_check_handles_an_order_below_one():
    import sympy as sp

    m = sp.Symbol("M", positive=True)
    counts = {(("M", 10),): 10, (("M", 1000),): 1000}  # count = 1000 * (M / 1000) exactly
    verdict = order_check(m / 1000, counts)
    assert verdict.verdict == "holds" and "factor 1.00" in verdict.detail


def test_blackbox_grid_varies_the_positives_too():
    import sympy as sp

    # The count follows M = p + n; with p and n varied apart, an order in p alone cannot fit.
    positives = sp.Symbol("p", positive=True)
    verdict = supplementary.check_blackbox_order(Form(positives * sp.log(positives, 2)))
    assert verdict.verdict == "fails", verdict.detail


def test_smooth_ap_order_of_m_is_off_by_the_grid_span():
    import sympy as sp

    # count = M^2 (one sigmoid per entry), so count / M = M: from 8 to 512, a factor 64.
    verdict = supplementary.check_smooth_ap_order(Form(sp.Symbol("M", positive=True)))
    assert "varies by a factor 64 over 4 grid points" in verdict.detail


def test_fastap_order_without_l_is_off_by_the_closed_form_spread():
    import sympy as sp

    # count = 2 M L + 5 L (by hand, above); over M in {8, 128, 2048} and L in {5, 20, 320},
    # count / M is largest at (8, 320) and smallest at (2048, 5).
    ratios = [(2 * m * bins + 5 * bins) / m for m in (8, 128, 2048) for bins in (5, 20, 320)]
    spread = max(ratios) / min(ratios)
    verdict = supplementary.check_fastap_order(Form(sp.Symbol("M", positive=True)))
    assert f"varies by a factor {spread:.3g} over 9 grid points" in verdict.detail


# --- the batch-size conjecture: not testable here, a measurement passed in is context ---------


def test_without_a_measurement_the_detail_says_what_is_missing_and_how_to_measure_it():
    verdict = check_batch_size_conjecture(Form({"P over m": "rises"}))
    assert verdict.verdict == "not-testable-here"
    for phrase in (
        "needs Stanford Online Products with a ResNet-50, one epoch of training per m",
        "The miniature was not measured in this run: `gradlab audit --measure` takes the quick "
        "one (3-digit strings, a small CNN, m = 16..256, one epoch per m, 3 seeds)",
    ):
        assert phrase in verdict.detail


RISING = {
    "batch_sizes": [16, 32, 64],
    "per_class": 4,
    "seeds": [0, 1, 2],
    "settings": {"trained_at_m": {"P": [[0.1 + s / 1000, 0.2, 0.3 + s / 500] for s in range(3)]}},
}


def test_a_given_measurement_is_context_not_a_verdict():
    verdict = check_batch_size_conjecture(Form({"P over m": "rises"}), measurement=RISING)
    assert verdict.verdict == "not-testable-here", verdict.detail
    assert "(its outcome: reproduced)" in verdict.detail


def test_the_claim_table_carries_the_measurement_to_the_check():
    def conjecture(measurement):
        return next(c for c in supplementary.claims(measurement)
                    if c.label == "claim-p-grows-with-batch-size")  # fmt: skip

    measured = conjecture(RISING)
    assert "(its outcome: reproduced)" in measured.check(measured.printed).detail
    unmeasured = conjecture(None)
    assert "not measured in this run" in unmeasured.check(unmeasured.printed).detail


# --- the checks' samples are the documented ones ----------------------------------------------


def _recorded_calls(monkeypatch, name: str) -> list:
    calls = []
    monkeypatch.setattr(supplementary, name, lambda *args: calls.append(args) or 1)
    return calls


def test_order_checks_count_on_their_documented_grids(monkeypatch):
    import sympy as sp

    m = sp.Symbol("M", positive=True)
    calls = _recorded_calls(monkeypatch, "count_blackbox")
    supplementary.check_blackbox_order(Form(m))
    assert sorted(calls) == [(p, n) for p in (4, 64, 1024) for n in (8, 128, 2048)]
    calls = _recorded_calls(monkeypatch, "count_fastap")
    supplementary.check_fastap_order(Form(m))
    assert sorted(calls) == [(items, bins) for items in (8, 128, 2048) for bins in (5, 20, 320)]
    calls = _recorded_calls(monkeypatch, "count_smooth_ap")
    supplementary.check_smooth_ap_order(Form(m))
    assert sorted(calls) == [(8,), (32,), (128,), (512,)]


def test_eq1_check_draws_its_documented_sample(monkeypatch):
    seen = {}

    def capture(printed, truth, cases, *, tolerance):
        seen["cases"] = list(cases)
        return Verdict("holds", "")

    monkeypatch.setattr(supplementary, "numeric_agreement", capture)
    eq1 = next(c for c in supplementary.claims() if c.label == "eq1").printed
    supplementary.check_operating_region(eq1)
    rng = np.random.default_rng(7)  # the docstring's sample, drawn here in the same order
    expected = []
    for _ in range(12):
        size = int(rng.integers(5, 40))
        expected.append(rng.normal(scale=0.05, size=size))
    assert len(seen["cases"]) == len(expected)
    for got, want in zip(seen["cases"], expected, strict=True):
        np.testing.assert_array_equal(got, want)


def _true_eq1(scores) -> float:
    """Seed 002's P by hand: the share of the m x m differences whose sigmoid slope exceeds
    0.005 at tau = 0.01 (slope of sigmoid(D / tau) in D: g (1 - g) / tau)."""
    differences = scores[None, :] - scores[:, None]
    sigmoid = 1 / (1 + np.exp(-differences / 0.01))
    return float(np.mean(sigmoid * (1 - sigmoid) / 0.01 > 0.005))


def test_eq1_with_a_constant_slope_at_the_threshold_reports_the_true_p():
    # |dG/dD| = 0.005 everywhere: '> threshold' counts no entry, so the printed P is 0 and the
    # error is the true P itself; '>=' would count all of them (error 1 - P).
    import sympy as sp

    from gradlab.symbolic.claims import with_parameters

    eq1 = next(c for c in supplementary.claims() if c.label == "eq1").printed
    flat = with_parameters(eq1, "constant slope", **{"|dG/dD|": sp.Rational(1, 200)})
    rng = np.random.default_rng(7)
    cases = [rng.normal(scale=0.05, size=int(rng.integers(5, 40))) for _ in range(12)]
    errors = [_true_eq1(scores) for scores in cases]
    worst = int(np.argmax(errors))
    verdict = supplementary.check_operating_region(flat)
    assert verdict.verdict == "fails"
    assert f"= {errors[worst]:.3g} (case {worst + 1} of 12)" in verdict.detail, verdict.detail


def test_table_s1_check_notices_a_sigmoid_turned_into_a_step():
    # tau = 1e-6 makes the sigmoid a step at the check's score differences (~0.1); the check's
    # scale must keep differences of a few tau = 0.01, where the relaxation is still smooth.
    step = Form(TABLE_S1_CORRECTED.replace("tau=0.01", "tau=0.000001"), render=str)
    verdict = check_table_s1(step)
    assert verdict.verdict == "fails", verdict.detail


def test_table_s1_check_draws_its_documented_sample(monkeypatch):
    seen = []
    original = supplementary.run_pseudocode

    def recording(code, scores, gt):
        seen.append((scores, gt))
        return original(code, scores, gt)

    monkeypatch.setattr(supplementary, "run_pseudocode", recording)
    check_table_s1(Form(TABLE_S1_CORRECTED, render=str))
    rng = np.random.default_rng(5)  # the docstring's draws, in the same order
    assert len(seen) == 10
    for scores, gt in seen:
        np.testing.assert_array_equal(scores, rng.normal(size=(1, 9)) * 0.1)
        relevant = (rng.random((1, 9)) < 0.4).astype(float)
        relevant[0, 0] = 1.0
        np.testing.assert_array_equal(gt, relevant)


# --- Eq. 1's index ranges are part of its form ----------------------------------------------


def _eq1():
    return next(c for c in supplementary.claims() if c.label == "eq1").printed


@pytest.mark.parametrize(("key", "bound"), [("i from", 1), ("j from", 1), ("i to", "m - 2")])
def test_eq1_with_a_range_that_skips_a_row_or_column_fails(key, bound):
    import sympy as sp

    from gradlab.symbolic.claims import with_parameters

    shifted = with_parameters(_eq1(), "shifted", **{key: sp.sympify(bound, locals={
        "m": supplementary.m_})})  # fmt: skip
    assert supplementary.check_operating_region(shifted).verdict == "fails"


def test_eq1_without_the_last_column_misses_its_entries_in_the_region():
    from gradlab.symbolic.claims import with_parameters

    shifted = with_parameters(_eq1(), "shifted", **{"j to": supplementary.m_ - 2})
    verdict = supplementary.check_operating_region(shifted)
    # the documented sample; the form misses the entries (i, m - 1) whose slope
    # sigmoid (1 - sigmoid) / tau exceeds 0.005, out of m^2 (float64 loops)
    rng = np.random.default_rng(7)
    cases = [rng.normal(scale=0.05, size=int(rng.integers(5, 40))) for _ in range(12)]
    errors = []
    for scores in cases:
        m, last = len(scores), scores[-1]
        slopes = [1 / (1 + math.exp(-(last - s_i) / 0.01)) for s_i in scores]
        errors.append(sum(g * (1 - g) / 0.01 > 0.005 for g in slopes) / m**2)
    worst = max(errors)
    assert (verdict.verdict, verdict.detail) == (
        "fails", f"max |printed - true| = {worst:.3g} (case {errors.index(worst) + 1} of 12).")


@pytest.mark.parametrize(("key", "bound"), [("j to", "m"), ("i from", -1)])
def test_eq1_with_a_range_outside_the_matrix_says_so(key, bound):
    import sympy as sp

    from gradlab.symbolic.claims import with_parameters

    shifted = with_parameters(_eq1(), "shifted", **{key: sp.sympify(bound, locals={
        "m": supplementary.m_})})  # fmt: skip
    verdict = supplementary.check_operating_region(shifted)
    m = int(np.random.default_rng(7).integers(5, 40))  # the documented sample's first size
    ranges = {"i from": 0, "i to": m - 1, "j from": 0, "j to": m - 1,
              key: sp.sympify(bound, locals={"m": m})}  # fmt: skip
    shown = ", ".join(f"{name} = {value}" for name, value in ranges.items())
    assert (verdict.verdict, verdict.detail) == ("fails", f"at m = {m} the ranges ({shown}) "
                                                 f"leave the m x m matrix, whose indices run "
                                                 f"0..{m - 1}.")  # fmt: skip


# --- Table S1: what R_pos holds, as printed and read element-wise --------------------------


def test_table_s1_detail_recognises_r_pos_as_the_rank_among_positives_when_it_is():
    """The corrected code with a wrong last line: its R_pos is the rank among the positives
    (every draw), so the detail blames the loss, not R_pos."""
    code = supplementary.TABLE_S1_CORRECTED.replace("loss = 1 - AP", "loss = 2 - AP")
    verdict = supplementary.check_table_s1(Form(code))
    draws = 10  # the documented sample: 10 draws of 9 scores
    assert verdict.verdict == "fails"
    assert verdict.detail.endswith(f"As printed, R_pos has shape (9,): R_pos is the rank among "
                                   f"the positives in {draws} of {draws} draws, and the loss "
                                   f"takes {draws} values over the draws.")  # fmt: skip


def test_table_s1_detail_says_that_even_element_wise_r_pos_is_not_the_rank_among_positives():
    # Element-wise, R_pos = gt * R, so R_pos / R = gt_i and AP = sum(gt^2) / sum(gt) = 1: the
    # loss is 0 for any scores. As printed, gt.T * R broadcasts to m x m, R_pos / R sums to m
    # over a row and 1 - AP = 1 - m = -8 for m = 9.
    detail = check_table_s1(Form(TABLE_S1, render=str)).detail
    assert ("As printed, R_pos has shape (9, 9): R_pos is the rank among the positives in none "
            "of the draws, and the loss is -8 on every draw, whatever the scores") in detail
    assert ("read element-wise (gt[0] * R), R_pos has shape (9,): R_pos is the rank among the "
            "positives in none of the draws, and the loss is 0 on every draw") in detail


def test_table_s1_code_that_does_not_run_fails_and_the_detail_names_the_error_per_reading():
    # the name is undefined as printed and in the element-wise reading alike
    code = TABLE_S1.replace("R_pos = gt.T * R", "R_pos = gt.T * R * undefined_name")
    verdict = check_table_s1(Form(code, render=str))
    assert verdict.verdict == "fails"
    assert verdict.detail.endswith("As printed the code raises NameError; read element-wise "
                                   "(gt[0] * R) the code raises NameError.")  # fmt: skip


def test_table_s1_detail_reads_the_loss_to_12_decimals():
    # 1 - AP * 4e-13 varies only past the 12th decimal over the draws: a constant loss there
    code = TABLE_S1_CORRECTED.replace("loss = 1 - AP", "loss = 1 - AP * 4e-13")
    verdict = check_table_s1(Form(code, render=str))
    assert verdict.detail.endswith("and the loss is 1 on every draw, whatever the scores.")


def test_table_s1_r_pos_off_the_rank_among_positives_by_1e_9_is_not_that_rank():
    # 1e-9 off: far outside the 1e-12 of the comparison, inside a default relative tolerance
    line = "R_pos = 1 + sum(D_ * (1 - eye(m)) * gt, 1)"
    code = TABLE_S1_CORRECTED.replace(line, line.replace("1 + sum", "1 + 1e-9 + sum"))
    verdict = check_table_s1(Form(code, render=str))
    assert verdict.verdict == "fails"
    assert verdict.detail.endswith("As printed, R_pos has shape (9,): R_pos is the rank among the "
                                   "positives in none of the draws, and the loss takes 10 values "
                                   "over the draws.")  # fmt: skip


def test_every_table_s1_slip_changes_a_line_and_fails():
    slips = supplementary.table_s1_slips(Form(TABLE_S1_CORRECTED, render=str))
    assert len(slips) == len(supplementary.TABLE_S1_SLIPS) >= 3
    for slip in slips:
        assert slip.value != TABLE_S1_CORRECTED
        assert check_table_s1(slip).verdict == "fails", slip.name


# --- the overhead: a bound the table supports ------------------------------------------------


def _overhead(bound, backbone=705):
    return check_overhead(Form({"bound (ms)": bound, "backbone (ms)": backbone}))


def test_overhead_bound_is_the_whole_ms_above_the_largest_gap():
    # Table S2: 6.6 - 3.7 = 2.9 ms and 6.6 - 4.2 = 2.4 ms; the whole-ms bound above 2.9 is 3.
    verdict = _overhead(3)
    assert verdict.verdict == "holds"
    assert "by 2.9 ms (Blackbox AP) and 2.4 ms (FastAP);" in verdict.detail
    assert f"(6.6 ms is {6.6 / 705:.2%} of the 705 ms backbone)" in verdict.detail
    for bound in (2, 4, 6):
        assert _overhead(bound).verdict == "fails", bound
    assert _overhead(2).detail.endswith("the smallest whole-ms bound above the largest gap is 3 "
                                        "ms, not 2 ms.")  # fmt: skip
    other = _overhead(3, backbone=700)
    assert (other.verdict, other.detail) == ("fails",
                                             "Table S2's backbone takes [705.0] ms, not 700.")


def test_a_gradient_count_in_other_symbols_is_named_and_fails():
    import sympy as sp

    verdict = supplementary.check_fig_s7_gradients(Form(supplementary.n_pos * sp.Symbol("x")))
    assert (verdict.verdict, verdict.detail) == ("fails", "x*|P| is not a count in m and |P|.")


@pytest.mark.parametrize("positives", [0, -1, 2.0, True, "3"])
def test_ap_attainable_refuses_a_positive_count_that_is_not_an_int_of_at_least_1(positives):
    from gradlab.errors import GradlabError

    with pytest.raises(GradlabError) as refused:
        supplementary.ap_attainable(positives, 0.5)
    assert str(refused.value) == f"positives must be an int >= 1; got {positives!r}"


def test_an_eq1_form_without_its_threshold_cannot_be_evaluated():
    pieces = {key: value for key, value in _eq1().value.items() if key != "threshold"}
    verdict = supplementary.check_operating_region(Form(pieces))
    assert (verdict.verdict, verdict.detail) == (
        "fails", "Eq. 1's form cannot be evaluated: threshold = nan is not an expression in [] "
                 "alone.")  # fmt: skip


@pytest.mark.parametrize("key", ["threshold", "j to"])
def test_an_eq1_form_with_a_piece_in_other_symbols_cannot_be_evaluated(key):
    import sympy as sp

    from gradlab.symbolic.claims import with_parameters

    symbols = {"threshold": "[]", "j to": "['m']"}[key]
    stray = with_parameters(_eq1(), "stray", **{key: sp.Symbol("y")})
    verdict = supplementary.check_operating_region(stray)
    assert (verdict.verdict, verdict.detail) == (
        "fails", f"Eq. 1's form cannot be evaluated: {key} = y is not an expression in "
                 f"{symbols} alone.")  # fmt: skip


def test_an_eq1_piece_in_an_m_of_other_assumptions_names_the_claims_m():
    # a reader's own sp.Symbol("m") was refused as "m*(m - 1) is not an expression in ['m']
    # alone", which read as a contradiction: SymPy holds the two m's apart
    import sympy as sp

    from gradlab.symbolic.claims import with_parameters

    m = sp.Symbol("m")
    stray = with_parameters(_eq1(), "another m", denominator=m * (m - 1))
    verdict = supplementary.check_operating_region(stray)
    assert (verdict.verdict, verdict.detail) == (
        "fails", "Eq. 1's form cannot be evaluated: denominator = m*(m - 1) is not an "
                 "expression in ['m'] alone (its m is another symbol than the claim's: SymPy "
                 "tells symbols apart by their assumptions; use sp.Symbol('m', integer=True, "
                 "positive=True), or the claim's own symbols).")  # fmt: skip
    claims_m = sp.Symbol("m", integer=True, positive=True)  # as the message says: evaluated
    as_printed = with_parameters(_eq1(), "the claim's m", denominator=claims_m**2)
    assert supplementary.check_operating_region(as_printed).verdict == "holds"
    slip = with_parameters(_eq1(), "m(m - 1)", denominator=claims_m * (claims_m - 1))
    assert supplementary.check_operating_region(slip).detail.startswith("max |printed - true|")


# --- Fig. S5 and S6: the printed APs -------------------------------------------------------


def _printed_as(ap: Fraction) -> set[float]:
    """The 3-decimal value an exact AP is printed as, halves rounded up: the k / 1000 with
    k / 1000 - 1/2000 <= ap < k / 1000 + 1/2000, that is 2000 ap - 1 < 2k <= 2000 ap + 1."""
    return {k / 1000 for k in range(math.floor((2000 * ap - 1) / 2) + 1,
                                    math.floor((2000 * ap + 1) / 2) + 1)}  # fmt: skip


def _all_aps(positives: int, items: int) -> set[float]:
    """Every AP (3 decimals) of ``positives`` relevant items among ``items``, by enumeration."""
    from itertools import combinations

    values = set()
    for ranks in combinations(range(1, items + 1), positives):
        ap = sum(Fraction(k, r) for k, r in enumerate(ranks, 1)) / positives
        values |= _printed_as(ap)
    return values


@pytest.mark.slow
@pytest.mark.parametrize("positives", [1, 3, 4, 5])
def test_attainable_aps_near_one_match_an_enumeration_of_rankings(positives):
    # AP >= 0.9 needs r_p <= p / (0.9 p - (p - 1)) (every earlier term at most 1): at most 10
    # for p = 5, so 14 items enumerate every ranking with such an AP.
    seen = {v for v in _all_aps(positives, 14) if v >= 0.9}
    for thousandths in range(900, 1001):
        value = thousandths / 1000
        assert supplementary.ap_attainable(positives, value) == (value in seen), value


@pytest.mark.slow
def test_one_positive_attains_exactly_the_printed_reciprocals_ties_either_way():
    # AP = 1 / r; from r = 2000 on, 1 / r is at most half a thousandth (printed 0.000 or 0.001)
    seen = set().union(*(_printed_as(Fraction(1, r)) for r in range(1, 2001)))
    assert 0.063 in seen and 0.062 not in seen  # 1/16 = 0.0625, a half: rounded up
    assert supplementary.ap_attainable(1, 0.0634)  # read to 3 decimals: 0.063
    for thousandths in range(1, 1001):
        value = thousandths / 1000
        assert supplementary.ap_attainable(1, value) == (value in seen), value


@pytest.mark.slow
def test_two_positives_attain_the_aps_of_an_enumeration_from_0_3_up():
    # AP = (1/r1 + 2/r2) / 2 = (r2 + 2 r1) / (2 r1 r2) with r1 < r2. An AP of 0.2995 or more
    # needs r1 <= 4 (r1 = 5 gives at most (1/5 + 2/6) / 2 = 0.267); as r2 grows the AP falls
    # to 1 / (2 r1), within 1e-5 of it from r2 = 1e5 on, which smaller r2 print alike.
    seen = set()
    for first in range(1, 5):
        second = np.arange(first + 1, 100_001, dtype=np.int64)
        numerator, denominator = second + 2 * first, 2 * first * second
        # k with 2000 AP - 1 < 2k <= 2000 AP + 1 (halves up), times 2 denominator: exact
        low = (2000 * numerator - denominator) // (2 * denominator) + 1
        high = (2000 * numerator + denominator) // (2 * denominator)
        for a, b in zip(low.tolist(), high.tolist(), strict=True):
            seen.update(k / 1000 for k in range(a, b + 1))
    for thousandths in range(300, 1001):
        value = thousandths / 1000
        assert supplementary.ap_attainable(2, value) == (value in seen), value


def test_the_baseline_of_fig_s5_b_pins_its_positives():
    # (4 + 5/6) / 5 = 0.9667: one negative before the fifth positive. With 4 positives the
    # largest AP below 1 is (3 + 4/5) / 4 = 0.95; with 6 the APs near it are (5 + 6/7) / 6 =
    # 0.976 and (5 + 6/8) / 6 = 0.958.
    assert [supplementary.ap_attainable(p, 0.967) for p in (4, 5, 6)] == [False, True, False]


def _fig(label):
    return next(c for c in supplementary.claims() if c.label == label)


@pytest.mark.slow
def test_fig_s5_holds_and_a_wrong_positive_count_or_case_fails():
    from gradlab.symbolic.claims import with_parameters

    claim = _fig("claim-fig-s5-ap")
    verdict = claim.check(claim.printed)
    assert verdict.verdict == "holds", verdict.detail
    # gains by hand: 1 - 0.854, 1 - 0.967, 0.758 - 0.335, 0.971 - 0.433
    assert "gains a +0.146, b +0.033, c +0.423, d +0.538" in verdict.detail
    six = claim.check(with_parameters(claim.printed, "six", **{"|P|": (11, 6, 7, 11)}))
    assert six.verdict == "fails" and "no ranking with |P| = 6 has AP 0.967" in six.detail
    for slip in claim.mutants:
        assert claim.check(slip).verdict == "fails", slip.name


_FIG_S5 = {"|P|": (11, 5, 7, 11), "baseline AP": (0.854, 0.967, 0.335, 0.433),
           "Smooth-AP AP": (1, 1, 0.758, 0.971), "AP = 1 for cases": (1, 2)}  # fmt: skip


@pytest.mark.parametrize(("change", "detail"), [
    # a Smooth-AP AP no ranking of its |P| gives (7 positives: 0.999 needs a negative after
    # rank 7000); the baseline's are attainable
    ({"Smooth-AP AP": (1, 1, 0.999, 0.971)}, "no ranking with |P| = 7 has AP 0.999."),
    ({"AP = 1 for cases": (1, 3)}, "AP = 1.000 in cases ['a', 'b'], not in cases ['a', 'c']."),
    ({"AP = 1 for cases": (2, 9)}, "AP = 1.000 in cases ['a', 'b'], not in cases ['b', '9.0']."),
    ({"AP = 1 for cases": (2, 8)}, "AP = 1.000 in cases ['a', 'b'], not in cases ['b', 'h']."),
    ({"|P|": (14, 5, 7, 11)}, "case a has |P| = 14, more than the 13 shown."),
    ({"|P|": (0, 5, 7, 11)}, "|P| = 0 is not a whole number >= 1."),
    ({"|P|": (3 / 2, 5, 7, 11)}, "|P| = 1.5 is not a whole number >= 1."),
    ({"|P|": (11, 5, 7)}, "3 values of |P| for 4 queries."),
    ({"baseline AP": (0.854, 1.2, 0.335, 0.433)}, "AP 1.2 outside (0, 1]."),
    # every problem of a stage, joined
    ({"baseline AP": (1.2, 0.967, 1.5, 0.433)}, "AP 1.2 outside (0, 1]; AP 1.5 outside (0, 1]."),
    ({"AP = 1 for cases": (1,), "Smooth-AP AP": (1, 1, 0.999, 0.971)},
     "AP = 1.000 in cases ['a', 'b'], not in cases ['a']; no ranking with |P| = 7 has AP 0.999."),
])  # fmt: skip
def test_fig_s5_names_what_is_wrong_with_a_table(change, detail):
    verdict = supplementary.check_fig_s5(Form({**_FIG_S5, **change}))
    assert (verdict.verdict, verdict.detail) == ("fails", detail)


def test_fig_s5_is_inconclusive_when_the_search_for_a_ranking_gives_up(monkeypatch):
    monkeypatch.setattr(supplementary, "ap_attainable", lambda positives, value: None)
    verdict = supplementary.check_fig_s5(Form(_FIG_S5))
    assert (verdict.verdict, verdict.detail) == (
        "inconclusive", "the search for a ranking ran out of its budget")


def test_fig_s5_takes_every_whole_positive_count_up_to_the_13_shown():
    assert supplementary.check_fig_s5(Form({**_FIG_S5, "|P|": (13, 5, 7, 11)})).verdict == "holds"
    one = supplementary.check_fig_s5(Form({**_FIG_S5, "|P|": (1, 5, 7, 11)}))
    assert one.detail == "no ranking with |P| = 1 has AP 0.854."  # a count, not a refusal


def test_fig_s6_gains_by_hand_and_the_row_read_across_fails():
    claim = _fig("claim-fig-s6-ap")
    verdict = claim.check(claim.printed)
    assert verdict.verdict == "holds"
    # 0.637 - 0.240 = 0.397 (0.397 / 0.240 = 165 %), 0.844 - 0.348 = 0.496 (143 %),
    # 0.774 - 0.435 = 0.339 (78 %)
    assert "a +0.397 (+165%), b +0.496 (+143%), c +0.339 (+78%)" in verdict.detail
    across = next(slip for slip in claim.mutants if slip.name.startswith("row read as"))
    assert claim.check(across).detail == "case b falls from 0.637 to 0.435."
    for slip in claim.mutants:
        assert claim.check(slip).verdict == "fails", slip.name


@pytest.mark.parametrize(("before", "after", "detail"), [
    ((0, 0.3), (0.5, 1.5), "AP 0.0 outside (0, 1]; AP 1.5 outside (0, 1]."),  # no gain computed
    ((0.5, 0.3), (0.5, 0.4), "case a falls from 0.5 to 0.5."),  # an equal AP is no gain
    (("x",), (0.5,), "AP x outside (0, 1]."),  # a symbol is no AP
])  # fmt: skip
def test_fig_s6_names_each_problem_of_a_table(before, after, detail):
    import sympy as sp

    value = {"baseline AP": sp.Tuple(*map(sp.sympify, before)),
             "Smooth-AP AP": sp.Tuple(*map(sp.sympify, after))}  # fmt: skip
    verdict = supplementary.check_fig_s6(Form(value))
    assert (verdict.verdict, verdict.detail) == ("fails", detail)


def test_fig_s6_reads_a_single_number_as_one_query():
    verdict = supplementary.check_fig_s6(Form({"baseline AP": 0.24, "Smooth-AP AP": 0.637}))
    # 0.637 - 0.240 = 0.397, 0.397 / 0.240 = 165 %
    assert (verdict.verdict, verdict.detail) == (
        "holds", "every query gains: a +0.397 (+165%) (AP points, relative gain).")


@pytest.mark.parametrize(("order", "problem"), [
    ("M**2", ""), ("n*log(n)", ""), ("L*M", ""), ("M**2*log(M)**2", ""),
    ("2*M**2", "the factor 2"), ("(M + 1)**2", "the factor (M + 1)**2"),
    ("M*log(M)/log(2)", "the factor 1/log(2)"), ("-M**2", "the factor -1"),
    ("M*sin(M)", "the factor sin(M)"),  # a function of one argument other than log
])  # fmt: skip
def test_an_order_is_a_product_of_powers_of_variables_and_their_logs(order, problem):
    import sympy as sp

    symbols = {name: sp.Symbol(name, positive=True) for name in ("M", "n", "L")}
    expression = sp.sympify(order, locals=symbols)
    got = supplementary.order_form_problem(expression)
    if problem:
        assert got == (f"{problem} of {expression} is not a positive power of a variable or of "
                       f"its log")  # fmt: skip
    else:
        assert got == ""
    if problem:
        verdict = supplementary.check_smooth_ap_order(Form(sp.sympify(order, locals=symbols)))
        assert verdict.verdict == "fails" and verdict.detail.startswith("not written as an order")


def test_an_unevaluated_zeroth_power_is_no_order_of_growth():
    import sympy as sp

    M = sp.Symbol("M", positive=True)
    order = sp.Mul(M, sp.Pow(M, 0, evaluate=False), evaluate=False)  # M * M**0, as written
    assert supplementary.order_form_problem(order).startswith("the factor M**0 of ")


# --- Fig. S7: which entries receive gradient -----------------------------------------------


def _entries_with_gradient_by_differences(size: int, positives: int) -> int:
    """Entries of D whose central difference moves 1 - Smooth-AP (float64 loops)."""
    scores = [0.001 * k for k in range(size)]
    base = [[scores[j] - scores[i] for j in range(size)] for i in range(size)]

    def loss(d):
        total = 0.0
        for i in range(positives):
            others = [1 / (1 + math.exp(-d[i][j] / 0.01)) for j in range(size) if j != i]
            relevant = [1 / (1 + math.exp(-d[i][j] / 0.01)) for j in range(positives) if j != i]
            total += (1 + sum(relevant)) / (1 + sum(others))
        return 1 - total / positives

    count = 0
    for i in range(size):
        for j in range(size):
            up = [row[:] for row in base]
            down = [row[:] for row in base]
            up[i][j] += 1e-6
            down[i][j] -= 1e-6
            count += abs(loss(up) - loss(down)) > 1e-12
    return count


@pytest.mark.parametrize(("size", "positives"), [(5, 1), (6, 2), (7, 3)])
def test_gradient_entries_match_finite_differences(size, positives):
    got = supplementary.count_gradient_entries(size, positives)
    assert got == _entries_with_gradient_by_differences(size, positives)


def _table_s1_gradient_by_hand(size: int, positives: int) -> list[list[float]]:
    """dL/dD_ij of 1 - mean over the relevant i of R_pos(i) / R(i), derived by hand (float64
    loops): -(1/|P|) sigmoid'(D_ij) ([j relevant] / R(i) - R_pos(i) / R(i)^2) for relevant i,
    j != i; sigmoid'(x) = sigmoid (1 - sigmoid) / tau."""
    scores = [0.001 * k for k in range(size)]
    grad = [[0.0] * size for _ in range(size)]
    for i in range(positives):
        sig = [1 / (1 + math.exp(-(scores[j] - scores[i]) / 0.01)) for j in range(size)]
        rank = 1 + sum(sig[j] for j in range(size) if j != i)
        rank_pos = 1 + sum(sig[j] for j in range(positives) if j != i)
        for j in range(size):
            if j != i:
                slope = sig[j] * (1 - sig[j]) / 0.01
                grad[i][j] = -slope * ((j < positives) / rank - rank_pos / rank**2) / positives
    return grad


@pytest.mark.parametrize(("size", "positives"), [(5, 1), (6, 2), (7, 3), (4, 4)])
def test_table_s1_gradient_is_the_gradient_derived_by_hand(size, positives):
    import torch

    got = supplementary.table_s1_gradient(size, positives)
    assert got.dtype == torch.float64 and got.shape == (size, size)
    expected = torch.tensor(_table_s1_gradient_by_hand(size, positives), dtype=torch.float64)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(("size", "positives", "message"), [
    (1, 1, "size must be an int >= 2; got 1"),
    (4.0, 1, "size must be an int >= 2; got 4.0"),
    (True, 1, "size must be an int >= 2; got True"),
    (4, 0, "positives must be an int from 1 to 4; got 0"),
    (4, 5, "positives must be an int from 1 to 4; got 5"),
    (4, "2", "positives must be an int from 1 to 4; got '2'"),
])  # fmt: skip
def test_table_s1_gradient_refuses_sizes_it_cannot_build(size, positives, message):
    from gradlab.errors import GradlabError

    for function in (supplementary.table_s1_gradient, supplementary.count_gradient_entries):
        with pytest.raises(GradlabError) as raised:
            function(size, positives)
        assert str(raised.value) == message


def test_fig_s7_check_tries_m_16_and_names_each_setting_a_count_gets_wrong():
    # right at m = 6 and 9, off by (m - 6)(m - 9) = 70 at m = 16 only
    m, k = supplementary.m_, supplementary.n_pos
    verdict = supplementary.check_fig_s7_gradients(Form(k * (m - 1) + (m - 6) * (m - 9)))
    wrong = [f"m = 16, |P| = {p}: {p * 15} receive gradient, not {p * 15 + 70}" for p in (1, 2, 4)]
    assert (verdict.verdict, verdict.detail) == ("fails",
                                                 "; ".join(wrong) + " (3 of 9 settings differ).")


def test_fig_s7_as_printed_fails_and_the_positive_rows_hold():
    claim = _fig("claim-fig-s7-gradients")
    assert claim.check(claim.printed).verdict == "fails"
    assert claim.check(claim.correction).verdict == "holds"


# --- the records as a whole: verdicts and mutants ----------------------------------------------


NOT_TESTABLE = ("claim-p-grows-with-batch-size", "claim-fig-s1-s4-gains", "claim-p-explains-table5")


@pytest.mark.slow
def test_claims_about_the_authors_experiments_are_not_testable_here_and_never_fail():
    from gradlab.symbolic.claims import evaluate

    for claim in supplementary.claims():
        verdict = evaluate(claim).verdict
        if claim.label in NOT_TESTABLE:
            assert verdict == "not-testable-here", claim.label
            assert set(claim.inapplicable) == set(supplementary.OPERATOR_NAMES)
        else:
            assert verdict in ("holds", "holds-with-correction"), (claim.label, verdict)


@pytest.mark.slow  # checks every claim of the module with its mutants
def test_every_record_has_three_killed_mutants_from_two_operators_or_says_why_not():
    from gradlab.symbolic.claims import audit_claim

    for claim in supplementary.claims():
        if claim.label in NOT_TESTABLE:
            continue
        record = audit_claim(claim, mutants=True)
        operators = {m["operator"] for m in record["mutant_results"]}
        assert record["mutants"] >= 3, claim.label
        assert record["mutants_killed"] == record["mutants"], claim.label
        missing = set(supplementary.OPERATOR_NAMES) - operators
        assert len(operators) >= 2 or missing <= set(claim.inapplicable), claim.label
        texts = {claim.printed.text(), claim.correction.text() if claim.correction else None}
        assert not texts & {m["formula"] for m in record["mutant_results"]}, claim.label
