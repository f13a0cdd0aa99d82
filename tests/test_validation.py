"""The shared argument checks of gradlab.validation: what they accept and how they refuse."""

import math
import types

import numpy as np
import pytest
import torch

import gradlab
from gradlab.errors import GradlabError
from gradlab.validation import (
    a_or_an,
    check_bool,
    check_embeddings_and_labels,
    check_finite,
    check_floating_dtype,
    check_in_range,
    check_int_in_range,
    check_interpolation,
    check_ks,
    check_non_negative_finite,
    check_optional_callable,
    check_positive_finite,
    check_positive_int,
    check_same_device,
    check_seed,
    check_signed_scores,
    check_tensor,
    count_noun,
    finite_flag,
    non_finite_message,
    number_text,
    skip_value_checks,
)


def _refusal(call):
    with pytest.raises(GradlabError) as raised:
        call()
    return str(raised.value)


@pytest.mark.parametrize(("value", "low", "high"), [(2, 2, None), (7, 2, None), (1, 1, 4),
                                                    (4, 1, 4), (10**30, 0, None)])  # fmt: skip
def test_an_int_in_range_is_returned_as_given(value, low, high):
    assert check_int_in_range("n", value, low, high) is value


@pytest.mark.parametrize(("value", "low", "high", "allowed"), [
    (1, 2, None, "an int >= 2"),
    (0, 1, 4, "an int from 1 to 4"),
    (5, 1, 4, "an int from 1 to 4"),
    (True, 0, None, "an int >= 0"),  # a bool is no count
    (3.0, 1, 4, "an int from 1 to 4"),
    ("3", 1, 4, "an int from 1 to 4"),
])  # fmt: skip
def test_anything_else_is_refused_with_the_name_the_range_and_the_value(value, low, high, allowed):
    with pytest.raises(GradlabError) as raised:
        check_int_in_range("count", value, low, high)
    assert str(raised.value) == f"count must be {allowed}; got {value!r}"


def test_a_count_agrees_with_its_noun():
    assert [count_noun(n, "query", "queries") for n in (0, 1, 2)] == [
        "0 queries", "1 query", "2 queries"]
    assert [count_noun(n, "pair") for n in (1, 2)] == ["1 pair", "2 pairs"]


def test_an_optional_callable_is_none_or_callable_and_named_when_not():
    assert check_optional_callable("hook", None) is None
    assert check_optional_callable("hook", len) is len
    assert _refusal(lambda: check_optional_callable("hook", 3)) == (
        "hook must be None or a callable; got int 3")
    assert _refusal(lambda: check_optional_callable("hook", "f", " (a, b)")) == (
        "hook must be None or a callable (a, b); got str 'f'")


def test_a_loss_s_validate_switch_must_be_a_bool():
    assert gradlab.NTXentLoss(0.1, validate=False).validate is False
    assert _refusal(lambda: gradlab.NTXentLoss(0.1, validate="no")) == (
        "validate must be True or False; got 'no'")


def test_the_finite_flag_is_a_0_d_bool_on_the_tensor_s_device():
    for tensor in (torch.zeros(0), torch.zeros(3, dtype=torch.long), torch.tensor([1.0])):
        flag = finite_flag(tensor)
        assert flag.shape == () and flag.dtype == torch.bool and bool(flag), tensor
    assert finite_flag(torch.zeros(0, device="meta")).device.type == "meta"
    assert not finite_flag(torch.tensor([math.nan]))  # one entry is read too
    assert not finite_flag(torch.tensor([math.inf, 1.0]))
    assert not finite_flag(torch.tensor([1.0, -math.inf]))


@pytest.mark.parametrize(("values", "expected"), [
    ([-2.0, 1.0], True), ([1.0, 2.0], True),  # both ends of [-bound, bound] are inside
    ([-3.0, 1.0], False), ([1.0, 3.0], False), ([math.nan, 1.0], False), ([math.inf], False),
])  # fmt: skip
def test_the_finite_flag_with_a_bound_keeps_every_entry_in_minus_bound_to_bound(values, expected):
    assert bool(finite_flag(torch.tensor(values), bound=2.0)) is expected


def test_a_number_in_range_is_returned_as_a_float_and_the_range_is_printed():
    assert check_in_range("x", 0, 0, 1) == 0.0 and check_in_range("x", 1, 0, 1) == 1.0
    assert _refusal(lambda: check_in_range("x", 2, 0, 1)) == (
        "x must be a finite number in [0, 1]; got 2")
    assert _refusal(lambda: check_in_range("x", -1, 0)) == (
        "x must be a finite number in [0, inf); got -1")
    assert _refusal(lambda: check_in_range("x", math.nan, 0, reason="why")) == (
        "x must be a finite number in [0, inf) (why); got nan")
    for value in (True, "1", None):
        assert _refusal(lambda value=value: check_in_range("x", value, 0, 2)) == (
            f"x must be a finite number in [0, 2]; got {value!r}")


@pytest.mark.parametrize(("check", "allowed"), [
    (check_positive_finite, "a positive finite number"),
    (check_non_negative_finite, "a non-negative finite number"),
])  # fmt: skip
def test_positive_and_non_negative_numbers_refuse_bools_text_and_infinities(check, allowed):
    for value in (True, "1", math.inf, -1):
        refused = _refusal(lambda value=value: check("x", value))
        assert refused == f"x must be {allowed}; got {value!r}"
    assert check("x", 2) == 2.0


def test_a_positive_int_starts_at_1_and_refuses_text():
    assert check_positive_int("n", 1) == 1
    for value in (0, "2", 2.0, False):
        assert _refusal(lambda value=value: check_positive_int("n", value)) == (
            f"n must be a positive integer; got {value!r}")


def test_a_positive_int_beyond_int64_is_refused_before_torch_overflows():
    # suspect_summary(k=2**63) raised "Overflow when unpacking long long" from inside
    largest = torch.iinfo(torch.int64).max
    assert check_positive_int("k", largest) == largest
    assert _refusal(lambda: check_positive_int("k", largest + 1)) == (
        f"k must be a positive integer of at most 2**63 - 1 (torch's int64); got {largest + 1}")


@pytest.mark.parametrize(("value", "ndims", "kind", "message"), [
    ([1.0], (1,), "any", "x must be a torch.Tensor; got list; pass torch.as_tensor(x)"),
    (torch.zeros(1, 1, 1), (1, 2), "any", "x must be 1-D or 2-D; got shape (1, 1, 1)"),
    (torch.zeros(2, dtype=torch.long), (1,), "float",
     "x must have a floating dtype; got torch.int64; pass x.float()"),
    (torch.zeros(2), (1,), "bool", "x must be a bool tensor; got torch.float32"
                                   " (a 0/1 mask: pass x.bool())"),
    (torch.zeros(2, dtype=torch.bool), (1,), "integer",
     "x must have an integer dtype; got torch.bool (whole-number ids: pass x.long())"),
    (torch.zeros(2, dtype=torch.complex64), (1,), "integer",
     "x must have an integer dtype; got torch.complex64"),
    (torch.zeros(2, dtype=torch.bool), (1,), "any_real",
     "x must have a real floating or integer dtype; got torch.bool"),
    (torch.zeros(2, dtype=torch.complex64), (1,), "any_real",
     "x must have a real floating or integer dtype; got torch.complex64"),
    (torch.zeros(2).to(torch.float8_e4m3fn), (1,), "float",
     "x must have dtype float16, bfloat16, float32 or float64; got torch.float8_e4m3fn "
     "(convert it first: no loss computes in it)"),
    (torch.zeros(2).to(torch.float8_e5m2), (1,), "any_real",
     "x must have dtype float16, bfloat16, float32 or float64; got torch.float8_e5m2 "
     "(convert it first: no loss computes in it)"),
    (torch.zeros(2).to_sparse(), (1,), "float",
     "x must be a dense (strided) tensor; got layout torch.sparse_coo"),
    (torch.zeros(2, dtype=torch.long).to_sparse(), (1,), "integer",
     "x must be a dense (strided) tensor; got layout torch.sparse_coo"),
])  # fmt: skip
def test_a_tensor_of_the_wrong_kind_is_refused_naming_what_is_allowed(value, ndims, kind, message):
    assert _refusal(lambda: check_tensor("x", value, ndims=ndims, kind=kind)) == message


def test_tensors_of_the_right_kind_are_returned_unchanged():
    for value, kind in ((torch.zeros(2), "float"), (torch.zeros(2, dtype=torch.bool), "bool"),
                        (torch.zeros(2, dtype=torch.int32), "integer"),
                        (torch.zeros(2), "any_real"),
                        (torch.zeros(2, dtype=torch.long), "any_real"),
                        (torch.zeros(2, dtype=torch.float16), "float"),
                        (torch.zeros(2, dtype=torch.bfloat16), "any_real"),
                        (torch.zeros(2, dtype=torch.float64), "float")):  # fmt: skip
        assert check_tensor("x", value, ndims=(1,), kind=kind) is value


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_unsigned_integers_wider_than_a_byte_are_refused_as_integers_saying_why_and_the_fix(
    dtype,
):
    # torch 2.13 has equality and sort for them, but no ordering comparison, search, bincount
    # or indexing: labels in them ended in a NotImplementedError after the work had started
    width = {torch.uint16: "uint16", torch.uint32: "uint32", torch.uint64: "uint64"}[dtype]
    labels = torch.tensor([0, 0, 1], dtype=dtype)
    assert _refusal(lambda: check_tensor("labels", labels, ndims=(1,), kind="integer")) == (
        f"labels must have a signed integer dtype or uint8; got torch.{width} (torch implements "
        f"few operations for {width}: no ordering comparison, search, bincount or indexing); "
        "pass labels.long()")


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64,
                                   torch.uint8])  # fmt: skip
def test_signed_integers_and_bytes_pass_as_integers(dtype):
    labels = torch.tensor([0, 0, 1], dtype=dtype)
    assert check_tensor("labels", labels, ndims=(1,), kind="integer") is labels


@pytest.mark.parametrize("dtype", [torch.uint8, torch.uint16, torch.uint32, torch.uint64])
def test_unsigned_scores_are_refused_with_the_value_minus_1_wraps_to_in_their_dtype(dtype):
    bits = 8 * torch.empty((), dtype=dtype).element_size()
    width = f"uint{bits}"
    scores = torch.zeros(2, 3, dtype=dtype, device="meta")  # refused before any value is read
    assert _refusal(lambda: check_signed_scores("distances", scores, ndims=(2,))) == (
        f"distances must have a signed dtype; got torch.{width} (a negated unsigned distance "
        f"wraps around: -1 is {2**bits - 1} in {width}): pass distances.long(), or "
        "-distance.long() for distances")


@pytest.mark.parametrize("dtype", [torch.int8, torch.int64, torch.float16, torch.float64])
def test_signed_and_floating_scores_are_returned_unchanged(dtype):
    scores = torch.tensor([[2, -1, 0]], dtype=dtype)
    assert check_signed_scores("scores", scores, ndims=(2,)) is scores


@pytest.mark.parametrize(("value", "message"), [
    ([[1.0]], "scores must be a torch.Tensor; got list; pass torch.as_tensor(scores)"),
    (torch.zeros(3), "scores must be 2-D; got shape (3,)"),
    (torch.zeros(1, 2, dtype=torch.bool),
     "scores must have a real floating or integer dtype; got torch.bool"),
    (torch.tensor([[0.5, float("nan")]]), "scores must be finite; got NaN in row 0 (1 row of 1)"),
])  # fmt: skip
def test_scores_are_refused_as_check_tensor_and_check_finite_refuse_them(value, message):
    assert _refusal(lambda: check_signed_scores("scores", value, ndims=(2,))) == message


def test_finite_tensors_refuse_an_infinity_at_either_end():
    for values, where in (([math.inf, 1.0], "inf in entry 0 (1 entry of 2)"),
                          ([1.0, -math.inf], "-inf in entry 1 (1 entry of 2)"),
                          ([math.nan], "NaN in entry 0 (1 entry of 1)")):  # fmt: skip
        assert _refusal(lambda values=values: check_tensor(
            "x", torch.tensor(values), ndims=(1,), kind="float", finite=True)) == (
            f"x must be finite; got {where}")


def test_the_finite_check_alone_passes_finite_integer_and_empty_tensors_unchanged():
    for value in (torch.tensor([1.0, -2.0]), torch.tensor([1, 2]), torch.zeros(0)):
        assert check_finite("x", value) is value
    assert _refusal(lambda: check_finite("scores", torch.tensor([[0.0, math.inf]]))) == (
        "scores must be finite; got inf in row 0 (1 row of 1)")
    with skip_value_checks():  # no value read: the caller handles non-finite values
        check_finite("x", torch.tensor([math.nan]))


def test_a_non_finite_refusal_names_the_kinds_and_the_rows_a_user_can_find():
    batch = torch.zeros(30, 4, 2)  # rows are the first dimension, whatever follows
    bad_rows = [3, 5, 7, 11, 13, 17, 19, 23, 27, 28, 29]  # eleven: more than are listed
    for row in bad_rows:
        batch[row, row % 4, 1] = math.inf if row == 17 else math.nan
    listed = ", ".join(str(row) for row in bad_rows[:10])
    assert _refusal(lambda: check_finite("embeddings", batch)) == (
        f"embeddings must be finite; got NaN and inf in rows {listed}, ... (11 rows of 30)")
    assert non_finite_message("x", torch.tensor(-math.inf), " here") == (
        "x must be finite here; got -inf")
    every_kind = torch.tensor([math.nan, math.inf, -math.inf, 0.0])
    assert non_finite_message("x", every_kind) == (
        "x must be finite; got NaN, inf and -inf in entries 0, 1, 2 (3 entries of 4)")
    vector = torch.zeros(12)
    vector[:10] = math.nan  # exactly as many as are listed: no "..."
    assert non_finite_message("gains", vector) == (
        "gains must be finite; got NaN in entries 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 (10 entries of 12)")


def test_tensors_on_two_devices_are_named_with_their_devices():
    check_same_device(a=torch.zeros(1), b=torch.zeros(1))
    refused = _refusal(lambda: check_same_device(a=torch.zeros(1), b=torch.zeros(1, device="meta")))
    assert refused == "tensors must be on one device; got a on cpu, b on meta"


@pytest.mark.parametrize(("embeddings", "labels", "message"), [
    ([[1.0]], torch.zeros(1, dtype=torch.long), "embeddings must be a torch.Tensor; got list"
                                                "; pass torch.as_tensor(embeddings)"),
    (torch.zeros(4), torch.zeros(4, dtype=torch.long), "embeddings must be 2-D; got shape (4,)"),
    (torch.zeros(4, 3, dtype=torch.long), torch.zeros(4, dtype=torch.long),
     "embeddings must have a floating dtype; got torch.int64; pass embeddings.float()"),
    (torch.zeros(4, 0), torch.zeros(4, dtype=torch.long),
     "embeddings must have at least one embedding dimension; got shape (4, 0)"),
    (torch.zeros(4, 3), [0, 1, 2, 3], "labels must be a torch.Tensor; got list"
                                      "; pass torch.as_tensor(labels)"),
    (torch.zeros(4, 3), torch.zeros(4, 1, dtype=torch.long),
     "labels must be 1-D; got shape (4, 1); pass labels.reshape(-1)"),
    (torch.zeros(4, 3), torch.zeros(4), "labels must have an integer dtype; got torch.float32"
                                        " (whole-number ids: pass labels.long())"),
    (torch.zeros(4, 3), torch.zeros(5, dtype=torch.long),
     "labels must have shape (4,) (one label per embedding); got (5,)"),
    (torch.zeros(4, 3, device="meta"), torch.zeros(4, dtype=torch.long),
     "embeddings is a meta tensor (a shape without values); pass a tensor on a real device "
     "(cpu, cuda, ...)"),
    (torch.zeros(4, 3), torch.zeros(4, dtype=torch.long, device="meta"),
     "labels is a meta tensor (a shape without values); pass a tensor on a real device "
     "(cpu, cuda, ...)"),
])  # fmt: skip
def test_in_batch_inputs_are_refused_naming_the_argument_and_what_is_wrong(embeddings, labels,
                                                                           message):
    assert _refusal(lambda: check_embeddings_and_labels(embeddings, labels)) == message


def test_in_batch_embeddings_must_be_finite_only_when_asked():
    embeddings, labels = torch.zeros(4, 3), torch.zeros(4, dtype=torch.long)
    embeddings[2, 1] = math.nan
    check_embeddings_and_labels(embeddings, labels)
    assert _refusal(lambda: check_embeddings_and_labels(embeddings, labels, finite=True)) == (
        "embeddings must be finite; got NaN in row 2 (1 row of 4)")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_a_floating_dtype_is_returned(dtype):
    assert check_floating_dtype("dtype", dtype) is dtype


@pytest.mark.parametrize("value", ["float64", torch.int64, torch.bool, torch.complex64, None])
def test_anything_else_is_refused_naming_the_argument(value):
    assert _refusal(lambda: check_floating_dtype("precision", value)) == (
        f"precision must be a floating torch dtype; got {value!r}")


def test_a_bool_option_takes_true_or_false_only():
    assert check_bool("mutants", True) is True and check_bool("mutants", False) is False
    for value in ("no", 1, 0, None, torch.tensor(True)):
        assert _refusal(lambda value=value: check_bool("mutants", value)) == (
            f"mutants must be True or False; got {value!r}")


@pytest.mark.parametrize("ks", [[1, 5], (10,), range(1, 4)])
def test_ks_are_returned_as_a_tuple(ks):
    assert check_ks(ks) == tuple(ks)


@pytest.mark.parametrize(
    ("ks", "message"),
    [
        (5, "ks must be a sequence of positive integers, such as (1, 5, 10); got 5"),
        ("15", "ks must be a sequence of positive integers, such as (1, 5, 10); got '15'"),
        (b"1", "ks must be a sequence of positive integers, such as (1, 5, 10); got b'1'"),
        (torch.tensor([1, 5]), "ks must be a sequence of positive integers, such as (1, 5, 10); "
                               "got tensor([1, 5])"),
        ({1, 5}, "ks must be a sequence of positive integers, such as (1, 5, 10); got {1, 5}"),
        ((), "ks must name at least one k; got ()"),
        ([], "ks must name at least one k; got []"),
        ((1, 0), "ks must be a positive integer; got 0"),
        ((True,), "ks must be a positive integer; got True"),
        ((2.0,), "ks must be a positive integer; got 2.0"),
    ],
)  # fmt: skip
def test_bad_ks_are_refused_naming_ks_and_the_value(ks, message):
    with pytest.raises(GradlabError) as caught:
        check_ks(ks)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "make",
    [
        lambda np: gradlab.SmoothAPLoss(np.float32(0.01)),
        lambda np: gradlab.NTXentLoss(np.float32(0.1)),
        lambda np: gradlab.MaxViolationTripletLoss(np.float32(0.2)),
        lambda np: gradlab.SigLIPLoss(np.float32(10.0), np.float32(-10.0)),
        lambda np: gradlab.FastAPLoss(np.int64(10)),
        lambda np: gradlab.FAPPYLoss(np.float32(0.25)),
        lambda np: gradlab.BlackboxAPLoss(np.float32(4.0), np.float32(0.02)),
    ],
)
def test_numpy_scalar_options_are_numbers(make):
    # A temperature read from a NumPy array or a config is a finite number: refusing it with
    # "must be a finite number; got np.float32(0.1)" contradicts itself.
    np = pytest.importorskip("numpy")
    loss_fn = make(np)
    options = {k: v for k, v in vars(loss_fn).items() if not k.startswith("_")}
    assert all(type(v) in (bool, int, float, str, list) for v in options.values()), options


@pytest.mark.parametrize("seed", [0, 1, 2**32 - 1, np.int64(5)])
def test_seeds_from_0_to_2_to_the_32_minus_1_are_taken_as_ints(seed):
    assert check_seed("seed", seed) == seed and type(check_seed("seed", seed)) is int


@pytest.mark.parametrize("seed", [-1, 2**32, 2**64, True, 1.0, "3", None])
def test_other_seeds_are_refused_naming_the_argument_and_the_range(seed):
    with pytest.raises(gradlab.GradlabError) as raised:
        check_seed("--seed", seed)
    assert str(raised.value) == f"--seed must be a whole number from 0 to 2**32 - 1; got {seed!r}"



def test_the_interpolation_lies_between_1e_30_and_1e30_with_the_reason():
    assert check_interpolation(1e-30) == 1e-30 and check_interpolation(1e30) == 1e30
    for value in (1e-46, 0.0, 1.5e30, math.inf, "4"):
        assert _refusal(lambda value=value: check_interpolation(value)) == (
            "interpolation must be a finite number in [1e-30, 1e+30] (1/interpolation and the "
            f"perturbed scores must stay finite in float32); got {value!r}")


@pytest.mark.parametrize(("check", "message"), [
    (lambda: check_positive_finite("tau", torch.tensor(0.01)),
     "tau must be a positive finite number; got tensor(0.0100)"),
    (lambda: check_in_range("margin", torch.tensor(0.1), 0.0, 1.0),
     "margin must be a finite number in [0, 1]; got tensor(0.1000)"),
    (lambda: check_non_negative_finite("margin", torch.tensor(0.1)),
     "margin must be a non-negative finite number; got tensor(0.1000)"),
])  # fmt: skip
def test_a_number_given_as_a_tensor_is_told_how_to_pass_it(check, message):
    # a 0-d tensor in range read as if it were out of range
    with pytest.raises(GradlabError) as raised:
        check()
    assert str(raised.value) == (
        f"{message} (a Python number, not a tensor: pass float(x), or x.item())")


def test_a_positive_number_refuses_zero_and_a_non_negative_one_takes_it():
    assert _refusal(lambda: check_positive_finite("tau", 0.0)) == (
        "tau must be a positive finite number; got 0.0")
    assert check_non_negative_finite("margin", 0.0) == 0.0
    assert check_positive_finite("tau", 5e-324) == 5e-324  # the smallest positive float


@pytest.mark.parametrize(("value", "expected"), [
    (-1.0, "-1"), (0.5, "0.5"), (1e7, "1e+07"), (1e-300, "1e-300"),  # %g is the value: short
    (1.0000001192092896, "1.0000001192092896"),  # %g would round it to 1
    (10000001.0, "10000001"), (-10000001.0, "-10000001"),  # whole: no ".0"
    (2.0**53 - 1, "9007199254740991"),  # the largest whole number below 2^53: its digits
    (2.0**53, "9007199254740992.0"),  # from 2^53 a float's repr, which reads back exactly
    (2.0**53 + 2, "9007199254740994.0"),
    (1e6 + 0.5, "1000000.5"), (math.inf, "inf"), (math.nan, "nan"),
])  # fmt: skip
def test_number_text_is_short_where_that_is_the_value_and_exact_elsewhere(value, expected):
    assert number_text(value) == expected
    assert float(expected) == value or value != value  # what is shown reads back as the value


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("layout", [torch.strided, torch.jagged])
def test_a_nested_tensor_is_refused_as_such(layout):
    # rows of two lengths: torch's "NestedTensorImpl doesn't support sizes" came out of the
    # shape check (strided), or a refusal naming a layout (jagged)
    nested = torch.nested.nested_tensor([torch.zeros(2, 3), torch.zeros(3, 3)], layout=layout)
    assert _refusal(lambda: check_tensor("scores", nested, ndims=(2,), kind="float")) == (
        "scores must be a dense tensor; got a nested tensor (pad its rows to one length, or call "
        "once per length)")


@pytest.mark.parametrize(("word", "said"), [
    ("int", "an int"), ("ExportSink", "an ExportSink"), ("Umbrella", "an Umbrella"),
    ("dict", "a dict"), ("Tensor", "a Tensor"), ("ab", "an ab"), ("ba", "a ba"),
])  # fmt: skip
def test_a_type_name_takes_its_article(word, said):
    # "a ExportSink" and "a int" in messages
    assert a_or_an(word) == said


@pytest.mark.parametrize(("value", "ndims", "kind"), [
    ([0, 0, 1, 1], (1,), "integer"),
    ((0.5, 1.5), (1,), "float"),
    (3, (0,), "any_real"),
    (np.arange(4), (1,), "integer"),
    (torch.tensor([[0, 0, 1, 1]]), (1,), "integer"),
    (torch.tensor([[0], [1]]), (1,), "integer"),
    (torch.tensor([0.0, 1.0]), (1,), "integer"),
    (torch.tensor([[1, 0], [0, 1]]), (2,), "bool"),
    (torch.tensor([[2, 3]]), (2,), "float"),
])  # fmt: skip
def test_the_fix_a_refusal_suggests_is_accepted(value, ndims, kind):
    # The message ends in "pass EXPR": EXPR, evaluated on what was passed, passes the check.
    message = _refusal(lambda: check_tensor("x", value, ndims=ndims, kind=kind))
    suggestion = message.rsplit("pass ", 1)[1].rstrip(")")
    suggestion += ")" * (suggestion.count("(") - suggestion.count(")"))
    fixed = eval(suggestion, {"torch": torch, "x": value})
    assert check_tensor("x", fixed, ndims=ndims, kind=kind) is fixed


@pytest.mark.parametrize(("value", "ndims", "kind", "message"), [
    (None, (1,), "any", "x must be a torch.Tensor; got NoneType"),
    (types.SimpleNamespace(shape=(3,)), (1,), "any",  # a shape, but no NumPy array
     "x must be a torch.Tensor; got SimpleNamespace"),
    ("0011", (1,), "integer", "x must be a torch.Tensor; got str"),
    (True, (0,), "any", "x must be a torch.Tensor; got bool"),
    (torch.zeros(2, 2, dtype=torch.long), (1,), "integer", "x must be 1-D; got shape (2, 2)"),
    (torch.zeros(1, 1, 3), (2,), "float", "x must be 2-D; got shape (1, 1, 3)"),
    (torch.zeros(2, dtype=torch.complex64), (1,), "float",
     "x must have a floating dtype; got torch.complex64"),
    (torch.zeros(2, dtype=torch.complex64), (1,), "bool",
     "x must be a bool tensor; got torch.complex64"),
])  # fmt: skip
def test_no_fix_is_suggested_where_no_one_call_makes_the_input(value, ndims, kind, message):
    # None is usually a missing input, a string no data; a 2-D matrix is no 1-D vector by
    # reshaping, and a complex tensor no real one by a cast that drops its imaginary part.
    assert _refusal(lambda: check_tensor("x", value, ndims=ndims, kind=kind)) == message


@pytest.mark.parametrize(("check", "what"), [
    (check_positive_finite, "a positive finite number"),
    (check_non_negative_finite, "a non-negative finite number"),
    (lambda name, value: check_in_range(name, value, 1e-30), "a finite number in [1e-30, inf)"),
])  # fmt: skip
def test_a_tensor_of_several_values_given_for_a_number_is_shown_by_dtype_and_shape(check, what):
    # operating_region_proportion(scores, positives) put a [64, 64] mask in tau's place: the
    # message printed the whole mask and told to pass float(x)
    mask = torch.eye(64, dtype=torch.bool)
    assert _refusal(lambda: check("tau", mask)) == (
        f"tau must be {what}; got a torch.bool tensor of shape (64, 64) (several values, not "
        "one number: an argument given in another's place? see the signature)")
    assert _refusal(lambda: check("tau", torch.tensor([0.5]))).endswith(
        "got tensor([0.5000]) (a Python number, not a tensor: pass float(x), or x.item())")
