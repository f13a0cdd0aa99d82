"""FastAP and Blackbox AP against loop references; their backward passes."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gradlab import BlackboxAPLoss, FastAPLoss, GradlabError
from gradlab.functional import (
    BlackboxRanks,
    blackbox_ap,
    blackbox_ap_loss,
    descending_ranks,
    fastap,
)
from tests.helpers.default_device import assert_unchanged_under_another_default_device
from tests.reference.histogram_losses_loops import fastap_query, ranked_ap
from tests.reference.smooth_ap_loops import loss_from_aps

BINS = (r"num_bins must be an integer from 1 to 16384 \(2\*\*14: with narrower bins float32 "
        r"rounding moves FastAP by more than 1e-4, past 1 at 10\*\*7 bins; the paper uses 10 "
        r"to 100\); got ")

MARGIN_REFUSED = (r"margin must be a finite number in \[0, 1e\+30\] \(larger margins overflow "
                  r"float32\)")


def batch(seed, size, dims=4):
    generator = torch.Generator().manual_seed(seed)
    return (
        torch.randn(size, dims, generator=generator, dtype=torch.float64),
        torch.randint(0, 3, (size,), generator=generator),
    )


def _loop_ranks(row):
    """1-based descending ranks, ties by index (the documented order), by a Python sort."""
    order = sorted(range(len(row)), key=lambda c: (-row[c], c))
    ranks = [0.0] * len(row)
    for position, c in enumerate(order, start=1):
        ranks[c] = float(position)
    return ranks


@given(seed=st.integers(0, 2**31 - 1), size=st.integers(2, 10), bins=st.sampled_from([4, 10, 20]))
@pytest.mark.slow
def test_fastap_matches_loops(seed, size, bins):
    embeddings, labels = batch(seed, size)
    got = fastap(embeddings, labels, bins)
    for q in range(size):
        expected = fastap_query(embeddings.tolist(), labels.tolist(), q, bins)
        if math.isnan(expected):
            assert math.isnan(got[q].item())
        else:
            assert got[q].item() == pytest.approx(expected, abs=1e-12)


def test_fastap_gradient_passes_gradcheck():
    embeddings, labels = batch(3, 8)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1])
    leaf = embeddings.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda e: FastAPLoss(10)(e, labels), (leaf,))


@pytest.mark.parametrize("bins", [2, 4, 8])
def test_fastap_of_a_batch_of_one_class_has_zero_gradient_even_at_bin_centres(bins):
    """Every candidate is a positive, so FastAP is 1 for all embeddings and its gradient is 0.
    One-hot embeddings put every distance at 2, exactly a bin centre for 2, 4 or 8 bins (exact
    widths), one width beyond empty bins: their kernel's edge (value 0) must not leave a gradient
    (an empty prefix's precision taken as 0 there left d FastAP/d x = -2/width)."""
    leaf = torch.eye(4, dtype=torch.float64).requires_grad_(True)
    values = fastap(leaf, torch.zeros(4, dtype=torch.long), bins)
    assert values.tolist() == [1.0] * 4
    values.sum().backward()
    assert leaf.grad.abs().max().item() == 0.0


@pytest.mark.slow
@given(seed=st.integers(0, 2**31 - 1), margin=st.sampled_from([0.0, 0.02, 0.3]))
def test_blackbox_forward_is_exact_ap_after_the_margin(seed, margin):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(4, 9, generator=generator, dtype=torch.float64)
    positives = torch.rand(4, 9, generator=generator) < 0.4
    got = blackbox_ap(scores, positives, margin=margin)
    for q in range(4):
        expected = ranked_ap(scores[q].tolist(), positives[q].tolist(), margin)
        if math.isnan(expected):
            assert math.isnan(got[q].item())
        else:
            assert got[q].item() == pytest.approx(expected, abs=1e-12)


@given(seed=st.integers(0, 2**31 - 1), interpolation=st.sampled_from([0.5, 4.0, 20.0]))
def test_blackbox_backward_is_the_interpolation_formula(seed, interpolation):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(2, 7, generator=generator, dtype=torch.float64)
    upstream = torch.randn(2, 7, generator=generator, dtype=torch.float64)
    leaf = scores.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(BlackboxRanks.apply(leaf, interpolation), leaf, upstream)

    for q in range(2):
        before = _loop_ranks(scores[q].tolist())
        after = _loop_ranks((scores[q] + interpolation * upstream[q]).tolist())
        expected = [-(b - a) / interpolation for b, a in zip(before, after, strict=True)]
        assert grad[q].tolist() == pytest.approx(expected, abs=1e-12)


def test_blackbox_gradient_is_not_the_gradient_of_its_forward():
    # By design: the forward is piecewise constant, so finite differences see zero, while the
    # blackbox backward returns the gradient of a lambda-interpolation (Vlastelica et al.).
    embeddings, labels = batch(5, 10)
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 0])
    loss_fn = BlackboxAPLoss()
    leaf = embeddings.clone().requires_grad_(True)
    loss_fn(leaf, labels).backward()
    step = 1e-7
    bumped = embeddings.clone()
    bumped[0, 0] += step
    finite_difference = (loss_fn(bumped, labels) - loss_fn(embeddings, labels)).item() / step
    assert finite_difference == 0.0
    assert leaf.grad.abs().sum().item() > 0


def test_descending_ranks_breaks_ties_by_index():
    assert descending_ranks(torch.tensor([0.5, 0.9, 0.5])).tolist() == [2.0, 1.0, 3.0]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: FastAPLoss(num_bins=0), BINS + "0$"),
        (lambda: FastAPLoss(num_bins=2**14 + 1), BINS + "16385$"),
        (
            lambda: BlackboxAPLoss(interpolation=0.0),
            r"interpolation must be a finite number in \[1e-30, 1e\+30\]",
        ),
        (lambda: BlackboxAPLoss(margin=-0.1), MARGIN_REFUSED),
        (
            lambda: blackbox_ap(
                torch.tensor([[math.nan, 0.0]]), torch.ones(1, 2, dtype=torch.bool)
            ),
            r"^scores must be finite or -inf \(a non-candidate\); got NaN in row 0 \(1 row of 1\)$",
        ),
        (
            lambda: blackbox_ap(torch.zeros(1, 2), torch.ones(1, 3, dtype=torch.bool)),
            r"positives must have shape \(1, 2\) \(one flag per score\); got \(1, 3\)$",
        ),
        (lambda: fastap(torch.zeros(3, 2), torch.zeros(3)), "labels must have an integer dtype"),
    ],
)
def test_error_table(call, message):
    with pytest.raises(GradlabError, match="^" + message):  # each message starts with its name
        call()


def test_descending_ranks_breaks_many_ties_by_index():
    # A long row of three tied values: an unstable sort (torch's default) permutes the ties
    # from about a hundred entries on; the documented order is by index.
    generator = torch.Generator().manual_seed(11)
    scores = torch.randint(0, 3, (2, 300), generator=generator).double()
    got = descending_ranks(scores)
    assert [got[q].tolist() for q in range(2)] == [_loop_ranks(row) for row in scores.tolist()]


def test_ranks_and_blackbox_ap_stay_on_the_input_device_whatever_the_default_device():
    scores = torch.tensor([[0.3, 0.9, 0.1, 0.9]], dtype=torch.float64)
    positives = torch.tensor([[True, False, True, False]])
    assert_unchanged_under_another_default_device(
        lambda: (descending_ranks(scores), blackbox_ap(scores, positives)), scores.device
    )


def _blackbox_ap_gradient(scores, positives, **options):
    leaf = scores.clone().requires_grad_(True)
    blackbox_ap(leaf, positives, **options).sum().backward()
    return leaf.grad


BLACKBOX_SCORES = torch.tensor(
    [[0.50, 0.51, 0.30, 0.90, 0.49, 0.10], [0.2, 0.7, 0.71, 0.69, 0.0, 0.4]], dtype=torch.float64
)
BLACKBOX_POSITIVES = torch.tensor(
    [[False, True, True, False, True, False], [True, False, True, True, False, False]]
)


def test_blackbox_ap_defaults_are_lambda_four_and_margin_two_hundredths():
    # Seed 002's lambda = 4, margin = 0.02. The margin moves positives 0.51 and 0.71 below the
    # negatives 0.50 and 0.70 (exact AP by loops); the default gradient is lambda = 4's.
    got = blackbox_ap(BLACKBOX_SCORES, BLACKBOX_POSITIVES)
    for q in range(2):
        row, flags = BLACKBOX_SCORES[q].tolist(), BLACKBOX_POSITIVES[q].tolist()
        assert got[q].item() == pytest.approx(ranked_ap(row, flags, 0.02), abs=1e-12)
        assert got[q].item() != pytest.approx(ranked_ap(row, flags, 0.0), abs=1e-3)
    default = _blackbox_ap_gradient(BLACKBOX_SCORES, BLACKBOX_POSITIVES)
    spelled_out = _blackbox_ap_gradient(BLACKBOX_SCORES, BLACKBOX_POSITIVES, interpolation=4.0)
    torch.testing.assert_close(default, spelled_out, atol=0, rtol=0)
    for other in (0.5, 5.0):
        moved = _blackbox_ap_gradient(BLACKBOX_SCORES, BLACKBOX_POSITIVES, interpolation=other)
        assert not torch.allclose(default, moved)


def _in_batch_ranked_aps(embeddings, labels, margin):
    normalized = torch.nn.functional.normalize(embeddings, dim=1).tolist()
    aps = []
    for q in range(len(labels)):
        others = [c for c in range(len(labels)) if c != q]
        scores = [
            math.fsum(a * b for a, b in zip(normalized[q], normalized[c], strict=True))
            for c in others
        ]
        aps.append(ranked_ap(scores, [labels[c] == labels[q] for c in others], margin))
    return aps


@pytest.mark.parametrize("margin", [None, 0.0, 0.3])
def test_blackbox_ap_loss_forward_uses_its_margin(margin):
    embeddings, _ = batch(12, 9, 3)
    labels = [0, 1, 2] * 3
    options = {} if margin is None else {"margin": margin}
    loss = blackbox_ap_loss(embeddings, torch.tensor(labels), **options).item()
    aps = _in_batch_ranked_aps(embeddings, labels, 0.02 if margin is None else margin)
    assert loss == pytest.approx(loss_from_aps(aps), abs=1e-12)


def test_blackbox_ap_loss_default_interpolation_is_lambda_four():
    embeddings, _ = batch(13, 12, 6)
    labels = torch.tensor([0, 1, 2] * 4)

    def gradient(**options):
        leaf = embeddings.clone().requires_grad_(True)
        blackbox_ap_loss(leaf, labels, **options).backward()
        return leaf.grad

    default = gradient()
    torch.testing.assert_close(default, gradient(interpolation=4.0), atol=0, rtol=0)
    assert not torch.allclose(default, gradient(interpolation=5.0))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_blackbox_ap_is_computed_in_the_scores_dtype(dtype):
    # Scores far apart (no rank moves when rounded): the exact AP by loops, in the input dtype.
    scores = torch.tensor([[0.9, 0.5, 0.7, 0.1], [0.2, 0.6, 0.4, 0.8]])
    positives = torch.tensor([[True, False, False, True], [False, True, True, False]])
    got = blackbox_ap(scores.to(dtype), positives)
    assert got.dtype == dtype
    expected = [ranked_ap(scores[q].tolist(), positives[q].tolist(), 0.02) for q in range(2)]
    torch.testing.assert_close(
        got, torch.tensor(expected, dtype=dtype), atol=torch.finfo(dtype).eps, rtol=0
    )


ONE_BY_TWO = torch.zeros(1, 2)
FLAGS = torch.ones(1, 2, dtype=torch.bool)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: blackbox_ap(torch.zeros(2), FLAGS), r"scores must be 2-D; got shape \(2,\)$"),
        (lambda: blackbox_ap(ONE_BY_TWO.long(), FLAGS),
         r"scores must have a floating dtype; got torch.int64; pass scores\.float\(\)$"),
        (lambda: blackbox_ap(torch.tensor([[math.inf, 0.0]]), FLAGS),
         r"^scores must be finite or -inf \(a non-candidate\); got inf in row 0 \(1 row of 1\)$"),
        (lambda: blackbox_ap(ONE_BY_TWO, FLAGS[0]), r"positives must be 2-D; got shape \(2,\)$"),
        (lambda: blackbox_ap(ONE_BY_TWO, FLAGS.float()),
         r"positives must be a bool tensor; got torch.float32"
         r" \(a 0/1 mask: pass positives\.bool\(\)\)$"),
        (lambda: blackbox_ap(ONE_BY_TWO, FLAGS, interpolation=0.0),
         r"interpolation must be a finite number in \[1e-30, 1e\+30\] \(1/interpolation and "
         r"the perturbed scores must stay finite in float32\); got 0.0$"),
        (lambda: blackbox_ap(ONE_BY_TWO, FLAGS, interpolation=1e-46),  # 0 in float32: 0 / 0
         r"interpolation must be a finite number in \[1e-30, 1e\+30\] .*; got 1e-46$"),
        (lambda: blackbox_ap(ONE_BY_TWO, FLAGS, interpolation=1e31),
         r"interpolation must be a finite number in \[1e-30, 1e\+30\] .*; got 1e\+31$"),
        (lambda: blackbox_ap(ONE_BY_TWO, FLAGS, margin=-0.1),
         MARGIN_REFUSED + r"; got -0.1$"),
        (lambda: blackbox_ap(ONE_BY_TWO, FLAGS, margin=math.inf),
         MARGIN_REFUSED + r"; got inf$"),
        (lambda: blackbox_ap(ONE_BY_TWO, FLAGS, margin=True),
         MARGIN_REFUSED + r"; got True$"),
        (lambda: blackbox_ap(ONE_BY_TWO, FLAGS, margin="0.1"),
         MARGIN_REFUSED + r"; got '0.1'$"),
        (lambda: blackbox_ap(ONE_BY_TWO, FLAGS.to("meta")),
         "tensors must be on one device; got scores on cpu, positives on meta$"),
        (lambda: blackbox_ap(ONE_BY_TWO.to("meta"), FLAGS.to("meta")),
         r"scores is a meta tensor \(a shape without values\)"),
    ],
)  # fmt: skip
def test_blackbox_ap_messages_name_the_argument(call, message):
    with pytest.raises(GradlabError, match="^" + message):
        call()


def test_blackbox_ap_takes_any_real_margin_and_checks_its_options_before_reading_values():
    scores = torch.tensor([[0.9, 0.5, 0.7, 0.6]], requires_grad=True)
    positives = torch.tensor([[True, False, True, False]])
    # a NumPy float32 was refused as "not a non-negative finite number" (BlackboxAPLoss took it)
    got = blackbox_ap(scores, positives, 4.0, np.float32(0.25))
    assert torch.equal(got, blackbox_ap(scores, positives, 4.0, float(np.float32(0.25))))
    # a bad option is named before the scores' values are read (NaN scores, a bad margin)
    with pytest.raises(GradlabError, match="^" + MARGIN_REFUSED):
        blackbox_ap(torch.tensor([[math.nan, 0.0]]), FLAGS, margin=-1.0)


def test_fastap_default_is_ten_bins():
    embeddings, labels = batch(14, 9)
    got = fastap(embeddings, labels)
    expected = [fastap_query(embeddings.tolist(), labels.tolist(), q, 10) for q in range(9)]
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float64), equal_nan=True)
    assert not torch.allclose(got, fastap(embeddings, labels, 11), equal_nan=True)


def test_fastap_stays_on_the_input_device_whatever_the_default_device():
    embeddings, labels = batch(15, 6)
    assert_unchanged_under_another_default_device(
        lambda: fastap(embeddings, labels, 4), embeddings.device
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_fastap_is_computed_in_the_embeddings_dtype(dtype):
    embeddings, labels = batch(16, 8)
    got = fastap(embeddings.to(dtype), labels, 4)
    assert got.dtype == dtype
    rounded = embeddings.to(dtype).double().tolist()
    expected = [fastap_query(rounded, labels.tolist(), q, 4) for q in range(8)]
    # Distances rounded in the dtype move kernel weights by about eps per candidate.
    torch.testing.assert_close(
        got.double(), torch.tensor(expected, dtype=torch.float64),
        atol=16 * torch.finfo(dtype).eps, rtol=0, equal_nan=True,
    )  # fmt: skip


TWO_BY_THREE = torch.ones(2, 3)
TWO_LABELS = torch.zeros(2, dtype=torch.long)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: fastap(torch.ones(3), TWO_LABELS), r"embeddings must be 2-D; got shape \(3,\)$"),
        (lambda: fastap(TWO_BY_THREE.long(), TWO_LABELS),
         r"embeddings must have a floating dtype; got torch.int64; pass embeddings\.float\(\)$"),
        (lambda: fastap(torch.full((2, 3), math.nan), TWO_LABELS),
         "embeddings must be finite; got (NaN|inf) in .*$"),
        (lambda: fastap(TWO_BY_THREE, torch.zeros(3, dtype=torch.long)),
         r"labels must have shape \(2,\) \(one label per embedding\); got \(3,\)$"),
        (lambda: fastap(TWO_BY_THREE, TWO_LABELS, 0), BINS + "0$"),
        (lambda: fastap(TWO_BY_THREE, TWO_LABELS, 2**14 + 1), BINS + "16385$"),
        (lambda: fastap(TWO_BY_THREE, TWO_LABELS, 10.0), BINS + "10.0$"),
        (lambda: fastap(TWO_BY_THREE, TWO_LABELS, True), BINS + "True$"),
    ],
)  # fmt: skip
def test_fastap_messages_name_the_argument(call, message):
    with pytest.raises(GradlabError, match="^" + message):
        call()


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_a_positive_scored_minus_inf_is_a_non_candidate(dtype):
    """-inf marks a non-candidate. A True of positives there was counted as a positive, tied
    with the negatives' -inf placeholders of the rank among positives and ranked after those
    of lower columns: AP 1/2 (rank 2 of 4) for row 1, where the loop, which leaves the
    non-candidate out, has no positive at all (NaN); row 0 keeps its other positive (AP 1/3)."""
    scores = torch.tensor([[0.2, -math.inf, 0.1, 0.5], [0.21, -math.inf, 0.13, 0.04]],
                          dtype=dtype)  # fmt: skip
    positives = torch.tensor([[False, True, True, False], [False, True, False, False]])
    ap = blackbox_ap(scores, positives, margin=0.0)
    kept = positives & (scores > -math.inf)
    for q in range(2):
        columns = [c for c in range(4) if scores[q, c] > -math.inf]
        expected = ranked_ap([float(scores[q, c]) for c in columns],
                             [bool(kept[q, c]) for c in columns], 0.0)  # fmt: skip
        if math.isnan(expected):
            assert math.isnan(float(ap[q]))
        else:
            assert float(ap[q]) == pytest.approx(expected, rel=torch.finfo(dtype).eps)


@pytest.mark.slow
def test_fastap_at_its_most_bins_stays_near_its_float64_value_and_takes_numpy_integers():
    # the bound's reason: float32 FastAP drifts from float64 as the bins narrow (docstring of
    # MAX_BINS); at 2**14 bins it stays within 1e-3 on random batches, and <= 1
    generator = torch.Generator().manual_seed(0)
    labels = torch.arange(16) % 4
    for _ in range(5):
        embeddings = torch.randn(16, 5, generator=generator)
        wide = fastap(embeddings.double(), labels, num_bins=np.int64(2**14))
        narrow = fastap(embeddings, labels, num_bins=2**14)
        assert (narrow.double() - wide).abs().max() < 1e-3 and narrow.max() <= 1.0
    assert FastAPLoss(num_bins=np.int64(20)).num_bins == 20


@pytest.mark.parametrize(("scores", "message"), [
    (torch.tensor(1.0), "scores must have at least one dimension (the ranks run along the "
                        "last); got a 0-d tensor"),
    ([1.0, 2.0], "scores must be a torch.Tensor; got list; pass torch.as_tensor(scores)"),
    (torch.tensor([[0.5, 0.9], [math.nan, 0.1]]), "scores must not be NaN (a NaN has no rank); "
                                                  "got NaN at [1, 0]"),
    (torch.tensor([True, False]), "scores must have a real floating or integer dtype; got "
                                  "torch.bool"),
    (torch.zeros(2, device="meta"), "scores is a meta tensor (a shape without values); pass a "
                                    "tensor on a real device (cpu, cuda, ...)"),
])  # fmt: skip
def test_descending_ranks_refuses_what_has_no_rank(scores, message):
    # a NaN was ranked first in silence; a 0-d tensor an IndexError
    with pytest.raises(GradlabError) as raised:
        descending_ranks(scores)
    assert str(raised.value) == message


def test_descending_ranks_ranks_integers_and_infinities():
    assert descending_ranks(torch.tensor([3, 1, 2])).tolist() == [1, 3, 2]
    assert descending_ranks(torch.tensor([-math.inf, 1.0, math.inf])).tolist() == [3.0, 2.0, 1.0]


@pytest.mark.parametrize(("dtype", "ranks"), [
    (torch.int8, torch.int64), (torch.uint8, torch.int64), (torch.int64, torch.int64),
    (torch.float16, torch.float32), (torch.bfloat16, torch.float32),
    (torch.float32, torch.float32), (torch.float64, torch.float64)])  # fmt: skip
def test_descending_ranks_count_every_position_exactly_whatever_the_dtype(dtype, ranks):
    # in int8, bfloat16 or float16 the ranks of 3000 entries wrapped or rounded (2524 distinct)
    scores = (torch.randperm(3000, generator=torch.Generator().manual_seed(0)) % 200).to(dtype)
    got = descending_ranks(scores)
    assert got.dtype == ranks and sorted(got.tolist()) == list(range(1, 3001))
    order = sorted(range(3000), key=lambda i: (-float(scores[i]), i))  # ties by index
    assert [int(got[i]) for i in order] == list(range(1, 3001))


def test_integer_scores_beyond_float64_s_integers_keep_their_order():
    assert descending_ranks(torch.tensor([2**60 + 1, 2**60, 5])).tolist() == [1, 2, 3]


def test_one_bin_is_the_smallest_histogram_and_matches_the_loops():
    # num_bins=1: two centres (0 and 4), the coarsest FastAP; the bound's low end
    embeddings, labels = batch(3, 8)
    got = fastap(embeddings, labels, 1)
    expected = [fastap_query(embeddings.tolist(), labels.tolist(), q, 1) for q in range(8)]
    assert got.tolist() == pytest.approx(expected, abs=1e-12, nan_ok=True)
    assert FastAPLoss(num_bins=1).num_bins == 1
