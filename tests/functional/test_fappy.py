"""FAPPY against loops from Eq. 1-7 / Algorithm 1; the Lemma 1 gradient; cosine <-> L2."""

import math
import re

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import gradlab.functional
from gradlab import FAPPYLoss, GradlabError
from gradlab.experiments.verification import histogram_loss_gradient_errors
from gradlab.functional import (
    cosine_from_euclidean,
    euclidean_from_cosine,
    false_positive_probability,
    fappy_deltas,
    fappy_gradient_closed_form,
    fappy_lemma1_as_printed,
    fappy_loss,
)
from tests.reference.histogram_losses_loops import (
    fappy_algorithm1,
    fappy_official,
    fappy_pair,
    fappy_scale_sums,
)


def batch(seed, size, dims=4):
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(size, dims, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, 3, (size,), generator=generator)
    return embeddings, labels


@given(seed=st.integers(0, 2**31 - 1), size=st.integers(2, 9), exponent=st.integers(0, 5))
@pytest.mark.slow
def test_pair_probabilities_match_the_printed_equations(seed, size, exponent):
    embeddings, labels = batch(seed, size)
    normalized = torch.nn.functional.normalize(embeddings, dim=1)
    similarities = normalized @ normalized.T
    delta = 2.0 / 2**exponent
    probabilities, (first, second) = false_positive_probability(similarities, labels, delta)
    for p, i, j in zip(probabilities.tolist(), first.tolist(), second.tolist(), strict=True):
        assert p == pytest.approx(
            fappy_pair(similarities.tolist(), labels.tolist(), i, j, delta), abs=1e-12
        )


@pytest.mark.slow
@given(
    seed=st.integers(0, 2**31 - 1),
    size=st.integers(2, 9),
    delta_min=st.sampled_from([0.01, 0.1, 0.3]),
)
def test_loss_matches_algorithm_1(seed, size, delta_min):
    embeddings, labels = batch(seed, size)
    expected = fappy_algorithm1(embeddings.tolist(), labels.tolist(), delta_min)
    assert fappy_loss(embeddings, labels, delta_min).item() == pytest.approx(expected, abs=1e-12)
    assert FAPPYLoss(delta_min)(embeddings, labels).item() == pytest.approx(expected, abs=1e-12)


def test_deltas_follow_algorithm_1():
    assert fappy_deltas(0.01) == [2.0 / 2**k for k in range(8)]
    assert fappy_deltas(1.0) == [2.0, 1.0]  # the repeat-until body runs 2.0 always


@pytest.mark.slow
def test_closed_form_gradient_matches_autograd():
    # The report's check compares autograd through false_positive_probability with the closed
    # form over random configurations; it must find no difference.
    errors = histogram_loss_gradient_errors(torch.Generator().manual_seed(0), trials=20)
    assert errors["fappy_closed_form_vs_autograd"] < 1e-12


def test_lemma1_as_printed_misses_the_lower_bin_and_has_the_wrong_sign():
    # A pair in bin [0.0, 0.25) and a negative in the bin below, [-0.25, 0.0).
    true_value = fappy_gradient_closed_form(0.1, -0.1, delta=0.25, num_negatives=1)
    assert true_value > 0
    assert fappy_lemma1_as_printed(0.1, -0.1, delta=0.25) == 0.0
    assert (
        fappy_lemma1_as_printed(0.1, 0.2, delta=0.25)
        < 0
        < fappy_gradient_closed_form(0.1, 0.2, 0.25, 1)
    )


def test_gradient_flows_and_batch_without_pairs_is_zero():
    embeddings, _ = batch(1, 6)
    leaf = embeddings.clone().requires_grad_(True)
    loss = fappy_loss(leaf, torch.arange(6), 0.1)
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(leaf.grad, torch.zeros_like(leaf))


def test_cosine_l2_equivalence():
    generator = torch.Generator().manual_seed(0)
    x = torch.nn.functional.normalize(
        torch.randn(20, 5, generator=generator, dtype=torch.float64), dim=1
    )
    cosine = x @ x.T
    distance = torch.cdist(x, x)
    torch.testing.assert_close(euclidean_from_cosine(cosine), distance, atol=1e-7, rtol=0)
    torch.testing.assert_close(cosine_from_euclidean(distance), cosine, atol=1e-12, rtol=0)
    # Larger cosine, smaller distance: the map is strictly decreasing on [-1, 1].
    grid = torch.linspace(-1, 1, 101, dtype=torch.float64)
    assert bool((euclidean_from_cosine(grid).diff() < 0).all())


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: FAPPYLoss(delta_min=0.0),
         r"delta_min must be a finite number in \[9.53674e-07, 1\] \(2\*\*-20: "),
        (
            lambda: fappy_loss(torch.zeros(3), torch.zeros(3, dtype=torch.long)),
            "embeddings must be 2-D",
        ),
        (
            lambda: fappy_loss(torch.ones(3, 2), torch.zeros(4, dtype=torch.long)),
            r"labels must have shape \(3,\)",
        ),
        (
            lambda: false_positive_probability(
                torch.ones(3, 3), torch.zeros(3, dtype=torch.long), -1.0
            ),
            "delta",
        ),
        (
            lambda: false_positive_probability(
                torch.ones(3, 2), torch.zeros(3, dtype=torch.long), 0.5
            ),
            r"scores must have shape \(3, 3\) \(\[B, B\]\)",
        ),
        (lambda: euclidean_from_cosine(torch.tensor([math.nan])), "similarity must be finite"),
    ],
)
def test_error_table(call, message):
    with pytest.raises(GradlabError, match="^" + message):  # each message starts with its name
        call()


# --- normalization: Algorithm 1 as printed ("paper") and the authors' Caffe layer ("official")


@pytest.mark.slow
@given(
    seed=st.integers(0, 2**31 - 1),
    size=st.integers(2, 9),
    delta_min=st.sampled_from([0.01, 0.1, 0.3]),
)
def test_official_normalization_matches_the_caffe_recurrence(seed, size, delta_min):
    embeddings, labels = batch(seed, size)
    expected = fappy_official(embeddings.tolist(), labels.tolist(), delta_min)
    got = fappy_loss(embeddings, labels, delta_min, normalization="official").item()
    assert got == pytest.approx(expected, abs=1e-12)
    module = FAPPYLoss(delta_min, normalization="official")(embeddings, labels).item()
    assert module == pytest.approx(expected, abs=1e-12)


def test_paper_normalization_is_the_default_and_the_mean_over_all_pairs():
    embeddings, labels = batch(3, 9)
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    scales = fappy_scale_sums(embeddings.tolist(), labels.tolist(), 0.1)
    pairs = scales[0][3]
    weights = [0.5 ** (len(scales) - k) for k in range(len(scales))]  # smallest Delta: 1/2
    mean_fused = sum(w * total for w, (_, total, _, _) in zip(weights, scales, strict=True)) / pairs
    default = fappy_loss(embeddings, labels, 0.1).item()
    assert default == pytest.approx(mean_fused, abs=1e-12)
    assert fappy_loss(embeddings, labels, 0.1, normalization="paper").item() == default
    official = fappy_loss(embeddings, labels, 0.1, normalization="official").item()
    assert official != pytest.approx(default, abs=1e-6)  # the two readings differ on this batch


def test_official_normalization_with_no_active_pair_divides_by_one():
    # two identical positives: 1 - s = 0 < every Delta, so no scale has an active pair
    embeddings = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    loss = fappy_loss(embeddings, torch.tensor([0, 0, 1]), 0.25, normalization="official")
    assert loss.item() == 0.0


@pytest.mark.parametrize("normalization", ["paper", "official"])
def test_a_collapsed_batch_is_fappys_zero_without_a_warning(normalization):
    # documented (loss reliability): every pair within the narrowest bin of cosine 1 is
    # inactive (Algorithm 1, line 5), so a collapsed batch reads as a perfect one
    import warnings

    import gradlab

    generator = torch.Generator().manual_seed(0)
    embeddings = (torch.ones(8, 16, dtype=torch.float64)
                  + 1e-2 * torch.randn(8, 16, generator=generator, dtype=torch.float64))
    labels = torch.arange(4).repeat_interleave(2)
    unit = torch.nn.functional.normalize(embeddings, dim=1)
    loss_fn = gradlab.FAPPYLoss(delta_min=0.01, normalization=normalization)
    assert (1 - unit @ unit.T).max() < min(loss_fn.deltas)  # no pair reaches a bin
    leaf = embeddings.clone().requires_grad_(True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not a degenerate batch: nothing is said
        loss = loss_fn(leaf, labels)
    loss.backward()
    assert loss.item() == 0.0 and torch.count_nonzero(leaf.grad) == 0
    assert loss_fn.degenerate_batches == 0
    assert gradlab.FastAPLoss()(embeddings, labels).item() > 0.5  # the others see no ranking


def test_official_normalization_gradient_flows():
    embeddings, labels = batch(5, 8)
    leaf = embeddings.clone().requires_grad_(True)
    fappy_loss(leaf, labels, 0.05, normalization="official").backward()
    assert torch.isfinite(leaf.grad).all()


@pytest.mark.parametrize("bad", ["Paper", "caffe", ""])
def test_unknown_normalization_is_refused(bad):
    embeddings, labels = batch(0, 4)
    with pytest.raises(GradlabError, match="normalization must be one of"):
        fappy_loss(embeddings, labels, 0.1, normalization=bad)
    with pytest.raises(GradlabError, match=repr(bad)):
        FAPPYLoss(0.1, normalization=bad)


LABELS3 = torch.zeros(3, dtype=torch.long)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: fappy_deltas(0.0), r"delta_min must be a finite number in \[9.53674e-07, 1\]"),
        (lambda: false_positive_probability(torch.ones(3, 3), LABELS3, 0.0),
         r"delta must be a finite number in \[9.53674e-07, 2\]; got 0.0"),
        (lambda: false_positive_probability(torch.ones(3, 3, dtype=torch.long), LABELS3, 0.5),
         "scores must have a floating dtype; got torch.int64; pass scores.float()"),
        (lambda: false_positive_probability(torch.full((3, 3), math.nan), LABELS3, 0.5),
         "scores must be finite; got (NaN|inf) in .*"),
        (lambda: fappy_loss(torch.ones(3, 2, dtype=torch.long), LABELS3),
         "embeddings must have a floating dtype; got torch.int64; pass embeddings.float()"),
        (lambda: fappy_loss(torch.full((3, 2), math.inf), LABELS3),
         "embeddings must be finite; got (NaN|inf) in .*"),
        (lambda: fappy_loss(torch.ones(3, 2), torch.zeros(4, dtype=torch.long)),
         r"labels must have shape \(3,\) \(one label per embedding\); got \(4,\)"),
        (lambda: euclidean_from_cosine(torch.zeros([1] * 8)),
         r"similarity must be 0-D or 1-D or 2-D or 3-D or 4-D or 5-D or 6-D or 7-D; got shape"),
        (lambda: euclidean_from_cosine(torch.zeros(2, dtype=torch.long)),
         "similarity must have a floating dtype; got torch.int64; pass similarity.float()"),
        (lambda: euclidean_from_cosine(torch.tensor([math.inf])),
         "similarity must be finite; got (NaN|inf) in .*"),
        (lambda: cosine_from_euclidean(torch.zeros([1] * 8)),
         r"distance must be 0-D or 1-D or 2-D or 3-D or 4-D or 5-D or 6-D or 7-D; got shape"),
        (lambda: cosine_from_euclidean(torch.zeros(2, dtype=torch.long)),
         "distance must have a floating dtype; got torch.int64; pass distance.float()"),
        (lambda: cosine_from_euclidean(torch.tensor([math.nan])),
         "distance must be finite; got (NaN|inf) in .*"),
    ],
)  # fmt: skip
def test_messages_name_the_argument(call, message):
    with pytest.raises(GradlabError, match=rf"^{message}"):
        call()


def test_seven_dimensional_similarities_and_distances_are_taken():
    grid = torch.full([1] * 7, 0.5, dtype=torch.float64)
    assert euclidean_from_cosine(grid).item() == pytest.approx(1.0)
    assert cosine_from_euclidean(grid).item() == pytest.approx(0.875)


def test_a_pair_exactly_delta_from_one_is_active():
    # Algorithm 1, line 5: a pair is active when 1 - s_ij >= Delta. Orthogonal positives have
    # s = 0 exactly, so at Delta = 1 they sit on the boundary and count.
    embeddings = torch.tensor(
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.6, 0.8]], dtype=torch.float64
    )
    labels = [0, 0, 1, 1]
    loss = fappy_loss(embeddings, torch.tensor(labels), delta_min=1.0)
    expected = fappy_algorithm1(embeddings.tolist(), labels, 1.0)
    assert loss.item() == pytest.approx(expected, abs=1e-12)
    assert expected > 0


@pytest.mark.parametrize("offset", [-0.25, -0.125, 0.0, 0.1, 0.25, 0.3])
def test_closed_form_is_the_right_derivative_at_and_between_bin_edges(offset):
    # P_ij is piecewise linear in s_ik; at a bin edge the closed form takes the right
    # derivative (the bins are half-open, [b_t, b_t + Delta)): a forward difference of the
    # loop reference P (seed 004 Eq. 1-7) over a step that stays inside one piece.
    delta, pair = 0.25, 0.1  # the pair's bin is [0.0, 0.25): b_t = 0.0
    negative = 0.0 + offset  # edges at -0.25, 0.0 and 0.25 among the offsets
    step = 2.0**-20

    def probability(value):
        similarities = [[1.0, pair, value], [pair, 1.0, -0.9], [value, -0.9, 1.0]]
        return fappy_pair(similarities, [0, 0, 1], 0, 1, delta)

    right = (probability(negative + step) - probability(negative)) / step
    closed = fappy_gradient_closed_form(pair, negative, delta, num_negatives=1)
    assert closed == pytest.approx(right, abs=1e-9)


@pytest.mark.parametrize("negative", [0.0, 0.125, 0.25])
def test_lemma1_as_printed_holds_on_the_closed_bin(negative):
    # Printed: -h_right on [b_t, b_{t+1}], both edges included; 0 outside.
    h_right = (0.1 - 0.0) / 0.25
    assert fappy_lemma1_as_printed(0.1, negative, delta=0.25) == pytest.approx(-h_right)
    assert fappy_lemma1_as_printed(0.1, 0.25 + 1e-12, delta=0.25) == 0.0
    assert fappy_lemma1_as_printed(0.1, -1e-12, delta=0.25) == 0.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: false_positive_probability(torch.ones(3, 3), torch.zeros(3), 0.5),
         r"labels must have an integer dtype; got torch.float32 \(whole-number ids: pass "
         r"labels\.long\(\)\)$"),
        (lambda: false_positive_probability(torch.ones(3, 3), torch.zeros(3, 1).long(), 0.5),
         "labels must be 1-D"),
        (lambda: false_positive_probability(torch.ones(3, 2), LABELS3, 0.5),
         r"scores must have shape \(3, 3\) \(\[B, B\]\); got \(3, 2\)$"),
        (lambda: false_positive_probability(torch.ones(3, 3), LABELS3.to("meta"), 0.5),
         "tensors must be on one device; got scores on cpu, labels on meta$"),
    ],
)  # fmt: skip
def test_label_messages_name_the_argument(call, message):
    with pytest.raises(GradlabError, match=rf"^{message}"):
        call()


@pytest.mark.parametrize("delta", [2.0, 0.5, 0.25])
@pytest.mark.parametrize("pair", [-1.0, -0.5, 0.3, 1.0])
def test_pairs_at_any_similarity_use_their_bin_the_last_closed_at_one(delta, pair):
    # Eq. 1-7 by loops for one positive pair (0, 1), given explicitly as pairs=; s = +1 falls in
    # the last bin (closed at +1), s = -1 in the first.
    similarities = torch.tensor(
        [
            [1.0, pair, 0.2, -0.4],
            [pair, 1.0, 0.7, 0.1],
            [0.2, 0.7, 1.0, 0.0],
            [-0.4, 0.1, 0.0, 1.0],
        ],
        dtype=torch.float64,
    )
    labels = torch.tensor([0, 0, 1, 2])
    chosen = (torch.tensor([0]), torch.tensor([1]))
    probability, (first, second) = false_positive_probability(
        similarities, labels, delta, pairs=chosen
    )
    assert first.tolist() == [0] and second.tolist() == [1]
    expected = fappy_pair(similarities.tolist(), labels.tolist(), 0, 1, delta)
    assert probability.item() == pytest.approx(expected, abs=1e-12)


def test_a_cosine_rounded_below_minus_one_is_in_the_first_bin():
    # Cosines of opposite vectors can round to -1 - 1e-16: the first bin, continuous with -1.
    similarities = torch.tensor([[1.0, -1.0, 0.2], [-1.0, 1.0, -0.3], [0.2, -0.3, 1.0]])
    similarities = similarities.double()
    labels = torch.tensor([0, 0, 1])
    at_minus_one, _ = false_positive_probability(similarities, labels, 0.5)
    similarities[0, 1] = similarities[1, 0] = -1.0 - 1e-12
    below, _ = false_positive_probability(similarities, labels, 0.5)
    assert below.item() == pytest.approx(at_minus_one.item(), abs=1e-9)


PAIR_SCORES = torch.tensor([[1.0, 0.5, 0.2], [0.5, 1.0, -0.3], [0.2, -0.3, 1.0]])
PAIR_LABELS = torch.tensor([0, 0, 1])
POSITIVE_PAIRS = "pairs must index positive pairs of the batch"


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ((torch.tensor([-1]), torch.tensor([0])), POSITIVE_PAIRS + r".* \(i, j\) = \(-1, 0\)"),
        ((torch.tensor([5]), torch.tensor([0])), POSITIVE_PAIRS + r".* \(i, j\) = \(5, 0\)"),
        ((torch.tensor([0, 1]), torch.tensor([1, 2])), POSITIVE_PAIRS + r".* at position 1"),
        ((torch.tensor([1]), torch.tensor([1])), POSITIVE_PAIRS + r".* \(i, j\) = \(1, 1\)"),
        ((torch.tensor([0, 1]), torch.tensor([1])),
         r"pairs\[1\] must have shape \(2,\) \(one j per i\); got \(1,\)"),
        ((torch.tensor([0.0]), torch.tensor([1.0])), r"pairs\[0\] must have an integer dtype"),
        ([torch.tensor([0])], "pairs must be a pair \\(i, j\\) of index tensors; got list of "),
        ((torch.tensor([0]), torch.tensor([1], device="meta")), "tensors must be on one device"),
    ],
    ids=["negative", "beyond", "not-positive", "self", "lengths", "float", "one", "device"],
)
def test_pairs_that_are_no_positive_pairs_of_the_batch_are_refused(pairs, message):
    # A negative index wrapped to the last row and lengths 2 and 1 broadcast to (0, 1), (1, 1).
    with pytest.raises(GradlabError, match=message):
        false_positive_probability(PAIR_SCORES, PAIR_LABELS, 0.5, pairs=pairs)


def _refusal(pairs) -> str:
    with pytest.raises(GradlabError) as raised:
        false_positive_probability(PAIR_SCORES, PAIR_LABELS, 0.5, pairs=pairs)
    return str(raised.value)


def test_the_pairs_refusals_name_the_argument_in_full():
    zero, one = torch.tensor([0]), torch.tensor([1])
    assert _refusal(zero) == "pairs must be a pair (i, j) of index tensors; got Tensor"
    assert _refusal((zero,)) == ("pairs must be a pair (i, j) of index tensors; got tuple of "
                                 "length 1")
    assert _refusal((zero, one.float())).startswith("pairs[1] must have an integer dtype")
    assert _refusal((zero, one.reshape(1, 1))).startswith("pairs[1] must be 1-D")
    assert _refusal((zero, one.to("meta"))) == (
        "tensors must be on one device; got scores on cpu, pairs[0] on cpu, pairs[1] on meta")
    assert _refusal((zero.to("meta"), one)) == (
        "tensors must be on one device; got scores on cpu, pairs[0] on meta, pairs[1] on cpu")


@pytest.mark.parametrize(
    ("labels", "pair"),
    # out of range, but clamped into the batch the index would make a positive pair
    [([0, 0, 1], (-1, 1)), ([0, 1, 1], (1, 3)), ([0, 1, 1], (3, 1)), ([0, 0, 1], (0, 5))],
    ids=["i-below", "j-at-size", "i-at-size", "j-beyond"],
)  # fmt: skip
def test_an_index_outside_the_batch_is_refused_even_where_clamping_would_pair_it(labels, pair):
    with pytest.raises(GradlabError, match=re.escape(f"got (i, j) = {pair} at position 0")):
        false_positive_probability(PAIR_SCORES, torch.tensor(labels), 0.5,
                                   pairs=(torch.tensor([pair[0]]), torch.tensor([pair[1]])))


def test_pairs_at_the_last_item_are_taken():
    labels = torch.tensor([0, 1, 1])
    for pair in ((2, 1), (1, 2)):
        given = (torch.tensor([pair[0]]), torch.tensor([pair[1]]))
        value, _ = false_positive_probability(PAIR_SCORES, labels, 0.5, pairs=given)
        expected = fappy_pair(PAIR_SCORES.tolist(), labels.tolist(), 1, 2, 0.5)
        assert value.item() == pytest.approx(expected, abs=1e-7)


def test_the_score_refusal_in_full_names_the_larger_excess_and_the_lower_on_a_tie():
    scores = PAIR_SCORES.clone()
    scores[0, 1] = scores[1, 0] = 1.5
    scores[0, 2] = scores[2, 0] = -1.5
    with pytest.raises(GradlabError) as raised:
        false_positive_probability(scores, PAIR_LABELS, 0.5)
    assert str(raised.value) == ("scores must be cosine similarities in [-1, 1] (FAPPY's bins "
                                 "tile [-1, 1], Zhong et al., Eq. 1-3); got a score of -1.5")


def test_one_score_is_checked_too_and_a_meta_tensor_is_refused_by_name():
    # meta scores and labels had reached torch.nonzero, which raised NotImplementedError
    with pytest.raises(GradlabError, match=r"got a score of 1\.5$"):
        false_positive_probability(torch.tensor([[1.5]]), torch.tensor([0]), 0.5)
    with pytest.raises(GradlabError, match=r"^scores is a meta tensor"):
        false_positive_probability(PAIR_SCORES.to("meta"), PAIR_LABELS.to("meta"), 0.5)


def test_given_pairs_in_either_order_are_the_default_pairs():
    default, _ = false_positive_probability(PAIR_SCORES, PAIR_LABELS, 0.5)
    swapped, _ = false_positive_probability(
        PAIR_SCORES, PAIR_LABELS, 0.5, pairs=(torch.tensor([1]), torch.tensor([0]))
    )
    expected = fappy_pair(PAIR_SCORES.tolist(), PAIR_LABELS.tolist(), 0, 1, 0.5)
    assert default.item() == pytest.approx(expected, abs=1e-7)
    assert swapped.item() == pytest.approx(expected, abs=1e-7)


@pytest.mark.parametrize("score", [1.5, -1.01, 14.3])
def test_scores_that_are_no_cosines_are_refused(score):
    # Eq. 1-3 bin [-1, 1]; a raw dot product of 1.5 gave P = -0.4 (a negative probability).
    scores = PAIR_SCORES.clone()
    scores[0, 1] = scores[1, 0] = score
    with pytest.raises(GradlabError, match=rf"^scores must be cosine similarities in \[-1, 1\] "
                                           rf".*; got a score of {score}$"):  # fmt: skip
        false_positive_probability(scores, PAIR_LABELS, 0.5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cosines_rounded_past_one_are_accepted(dtype):
    # Normalized duplicates: their cosine reads a few rounding steps above 1 in float32.
    vectors = torch.randn(64, 128, generator=torch.Generator().manual_seed(8))
    vectors[1] = vectors[0]
    unit = torch.nn.functional.normalize(vectors.to(dtype), dim=1)
    scores = unit @ unit.T
    labels = torch.arange(64) % 4
    probabilities, _ = false_positive_probability(scores, labels, 0.25)
    assert bool(torch.isfinite(probabilities).all())


@pytest.mark.parametrize("normalization", ["paper", "official"])
@pytest.mark.parametrize("delta_min", [1.0, 0.5, 0.01])
def test_a_pair_of_opposite_vectors_is_in_the_first_bin(normalization, delta_min):
    """Opposite vectors have cosine -1, which the loops' float64 quotient rounds to
    -1 - 2^-52; their bin index floor((s + 1) / Delta) was -1 there, Python's index wrapped to
    the last boundary (+1), and the reference said -170.7 (gradlab 1.99 at delta_min 0.01).
    The reference's cosines are in [-1, 1] now."""
    embeddings = torch.tensor([[0.543475142177413, 1.1056432820212598],
                               [-0.543475142177413, -1.1056432820212598],
                               [-1.2443136576307374, 0.2000928228614059]], dtype=torch.float64)
    labels = [1, 1, 0]
    reference = fappy_algorithm1 if normalization == "paper" else fappy_official
    expected = reference(embeddings.tolist(), labels, delta_min)
    got = fappy_loss(embeddings, torch.tensor(labels), delta_min, normalization)
    assert float(got) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("dtype", "allowed"), [(torch.float16, 7.8125e-3),
                                                (torch.bfloat16, 0.0625)])  # fmt: skip
def test_the_slack_past_one_is_eight_rounding_steps_of_a_half_precision_dtype(dtype, allowed):
    # COSINE_SLACK's documented tolerance: 8 steps of the dtype at 1 where that exceeds 1e-3
    # (float16 2^-10 a step, bfloat16 2^-7): 1 + 8 steps is a cosine, the next value is not.
    assert allowed == 8 * torch.finfo(dtype).eps
    edge = torch.tensor(1.0 + allowed, dtype=dtype)
    past = edge + torch.finfo(dtype).eps  # the next value of the dtype above the edge
    assert float(past) > float(edge)
    for score, refused in ((edge, False), (past, True)):
        scores = PAIR_SCORES.to(dtype)
        scores[0, 1] = scores[1, 0] = score
        if refused:
            with pytest.raises(GradlabError, match=r"^scores must be cosine similarities"):
                false_positive_probability(scores, PAIR_LABELS, 0.5)
        else:
            false_positive_probability(scores, PAIR_LABELS, 0.5)


def test_with_value_checks_skipped_a_score_past_one_is_not_read():
    # skip_value_checks() (the Monitor's own calls, whose inputs it checked) reads no value
    # back: a score of 1.5 then passes through the bins instead of being refused.
    from gradlab.validation import skip_value_checks

    scores = PAIR_SCORES.clone()
    scores[0, 1] = scores[1, 0] = 1.5
    with skip_value_checks():
        false_positive_probability(scores, PAIR_LABELS, 0.5)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_embeddings_without_validation_are_named_as_the_caller_passed_them(bad):
    """validate=False skips the embeddings check, but FAPPY's bins refuse what has no bin: the
    refusal names the caller's ``embeddings`` and their row, not the similarities it built."""
    embeddings = torch.randn(8, 4, generator=torch.Generator().manual_seed(2))
    embeddings[5, 1] = bad
    labels = torch.arange(4).repeat_interleave(2)
    for call in (lambda: fappy_loss(embeddings, labels, validate=False),
                 lambda: FAPPYLoss(validate=False)(embeddings, labels)):  # fmt: skip
        with pytest.raises(GradlabError) as caught:
            call()
        assert str(caught.value).startswith("embeddings must be finite")
        assert "row 5" in str(caught.value)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.slow
def test_half_precision_scores_are_binned_in_float32_and_p_returned_in_their_dtype(dtype):
    """Bins of 2^-15: their index passes float16's largest value (a RuntimeError in clamp) and
    bfloat16's integers (wrong edges); binned in float32, P is the loops' on the same rounded
    scores, returned in the scores' dtype."""
    vectors = torch.randn(6, 4, generator=torch.Generator().manual_seed(5))
    unit = torch.nn.functional.normalize(vectors, dim=1)
    scores = (unit @ unit.T).clamp(-1.0, 1.0).to(dtype)
    labels = [0, 0, 1, 1, 2, 2]
    probabilities, (first, second) = false_positive_probability(scores, torch.tensor(labels),
                                                                2**-15)  # fmt: skip
    assert probabilities.dtype == dtype
    rounded = scores.double().tolist()
    expected = [fappy_pair(rounded, labels, int(i), int(j), 2**-15)
                for i, j in zip(first, second, strict=True)]  # fmt: skip
    torch.testing.assert_close(probabilities.double(), torch.tensor(expected, dtype=torch.float64),
                               atol=torch.finfo(dtype).eps, rtol=torch.finfo(dtype).eps)


@pytest.mark.parametrize("function", ["fappy_gradient_closed_form", "fappy_lemma1_as_printed"])
@pytest.mark.parametrize(("position", "value", "message"), [
    (0, math.nan, "pair_similarity must be a finite number in [-1, 1]; got nan"),
    (0, 1.5, "pair_similarity must be a finite number in [-1, 1]; got 1.5"),
    (0, "a", "pair_similarity must be a finite number in [-1, 1]; got 'a'"),
    (1, -1.25, "negative_similarity must be a finite number in [-1, 1]; got -1.25"),
    (1, math.inf, "negative_similarity must be a finite number in [-1, 1]; got inf"),
    (2, 0.0, "delta must be a finite number in [9.53674e-07, 2]"),
    (2, -0.25, "delta must be a finite number in [9.53674e-07, 2]"),
    (2, 0.3, "delta must divide 2 into whole bins (2 / delta an integer: 2.0, 1.0, 0.5, 0.4, "
             "...); got 0.3"),
])  # fmt: skip
def test_a_single_bin_derivative_refuses_what_it_cannot_place(function, position, value,
                                                              message):
    # NaN gave 0.0, a cosine of 1.5 a number, delta 0 a ZeroDivisionError
    arguments = [0.3, 0.1, 0.25, 4][: 3 if function == "fappy_lemma1_as_printed" else 4]
    arguments[position] = value
    with pytest.raises(GradlabError) as raised:
        getattr(gradlab.functional, function)(*arguments)
    assert str(raised.value).startswith(message)


@pytest.mark.parametrize("count", [0, -1, 2.0, True])
def test_the_closed_form_needs_a_positive_number_of_negatives(count):
    with pytest.raises(GradlabError) as raised:
        gradlab.functional.fappy_gradient_closed_form(0.3, 0.1, 0.25, count)
    assert str(raised.value) == f"num_negatives must be a positive integer; got {count!r}"


@pytest.mark.parametrize(("function", "values", "message"), [
    ("cosine_from_euclidean", [0.5, 1e6], "distance must be a distance of unit vectors, in "
                                          "[0, 2] up to rounding (0.001); got 1e+06"),
    ("cosine_from_euclidean", [-1.0], "distance must be a distance of unit vectors, in [0, 2] "
                                      "up to rounding (0.001); got -1"),
    ("euclidean_from_cosine", [4.0], "similarity must be a cosine, in [-1, 1] up to rounding "
                                     "(0.001); got 4"),
    ("euclidean_from_cosine", [-1.01], "similarity must be a cosine, in [-1, 1] up to rounding "
                                       "(0.001); got -1.01"),
])  # fmt: skip
def test_the_distance_cosine_maps_refuse_values_outside_their_domain(function, values, message):
    # 1e6 gave a cosine of -5e11, a cosine of 4 a distance of 0
    with pytest.raises(GradlabError) as raised:
        getattr(gradlab.functional, function)(torch.tensor(values))
    assert str(raised.value) == message


def test_the_distance_cosine_maps_clamp_rounding_and_invert_each_other():
    from gradlab.functional import cosine_from_euclidean, euclidean_from_cosine

    cosines = torch.tensor([1.0005, 1.0, 0.3, -1.0, -1.0005], dtype=torch.float64)
    distances = euclidean_from_cosine(cosines)
    assert distances.tolist() == [0.0, 0.0, math.sqrt(1.4), 2.0, 2.0]
    assert torch.allclose(cosine_from_euclidean(distances), cosines.clamp(-1.0, 1.0),
                          rtol=0, atol=1e-15)  # fmt: skip
    assert cosine_from_euclidean(torch.tensor([2.0005, -0.0])).tolist() == [-1.0, 1.0]


def test_the_rounding_slack_is_inclusive_and_unchecked_inside_skip_value_checks():
    from gradlab.functional import cosine_from_euclidean, euclidean_from_cosine
    from gradlab.functional.fappy import ROUNDING_SLACK
    from gradlab.validation import skip_value_checks

    # exactly at the slack: taken as rounding and clamped
    edge = torch.tensor([1.0 + ROUNDING_SLACK, -1.0 - ROUNDING_SLACK], dtype=torch.float64)
    assert euclidean_from_cosine(edge).tolist() == [0.0, 2.0]
    distances = torch.tensor([0.0 - ROUNDING_SLACK, 2.0 + ROUNDING_SLACK, -0.0005],
                             dtype=torch.float64)  # fmt: skip
    assert cosine_from_euclidean(distances).tolist() == [1.0, -1.0, 1.0]  # clamped to [0, 2]
    with skip_value_checks():  # no value read: out of range is the caller's
        assert euclidean_from_cosine(torch.tensor([4.0])).tolist() == [0.0]
