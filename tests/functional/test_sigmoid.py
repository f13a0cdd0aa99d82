"""tempered_sigmoid and sigmoid_slope against the loops of tests/reference (seed 000, Eq. 2-3).

The reference is plain ``math``: ``G(x; tau) = 1 / (1 + exp(-x / tau))`` and its slope
``G(x) G(-x) / tau``, written branch-wise so that neither overflows. Tolerances: a few float64
ulps relative (``4 * eps``), since each side is a handful of correctly rounded operations.
"""

from __future__ import annotations

import math

import pytest
import torch

from gradlab.errors import GradlabError
from gradlab.functional.sigmoid import sigmoid_slope, tempered_sigmoid
from tests.reference.smooth_ap_loops import sigmoid, slope

EPS64 = torch.finfo(torch.float64).eps
POINTS = [-0.7, -0.05, -0.013, -1e-3, 0.0, 2e-4, 0.004, 0.021, 0.3, 1.9]


def _expected(function, points, tau):
    return torch.tensor([function(x, tau) for x in points], dtype=torch.float64)


@pytest.mark.parametrize("tau", [0.003, 0.01, 0.25, 2.0])
def test_sigmoid_and_slope_match_the_loops(tau):
    x = torch.tensor(POINTS, dtype=torch.float64)
    torch.testing.assert_close(
        tempered_sigmoid(x, tau), _expected(sigmoid, POINTS, tau), rtol=4 * EPS64, atol=0.0
    )
    torch.testing.assert_close(
        sigmoid_slope(x, tau), _expected(slope, POINTS, tau), rtol=8 * EPS64, atol=0.0
    )


def test_the_slope_is_the_derivative_of_the_sigmoid():
    """Another path: autograd through ``torch.sigmoid(x / tau)`` written here, not in gradlab.

    Autograd forms ``G (1 - G)``, whose ``1 - G`` loses ``eps * G / (1 - G)`` relative; with
    ``|x / tau| <= 3.8`` here, ``1 - G >= 0.022``: at most about ``45 eps``, so ``64 eps``.
    """
    x = torch.tensor(POINTS, dtype=torch.float64, requires_grad=True)
    tau = 0.5
    (derivative,) = torch.autograd.grad(torch.sigmoid(x / tau).sum(), x)
    torch.testing.assert_close(sigmoid_slope(x.detach(), tau), derivative, rtol=64 * EPS64,
                               atol=0.0)  # fmt: skip


def test_the_slope_keeps_its_relative_accuracy_far_in_the_tails():
    """At x / tau = +-50, ``1 - G`` is below float64's resolution of 1: the slope must still be
    ``exp(-50) / (1 + exp(-50))^2 / tau`` to a few ulps, not 0."""
    tau = 0.01
    x = torch.tensor([-0.5, 0.5], dtype=torch.float64)
    expected = math.exp(-50.0) / (1.0 + math.exp(-50.0)) ** 2 / tau
    got = sigmoid_slope(x, tau)
    assert got.tolist() == [pytest.approx(expected, rel=8 * EPS64)] * 2


def test_default_temperature_is_one_hundredth():
    x = torch.tensor(POINTS, dtype=torch.float64)
    torch.testing.assert_close(tempered_sigmoid(x), _expected(sigmoid, POINTS, 0.01),
                               rtol=4 * EPS64, atol=0.0)  # fmt: skip
    torch.testing.assert_close(sigmoid_slope(x), _expected(slope, POINTS, 0.01), rtol=8 * EPS64,
                               atol=0.0)  # fmt: skip
    assert sigmoid_slope(torch.zeros(1, dtype=torch.float64)).item() == pytest.approx(25.0)


@pytest.mark.parametrize("function", [tempered_sigmoid, sigmoid_slope])
@pytest.mark.parametrize("tau", [0.0, -0.1, math.inf, math.nan, "0.1", True, 1e-31])
def test_a_bad_temperature_is_refused_by_name(function, tau):
    with pytest.raises(GradlabError, match=r"^tau must be a finite number in \[1e-30, inf\)"):
        function(torch.zeros(2), tau)


@pytest.mark.parametrize("function", [tempered_sigmoid, sigmoid_slope])
@pytest.mark.parametrize("x", [[0.0, 1.0], 0.5, None])
def test_x_that_is_no_tensor_is_refused_by_name(function, x):
    """A list had met ``x / tau`` (a bare TypeError)."""
    with pytest.raises(GradlabError, match=r"^x must be a torch.Tensor; got"):
        function(x, 0.1)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_the_smallest_temperature_gives_the_step_in_every_dtype(dtype):
    """tau = 1e-300 had rounded to 0 next to a float32 or half-precision x: G(0) was
    0 / 0 = NaN. Now refused below 1e-30, where G is the step with G(0) = 1/2."""
    x = torch.tensor([-1e-3, -0.0, 0.0, 1e-3], dtype=dtype)
    assert tempered_sigmoid(x, 1e-30).tolist() == [0.0, 0.5, 0.5, 1.0]
    with pytest.raises(GradlabError, match=r"^tau must be a finite number in \[1e-30, inf\)"):
        tempered_sigmoid(x, 1e-300)


@pytest.mark.parametrize("function", [tempered_sigmoid, sigmoid_slope])
def test_x_is_any_real_tensor_of_up_to_eight_dimensions(function):
    # Integers are real numbers (computed as the default float dtype); bool and complex are
    # not; nine dimensions are past the package's limit for elementwise inputs.
    integers = torch.tensor([[-1, 0, 2]])
    assert torch.equal(function(integers, 0.5), function(integers.float(), 0.5))
    for bad, message in [
        (torch.tensor(True), "x must have a real floating or integer dtype; got torch.bool"),
        (torch.tensor(1j), "x must have a real floating or integer dtype; got torch.complex64"),
        (torch.zeros([1] * 9), "x must be 0-D or 1-D or 2-D or 3-D or 4-D or 5-D or 6-D or "
                               "7-D or 8-D; got shape (1, 1, 1, 1, 1, 1, 1, 1, 1)"),
    ]:
        with pytest.raises(GradlabError) as caught:
            function(bad, 0.5)
        assert str(caught.value) == message
    assert function(torch.zeros([1] * 8), 0.5).shape == (1,) * 8
