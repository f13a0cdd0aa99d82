"""Harmonic and discount stand-ins against mpmath, their gradients, and the error analysis."""

import math

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
    harmonic_gap,
    harmonic_log_error,
    harmonic_number,
    logarithmic_integral,
)


@pytest.mark.parametrize("x", [1.0001, 1.3, 2.0, 3.7, 50.0, 1234.5, 9.9e5])
def test_logarithmic_integral_matches_mpmath(x):
    value = logarithmic_integral(torch.tensor([x], dtype=torch.float64)).item()
    assert value == pytest.approx(float(mpmath.li(x)), rel=1e-13)


def test_logarithmic_integral_gradient():
    x = torch.tensor([1.05, 2.0, 17.0, 400.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(logarithmic_integral, (x,))


@given(a=st.integers(0, 300), n=st.integers(0, 300))
def test_exact_methods_are_exact_at_integers(a, n):
    low = torch.tensor([float(a)], dtype=torch.float64)
    high = torch.tensor([float(a + n)], dtype=torch.float64)
    harmonic_truth = float(mpmath.harmonic(a + n) - mpmath.harmonic(a))
    discount_truth = math.fsum(1.0 / math.log2(t + 1) for t in range(a + 1, a + n + 1))
    assert harmonic_gap(low, high, "exact").item() == pytest.approx(harmonic_truth, abs=1e-12)
    assert discount_gap(low, high, "exact").item() == pytest.approx(discount_truth, abs=1e-12)
    assert harmonic_number(high).item() == pytest.approx(float(mpmath.harmonic(a + n)), abs=1e-12)


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
        (lambda: harmonic_log_error(0.5, 1.0), "a must be >= 1 and n >= 0"),
        (lambda: harmonic_log_error(2.0, -1.0), "a must be >= 1 and n >= 0"),
        (lambda: harmonic_log_error(2.0, 1.0, precision="float32"), "precision must be"),
        (lambda: logarithmic_integral(torch.tensor([1.0])), r"x must lie in \(1, 1e6\]"),
        (lambda: logarithmic_integral(torch.tensor([2e6])), r"x must lie in \(1, 1e6\]"),
    ],
)
def test_error_table(call, message):
    with pytest.raises(GradlabError, match=message):
        call()
