"""What :func:`compare` and :func:`compare_gradients` measure, on gradients made by hand.

Every number the comparison reports (largest absolute and relative difference, the threshold
``atol + rtol * max|reference|``, the least-squares scale, the worst entry, the parameters, rows
and processes that differ, the unscored scores, the negatives with gradient) is recomputed here
by plain Python loops over the same hand-made values, from the definitions in the docstrings of
:mod:`gradlab.equivalence.compare`; tolerance edges use values that are exact in binary, so that
a difference exactly at the threshold agrees and one just above it does not.
"""

import math
from dataclasses import dataclass, field

import pytest
import torch

import gradlab
from gradlab.equivalence import (
    AllGather,
    FullBatch,
    Gradients,
    PairedBatch,
    compare,
    compare_gradients,
    default_tolerance,
    synthetic_problem,
)
from tests.helpers.equivalence_workers import SleepingStep

B = 4
LABELS = [0, 0, 1, 1]


def _batch(size=B, labels=None, memory_labels=None):
    labels = torch.tensor(LABELS if labels is None else labels)
    memory = None
    if memory_labels is not None:
        memory = torch.zeros(len(memory_labels), 2, dtype=torch.float64)
        memory_labels = torch.tensor(memory_labels)
    return PairedBatch(torch.zeros(size, 2), torch.zeros(size, 2), labels, memory, memory_labels)


def _t(values, dtype=torch.float64):
    return torch.tensor(values, dtype=dtype)


def _grads(parameters, queries=None, candidates=None, scores=None, scored=None, values=None,
           loss=0.0, world_size=1):  # fmt: skip
    if scores is not None and scored is None:
        scored = torch.ones(scores.shape, dtype=torch.bool)
    return Gradients(parameters=parameters, queries=queries, candidates=candidates, scores=scores,
                     scored=scored, score_values=values, loss=loss,
                     world_size=world_size)  # fmt: skip


def _flat(tensor):
    return [float(v) for v in tensor.detach().flatten().tolist()]


def _expected(ref, cand, atol, rtol):
    """The documented measures of two flat lists of floats, by plain loops."""
    diffs = [abs(c - r) for r, c in zip(ref, cand, strict=True)]
    max_abs = max(diffs, default=0.0)
    reference_max = max((abs(r) for r in ref), default=0.0)
    if reference_max > 0:
        relative = max_abs / reference_max
    else:
        relative = 0.0 if max_abs == 0 else math.inf
    norm = sum(r * r for r in ref)
    scale = sum(c * r for r, c in zip(ref, cand, strict=True)) / norm if norm > 0 else math.nan
    residual = max((abs(c - scale * r) for r, c in zip(ref, cand, strict=True)), default=0.0)
    threshold = atol + rtol * reference_max
    scaled = math.isfinite(scale) and residual <= atol + rtol * abs(scale) * reference_max
    worst = diffs.index(max_abs) if diffs else None
    return {"max_abs": max_abs, "reference_max": reference_max, "relative": relative,
            "threshold": threshold, "agrees": max_abs <= threshold, "scale": scale,
            "scaled_agrees": max_abs <= threshold or scaled, "worst": worst}  # fmt: skip


def _assert_measures(quantity, expected):
    for name in ("max_abs", "reference_max", "relative", "threshold", "agrees", "scaled_agrees"):
        assert getattr(quantity, name) == expected[name], (quantity.name, name)
    if math.isnan(expected["scale"]):
        assert math.isnan(quantity.scale)
    else:
        assert quantity.scale == pytest.approx(expected["scale"], rel=1e-12, abs=0)


@pytest.mark.parametrize(
    ("dtype", "tolerance"),
    [
        (torch.float64, (1e-10, 1e-10)),
        (torch.float32, (1e-5, 1e-4)),
        (torch.float16, (1e-2, 1e-2)),
        (torch.bfloat16, (1e-2, 1e-2)),
    ],
)
def test_default_tolerance_per_dtype(dtype, tolerance):
    assert default_tolerance(dtype) == tolerance


@pytest.mark.parametrize(
    ("dtype", "name"), [(torch.float16, "float16"), (torch.bfloat16, "bfloat16")]
)
def test_compare_takes_its_defaults_from_the_parameters_dtype(dtype, name):
    ref = _grads({"w": _t([1.0, 2.0], dtype)})
    cand = _grads({"w": _t([1.0, 2.0 + 1 / 64], dtype)})  # 1/64 <= 0.01 + 0.01 x 2 = 0.03
    result = compare(ref, cand, _batch())
    assert (result.atol, result.rtol, result.dtype) == (1e-2, 1e-2, name)
    assert result["dL/dtheta"].threshold == pytest.approx(0.03, abs=1e-15)
    assert result.equivalent


def _random_problem():
    generator = torch.Generator().manual_seed(11)

    def draw(*shape, size=1.0):
        return size * torch.randn(*shape, generator=generator, dtype=torch.float64)

    parameters = {"weight": draw(2, 3, size=0.3), "bias": draw(3, size=0.3)}
    ref = _grads(parameters, queries=draw(B, 2, size=0.2), candidates=draw(B, 2),
                 scores=draw(B, B, size=0.1), values=draw(B, B), loss=1.25)  # fmt: skip
    cand = _grads(
        {name: value + draw(*value.shape, size=1e-3) for name, value in parameters.items()},
        queries=ref.queries + draw(B, 2, size=1e-7),
        candidates=2 * ref.candidates,
        scores=ref.scores + draw(B, B, size=1e-2),
        values=ref.score_values + draw(B, B, size=1e-6),
        loss=1.5,
    )
    return ref, cand


def test_every_measure_is_the_documented_one():
    ref, cand = _random_problem()
    atol, rtol = 1e-5, 1e-3
    result = compare(ref, cand, _batch(), atol=atol, rtol=rtol)
    assert (result.atol, result.rtol, result.dtype, result.world_size) == (atol, rtol, "float64", 1)
    assert (result.reference_loss, result.candidate_loss) == (1.25, 1.5)
    ref_theta = [v for p in ref.parameters.values() for v in _flat(p)]
    cand_theta = [v for p in cand.parameters.values() for v in _flat(p)]
    pairs = {
        "dL/dtheta": (ref_theta, cand_theta),
        "dL/dqueries": (_flat(ref.queries), _flat(cand.queries)),
        "dL/dcandidates": (_flat(ref.candidates), _flat(cand.candidates)),
        "dL/dscores": (_flat(ref.scores), _flat(cand.scores)),
        "scores": (_flat(ref.score_values), _flat(cand.score_values)),
    }
    verdicts = {}
    for name, (r, c) in pairs.items():
        expected = _expected(r, c, atol, rtol)
        quantity = result[name]
        assert quantity.recorded is True
        _assert_measures(quantity, expected)
        verdicts[name] = (expected["agrees"], expected["scaled_agrees"])
        if name != "dL/dtheta":
            width = 2 if name in ("dL/dqueries", "dL/dcandidates") else B
            at = expected["worst"]
            assert quantity.worst == {"index": [at // width, at % width], "reference": r[at],
                                      "candidate": c[at]}  # fmt: skip
    # the draws were sized so that each verdict is a different one
    assert verdicts == {"dL/dtheta": (False, False), "dL/dqueries": (True, True),
                        "dL/dcandidates": (False, True), "dL/dscores": (False, False),
                        "scores": (True, True)}  # fmt: skip
    assert result.differing == ["dL/dtheta", "dL/dcandidates", "dL/dscores"]
    assert not result.equivalent


def test_a_difference_exactly_at_the_threshold_agrees():
    # max|reference| = 1, so the threshold is 0.25 + 0.5 x 1 = 0.75; 1.25 - 0.5 = 0.75 exactly
    ref = _grads({"w": _t([1.0, 0.5])}, queries=_t([[1.0, 0.5]] * B))
    cand = _grads({"w": _t([1.0, 1.25])}, queries=_t([[1.0, 1.25]] * B))
    result = compare(ref, cand, _batch(), atol=0.25, rtol=0.5)
    for name in ("dL/dtheta", "dL/dqueries"):
        assert (result[name].max_abs, result[name].threshold) == (0.75, 0.75)
        assert result[name].agrees
    assert result["dL/dtheta"].parameters == []
    assert result.equivalent


def test_a_difference_just_above_the_threshold_differs():
    above = 1.25 + 2.0**-30
    ref = _grads({"w": _t([1.0, 0.5])}, queries=_t([[1.0, 0.5]] * B))
    cand = _grads({"w": _t([1.0, above])}, queries=_t([[1.0, above]] * B))
    result = compare(ref, cand, _batch(), atol=0.25, rtol=0.5)
    assert result.differing == ["dL/dtheta", "dL/dqueries"]
    assert result["dL/dtheta"].max_abs == 0.75 + 2.0**-30
    assert result["dL/dtheta"].parameters == ["w"]


def test_a_zero_reference_has_relative_zero_or_inf_and_no_scale():
    # The same non-zero dL/dcandidates in every one: a reference zero everywhere is refused.
    live = _t([[1.0, -1.0]] * B)
    zero = _grads({"w": _t([0.0, 0.0])}, queries=torch.zeros(B, 2), candidates=live)
    same = compare(zero, zero, _batch(), atol=0.25, rtol=0.5)
    for name in ("dL/dtheta", "dL/dqueries"):
        q = same[name]
        assert (q.max_abs, q.reference_max, q.relative, q.threshold) == (0.0, 0.0, 0.0, 0.25)
        assert q.agrees and q.scaled_agrees and math.isnan(q.scale)
    # a candidate of 0.25 against a zero reference: exactly at atol, so it agrees
    at = _grads({"w": _t([0.25, 0.0])}, queries=_t([[0.0, 0.25]] + [[0.0, 0.0]] * (B - 1)),
                candidates=live)  # fmt: skip
    result = compare(zero, at, _batch(), atol=0.25, rtol=0.5)
    for name in ("dL/dtheta", "dL/dqueries"):
        q = result[name]
        assert (q.max_abs, q.reference_max, q.relative) == (0.25, 0.0, math.inf)
        assert q.agrees is True and q.scaled_agrees is True and math.isnan(q.scale)
    # a candidate of 1 against a zero reference: inf, and no factor makes them agree
    one = _grads({"w": _t([1.0, 0.0])}, queries=_t([[1.0, 0.0]] * B), candidates=live)
    result = compare(zero, one, _batch(), atol=0.25, rtol=0.5)
    for name in ("dL/dtheta", "dL/dqueries"):
        q = result[name]
        assert (q.max_abs, q.relative, q.agrees, q.scaled_agrees) == (1.0, math.inf, False, False)


def test_an_exact_multiple_agrees_up_to_its_factor_even_with_zero_tolerance():
    ref = _grads({"w": _t([0.75, -1.5, 3.0])}, candidates=_t([[0.75, -1.5]] * B))
    cand = _grads({"w": _t([1.5, -3.0, 6.0])}, candidates=_t([[1.5, -3.0]] * B))
    result = compare(ref, cand, _batch(), atol=0.0, rtol=0.0)
    for name in ("dL/dtheta", "dL/dcandidates"):
        q = result[name]
        assert q.scale == 2.0 and q.threshold == 0.0
        assert not q.agrees and q.scaled_agrees


def test_the_scaled_tolerance_grows_with_the_factor():
    # candidate = 2 x reference + 5e-3 at an entry where the reference is 0: the scale stays 2
    # and the residual 5e-3 is within rtol x |scale| x max|reference| = 1e-3 x 2 x 4 = 8e-3
    ref_values = [4.0, 1.0, 0.0, -2.0]
    cand_values = [8.0, 2.0, 5e-3, -4.0]
    ref = _grads({"w": _t(ref_values)}, queries=_t([ref_values[:2], ref_values[2:]] * 2))
    cand = _grads({"w": _t(cand_values)}, queries=_t([cand_values[:2], cand_values[2:]] * 2))
    result = compare(ref, cand, _batch(), atol=0.0, rtol=1e-3)
    for name in ("dL/dtheta", "dL/dqueries"):
        q = result[name]
        assert q.scale == 2.0
        assert not q.agrees and q.scaled_agrees
    # twice the residual (1e-2 > 8e-3) is no longer a factor
    cand_values[2] = 1e-2
    cand = _grads({"w": _t(cand_values)}, queries=_t([cand_values[:2], cand_values[2:]] * 2))
    result = compare(ref, cand, _batch(), atol=0.0, rtol=1e-3)
    assert not result["dL/dtheta"].scaled_agrees and not result["dL/dqueries"].scaled_agrees


def test_a_difference_that_is_no_factor_does_not_agree_up_to_scale():
    ref = _grads({"w": _t([1.0, 1.0])}, queries=_t([[1.0, 1.0]] * B))
    cand = _grads({"w": _t([1.0, -1.0])}, queries=_t([[1.0, -1.0]] * B))
    result = compare(ref, cand, _batch(), atol=1e-3, rtol=1e-3)
    for name in ("dL/dtheta", "dL/dqueries"):
        q = result[name]
        assert q.scale == 0.0 and q.relative == 2.0
        assert q.agrees is False and q.scaled_agrees is False


def test_float32_gradients_are_measured_in_float64():
    # r = 1 + 2^-20: r^2 is exact in float64, rounded in float32; 3r is exact in both
    r = 1.0 + 2.0**-20
    ref = _grads({"w": _t([r], torch.float32)},
                 queries=_t([[r, 0.0]] + [[0.0, 0.0]] * (B - 1), torch.float32))  # fmt: skip
    cand = _grads({"w": _t([3 * r], torch.float32)},
                  queries=_t([[3 * r, 0.0]] + [[0.0, 0.0]] * (B - 1), torch.float32))  # fmt: skip
    result = compare(ref, cand, _batch())
    assert (result.dtype, result.atol, result.rtol) == ("float32", 1e-5, 1e-4)
    for name in ("dL/dtheta", "dL/dqueries"):
        q = result[name]
        assert q.scale == 3.0 and q.max_abs == 2 * r and q.reference_max == r
        assert q.scaled_agrees and not q.agrees


def test_empty_gradients_measure_zero():
    # Beside the same non-zero dL/dcandidates: a reference with nothing else is refused.
    empty = _grads({"empty": torch.zeros(0)}, queries=torch.zeros(B, 0),
                   candidates=_t([[1.0, -1.0]] * B))  # fmt: skip
    result = compare(empty, empty, _batch(), atol=0.5, rtol=0.5)
    for name in ("dL/dtheta", "dL/dqueries"):
        q = result[name]
        assert (q.max_abs, q.reference_max, q.relative, q.threshold) == (0.0, 0.0, 0.0, 0.5)
        assert q.agrees and q.scaled_agrees and math.isnan(q.scale) and q.worst == {}
    assert result["dL/dtheta"].parameters == [] and result["dL/dqueries"].rows == []
    assert result.equivalent


def test_a_model_without_trainable_parameters_is_compared_on_the_rest():
    # A frozen model: no dL/dtheta entry can differ, and the other quantities are compared.
    queries = torch.arange(B * 2, dtype=torch.float64).reshape(B, 2)
    reference = _grads({}, queries=queries)
    result = compare(reference, _grads({}, queries=queries + 1.0), _batch(), atol=0.5, rtol=0.0)
    theta = result["dL/dtheta"]
    assert (theta.max_abs, theta.parameters, theta.agrees) == (0.0, [], True)
    assert not result["dL/dqueries"].agrees and not result.equivalent


def _four_parameters(b_shift=0.0, c_shift=0.0):
    return {
        "a": _t([0.5, -0.25]),
        "empty": torch.zeros(0),
        "b": _t([1.0 + b_shift, 2.0, 3.0]),
        "c": _t([-4.0 + c_shift]),
    }


def test_the_parameters_that_differ_are_named():
    ref = _grads(_four_parameters())
    cand = _grads(_four_parameters(b_shift=0.5, c_shift=0.25))
    result = compare(ref, cand, _batch(), atol=0.0, rtol=0.0)
    q = result["dL/dtheta"]
    assert q.parameters == ["b", "c"]  # "a" agrees exactly: 0 is not above the threshold 0
    # the worst entry is b's first, flat index 2 of the concatenation
    assert q.worst == {"index": [0], "reference": 1.0, "candidate": 1.5, "parameter": "b"}


def test_the_worst_entry_is_located_within_the_last_parameter():
    ref = _grads(_four_parameters())
    cand = _grads(_four_parameters(b_shift=0.25, c_shift=0.5))
    q = compare(ref, cand, _batch(), atol=0.0, rtol=0.0)["dL/dtheta"]
    assert q.parameters == ["b", "c"]
    assert q.worst == {"index": [0], "reference": -4.0, "candidate": -3.5, "parameter": "c"}


@pytest.mark.parametrize("shape", [(2, 3), (3, 1, 2), ()])
def test_the_worst_entry_of_a_parameter_is_indexed_in_its_own_shape(shape):
    # A weight [out, in] is read as weight[i, j]: its worst entry's index has one entry per
    # dimension (none for a scalar such as a learnable temperature), after a 1-D parameter.
    weight = torch.arange(1.0, math.prod(shape) + 1, dtype=torch.float64).reshape(shape)
    worst = tuple(n - 1 for n in shape)  # the last entry
    shifted = weight.clone()
    shifted[worst] += 2.0
    before = {"bias": _t([1.0, 2.0, 3.0, 4.0])}
    ref = _grads({**before, "weight": weight})
    cand = _grads({**before, "weight": shifted})
    q = compare(ref, cand, _batch(), atol=0.0, rtol=0.0)["dL/dtheta"]
    assert q.worst == {"index": list(worst), "reference": float(weight[worst]),
                       "candidate": float(weight[worst]) + 2.0, "parameter": "weight"}  # fmt: skip


def test_parameters_agreeing_within_the_threshold_are_not_named():
    ref = _grads(_four_parameters())
    cand = _grads(_four_parameters(b_shift=1e-3, c_shift=0.5))
    q = compare(ref, cand, _batch(), atol=0.0, rtol=0.01)["dL/dtheta"]
    assert q.threshold == 0.04 and q.parameters == ["c"]


def test_different_parameter_names_are_refused():
    with pytest.raises(gradlab.GradlabError) as caught:
        compare(_grads({"b": _t([1.0]), "a": _t([1.0])}),
                _grads({"a": _t([1.0]), "c": _t([1.0])}), _batch())  # fmt: skip
    assert str(caught.value) == (
        "the reference and the candidate must train the same parameters; got ['a', 'b'] and "
        "['a', 'c']"
    )


@pytest.mark.parametrize(
    ("field_name", "quantity"),
    [("queries", "dL/dqueries"), ("candidates", "dL/dcandidates"), ("scores", "dL/dscores")],
)
def test_different_shapes_are_refused(field_name, quantity):
    ref = _grads({"w": _t([1.0])}, **{field_name: torch.zeros(B, 2)})
    cand = _grads({"w": _t([1.0])}, **{field_name: torch.zeros(B, 3)})
    with pytest.raises(gradlab.GradlabError) as caught:
        compare(ref, cand, _batch())
    assert str(caught.value) == (
        f"{quantity}: the reference's shape (4, 2) and the candidate's (4, 3) differ"
    )


@pytest.mark.parametrize("name", ["atol", "rtol"])
@pytest.mark.parametrize("value", [-1.0, math.inf])
def test_compare_refuses_a_bad_tolerance(name, value):
    grads = _grads({"w": _t([1.0])})
    with pytest.raises(gradlab.GradlabError) as caught:
        compare(grads, grads, _batch(), **{name: value})
    assert str(caught.value) == f"{name} must be a non-negative finite number; got {value!r}"


def test_compare_uses_the_tolerances_it_is_given():
    ref = _grads({"w": _t([2.0])})
    cand = _grads({"w": _t([2.5])})
    result = compare(ref, cand, _batch(), atol=0.25, rtol=0.125)
    assert (result.atol, result.rtol) == (0.25, 0.125)
    assert result["dL/dtheta"].threshold == 0.5 and result.equivalent
    result = compare(ref, cand, _batch(), atol=0, rtol=0.0625)  # rtol alone: 0.125 < 0.5
    assert (result.atol, result.rtol) == (0.0, 0.0625) and not result.equivalent
    result = compare(ref, cand, _batch(), rtol=0.25)  # atol: float64's default
    assert (result.atol, result.rtol) == (1e-10, 0.25) and result.equivalent


def test_compare_names_the_sides_by_default():
    grads = _grads({"w": _t([1.0])})
    result = compare(grads, grads, _batch())
    assert (result.reference, result.candidate, result.loss) == ("reference", "candidate", "")
    named = compare(grads, grads, _batch(), reference_name="R", candidate_name="C",
                    loss_name="L")  # fmt: skip
    assert (named.reference, named.candidate, named.loss) == ("R", "C", "L")


def test_quantities_one_side_did_not_record_are_skipped():
    ref = _grads({"w": _t([1.0])}, queries=torch.zeros(B, 2), candidates=torch.zeros(B, 2),
                 scores=torch.zeros(B, B), values=torch.zeros(B, B))  # fmt: skip
    cand = _grads({"w": _t([1.0])}, queries=torch.ones(B, 2))
    result = compare(ref, cand, _batch())
    assert [(q.name, q.recorded) for q in result.quantities] == [
        ("dL/dtheta", True), ("dL/dqueries", True), ("dL/dcandidates", False),
        ("dL/dscores", False), ("scores", False)]  # fmt: skip
    assert all(q.recorded is False for q in result.quantities[2:])
    assert result.differing == ["dL/dqueries"]


def test_score_values_are_compared_only_where_both_steps_computed_them():
    generator = torch.Generator().manual_seed(3)
    values = torch.rand(B, B, generator=generator, dtype=torch.float64) + 0.5
    blocks = torch.block_diag(torch.ones(2, 2), torch.ones(2, 2)).bool()
    grad = torch.zeros(B, B, dtype=torch.float64)
    ref = _grads({"w": _t([1.0])}, scores=grad, values=values)
    # the candidate computed the diagonal blocks only (0 elsewhere, as a probe leaves it)
    cand = _grads({"w": _t([1.0])}, scores=grad, scored=blocks,
                  values=torch.where(blocks, values, 0.0))  # fmt: skip
    result = compare(ref, cand, _batch(), atol=0.0, rtol=0.0)
    assert result["dL/dscores"].unscored == int((~blocks).sum()) == 8
    q = result["scores"]
    assert q.max_abs == 0.0 and q.agrees
    assert q.reference_max == max(v for v, s in zip(_flat(values), _flat(blocks), strict=True)
                                  if s)  # fmt: skip
    # and the other way round: what the reference never computed is no difference either
    swapped = compare(cand, ref, _batch(), atol=0.0, rtol=0.0)
    assert swapped["dL/dscores"].unscored == 0
    assert swapped["scores"].max_abs == 0.0 and swapped["scores"].agrees


def _negatives(grad, labels, column_labels, threshold):
    counts = [sum(1 for g, lc in zip(row, column_labels, strict=True)
                  if lq != lc and abs(g) > threshold)
              for row, lq in zip(grad, labels, strict=True)]  # fmt: skip
    return sum(counts) / len(counts)


def test_negatives_with_gradient_count_entries_above_the_threshold():
    # max|reference| = 1: threshold 0.25 + 0.25 x 1 = 0.5; 0.5 itself does not count
    column_labels = [*LABELS, 1, 0]  # the memory's two slots after the batch's columns
    ref_grad = [
        [1.0, 0.9, 0.5, 0.75, 0.6, 0.0],
        [-0.5, 0.0, -0.75, 0.5, -0.6, 0.7],
        [0.75, 0.5, 0.0, 0.0, 0.0, -0.8],
        [0.0, 0.6, 0.0, -0.5, 0.0, 0.5],
    ]
    cand_grad = [[0.5 if abs(g) > 0.55 else g for g in row] for row in ref_grad]
    ref = _grads({"w": _t([1.0])}, scores=_t(ref_grad))
    cand = _grads({"w": _t([1.0])}, scores=_t(cand_grad))
    result = compare(ref, cand, _batch(memory_labels=[1, 0]), atol=0.25, rtol=0.25)
    q = result["dL/dscores"]
    assert q.threshold == 0.5
    assert q.negatives_with_gradient == {
        "reference": _negatives(ref_grad, LABELS, column_labels, 0.5),
        "candidate": _negatives(cand_grad, LABELS, column_labels, 0.5),
    }
    assert q.negatives_with_gradient == {"reference": 1.75, "candidate": 0.0}
    differing = sorted(
        {
            j
            for r, c in zip(ref_grad, cand_grad, strict=True)
            for j, (a, b) in enumerate(zip(r, c, strict=True))
            if abs(a - b) > 0.5
        }
    )
    assert differing == [2, 4, 5]
    assert q.columns == [2] and q.memory_slots == [0, 1]


def test_negatives_with_gradient_without_score_rows_are_zero():
    # a score gradient with no rows at all counts no negatives: 0, not the mean of nothing
    grads = _grads({"w": _t([1.0])}, scores=torch.zeros(0, 1))
    result = compare(grads, grads, _batch(size=1, labels=[0]))
    assert result["dL/dscores"].negatives_with_gradient == {"reference": 0.0, "candidate": 0.0}
    assert result["dL/dscores"].agrees


def _located_problem(world_size):
    values = _t([[0.5] * B] * B)
    ref = _grads({"w": _t([1.0])}, queries=torch.zeros(B, 2), candidates=torch.zeros(B, 2),
                 scores=torch.zeros(B, B), values=values)  # fmt: skip
    queries, candidates = torch.zeros(B, 2), torch.zeros(B, 2)
    scores, changed = torch.zeros(B, B), values.clone()
    queries[3, 1] = 1.0
    candidates[0, 0] = 1.0
    scores[1, 2] = scores[2, 0] = 1.0
    changed[2, 3] = 1.0
    cand = _grads({"w": _t([1.0])}, queries=queries, candidates=candidates, scores=scores,
                  values=changed, world_size=world_size)  # fmt: skip
    return compare(ref, cand, _batch(), atol=0.0, rtol=0.0)


def test_differing_rows_are_assigned_to_their_processes():
    result = _located_problem(world_size=2)
    assert result.world_size == 2
    rows = {"dL/dqueries": [3], "dL/dcandidates": [0], "dL/dscores": [1, 2], "scores": [2]}
    for name, expected in rows.items():
        assert result[name].rows == expected
        # two equal contiguous shards of B = 4 rows: rows 0-1 on rank 0, 2-3 on rank 1
        assert result[name].ranks == sorted({row // (B // 2) for row in expected}), name


def test_one_process_reports_no_ranks():
    result = _located_problem(world_size=1)
    assert result.differing == ["dL/dqueries", "dL/dcandidates", "dL/dscores", "scores"]
    for name in ("dL/dqueries", "dL/dcandidates", "dL/dscores", "scores"):
        assert result[name].rows and result[name].ranks == []


@pytest.fixture(scope="module")
def problem():
    return synthetic_problem(batch_size=4, seed=1)


LOSS = gradlab.NTXentLoss(temperature=0.5)


@pytest.mark.parametrize("side", ["reference", "candidate"])
def test_compare_gradients_refuses_a_step_that_is_not_callable(problem, side):
    model, batch = problem
    steps = {"reference": FullBatch(LOSS), "candidate": FullBatch(LOSS), side: 3}
    with pytest.raises(gradlab.GradlabError) as caught:
        compare_gradients(steps["reference"], steps["candidate"], model, batch)
    assert str(caught.value) == (
        f"{side} must be a step: a callable step(model, batch, probe) such as "
        "gradlab.equivalence.FullBatch(loss); got int"
    )


@pytest.mark.parametrize("name", ["atol", "rtol"])
def test_compare_gradients_refuses_a_bad_tolerance_before_any_work(problem, name):
    model, batch = problem
    with pytest.raises(gradlab.GradlabError) as caught:
        compare_gradients(FullBatch(LOSS), FullBatch(LOSS), model, batch, **{name: -1.0})
    assert str(caught.value) == f"{name} must be a non-negative finite number; got -1.0"


def test_compare_gradients_uses_the_tolerances_it_is_given(problem):
    model, batch = problem
    result = compare_gradients(FullBatch(LOSS), FullBatch(LOSS), model, batch, atol=0.125,
                               rtol=0.0625)  # fmt: skip
    assert (result.atol, result.rtol) == (0.125, 0.0625)
    reference_max = result["dL/dtheta"].reference_max
    assert result["dL/dtheta"].threshold == 0.125 + 0.0625 * reference_max
    assert result.equivalent and result.loss == "NTXentLoss"


@dataclass
class CheckedStep:
    """A whole-batch step that records the process counts it was checked for."""

    worlds: list = field(default_factory=list)
    name: str = "CheckedStep"

    def check(self, batch, world):
        self.worlds.append(world)

    def __call__(self, model, batch, probe):
        return FullBatch(LOSS)(model, batch, probe)


def test_compare_gradients_checks_the_reference_for_one_process(problem):
    model, batch = problem
    reference, candidate = CheckedStep(), CheckedStep()
    result = compare_gradients(reference, candidate, model, batch)
    assert (reference.worlds, candidate.worlds) == ([1], [1])
    assert result.equivalent and (result.reference, result.candidate) == ("CheckedStep",) * 2


def test_a_reference_without_a_loss_leaves_the_loss_name_empty(problem):
    model, batch = problem

    def whole_batch(model, batch, probe):
        return FullBatch(LOSS)(model, batch, probe)

    result = compare_gradients(whole_batch, FullBatch(LOSS), model, batch)
    assert (result.reference, result.candidate, result.loss) == ("whole_batch", "FullBatch()",
                                                                 "")  # fmt: skip
    assert result.equivalent


@pytest.mark.slow
def test_compare_gradients_runs_the_candidate_in_processes(problem):
    model, batch = problem
    result = compare_gradients(FullBatch(LOSS), AllGather(LOSS), model, batch, world_size=2,
                               timeout=60)  # fmt: skip
    assert result.world_size == 2 and result.candidate == AllGather(LOSS).name
    assert result.equivalent, str(result)
    assert all(q.recorded for q in result.quantities)


@pytest.mark.slow
def test_compare_gradients_stops_processes_past_its_timeout(problem):
    model, batch = problem
    with pytest.raises(TimeoutError, match="still ran after 1 s"):
        compare_gradients(FullBatch(LOSS), SleepingStep(None, seconds=8), model, batch,
                          world_size=2, timeout=1)  # fmt: skip
