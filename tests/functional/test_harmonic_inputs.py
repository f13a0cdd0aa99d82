"""The harmonic helpers' input rules: which counts the exact discount refuses, what
``logarithmic_integral`` accepts, and the message when an extra ``harmonic_log_error`` needs is
missing."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
import torch

from gradlab import GradlabError
from gradlab.extras import install_hint
from gradlab.functional.harmonic import (
    discount_gap,
    discount_rate,
    harmonic_gap,
    harmonic_log_error,
    harmonic_rate,
    logarithmic_integral,
)

NAN, INF = float("nan"), float("inf")


def _exact_message(name: str, where: str) -> str:
    return (
        f"{name} must be finite for method='exact' (the exact discount indexes a table of partial "
        f"sums); got {where}"
    )


@pytest.mark.parametrize(
    ("call", "name", "where"),
    [
        (lambda: discount_gap(torch.tensor([NAN]), torch.tensor([1.0])), "a",
         "NaN in entry 0 (1 entry of 1)"),
        (lambda: discount_gap(torch.tensor([0.0, 1.0]), torch.tensor([2.0, INF])), "b",
         "inf in entry 1 (1 entry of 2)"),
        (lambda: discount_rate(torch.tensor([-INF]), torch.tensor([1.0])), "a",
         "-inf in entry 0 (1 entry of 1)"),
        (lambda: discount_rate(torch.tensor([0.0]), torch.tensor([NAN])), "count",
         "NaN in entry 0 (1 entry of 1)"),
    ],
)  # fmt: skip
def test_the_exact_discount_refuses_non_finite_counts_by_name(call, name, where):
    with pytest.raises(GradlabError) as caught:
        call()
    assert str(caught.value) == _exact_message(name, where)


@pytest.mark.parametrize("method", ["log", "midpoint", "exact"])
@pytest.mark.parametrize("function", [harmonic_gap, discount_gap, harmonic_rate, discount_rate])
@pytest.mark.parametrize("nan_in", ["first", "second"])
def test_every_stand_in_refuses_a_nan_count_by_name(method, function, nan_in):
    # a NaN count gave a NaN gap or rate in silence (the exact discount refused it, the others
    # did not)
    counts = [torch.tensor([0.0, 1.0], dtype=torch.float64), torch.tensor([2.0, 3.0]).double()]
    index = 0 if nan_in == "first" else 1
    counts[index][1] = NAN
    names = ("a", "count") if "rate" in function.__name__ else ("a", "b")
    with pytest.raises(GradlabError) as caught:
        function(*counts, method)
    message = str(caught.value)
    if function in (discount_gap, discount_rate) and method == "exact":  # the table's check
        assert message.startswith(f"{names[index]} must be finite for method='exact'")
        return
    assert message == (f"{names[index]} must be a count, not NaN, for {function.__name__}; "
                       "got NaN in 1 of 2 entries")  # fmt: skip


def test_an_infinite_upper_count_is_the_divergent_harmonic_sum():
    gap = harmonic_gap(torch.tensor([1.0]), torch.tensor([math.inf]), "log")
    assert gap.item() == math.inf


def test_the_exact_discount_accepts_finite_and_empty_counts():
    # 1/log2(2) + 1/log2(3): the sum itself, written out here
    expected = 1.0 + 1.0 / math.log2(3.0)
    gap = discount_gap(torch.tensor([0.0], dtype=torch.float64), torch.tensor([2.0]).double())
    assert gap.item() == pytest.approx(expected, rel=1e-15)
    empty = torch.zeros(0)
    assert discount_gap(empty, empty).shape == (0,)


@pytest.mark.parametrize(
    ("x", "message"),
    [
        (torch.tensor([True]), "x must have a real floating or integer dtype; got torch.bool"),
        (torch.full([1] * 9, 2.0),
         "x must be 0-D or 1-D or 2-D or 3-D or 4-D or 5-D or 6-D or 7-D or 8-D; got shape "
         "(1, 1, 1, 1, 1, 1, 1, 1, 1)"),
        ([2.0], "x must be a torch.Tensor; got list; pass torch.as_tensor(x)"),
    ],
)  # fmt: skip
def test_logarithmic_integral_refuses_bad_input_by_name(x, message):
    with pytest.raises(GradlabError) as caught:
        logarithmic_integral(x)
    assert str(caught.value) == message


def test_logarithmic_integral_of_integers_is_in_the_default_float_dtype():
    values = logarithmic_integral(torch.tensor([2, 10]))
    assert values.dtype == torch.get_default_dtype()
    # li(2) and li(10) to 12 digits (Abramowitz and Stegun, Table 5.1; mpmath.li agrees)
    assert values.tolist() == pytest.approx([1.045163780117, 6.165599504787], rel=1e-6)
    assert logarithmic_integral(torch.full([1] * 8, 2.0)).shape == (1,) * 8


@pytest.mark.parametrize(
    ("module", "precision"), [("scipy.special", "float64"), ("mpmath", "mpmath")]
)
def test_harmonic_log_error_without_its_extra_names_the_function_and_the_extra(
    monkeypatch, module, precision
):
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    with pytest.raises(GradlabError) as caught:
        harmonic_log_error(10.0, 2.0, precision=precision)
    package = module.split(".")[0]
    assert str(caught.value) == (
        f"harmonic_log_error needs the {package} package, which is not installed; install it "
        f"with: {install_hint('audit')}"
    )


def test_integer_counts_are_promoted_not_truncated_by_the_exact_discount():
    # sum_{t=1}^{2} 1/log2(t+1) = 1 + 1/log2(3), by hand
    expected = 1.0 + 1.0 / math.log2(3.0)
    value = discount_gap(torch.tensor([0]), torch.tensor([2]), "exact")
    assert value.dtype == torch.get_default_dtype()
    assert value.item() == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("method", ["exact", "log", "midpoint"])
@pytest.mark.parametrize("function", [discount_gap, discount_rate, harmonic_gap, harmonic_rate])
def test_integer_and_float_counts_give_the_same_stand_in(function, method):
    a, b = torch.tensor([0, 1, 3, 7]), torch.tensor([2, 4, 3, 12])
    from_integers = function(a, b, method)
    assert from_integers.is_floating_point()
    torch.testing.assert_close(from_integers, function(a.float(), b.float(), method))


@pytest.mark.parametrize("method", ["log", "midpoint"])
@pytest.mark.parametrize(("a", "b"), [(1e6, 2e6), (5e5, 1e7)])
def test_the_continuous_discounts_reach_ten_million_items(method, a, b):
    # He et al. (2018), suppl., Eq. 14-16: ln2 [li(b + c) - li(a + c)], c = 1 (log) or 1.5
    # (midpoint), from mpmath. Counts above 1e6 raised an error about logarithmic_integral's x.
    mpmath = pytest.importorskip("mpmath")
    shift = 1.0 if method == "log" else 1.5
    expected = float(mpmath.log(2) * (mpmath.li(b + shift) - mpmath.li(a + shift)))
    got = discount_gap(torch.tensor([a], dtype=torch.float64),
                       torch.tensor([b], dtype=torch.float64), method)  # fmt: skip
    assert got.item() == pytest.approx(expected, rel=1e-13)


@pytest.mark.parametrize("method", ["log", "midpoint", "exact"])
def test_discount_counts_above_ten_million_are_refused_by_name(method):
    # "exact" tabulated every partial sum up to the largest count (8 GB of float64 at 1e9).
    low, high = torch.tensor([0.0], dtype=torch.float64), torch.tensor([2e7], dtype=torch.float64)
    with pytest.raises(GradlabError, match=r"^b must be at most 1e\+07 for discount_gap .*; "
                                           r"got 2e\+07$"):  # fmt: skip
        discount_gap(low, high, method)
    with pytest.raises(GradlabError, match=r"^a \+ count must be at most 1e\+07 for "
                                           r"discount_rate .*; got 2e\+07$"):  # fmt: skip
        discount_rate(low, high, method)


@pytest.mark.parametrize("function", [harmonic_gap, discount_gap, harmonic_rate, discount_rate])
def test_counts_that_are_no_tensors_are_refused_by_name(function):
    second = "b" if function in (harmonic_gap, discount_gap) else "count"
    with pytest.raises(GradlabError, match=r"^a must be a torch.Tensor; got float"
                                           r"; pass torch\.as_tensor\(a\)$"):
        function(2.0, torch.tensor([3.0]))
    with pytest.raises(GradlabError, match=rf"^{second} must be a torch.Tensor; got int"
                                           rf"; pass torch\.as_tensor\({second}\)$"):
        function(torch.tensor([2.0]), 3)
    with pytest.raises(GradlabError, match=r"^a must have a real floating or integer dtype"):
        function(torch.tensor([True]), torch.tensor([3.0]))


@pytest.mark.parametrize("method", ["log", "midpoint", "exact"])
def test_negative_discount_counts_are_refused_by_name(method):
    # a count below 0 items has no discount: "exact" extrapolated its table, "midpoint" failed
    # inside li naming x, "log" continued its tangent; each now names the count and function
    low, high = torch.tensor([-1.0]), torch.tensor([2.0])
    with pytest.raises(GradlabError, match=r"^a must be a count, at least 0, for discount_gap; "
                                           r"got -1$"):  # fmt: skip
        discount_gap(low, high, method)
    with pytest.raises(GradlabError, match=r"^a must be a count, at least 0, for discount_rate; "
                                           r"got -1$"):  # fmt: skip
        discount_rate(low, torch.tensor([3.0]), method)
    with pytest.raises(GradlabError, match=r"^b must be a count, at least 0, for discount_gap; "
                                           r"got -0\.5$"):  # fmt: skip
        discount_gap(torch.tensor([0.0]), torch.tensor([-0.5]), method)


@pytest.mark.parametrize("function", [harmonic_gap, discount_gap, harmonic_rate, discount_rate])
def test_counts_of_up_to_eight_dimensions_are_taken(function):
    eight, nine = torch.ones([1] * 8), torch.ones([1] * 9)
    assert function(eight, 2 * eight).shape == eight.shape
    with pytest.raises(GradlabError, match=r"^a must be 0-D or 1-D .* or 8-D; got shape "
                                           r"\(1, 1, 1, 1, 1, 1, 1, 1, 1\)$"):  # fmt: skip
        function(nine, 2 * nine)


@pytest.mark.parametrize("method", ["log", "midpoint", "exact"])
def test_counts_of_zero_and_below_one_beside_a_huge_one_are_refused_for_the_huge_one(method):
    for small in (0.0, 0.5):  # no negative count among them: the refusal is for the largest
        low, high = torch.tensor([0.0, 0.0]), torch.tensor([small, 2e7])
        with pytest.raises(GradlabError, match=r"^b must be at most 1e\+07 for discount_gap "
                                               r".*; got 2e\+07$"):  # fmt: skip
            discount_gap(low, high, method)


@pytest.mark.parametrize("method", ["exact", "log", "midpoint"])
@pytest.mark.parametrize("function", [harmonic_gap, discount_gap])
def test_a_gap_from_a_negative_count_or_past_b_is_refused_by_name(function, method):
    name = function.__name__
    with pytest.raises(GradlabError, match=rf"^a must be a count, at least 0, for {name}; "
                                           r"got -1$"):  # fmt: skip
        function(torch.tensor([0.0, -1.0]), torch.tensor([2.0, 2.0]), method)
    # broadcast: the first pair out of order is named
    with pytest.raises(GradlabError, match=rf"^a must be at most b for {name} \(the gap sums "
                                           r"t = a \+ 1 \.\. b\); got a = 5 > b = 2$"):  # fmt: skip
        function(torch.tensor([[1.0, 5.0]]), torch.tensor([3.0, 2.0]), method)
    # a = b is the empty sum, and is not the pair named: the first with a > b is
    with pytest.raises(GradlabError, match=r"got a = 5 > b = 2$"):
        function(torch.tensor([[2.0, 5.0]]), torch.tensor([2.0, 2.0]), method)
    assert function(torch.tensor([2.0]), torch.tensor([2.0]), method).tolist() == [0.0]


@pytest.mark.parametrize("function", [harmonic_gap, discount_gap])
@pytest.mark.parametrize("meta", ["a", "b"])
def test_a_gap_of_meta_counts_is_refused_by_name(function, meta):
    # their order is read: a meta tensor has a shape and no values
    counts = {"a": torch.tensor([1.0]), "b": torch.tensor([2.0])}
    counts[meta] = counts[meta].to("meta")
    with pytest.raises(GradlabError, match=rf"^{meta} is a meta tensor"):
        function(counts["a"], counts["b"])


@pytest.mark.parametrize("rate", [harmonic_rate, discount_rate], ids=lambda f: f.__name__)
@pytest.mark.parametrize(("a", "count", "name", "got"), [(1.0, -0.5, "count", -0.5),
                                                         (-1.0, 0.5, "a", -1.0)])  # fmt: skip
def test_a_rate_names_its_own_arguments_when_a_count_is_negative(rate, a, count, name, got):
    # a negative count reached the gap, which refused "a must be at most b for harmonic_gap":
    # a function and an argument the caller never used
    with pytest.raises(GradlabError) as raised:
        rate(torch.tensor([a], dtype=torch.float64), torch.tensor([count], dtype=torch.float64))
    assert str(raised.value) == (f"{name} must be a count, at least 0, for {rate.__name__}; "
                                 f"got {got:g}")  # fmt: skip


@pytest.mark.parametrize("n", [-0.5, -2.0, -1e-9])
def test_harmonic_number_refuses_a_negative_count(n):
    # -0.5 gave -1.386 (no sum of 1/k), -2.0 NaN (a pole of the digamma)
    from gradlab.functional import harmonic_number

    with pytest.raises(GradlabError) as raised:
        harmonic_number(torch.tensor([1.0, n], dtype=torch.float64))
    assert str(raised.value) == f"n must be a count, at least 0, for harmonic_number; got {n:g}"
    assert harmonic_number(torch.tensor([0.0, 4.0])).tolist() == pytest.approx(
        [0.0, 1 + 1 / 2 + 1 / 3 + 1 / 4], rel=1e-6, abs=1e-7)


@pytest.mark.parametrize("meta", ["a", "count"])
def test_a_rate_of_a_meta_count_is_refused_by_name_before_its_signs_are_read(meta):
    counts = {"a": torch.zeros(2), "count": torch.ones(2)}
    counts[meta] = counts[meta].to("meta")
    with pytest.raises(GradlabError) as raised:
        harmonic_rate(counts["a"], counts["count"])
    assert str(raised.value) == (f"{meta} is a meta tensor (a shape without values); pass a "
                                 "tensor on a real device (cpu, cuda, ...)")  # fmt: skip


@pytest.mark.parametrize(("function", "second"), [
    (harmonic_gap, "b"), (discount_gap, "b"), (harmonic_rate, "count"), (discount_rate, "count")])
def test_counts_whose_shapes_do_not_broadcast_are_refused_by_name(function, second):
    # a raw torch size-mismatch error from deep inside the stand-in, before
    with pytest.raises(GradlabError) as raised:
        function(torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0, 5.0]))
    assert str(raised.value) == (
        f"a and {second} must have shapes that broadcast together (one count per entry, or a "
        "single count); got (2,) and (3,)"
    )
    assert function(torch.tensor([[1.0], [2.0]]), torch.tensor([3.0, 4.0, 5.0])).shape == (2, 3)


@pytest.mark.parametrize(("a", "n", "message"), [
    ("1", 2.0, "a must be a real number or an array of real numbers for harmonic_log_error; "
               "got '1'"),
    (1.0, "abc", "n must be a real number or an array of real numbers for harmonic_log_error; "
                 "got 'abc'"),
    (True, 2.0, "a must be a real number or an array of real numbers for harmonic_log_error; "
                "got True"),
    ([1.0, 2.0], [1.0, 2.0, 3.0], "a and n must have shapes that broadcast together for "
                                  "harmonic_log_error; got (2,) and (3,)"),
    (["1", 2], 2.0, "a must be a real number or an array of real numbers for "
                    "harmonic_log_error; got ['1', 2]"),
    ([None, 2], 2.0, "a must be a real number or an array of real numbers for "
                     "harmonic_log_error; got [None, 2]"),  # an object array, not counts
])  # fmt: skip
def test_harmonic_log_error_refuses_text_bools_and_shapes_that_do_not_broadcast(a, n, message):
    pytest.importorskip("scipy")
    # text was converted ('1', '2' gave an error of 0.2653), 'abc' a NumPy ValueError
    with pytest.raises(GradlabError) as raised:
        harmonic_log_error(a, n)
    assert str(raised.value) == message
    assert harmonic_log_error(torch.tensor([10.0]), np.int64(2)).error.shape == (1,)
    leaf = torch.tensor([10.0], requires_grad=True)  # read without its graph
    assert harmonic_log_error(leaf, 2.0).error.tolist() == harmonic_log_error(10.0, 2.0).error


@pytest.mark.parametrize(("a", "n", "message"), [
    (10, 2**1100, "n must be a count below float64's largest number (about 1.8e308) for "
                  "harmonic_log_error; got an int of 332 digits"),
    (10, [1, 2**1100], "n must be a count below float64's largest number (about 1.8e308) for "
                       "harmonic_log_error; got an array holding such an int"),
    (torch.tensor([10.0], device="meta"), 2.0,
     "a is a meta tensor (a shape without values); pass a tensor on a real device (cpu, cuda, "
     "...)"),
])  # fmt: skip
def test_harmonic_log_error_refuses_counts_it_cannot_hold(a, n, message):
    # an OverflowError and a NotImplementedError from deep inside before
    with pytest.raises(GradlabError) as raised:
        harmonic_log_error(a, n)
    assert str(raised.value) == message


@pytest.mark.filterwarnings("error")  # refused, with no overflow warning first
@pytest.mark.parametrize(("a", "n"), [(1e308, 1e308), ([3.0, 1.7e308], [1.0, 1e307])])
def test_harmonic_log_error_refuses_counts_whose_sum_overflows(a, n):
    # digamma(inf) made the error -inf, with overflow warnings, silently
    with pytest.raises(GradlabError) as raised:
        harmonic_log_error(np.asarray(a), np.asarray(n))
    assert str(raised.value) == (
        "a + n must stay below float64's largest number (about 1.8e308) for harmonic_log_error; "
        "it overflows in 1 of 1 entries" if np.ndim(a) == 0 else
        "a + n must stay below float64's largest number (about 1.8e308) for harmonic_log_error; "
        "it overflows in 1 of 2 entries")


@pytest.mark.filterwarnings("error")  # an overflow warning fails the test
@pytest.mark.parametrize(("a", "n"), [(1e160, 1e170), (1e300, 1e305), (3.0, 1e200)])
def test_the_bound_and_the_expansion_of_huge_counts_are_numbers_not_overflows(a, n):
    # a**2 overflowed past a = 1.3e154: the bound n / (2 a^2) came back 0 with warnings
    mpmath = pytest.importorskip("mpmath")
    result = harmonic_log_error(a, n)
    with mpmath.workdps(60):
        x, k = mpmath.mpf(a), mpmath.mpf(n)
        bound = float(k / (2 * x**2))
        expansion = float(k / (2 * x * (x + k)) - (1 / x**2 - 1 / (x + k) ** 2) / 12)
    assert float(result.paper_bound) == pytest.approx(bound, rel=1e-14, abs=0.0)
    assert float(result.asymptotic) == pytest.approx(expansion, rel=1e-14, abs=0.0)


def test_a_single_count_gives_numpy_scalars_in_either_precision():
    # mpmath's error of 0-d counts was a 0-d array, float64's a scalar
    pytest.importorskip("mpmath")
    for precision in ("float64", "mpmath"):
        result = harmonic_log_error(np.array(5.0), np.array(100.0), precision=precision)
        assert [type(value) for value in result] == [np.float64] * 3, precision


@pytest.mark.parametrize(("n", "message"), [
    (3.0, "n must be a torch.Tensor; got float; pass torch.as_tensor(n)"),
    (torch.tensor([1 + 0j]), "n must have a real floating or integer dtype; got torch.complex64"),
    (torch.tensor([True]), "n must have a real floating or integer dtype; got torch.bool"),
    (torch.zeros((1,) * 9), "n must be 0-D or 1-D or 2-D or 3-D or 4-D or 5-D or 6-D or 7-D or "
                            "8-D; got shape (1, 1, 1, 1, 1, 1, 1, 1, 1)"),
    (torch.zeros(2, device="meta"), "n is a meta tensor (a shape without values); pass a tensor "
                                    "on a real device (cpu, cuda, ...)"),
], ids=["number", "complex", "bool", "nine_dims", "meta"])  # fmt: skip
def test_harmonic_number_names_n_when_it_is_no_real_tensor_of_values(n, message):
    from gradlab.functional import harmonic_number

    with pytest.raises(GradlabError) as raised:
        harmonic_number(n)
    assert str(raised.value) == message
    assert harmonic_number(torch.zeros((1,) * 8)).item() == 0.0  # eight dimensions are allowed


@pytest.mark.parametrize("function", [harmonic_gap, discount_gap, harmonic_rate, discount_rate])
def test_an_empty_count_against_a_nan_one_computes_nothing_and_refuses_nothing(function):
    # an empty first count broadcast with one NaN: the result is empty, nothing is read
    got = function(torch.zeros(0, dtype=torch.float64), torch.tensor([NAN]).double(), "log")
    assert got.shape == (0,)


@pytest.mark.parametrize("method", ["log", "midpoint", "exact"])
def test_an_infinite_a_is_refused_where_inf_minus_inf_gave_nan(method):
    infinite = torch.tensor([math.inf])
    with pytest.raises(GradlabError) as refused:
        harmonic_gap(infinite, infinite, method)
    assert str(refused.value) == ("a must be finite for harmonic_gap (a gap that starts past "
                                  "every count has no value; b = inf gives inf); got inf")
    assert harmonic_gap(torch.tensor([3.0]), infinite, method).item() == math.inf


@pytest.mark.parametrize("wide", ["a", "b"])
@pytest.mark.parametrize("method", ["log", "midpoint", "exact"])
def test_counts_of_two_dtypes_are_computed_in_the_more_precise(method, wide):
    # a float32 count beside a float64 one gave float64 numbers of float32 accuracy
    a, b = torch.tensor([0.0, 2.0, 7.5]), torch.tensor([1.0, 5.0, 1e6])
    a, b = (a.double(), b) if wide == "a" else (a, b.double())
    mixed = harmonic_gap(a, b, method)
    assert mixed.dtype == torch.float64
    assert torch.equal(mixed, harmonic_gap(a.double(), b.double(), method))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: harmonic_gap(torch.tensor([1.0000001]), torch.tensor([1.0])),
         "a must be at most b for harmonic_gap (the gap sums t = a + 1 .. b); got a = "
         "1.0000001192092896 > b = 1"),
        (lambda: discount_gap(torch.tensor([1.0]), torch.tensor([10000001.0])),
         "b must be at most 1e+07 for discount_gap (the exact partial sums are tabulated up to "
         "the largest count, and li's series is checked up to there); got 10000001"),
    ],
)
def test_a_refused_count_is_shown_with_every_digit_that_sets_it_apart(call, message):
    # %g rounded both to the bound they broke: "got a = 1 > b = 1", "at most 1e+07; got 1e+07"
    with pytest.raises(GradlabError) as raised:
        call()
    assert str(raised.value) == message


@pytest.mark.parametrize("method", ["log", "midpoint", "exact"])
@pytest.mark.parametrize("name", ["a", "count"])
def test_an_infinite_count_of_harmonic_rate_is_refused_by_name(method, name):
    # count = inf came back NaN for every method; a = inf was refused naming harmonic_gap and
    # a "b" the caller never passed
    values = {"a": torch.tensor([1.0, 2.0]), "count": torch.tensor([3.0, 4.0])}
    values[name][1] = INF
    with pytest.raises(GradlabError) as raised:
        harmonic_rate(values["a"], values["count"], method)
    assert str(raised.value) == (
        f"{name} must be a finite count for harmonic_rate; got inf in 1 of 2 entries")


@pytest.mark.parametrize("method", ["log", "midpoint", "exact"])
def test_counts_whose_sum_overflows_their_dtype_are_refused(method):
    # a = 1e38, count = 3e38 in float32: a + count is inf, and the log rate came back inf
    largest = torch.finfo(torch.float32).max
    a = torch.tensor([1.0, largest / 2])
    count = torch.tensor([2.0, largest * 0.75])
    assert torch.isinf(a + count).tolist() == [False, True]  # finite counts, an endless sum
    with pytest.raises(GradlabError) as raised:
        harmonic_rate(a, count, method)
    assert str(raised.value) == (
        "a + count must be finite in float32 for harmonic_rate; it overflows in 1 of 2 "
        "entries: pass float64 counts")
    wide = harmonic_rate(a.double(), count.double(), method)  # the same counts in float64
    assert torch.isfinite(wide).all()


def test_the_discount_rate_refuses_such_counts_by_its_own_limit():
    # its limit of 1e7 counts comes first, not the harmonic rate's float64 advice
    largest = torch.finfo(torch.float32).max
    with pytest.raises(GradlabError) as raised:
        discount_rate(torch.tensor([largest / 2]), torch.tensor([largest * 0.75]), "log")
    assert str(raised.value).startswith("a must be at most 1e+07 for discount_rate")
