"""Harmonic and discount stand-ins against mpmath, their gradients, and the error analysis."""

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import digamma

from gradlab import GradlabError
from gradlab.functional import (
    HARMONIC_METHODS,
    discount_gap,
    discount_rate,
    harmonic_gap,
    harmonic_log_error,
    harmonic_number,
    harmonic_rate,
    logarithmic_integral,
)
from tests.helpers.default_device import assert_unchanged_under_another_default_device
from tests.reference.relaxed_ranking_loops import harmonic_stand_in


@pytest.mark.parametrize("x", [1.0001, 1.3, 2.0, 3.7, 50.0, 1234.5, 9.9e5])
def test_logarithmic_integral_matches_mpmath(x):
    value = logarithmic_integral(torch.tensor([x], dtype=torch.float64)).item()
    assert value == pytest.approx(float(mpmath.li(x)), rel=1e-13)


def test_logarithmic_integral_gradient():
    x = torch.tensor([1.05, 2.0, 17.0, 400.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(logarithmic_integral, (x,))


@pytest.mark.slow
@given(a=st.integers(0, 300), n=st.integers(0, 300))
def test_exact_methods_are_exact_at_integers(a, n):
    low = torch.tensor([float(a)], dtype=torch.float64)
    high = torch.tensor([float(a + n)], dtype=torch.float64)
    harmonic_truth = float(mpmath.harmonic(a + n) - mpmath.harmonic(a))
    discount_truth = math.fsum(1.0 / math.log2(t + 1) for t in range(a + 1, a + n + 1))
    assert harmonic_gap(low, high, "exact").item() == pytest.approx(harmonic_truth, abs=1e-12)
    assert discount_gap(low, high, "exact").item() == pytest.approx(discount_truth, abs=1e-12)
    assert harmonic_number(high).item() == pytest.approx(float(mpmath.harmonic(a + n)), abs=1e-12)


@pytest.mark.slow
@given(a=st.floats(1.0, 500.0), n=st.floats(0.0, 500.0))
def test_log_method_is_the_printed_formula_above_one_item(a, n):
    low = torch.tensor([a], dtype=torch.float64)
    high = torch.tensor([a + n], dtype=torch.float64)
    assert harmonic_gap(low, high, "log").item() == pytest.approx(math.log((a + n) / a), abs=1e-12)
    printed = math.log(2) * float(mpmath.li(a + n + 1) - mpmath.li(a + 1))
    assert discount_gap(low, high, "log").item() == pytest.approx(printed, abs=1e-10)
    midpoint = math.log((a + n + 0.5) / (a + 0.5))
    assert harmonic_gap(low, high, "midpoint").item() == pytest.approx(midpoint, abs=1e-12)


@pytest.mark.parametrize("method", HARMONIC_METHODS)
@pytest.mark.parametrize("gap", [harmonic_gap, discount_gap])
def test_finite_and_differentiable_at_the_first_bin_and_below_one_item(method, gap):
    low = torch.tensor([0.0, 0.0, 0.4, 0.999, 1.001], dtype=torch.float64, requires_grad=True)
    high = torch.tensor([0.0, 1.0, 0.9, 2.5, 3.3], dtype=torch.float64, requires_grad=True)
    value = gap(low, high, method)
    assert bool(torch.isfinite(value).all())
    grads = torch.autograd.grad(value.sum(), (low, high))
    assert all(bool(torch.isfinite(g).all()) for g in grads)
    # A first bin of one item: H(1) - H(0) = 1 and D(1) = 1 for the log and exact forms.
    if method != "midpoint":
        assert value[1].item() == pytest.approx(1.0)


@pytest.mark.parametrize("method", HARMONIC_METHODS)
@pytest.mark.parametrize("gap", [harmonic_gap, discount_gap])
def test_gradients_match_finite_differences(method, gap):
    low = torch.tensor([0.3, 1.7, 4.2, 10.6], dtype=torch.float64, requires_grad=True)
    high = torch.tensor([0.8, 3.4, 4.9, 15.3], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: gap(a, b, method), (low, high))


def test_log_antiderivative_is_continuously_differentiable_at_one():
    x = torch.tensor([1.0 - 1e-7, 1.0 + 1e-7], dtype=torch.float64, requires_grad=True)
    for gap in (harmonic_gap, discount_gap):
        value = gap(torch.zeros(2, dtype=torch.float64), x, "log")
        (grad,) = torch.autograd.grad(value.sum(), x)
        assert grad[0].item() == pytest.approx(grad[1].item(), abs=1e-6)
        assert value[0].item() == pytest.approx(value[1].item(), abs=1e-6)


@given(a=st.integers(1, 10_000), n=st.integers(0, 10_000), method=st.sampled_from(HARMONIC_METHODS))
@pytest.mark.slow
def test_error_float64_matches_mpmath(a, n, method):
    fast = harmonic_log_error(float(a), float(n), method)
    slow = harmonic_log_error(float(a), float(n), method, precision="mpmath")
    assert float(fast.error) == pytest.approx(float(slow.error), abs=1e-13)


def test_log_error_is_positive_below_the_paper_bound_and_matches_the_asymptotic_form():
    a, n = np.meshgrid(np.arange(1.0, 200.0), np.arange(0.0, 200.0))
    result = harmonic_log_error(a, n)
    assert np.all(result.error >= -1e-15)
    assert np.all(result.error <= result.paper_bound + 1e-15)
    large = a >= 20
    relative = np.abs(result.error - result.asymptotic)[large] / np.maximum(
        result.error[large], 1e-300
    )
    assert np.nanmax(relative[result.error[large] > 0]) < 1e-3


def test_midpoint_is_far_closer_than_log_and_exact_is_zero():
    a, n = np.array([5.0, 50.0, 500.0]), np.array([3.0, 30.0, 300.0])
    log_error = np.abs(harmonic_log_error(a, n, "log").error)
    midpoint_error = np.abs(harmonic_log_error(a, n, "midpoint").error)
    assert np.all(midpoint_error < log_error / 10)
    exact = harmonic_log_error(a, n, "exact").error
    assert np.allclose(exact, 0.0, atol=1e-14)
    reference = digamma(a + n + 1) - digamma(a + 1)
    assert np.allclose(np.log1p(n / a) - reference, harmonic_log_error(a, n).error)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: harmonic_gap(torch.zeros(1), torch.ones(1), "trapezoid"), "method must be one of"),
        (lambda: discount_gap(torch.zeros(1), torch.ones(1), "li"), "method must be one of"),
        (lambda: harmonic_log_error(0.5, 1.0), "a must be at least 1"),
        (lambda: harmonic_log_error(2.0, -1.0), "n must be at least 0"),
        (lambda: harmonic_log_error(2.0, 1.0, precision="float32"), "precision must be"),
        (lambda: logarithmic_integral(torch.tensor([1.0])), r"x must lie in \(1, 1e6\]"),
        (lambda: logarithmic_integral(torch.tensor([2e6])), r"x must lie in \(1, 1e6\]"),
    ],
)
def test_error_table(call, message):
    with pytest.raises(GradlabError, match="^" + message):  # each message starts with its name
        call()


# --- rates at and near an empty bin, values of every stand-in, dtypes, devices, edges ---------


def _right_derivative(gap_of, a):
    """``d/db gap(a, b)`` at ``b = a`` from the right, by mpmath's numeric differentiation."""
    return float(mpmath.diff(lambda b: gap_of(a, b), a, direction=1))


def _discount_stand_in(a, b, method):
    """The discount stand-ins at mpmath precision: the printed ``ln2 [li(b+1) - li(a+1)]``
    (continued below one item by its tangent), the midpoint rule, linear interpolation."""

    def log_form(x):
        if x >= 1:
            return mpmath.log(2) * mpmath.li(x + 1)
        return mpmath.log(2) * mpmath.li(2) + (x - 1)

    def partial_sum(x):
        whole = int(mpmath.floor(x))
        steps = [1 / mpmath.log(t + 1, 2) for t in range(1, whole + 2)]
        return mpmath.fsum(steps[:whole]) + (x - whole) * steps[whole]

    if method == "log":
        return log_form(b) - log_form(a)
    if method == "midpoint":
        return mpmath.log(2) * (mpmath.li(b + 1.5) - mpmath.li(a + 1.5))
    return partial_sum(b) - partial_sum(a)


STARTS = [0.0, 0.25, 0.5, 1.0, 1.5, 3.0, 7.25]


@pytest.mark.parametrize("method", HARMONIC_METHODS)
def test_rates_of_an_empty_bin_are_the_stand_ins_derivatives(method):
    # An empty bin (count 0) takes the limit of gap(a, a + c) / c: the right derivative.
    # 1e-8: torch's float64 trigamma (the exact method's derivative) is good to about 1e-9.
    a = torch.tensor(STARTS, dtype=torch.float64)
    harmonic = harmonic_rate(a, torch.zeros_like(a), method)
    discount = discount_rate(a, torch.zeros_like(a), method)
    for k, start in enumerate(STARTS):
        expected_harmonic = _right_derivative(lambda x, y: harmonic_stand_in(x, y, method), start)
        expected_discount = _right_derivative(lambda x, y: _discount_stand_in(x, y, method), start)
        assert harmonic[k].item() == pytest.approx(expected_harmonic, abs=1e-8)
        assert discount[k].item() == pytest.approx(expected_discount, abs=1e-8)


@pytest.mark.parametrize("method", HARMONIC_METHODS)
@pytest.mark.parametrize("count", [1e-7, 3e-7, 1e-3, 0.5, 1.0, 2.75])
def test_rates_of_a_filled_bin_are_the_mean_over_the_bin(method, count):
    # From the cut-off 1e-7 on, the rate is gap / count itself, not the derivative (which
    # differs from it by about count * |second derivative| / 2, over 1e-8 here).
    a = torch.tensor(STARTS, dtype=torch.float64)
    counts = torch.full_like(a, count)
    harmonic = harmonic_rate(a, counts, method)
    discount = discount_rate(a, counts, method)
    for k, start in enumerate(STARTS):
        mean_harmonic = harmonic_stand_in(start, start + count, method) / count
        mean_discount = _discount_stand_in(start, start + count, method) / count
        assert harmonic[k].item() == pytest.approx(float(mean_harmonic), abs=1e-8)
        assert discount[k].item() == pytest.approx(float(mean_discount), abs=1e-8)


@pytest.mark.parametrize("method", HARMONIC_METHODS)
def test_discount_gap_values_match_mpmath(method):
    pairs = [(0.0, 0.4), (0.0, 1.0), (0.3, 2.6), (1.0, 1.0), (1.5, 4.25), (9.0, 30.5)]
    low = torch.tensor([a for a, _ in pairs], dtype=torch.float64)
    high = torch.tensor([b for _, b in pairs], dtype=torch.float64)
    got = discount_gap(low, high, method)
    for k, (a, b) in enumerate(pairs):
        assert got[k].item() == pytest.approx(float(_discount_stand_in(a, b, method)), abs=1e-12)


@pytest.mark.parametrize("method", HARMONIC_METHODS)
@pytest.mark.parametrize("function", [harmonic_gap, discount_gap, harmonic_rate, discount_rate])
def test_float32_in_float32_out(method, function):
    a = torch.tensor([0.0, 0.5, 2.0, 6.5])
    value = function(a, a + 1.5, method)
    assert value.dtype == torch.float32
    reference = function(a.double(), a.double() + 1.5, method)
    torch.testing.assert_close(value.double(), reference, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("method", HARMONIC_METHODS)
@pytest.mark.parametrize("function", [harmonic_gap, discount_gap])
def test_empty_inputs_give_empty_results(method, function):
    empty = torch.zeros(0, dtype=torch.float64)
    assert function(empty, empty, method).shape == (0,)


def test_logarithmic_integral_of_float32_is_rounded_from_float64():
    # Evaluated in float64 then rounded: within half a float32 ulp of mpmath (a float32
    # evaluation of the series is off by up to 5 ulp at 1.5).
    x = torch.tensor([1.3, 1.5, 3.7, 50.0, 1234.5, 9.9e5, 1e6], dtype=torch.float32)
    value = logarithmic_integral(x)
    assert value.dtype == torch.float32
    for got, point in zip(value.tolist(), x.tolist(), strict=True):
        reference = float(mpmath.li(point))
        assert abs(got - reference) <= torch.finfo(torch.float32).eps / 2 * abs(reference)


def test_logarithmic_integral_domain_ends_at_one_million():
    assert logarithmic_integral(torch.tensor([1e6], dtype=torch.float64)).item() == pytest.approx(
        float(mpmath.li(1e6)), rel=1e-13
    )
    with pytest.raises(GradlabError, match=r"^x must lie in \(1, 1e6\] for logarithmic_integral; "
                       r"got 1000000.5$"):  # fmt: skip
        logarithmic_integral(torch.tensor([1e6 + 0.5], dtype=torch.float64))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 1.0])
def test_logarithmic_integral_refuses_a_value_outside_its_domain_nan_included(bad):
    # a NaN entry passed the range test (NaN <= 1 and NaN > 1e6 are both False) and came back
    # as a NaN value and a NaN gradient without a word
    x = torch.tensor([2.0, bad], dtype=torch.float64, requires_grad=True)
    with pytest.raises(GradlabError) as refused:
        logarithmic_integral(x)
    assert str(refused.value) == (
        f"x must lie in (1, 1e6] for logarithmic_integral; got {bad:g}"
    )


@pytest.mark.parametrize("method", HARMONIC_METHODS)
def test_result_stays_on_the_input_device_whatever_the_default_device(method):
    # Internal tensors are made on the input's device: with torch's default device elsewhere
    # (here "meta"), the CPU result is unchanged.
    a = torch.tensor([0.0, 0.5, 2.0, 6.5], dtype=torch.float64)
    assert_unchanged_under_another_default_device(
        lambda: [f(a, a + 1.5, method) for f in (harmonic_gap, discount_gap, discount_rate)],
        a.device,
    )


def test_paper_bound_and_asymptotic_form_are_the_printed_expressions():
    a, n = np.array([1.0, 3.0, 40.0]), np.array([2.0, 0.5, 7.0])
    result = harmonic_log_error(a, n)
    for k in range(3):
        x, m = Fraction(a[k]), Fraction(n[k])
        assert result.paper_bound[k] == pytest.approx(float(m / (2 * x**2)), rel=1e-15)
        asymptotic = m / (2 * x * (x + m)) - (1 / x**2 - 1 / (x + m) ** 2) / 12
        assert result.asymptotic[k] == pytest.approx(float(asymptotic), rel=1e-14)


@pytest.mark.parametrize("precision", ["float64", "mpmath"])
def test_log_error_takes_integer_counts_of_any_size(precision):
    # Python integers, even beyond int64 and beyond 2^32 squared, are counts like any other,
    # one at a time and as lists.
    a, n = [3, 2**32, 10**30], [4, 1, 10**30]
    as_float = harmonic_log_error([float(x) for x in a], [float(x) for x in n], precision=precision)
    as_list = harmonic_log_error(a, n, precision=precision)
    for k in range(3):
        one = harmonic_log_error(a[k], n[k], precision=precision)
        for got, listed, expected in zip(one, as_list, as_float, strict=True):
            assert float(got) == pytest.approx(float(expected[k]), rel=1e-12, abs=1e-300)
            assert float(listed[k]) == pytest.approx(float(expected[k]), rel=1e-12, abs=1e-300)


def test_log_error_of_empty_grids_is_empty():
    for precision in ("float64", "mpmath"):
        result = harmonic_log_error(np.zeros(0), np.zeros(0), precision=precision)
        assert all(part.shape == (0,) for part in result)


@pytest.mark.parametrize(("a", "n", "message"), [
    (0.5, 1.0, "a must be at least 1 for harmonic_log_error; got 0.5"),
    (np.array([3.0, 2.0]), np.array([1.0, -2.0]), "n must be at least 0 for harmonic_log_error; "
                                                  "got -2"),
    (math.nan, 1.0, "a must be finite for harmonic_log_error; got nan"),
    (2.0, math.inf, "n must be finite for harmonic_log_error; got inf")])  # fmt: skip
def test_log_error_message_names_the_count_and_its_value(a, n, message):
    # one message for both counts, without the value; NaN passed every comparison silently
    with pytest.raises(GradlabError) as raised:
        harmonic_log_error(a, n)
    assert str(raised.value) == message


def test_the_mpmath_error_is_taken_at_the_documented_50_digits_and_leaves_mpmath_as_it_was(
    monkeypatch,
):
    """``precision="mpmath"`` promises 50 significant digits: every harmonic sum it takes sees
    ``mp.dps == 50``, and the caller's own precision is back afterwards."""
    seen = []
    harmonic = mpmath.harmonic

    def spy(x):
        seen.append(mpmath.mp.dps)
        return harmonic(x)

    monkeypatch.setattr(mpmath, "harmonic", spy)
    before = mpmath.mp.dps
    harmonic_log_error(np.array([3.0, 7.0]), 2.0, "log", precision="mpmath")
    assert seen == [50] * 4
    assert mpmath.mp.dps == before


def test_a_meta_tensor_is_refused_by_name_before_the_domain_check_reads_it():
    # li's domain check reads the values back, which a meta tensor (a shape without values)
    # cannot give: refused by its name, as the other functions of this module do.
    with pytest.raises(GradlabError) as caught:
        logarithmic_integral(torch.full((3,), 2.0, device="meta"))
    assert str(caught.value) == ("x is a meta tensor (a shape without values); pass a tensor on "
                                 "a real device (cpu, cuda, ...)")  # fmt: skip


def _mp_gap(kind: str, method: str, a: float, b: float) -> float:
    """The stand-in of ``kind`` from ``a`` to ``b`` with mpmath at 50 digits (no torch)."""
    with mpmath.workdps(50):
        a, b = mpmath.mpf(a), mpmath.mpf(b)
        if kind == "harmonic":
            return float({"exact": lambda: mpmath.digamma(b + 1) - mpmath.digamma(a + 1),
                          "log": lambda: mpmath.log(b / a),
                          "midpoint": lambda: mpmath.log((b + 0.5) / (a + 0.5))}[method]())
        shift = {"exact": None, "log": 1, "midpoint": 1.5}[method]
        if shift is None:  # integer ends: the partial sums themselves
            return float(mpmath.fsum(1 / mpmath.log(t + 1, 2) for t in range(int(a) + 1,
                                                                               int(b) + 1)))
        return float(mpmath.log(2) * (mpmath.li(b + shift) - mpmath.li(a + shift)))


@pytest.mark.parametrize("method", HARMONIC_METHODS)
@pytest.mark.parametrize(("kind", "gap", "rate", "starts"), [
    ("harmonic", harmonic_gap, harmonic_rate, (1e3, 1e5, 1.6e7)),
    ("discount", discount_gap, discount_rate, (1e3, 1e5, 9e6)),
])  # fmt: skip
def test_float32_counts_give_gaps_and_rates_to_float32_rounding(kind, gap, rate, starts, method):
    """Each stand-in is a difference of two values that grow with the counts: computed in
    float32, the gap of one item at a = 1e5 was 4.6 % off, at a = 1.6e7 it was 0."""
    counts = (1.0, 5.0) + ((0.3,) if method != "exact" or kind == "harmonic" else ())
    a = torch.tensor([start for start in starts for _ in counts])
    count = torch.tensor([c for _ in starts for c in counts])  # exact in float32, as a is
    b = a + count  # rounded to float32 (1e5 + 0.3 is 100000.3046875): the gap's own ends
    gaps = torch.tensor([_mp_gap(kind, method, float(x), float(y))
                         for x, y in zip(a, b, strict=True)], dtype=torch.float64)
    # the rate's bin ends at a + count exactly (its sum is taken in float64)
    rates = torch.tensor([_mp_gap(kind, method, float(x), float(x) + float(c)) / float(c)
                          for x, c in zip(a, count, strict=True)], dtype=torch.float64)
    for got, want in ((gap(a, b, method), gaps), (rate(a, count, method), rates)):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), want, rtol=2 ** -22, atol=0.0)
