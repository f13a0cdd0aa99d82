"""Continuous replacements of harmonic and DCG-discount partial sums (He et al. 2018, Eq. 11-21).

The relaxed tie-aware metrics need ``sum_{t=a+1}^{b} 1/t = H(b) - H(a)`` and
``sum_{t=a+1}^{b} 1/log2(t+1)`` for *real* counts ``a <= b``. Three replacements each:

``"log"`` (the paper's Eq. 11 and 14)
    ``ln b - ln a`` and ``ln2 [li(b+1) - li(a+1)]``. Both diverge at the first bin (``a = 0``):
    ``ln 0`` and ``li(1)`` are ``-inf``. gradlab keeps the printed form for counts of at least one
    item and continues each antiderivative below one item by its tangent line at 1
    (``ln x -> x - 1``; ``ln2 li(x+1) -> ln2 li(2) + (x - 1)``). The result is finite and
    continuously differentiable everywhere, and exact for a first bin holding one item
    (``H(1) - H(0) = 1``, ``D(1) = 1``).
``"midpoint"``
    The midpoint rule: ``ln((b + 1/2)/(a + 1/2))`` and ``ln2 [li(b + 3/2) - li(a + 3/2)]``;
    finite for all ``a, b >= 0``.
``"exact"``
    Exact at integer counts: ``psi(b + 1) - psi(a + 1)`` (digamma, smooth), and for the discount
    the linear interpolation of the exact partial sums between integers.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import numpy as np
import torch

from gradlab.errors import GradlabError
from gradlab.extras import require
from gradlab.validation import (
    check_real_device,
    check_tensor,
    non_finite_message,
    number_text,
    value_checks_enabled,
)

HARMONIC_METHODS = ("log", "midpoint", "exact")
EULER_GAMMA = 0.5772156649015329
LN2 = math.log(2.0)
_LI_TERMS = 120
LI_LARGEST = 1e6
"""The largest ``x`` of :func:`logarithmic_integral`."""
DISCOUNT_LARGEST_COUNT = 1e7
"""The largest count the discount stand-ins accept (:func:`discount_gap`,
:func:`discount_rate`): ``"exact"`` tabulates the partial sums up to the largest count (80 MB of
float64 at 1e7), and the series of ``li`` behind ``"log"`` and ``"midpoint"`` is within 1e-15
of ``mpmath.li`` there."""


def check_harmonic_method(method: str) -> None:
    """Refuse a ``method`` that is not one of :data:`HARMONIC_METHODS`.

    Raises:
        GradlabError: naming ``method``, its value and the allowed ones.

    Example:
        >>> check_harmonic_method("exact")
    """
    if method not in HARMONIC_METHODS:
        raise GradlabError(f"method must be one of {HARMONIC_METHODS}; got {method!r}")


def _li_series(x: torch.Tensor) -> torch.Tensor:
    """``li(x) = gamma + ln ln x + sum_n (ln x)^n / (n n!)`` for ``x > 1`` (float64)."""
    log_x = torch.log(x)
    term = torch.ones_like(log_x)
    total = torch.zeros_like(log_x)
    for n in range(1, _LI_TERMS + 1):
        term = term * log_x / n  # (ln x)^n / n!
        total = total + term / n
    return EULER_GAMMA + torch.log(log_x) + total


class _LogarithmicIntegral(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[override]
        ctx.save_for_backward(x)
        return _li_series(x.to(torch.float64)).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        (x,) = ctx.saved_tensors
        return grad / torch.log(x)


def logarithmic_integral(x: torch.Tensor) -> torch.Tensor:
    """``li(x) = PV int_0^x dt / ln t`` for ``1 < x <= 1e6``, with the exact derivative ``1/ln x``.

    Evaluated by the series ``gamma + ln ln x + sum_{n>=1} (ln x)^n / (n n!)`` (120 terms,
    float64; checked against ``mpmath.li``).

    Integer tensors are promoted to the default float dtype (never truncated back).

    Example:
        >>> import torch
        >>> from gradlab.functional import logarithmic_integral
        >>> round(logarithmic_integral(torch.tensor([2.0], dtype=torch.float64)).item(), 6)
        1.045164
        >>> logarithmic_integral(torch.tensor([2]))
        tensor([1.0452])
    """
    return _logarithmic_integral(x, nan_passes=False)


def _logarithmic_integral(
    x: torch.Tensor, nan_passes: bool, largest: float = LI_LARGEST
) -> torch.Tensor:
    """:func:`logarithmic_integral`; with ``nan_passes`` a NaN entry gives a NaN value (the
    continuous discounts pass NaN counts through), else it is refused like any value outside
    the domain. The discounts, which check their counts themselves, pass a larger
    ``largest``."""
    x = check_tensor("x", x, ndims=tuple(range(9)), kind="any_real")
    check_real_device(x=x)  # its domain check reads the values
    if not x.is_floating_point():
        x = x.to(torch.get_default_dtype())
    outside = ~((x > 1) & (x <= largest))  # NaN is outside too: it has no li
    if nan_passes:
        outside &= ~x.isnan()
    if bool(outside.any()):
        value = float(x.detach()[outside].flatten()[0])
        bound = "1e6" if largest == LI_LARGEST else f"{largest:g}"
        raise GradlabError(f"x must lie in (1, {bound}] for logarithmic_integral; got "
                           f"{number_text(value)}")  # fmt: skip
    return _LogarithmicIntegral.apply(x)


def _log_antiderivative(x: torch.Tensor) -> torch.Tensor:
    """``ln x`` for ``x >= 1``, continued by its tangent ``x - 1`` below one item."""
    return torch.where(x >= 1.0, torch.log(x.clamp(min=1.0)), x - 1.0)


def _li_antiderivative(x: torch.Tensor) -> torch.Tensor:
    """``ln2 li(x + 1)`` for ``x >= 1``, continued by its tangent at 1 (slope ``D(1) = 1``)."""
    at_one = LN2 * 1.0451637801174928  # ln2 li(2)
    above = LN2 * _logarithmic_integral(x.clamp(min=1.0) + 1.0, nan_passes=True,
                                        largest=DISCOUNT_LARGEST_COUNT + 2.0)  # fmt: skip
    return torch.where(x >= 1.0, above, at_one + (x - 1.0))


def harmonic_gap(a: torch.Tensor, b: torch.Tensor, method: str = "exact") -> torch.Tensor:
    """A continuous stand-in for ``H(b) - H(a) = sum_{t=a+1}^b 1/t`` (He et al. 2018, Eq. 10-11).

    Args:
        a, b: real counts ``0 <= a <= b`` (broadcastable tensors), not NaN; ``b = inf`` gives
            ``inf`` (the sum diverges). float32 holds every integer count only up to ``2**24``
            (about 1.7e7): beyond, pass float64 counts, or a gap of a few items is lost to the
            rounding of the counts themselves.
        method: ``"log"`` (Eq. 11, finite below one item, see module docs), ``"midpoint"``,
            or ``"exact"`` (digamma).

    Returns:
        The gaps in the counts' common float dtype (the default float dtype for integer
        counts), computed in float64 (in that dtype on MPS, which has no float64): a gap is
        a difference of two values that grow with the counts, and in float32 the gap of one
        item at ``a = 1e5`` lost 4.6 % to their rounding. So are :func:`harmonic_rate`,
        :func:`discount_gap` and :func:`discount_rate`.

    Raises:
        GradlabError: counts that are no real tensors, do not broadcast, are NaN, below 0, an
            infinite ``a``, or with ``a > b`` (one host read).

    Example:
        >>> import torch
        >>> from gradlab.functional import harmonic_gap
        >>> a, b = torch.tensor([0.0, 10.0]), torch.tensor([1.0, 12.0])
        >>> [round(v, 4) for v in harmonic_gap(a, b, "exact").tolist()]
        [1.0, 0.1742]
        >>> [round(v, 4) for v in harmonic_gap(a, b, "log").tolist()]
        [1.0, 0.1823]
    """
    check_harmonic_method(method)
    _check_counts(a=a, b=b)
    check_real_device(a=a, b=b)  # their order is read
    _check_ordered("harmonic_gap", a, b)
    a, b, dtype = _widened(a, b)
    if method == "log":
        return (_log_antiderivative(b) - _log_antiderivative(a)).to(dtype)
    if method == "midpoint":
        return torch.log((b + 0.5) / (a + 0.5)).to(dtype)
    return (torch.digamma(b + 1.0) - torch.digamma(a + 1.0)).to(dtype)


def _common_float(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``a`` and ``b`` in one floating dtype: the promotion of theirs, or the default float
    dtype for integer counts (a float32 count beside a float64 one was computed in float32)."""
    dtype = torch.promote_types(a.dtype, b.dtype)
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    return a.to(dtype), b.to(dtype)


def _widened(
    a: torch.Tensor, b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.dtype]:
    """``a`` and ``b`` in float64 to compute with, and the dtype to return the result in (their
    common float dtype, :func:`_common_float`). Each stand-in is a difference of two values
    that grow with the counts (``psi(b + 1) - psi(a + 1)``, ``log b - log a``): in float32 the
    gap of one item at ``a = 1e5`` lost 4.6 % to the rounding of the two (at ``a = 3e7`` it was
    0), and ``a + count`` of a soft count was rounded before the gap was taken. MPS has no
    float64: there they stay in their common dtype."""
    a, b = _common_float(a, b)
    dtype = a.dtype
    if a.device.type != "mps":
        a, b = a.to(torch.float64), b.to(torch.float64)
    return a, b, dtype


def _discount_partial_sum(x: torch.Tensor) -> torch.Tensor:
    """``F(x) = sum_{t=1}^x 1/log2(t+1)`` at integers, linear in between (float64)."""
    if not x.is_floating_point():  # integer counts are promoted, never truncated
        x = x.to(torch.get_default_dtype())
    floor = torch.floor(x).clamp(min=0.0)
    top = int(floor.max().item()) if floor.numel() else 0
    steps = 1.0 / torch.log2(torch.arange(2, top + 3, dtype=torch.float64, device=x.device))
    table = torch.cat([torch.zeros(1, dtype=torch.float64, device=x.device), steps.cumsum(0)])
    index = floor.long()
    return table[index].to(x.dtype) + (x - floor) * steps[index].to(x.dtype)


def _check_counts(**counts: object) -> None:
    """The counts of the stand-ins are tensors of a real dtype whose shapes broadcast together
    (no value is read)."""
    for name, value in counts.items():
        check_tensor(name, value, ndims=tuple(range(9)), kind="any_real")
    shapes = [tuple(value.shape) for value in counts.values()]
    try:  # NumPy's: torch.broadcast_shapes imports SymPy, which the core does without
        np.broadcast_shapes(*shapes)
    except ValueError:
        names = " and ".join(counts)
        raise GradlabError(f"{names} must have shapes that broadcast together (one count per "
                           f"entry, or a single count); got {' and '.join(map(str, shapes))}"
                           ) from None  # fmt: skip


def _check_rate_counts(
    function: str, a: torch.Tensor, count: torch.Tensor, sum_fits: bool = False
) -> None:
    """Refuse NaN, ``a < 0``, ``count < 0`` or an infinite count anywhere, named as the rate's
    caller passed them, in one read: the rate's gap would otherwise refuse ``a > a + count``
    (or a NaN) naming ``b``, an argument the caller never gave. ``sum_fits``: also refuse an
    ``a + count`` that overflows the dtype (the harmonic gap would be inf; the discount's own
    limit refuses such counts by name)."""
    if not (a.numel() and count.numel()) or not value_checks_enabled():
        return
    total = a + count if sum_fits else None
    flags = torch.stack([a.isnan().any(), count.isnan().any(), (a < 0).any(),
                         (count < 0).any(), a.isinf().any(), count.isinf().any(),
                         *([total.isinf().any()] if sum_fits else [])]).tolist()
    named = (("a", a), ("count", count))
    for (name, value), has_nan in zip(named, flags[:2], strict=True):
        if has_nan:
            raise GradlabError(_nan_message(name, function, value))
    for (name, value), negative in zip(named, flags[2:4], strict=True):
        if negative:
            raise GradlabError(f"{name} must be a count, at least 0, for {function}; got "
                               f"{number_text(value.min())}")  # fmt: skip
    for (name, value), endless in zip(named, flags[4:6], strict=True):
        if endless:  # a bin past every count, or an endless one: the rate has no value here
            raise GradlabError(f"{name} must be a finite count for {function}; got inf in "
                               f"{int(value.isinf().sum())} of {value.numel()} entries")
    if sum_fits and flags[6]:  # finite counts whose sum overflows: the gap would be inf
        raise GradlabError(
            f"a + count must be finite in {str(total.dtype).removeprefix('torch.')} for "
            f"{function}; it overflows in {int(total.isinf().sum())} of {total.numel()} "
            "entries: pass float64 counts")


def _nan_message(name: str, function: str, count: torch.Tensor) -> str:
    return (f"{name} must be a count, not NaN, for {function}; got NaN in "
            f"{int(count.isnan().sum())} of {count.numel()} entries")  # fmt: skip


def _check_ordered(function: str, a: torch.Tensor, b: torch.Tensor) -> None:
    """Refuse a NaN count, ``a < 0`` or ``a > b`` anywhere, in one read: the gap sums
    ``t = a + 1 .. b``, and below ``a = -1`` the digamma and the logarithm have their poles
    (``b = inf`` is the divergent sum, ``inf``). Nothing is read inside
    :func:`gradlab.validation.skip_value_checks`."""
    if not (a.numel() and b.numel()) or not value_checks_enabled():
        return
    nan_a, nan_b, negative, reversed_, endless = torch.stack([
        a.isnan().any(), b.isnan().any(), (a < 0).any(), (a > b).any(),
        (a == math.inf).any()]).tolist()  # fmt: skip
    for name, count, has_nan in (("a", a, nan_a), ("b", b, nan_b)):
        if has_nan:
            raise GradlabError(_nan_message(name, function, count))
    if negative:
        raise GradlabError(f"a must be a count, at least 0, for {function}; got "
                           f"{number_text(a.min())}")  # fmt: skip
    if endless:  # inf - inf: the gap from an infinite count has no value (b = inf has: inf)
        raise GradlabError(f"a must be finite for {function} (a gap that starts past every "
                           "count has no value; b = inf gives inf); got inf")  # fmt: skip
    if reversed_:
        first = (a > b).nonzero()[0].tolist()
        pair = torch.broadcast_tensors(a, b)
        raise GradlabError(
            f"a must be at most b for {function} (the gap sums t = a + 1 .. b); got a = "
            f"{number_text(pair[0][tuple(first)])} > b = {number_text(pair[1][tuple(first)])}"
        )


def _check_discount_counts(function: str, method: str, **counts: torch.Tensor) -> None:
    """Refuse discount counts below 0 or above :data:`DISCOUNT_LARGEST_COUNT` (NaN passes: the
    caller's :func:`_check_ordered` or :func:`_check_rate_counts` names it), and for
    ``"exact"`` NaN or infinite ones, before any work."""
    _check_exact_counts(method, **counts)
    present = {name: value for name, value in counts.items() if value.numel()}
    if not present:
        return
    outside = torch.stack([((value > DISCOUNT_LARGEST_COUNT) | (value < 0)).any()
                           for value in present.values()]).tolist()  # one read for all  # fmt: skip
    for (name, value), refused in zip(present.items(), outside, strict=True):
        if not refused:
            continue
        if bool((value < 0).any()):
            raise GradlabError(
                f"{name} must be a count, at least 0, for {function}; got "
                f"{number_text(value.min())}"
            )
        raise GradlabError(
            f"{name} must be at most {DISCOUNT_LARGEST_COUNT:g} for {function} (the exact "
            f"partial sums are tabulated up to the largest count, and li's series is "
            f"checked up to there); got {number_text(value.max())}"
        )


def _check_exact_counts(method: str, **counts: torch.Tensor) -> None:
    """``method="exact"`` indexes a table of partial sums: refuse NaN or infinite counts."""
    check_real_device(**counts)  # the discounts read the counts' values
    if method != "exact":
        return
    for name, value in counts.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
            if not bool(torch.isfinite(value).all()):
                raise GradlabError(non_finite_message(
                    name, value, " for method='exact' (the exact discount indexes a table of "
                    "partial sums)"))  # fmt: skip


def discount_gap(a: torch.Tensor, b: torch.Tensor, method: str = "exact") -> torch.Tensor:
    """A continuous stand-in for ``sum_{t=a+1}^b 1/log2(t+1)`` (He et al. 2018, suppl., Eq. 14-16).

    ``"log"`` is the printed ``ln2 [li(b+1) - li(a+1)]`` (finite below one item, see module
    docs), ``"midpoint"`` integrates from ``a + 1/2`` to ``b + 1/2``, ``"exact"`` interpolates
    the exact partial sums linearly between integers.

    Args:
        a, b: real counts ``0 <= a <= b <= 1e7`` (:data:`DISCOUNT_LARGEST_COUNT`), tensors
            that broadcast; finite for ``"exact"``.
        method: one of :data:`HARMONIC_METHODS`.

    Raises:
        GradlabError: a count that is no tensor, negative, above 1e7, or (``"exact"``) not
            finite; before any work.

    Example:
        >>> import torch
        >>> from gradlab.functional import discount_gap
        >>> a, b = torch.tensor([0.0, 5.0]), torch.tensor([1.0, 7.0])
        >>> [round(v, 4) for v in discount_gap(a, b, "exact").tolist()]
        [1.0, 0.6895]
    """
    check_harmonic_method(method)
    _check_counts(a=a, b=b)
    _check_discount_counts("discount_gap", method, a=a, b=b)
    _check_ordered("discount_gap", a, b)
    a, b, dtype = _widened(a, b)
    if method == "log":
        return (_li_antiderivative(b) - _li_antiderivative(a)).to(dtype)
    if method == "midpoint":
        largest = DISCOUNT_LARGEST_COUNT + 2.0
        return (LN2 * (
            _logarithmic_integral(b + 1.5, nan_passes=True, largest=largest)
            - _logarithmic_integral(a + 1.5, nan_passes=True, largest=largest)
        )).to(dtype)  # fmt: skip
    return (_discount_partial_sum(b) - _discount_partial_sum(a)).to(dtype)


_RATE_CUTOFF = 1e-7
"""Below this bin count, ``gap / count`` is replaced by its limit (the stand-in's derivative)."""


def _rate(gap, derivative, a: torch.Tensor, count: torch.Tensor, method: str) -> torch.Tensor:
    a, count, dtype = _widened(a, count)  # the bin's end, a + count, in float64 too
    small = count.abs() < _RATE_CUTOFF
    safe_count = torch.where(small, 1.0, count)
    rate = torch.where(small, derivative(a, method), gap(a, a + safe_count, method) / safe_count)
    return rate.to(dtype)


def _harmonic_derivative(a: torch.Tensor, method: str) -> torch.Tensor:
    if method == "log":
        return torch.where(a >= 1.0, 1.0 / a.clamp(min=1.0), 1.0)
    if method == "midpoint":
        return 1.0 / (a + 0.5)
    return torch.polygamma(1, a + 1.0)


def _discount_derivative(a: torch.Tensor, method: str) -> torch.Tensor:
    if method == "log":
        return torch.where(a >= 1.0, LN2 / torch.log(a.clamp(min=1.0) + 1.0), 1.0)
    if method == "midpoint":
        return LN2 / torch.log(a + 1.5)
    return 1.0 / torch.log2(torch.floor(a).clamp(min=0.0) + 2.0)


def harmonic_rate(a: torch.Tensor, count: torch.Tensor, method: str = "exact") -> torch.Tensor:
    """``harmonic_gap(a, a + count) / count``: the mean of ``1/t`` over a bin of ``count`` items.

    At ``count -> 0`` (an empty bin) it tends to the stand-in's derivative at ``a``; using that
    limit keeps the relaxed AP differentiable at empty bins with the correct first-order change.
    ``a`` and ``count`` must be finite counts, at least 0 (a ``GradlabError`` names the one
    that is not).

    Example:
        >>> import torch
        >>> from gradlab.functional import harmonic_rate
        >>> harmonic_rate(torch.tensor([3.0, 3.0]), torch.tensor([0.0, 1.0]), "exact")
        tensor([0.2838, 0.2500])
    """
    check_harmonic_method(method)
    _check_counts(a=a, count=count)
    check_real_device(a=a, count=count)  # their signs are read
    _check_rate_counts("harmonic_rate", a, count, sum_fits=True)
    return _rate(harmonic_gap, _harmonic_derivative, a, count, method)


def discount_rate(a: torch.Tensor, count: torch.Tensor, method: str = "exact") -> torch.Tensor:
    """``discount_gap(a, a + count) / count``, with its ``count -> 0`` limit (see above).

    ``a`` must be at least 0 and ``a + count`` at most :data:`DISCOUNT_LARGEST_COUNT`
    (1e7), as for :func:`discount_gap`.

    Example:
        >>> import torch
        >>> from gradlab.functional import discount_rate
        >>> discount_rate(torch.tensor([0.0]), torch.tensor([1.0]), "exact")
        tensor([1.])
    """
    check_harmonic_method(method)
    _check_counts(a=a, count=count)
    _check_exact_counts(method, a=a, count=count)
    _check_rate_counts("discount_rate", a, count)
    _check_discount_counts("discount_rate", method, a=a, **{"a + count": a + count})
    return _rate(discount_gap, _discount_derivative, a, count, method)


class HarmonicLogError(NamedTuple):
    """Error of a harmonic stand-in on a grid of ``(a, n)`` (see :func:`harmonic_log_error`).

    Attributes:
        error: replacement minus ``H(a+n) - H(a)`` (the exact value).
        paper_bound: He et al.'s (2018, suppl.) Eq. 21 bound ``n / (2 a^2)``.
        asymptotic: ``n / (2 a (a + n)) - (1/12) (1/a^2 - 1/(a+n)^2)``, the first two terms of
            the log method's error from the expansion of ``H`` (Eq. 17 carried one order further).

    Example:
        >>> import numpy as np
        >>> from gradlab.functional import harmonic_log_error
        >>> result = harmonic_log_error(np.array([10.0]), np.array([5.0]))
        >>> bool(abs(result.error[0]) <= result.paper_bound[0])
        True
    """

    error: np.ndarray
    paper_bound: np.ndarray
    asymptotic: np.ndarray


def harmonic_log_error(
    a: np.ndarray | float,
    n: np.ndarray | float,
    method: str = "log",
    precision: str = "float64",
) -> HarmonicLogError:
    """The error of replacing ``H(a + n) - H(a)`` by ``ln((a + n)/a)`` (or another method).

    He et al. (2018, suppl.), Eq. 17-21: ``a = N_{d-1}`` items before the bin, ``n = n_d``
    items in it. For ``"log"`` this is the paper's Eq. 11 exactly (``a >= 1``; the first bin,
    ``a = 0``, is infinite there).

    Args:
        a, n: broadcastable arrays, ``a >= 1`` and ``n >= 0``.
        method: ``"log"``, ``"midpoint"`` or ``"exact"`` (see :func:`harmonic_gap`).
        precision: ``"float64"`` (vectorized, ``log1p`` and digamma) or ``"mpmath"``
            (50 significant digits, elementwise; the reference). In float64 the error is the
            difference of two values of the size of the gap ``ln((a + n) / a)``, so it is
            resolved to about ``1e-16`` of that size only: where the true error is smaller
            (counts past about ``10**7``, where it falls below ``1e-14``) the float64 value is
            rounding, of either sign; use ``"mpmath"`` there.

    Example:
        >>> from gradlab.functional import harmonic_log_error
        >>> result = harmonic_log_error(10.0, 2.0)
        >>> round(float(result.error), 6), round(float(result.paper_bound), 6)
        (0.008079, 0.01)
    """
    check_harmonic_method(method)
    arrays = []
    for name, value in (("a", a), ("n", n)):
        check_real_device(**{name: value})  # a meta tensor has no values to count
        array = np.asarray(value.detach().cpu() if isinstance(value, torch.Tensor) else value)
        whole = array.dtype.kind == "O" and all(  # Python ints past int64, as objects
            isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))
            for x in array.flat)  # fmt: skip
        if array.dtype.kind not in "iuf" and not whole:  # bools and text are no counts
            raise GradlabError(f"{name} must be a real number or an array of real numbers for "
                               f"harmonic_log_error; got {value!r}")  # fmt: skip
        try:
            arrays.append(array.astype(np.float64))
        except OverflowError:  # an int past float64's largest number
            got = (f"an int of {len(str(abs(value)))} digits" if isinstance(value, int)
                   else "an array holding such an int")  # fmt: skip
            raise GradlabError(f"{name} must be a count below float64's largest number "
                               f"(about 1.8e308) for harmonic_log_error; got {got}"
                               ) from None  # fmt: skip
    try:
        a_arr, n_arr = np.broadcast_arrays(*arrays)
    except ValueError:
        raise GradlabError(f"a and n must have shapes that broadcast together for "
                           f"harmonic_log_error; got {arrays[0].shape} and {arrays[1].shape}"
                           ) from None  # fmt: skip
    for name, values, least in (("a", a_arr, 1), ("n", n_arr, 0)):
        if not np.all(np.isfinite(values)):
            raise GradlabError(f"{name} must be finite for harmonic_log_error; got "
                               f"{values[~np.isfinite(values)].flat[0]}")  # fmt: skip
        if np.any(values < least):
            raise GradlabError(f"{name} must be at least {least} for harmonic_log_error; got "
                               f"{number_text(values.min())}")  # fmt: skip
    with np.errstate(over="ignore"):  # the overflow is the refusal below, not a warning
        total = a_arr + n_arr + 1.0  # the exact value's digamma argument
    if not np.all(np.isfinite(total)):
        raise GradlabError("a + n must stay below float64's largest number (about 1.8e308) for "
                           f"harmonic_log_error; it overflows in {int((~np.isfinite(total)).sum())}"
                           f" of {total.size} entries")  # fmt: skip
    if precision == "float64":
        digamma = require("scipy.special", "audit", "harmonic_log_error").digamma
        exact = digamma(a_arr + n_arr + 1.0) - digamma(a_arr + 1.0)
        approx = {
            "log": np.log1p(n_arr / a_arr),
            "midpoint": np.log1p(n_arr / (a_arr + 0.5)),
            "exact": exact,
        }[method]
        error = approx - exact
    elif precision == "mpmath":
        mpmath = require("mpmath", "audit", "harmonic_log_error")

        def one(x: float, k: float) -> float:
            truth = mpmath.harmonic(x + k) - mpmath.harmonic(x)
            stand_in = {
                "log": mpmath.log((x + k) / x),
                "midpoint": mpmath.log((x + k + 0.5) / (x + 0.5)),
                "exact": mpmath.digamma(x + k + 1) - mpmath.digamma(x + 1),
            }[method]
            return float(stand_in - truth)

        with mpmath.workdps(50):  # local precision: a global setting would leak to callers
            error = np.vectorize(one, otypes=[np.float64])(a_arr, n_arr)
        error = error[()]  # 0-d input: a NumPy scalar, as the float64 path's ufuncs give
    else:
        raise GradlabError(f"precision must be 'float64' or 'mpmath'; got {precision!r}")
    # Quotients before squares: a**2 overflows past a = 1.3e154, where n / (2 a^2) and the
    # expansion's terms are still numbers (or round to 0, as they should).
    half, total = 0.5 * n_arr, a_arr + n_arr
    paper_bound = half / a_arr / a_arr
    asymptotic = half / total / a_arr - ((1.0 / a_arr) ** 2 - (1.0 / total) ** 2) / 12.0
    return HarmonicLogError(error, paper_bound, asymptotic)
