"""smooth_ap against the loop reference, its exact backward against gradcheck and autograd."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gradlab import GradlabError
from gradlab.functional import smooth_ap
from gradlab.functional.smooth_ap import (
    PositiveGroup,
    chunk_slices,
    group_by_positive_count,
    smooth_ap_checked,
)
from tests.helpers.default_device import assert_unchanged_under_another_default_device
from tests.reference.smooth_ap_loops import smooth_ap_one_query, smooth_ap_one_query_gradient


def random_problem(seed: int, queries: int, candidates: int, density: float, spread: float):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(queries, candidates, generator=generator, dtype=torch.float64) * spread
    positives = torch.rand(queries, candidates, generator=generator) < density
    return scores, positives


@given(
    seed=st.integers(0, 2**31 - 1),
    queries=st.integers(1, 6),
    candidates=st.integers(1, 12),
    density=st.floats(0.0, 1.0),
    tau=st.sampled_from([0.01, 0.1, 1.0]),
)
@pytest.mark.slow
def test_values_match_loop_reference(seed, queries, candidates, density, tau):
    scores, positives = random_problem(seed, queries, candidates, density, spread=0.2)
    got = smooth_ap(scores, positives, tau)
    for q in range(queries):
        expected = smooth_ap_one_query(scores[q].tolist(), positives[q].tolist(), tau)
        if math.isnan(expected):
            assert math.isnan(got[q].item())
        else:
            assert got[q].item() == pytest.approx(expected, abs=1e-12)


@pytest.mark.slow  # seconds: left out of make test-fast
@given(
    seed=st.integers(0, 2**31 - 1),
    queries=st.integers(1, 5),
    candidates=st.integers(2, 9),
    chunk=st.integers(1, 64),
)
def test_exact_backward_passes_gradcheck(seed, queries, candidates, chunk):
    scores, positives = random_problem(seed, queries, candidates, 0.4, spread=0.1)
    positives[:, 0] = True  # gradcheck cannot difference the NaN of a query without positives
    scores.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda s: smooth_ap(s, positives, 0.05, max_chunk_elements=chunk), (scores,)
    )


def loop_values_and_gradients(scores, positives, tau, candidates=None):
    """Per-query AP and ``d AP / d scores`` from the float64 loops, on each query's candidates.

    Columns that are not candidates are dropped before the loops (they are neither positive nor
    negative) and get zero gradient.
    """
    values, gradients = [], torch.zeros(scores.shape, dtype=torch.float64)
    for q in range(scores.shape[0]):
        kept = [c for c in range(scores.shape[1]) if candidates is None or candidates[q, c]]
        row = [float(scores[q, c]) for c in kept]
        flags = [bool(positives[q, c]) for c in kept]
        values.append(smooth_ap_one_query(row, flags, tau))
        for c, derivative in zip(kept, smooth_ap_one_query_gradient(row, flags, tau), strict=True):
            gradients[q, c] = derivative
    return torch.tensor(values, dtype=torch.float64), gradients


@pytest.mark.slow
@given(seed=st.integers(0, 2**31 - 1), chunk=st.integers(1, 200))
@pytest.mark.parametrize("backward", ["exact", "autograd"])
def test_both_backwards_equal_the_loop_gradient(backward, seed, chunk):
    scores, positives = random_problem(seed, 7, 15, 0.3, spread=0.05)
    leaf = scores.clone().requires_grad_(True)
    weights = torch.rand(7, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    ap = smooth_ap(leaf, positives, 0.01, backward=backward, max_chunk_elements=chunk)
    (grad,) = torch.autograd.grad((ap.nan_to_num(0.0) * weights).sum(), leaf)
    values, gradients = loop_values_and_gradients(scores, positives, 0.01)
    torch.testing.assert_close(ap, values, atol=1e-12, rtol=0, equal_nan=True)
    torch.testing.assert_close(grad, gradients * weights.unsqueeze(1), atol=1e-10, rtol=0)


@given(seed=st.integers(0, 2**31 - 1), keep=st.floats(0.3, 1.0))
@pytest.mark.parametrize("backward", ["exact", "autograd"])
@pytest.mark.slow
def test_candidate_mask_equals_the_loops_on_the_kept_columns(backward, seed, keep):
    scores, positives = random_problem(seed, 5, 10, 0.4, spread=0.1)
    candidates = torch.rand(5, 10, generator=torch.Generator().manual_seed(seed)) < keep
    leaf = scores.clone().requires_grad_(True)
    masked = smooth_ap(leaf, positives, 0.05, candidate_mask=candidates, backward=backward)
    (grad,) = torch.autograd.grad(masked.nan_to_num(0.0).sum(), leaf)
    values, gradients = loop_values_and_gradients(scores, positives, 0.05, candidates)
    torch.testing.assert_close(masked, values, atol=1e-12, rtol=0, equal_nan=True)
    torch.testing.assert_close(grad, gradients, atol=1e-10, rtol=0)
    assert bool((grad[~candidates] == 0).all())


def test_query_without_positive_is_nan_with_zero_gradient():
    scores = torch.tensor([[0.3, 0.1, 0.2], [0.5, 0.4, 0.0]], dtype=torch.float64)
    positives = torch.tensor([[False, False, False], [True, False, True]])
    scores.requires_grad_(True)
    ap = smooth_ap(scores, positives)
    assert math.isnan(ap[0].item()) and not math.isnan(ap[1].item())
    (grad,) = torch.autograd.grad(ap[1], scores)
    assert torch.equal(grad[0], torch.zeros(3, dtype=torch.float64))


def test_all_positive_query_has_ap_one_and_zero_gradient():
    scores = torch.tensor([[0.3, 0.31, -0.2, 0.9]], dtype=torch.float64, requires_grad=True)
    ap = smooth_ap(scores, torch.ones(1, 4, dtype=torch.bool), tau=0.05)
    assert ap.item() == 1.0
    (grad,) = torch.autograd.grad(ap.sum(), scores)
    assert torch.equal(grad, torch.zeros_like(grad))


def test_no_candidates_gives_nan_and_no_queries_an_empty_result():
    ap = smooth_ap(torch.zeros(3, 0), torch.zeros(3, 0, dtype=torch.bool))
    assert ap.shape == (3,) and bool(torch.isnan(ap).all())
    for shape in ((0, 4), (0, 0)):
        assert smooth_ap(torch.zeros(shape), torch.zeros(shape, dtype=torch.bool)).shape == (0,)


def test_every_chunk_size_gives_the_loop_values_and_gradients():
    scores, positives = random_problem(3, 20, 50, 0.2, spread=0.1)
    values, gradients = loop_values_and_gradients(scores, positives, 0.01)
    for chunk in (1, 7, 333, 10**9):
        leaf = scores.clone().requires_grad_(True)
        ap = smooth_ap(leaf, positives, max_chunk_elements=chunk)
        (grad,) = torch.autograd.grad(ap.nan_to_num(0.0).sum(), leaf)
        torch.testing.assert_close(ap, values, atol=1e-12, rtol=0, equal_nan=True)
        torch.testing.assert_close(grad, gradients, atol=1e-9, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_low_precision_inputs_computed_in_float32(dtype):
    queries, candidates = 4, 30
    scores, positives = random_problem(5, queries, candidates, 0.3, spread=0.3)
    low = scores.to(dtype).requires_grad_(True)
    ap = smooth_ap(low, positives, 0.05)
    assert ap.dtype == dtype
    values, _ = loop_values_and_gradients(low.detach().double(), positives, 0.05)
    # The float32 result is rounded to ``dtype``: at most half an ulp of ``dtype`` at the value
    # (eps * 2^floor(log2 AP) / 2), plus the float32 compute error, a few roundings per
    # candidate summed (8 C eps32, loose). bfloat16 computed natively is off by up to 1.5 times
    # this bound; the 1e-2 used before admitted it.
    half_ulp = torch.finfo(dtype).eps * torch.exp2(torch.floor(torch.log2(values.abs()))) / 2
    tolerance = half_ulp + 8 * candidates * torch.finfo(torch.float32).eps
    assert bool(((ap.double() - values).abs() <= tolerance).all())
    ap.nan_to_num(0.0).sum().backward()
    assert low.grad.dtype == dtype and bool(torch.isfinite(low.grad).all())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_matches_cpu(dtype):
    scores, positives = random_problem(11, 32, 200, 0.05, spread=0.1)
    scores = scores.to(dtype)
    cpu = scores.clone().requires_grad_(True)
    gpu = scores.cuda().requires_grad_(True)
    ap_cpu, ap_gpu = smooth_ap(cpu, positives), smooth_ap(gpu, positives.cuda())
    torch.testing.assert_close(ap_gpu.cpu(), ap_cpu, equal_nan=True)
    ap_cpu.nan_to_num(0.0).sum().backward()
    ap_gpu.nan_to_num(0.0).sum().backward()
    torch.testing.assert_close(gpu.grad.cpu(), cpu.grad)


GOOD_SCORES = torch.zeros(2, 3)
GOOD_POSITIVES = torch.ones(2, 3, dtype=torch.bool)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scores": [[0.0]]}, "scores must be a torch.Tensor"),
        ({"scores": torch.zeros(3)}, "scores must be 2-D"),
        ({"scores": torch.zeros(2, 3, dtype=torch.long)}, "scores must have a floating dtype"),
        ({"scores": torch.tensor([[0.0, float("nan"), 0.0]] * 2)}, "scores must be finite"),
        ({"scores": torch.tensor([[0.0, float("inf"), 0.0]] * 2)}, "scores must be finite"),
        ({"positives": torch.ones(2, 3)}, "positives must be a bool tensor"),
        ({"positives": torch.ones(2, 4, dtype=torch.bool)}, r"positives must have shape \(2, 3\)"),
        ({"tau": 0.0}, "tau must be a finite number in \\[1e-30, inf\\) .*; got 0.0$"),
        ({"tau": -0.01}, "tau must be a finite number in \\[1e-30, inf\\)"),
        ({"tau": float("inf")}, "tau must be a finite number in \\[1e-30, inf\\)"),
        ({"tau": float("nan")}, "tau must be a finite number in \\[1e-30, inf\\)"),
        ({"tau": "0.01"}, "tau must be a finite number in \\[1e-30, inf\\)"),
        ({"tau": True}, "tau must be a finite number in \\[1e-30, inf\\)"),
        ({"candidate_mask": torch.ones(2, 3)}, "candidate_mask must be a bool tensor"),
        (
            {"candidate_mask": torch.ones(3, 3, dtype=torch.bool)},
            r"candidate_mask must have shape \(2, 3\)",
        ),
        ({"backward": "numeric"}, "^backward must be 'exact' or 'autograd'; got 'numeric'$"),
        ({"max_chunk_elements": 0}, "max_chunk_elements must be a positive integer"),
        ({"max_chunk_elements": 2.5}, "max_chunk_elements must be a positive integer"),
        ({"validate": 1}, "^validate must be True or False; got 1$"),
    ],
)
def test_error_table(kwargs, message):
    arguments = {"scores": GOOD_SCORES, "positives": GOOD_POSITIVES, **kwargs}
    with pytest.raises(GradlabError, match="^" + message):  # each message starts with its name
        smooth_ap(**arguments)


def test_errors_are_value_errors():
    assert issubclass(GradlabError, ValueError)


# --- one host synchronisation: the grouping, the finiteness check, validate= -------------------


@pytest.mark.slow
@given(
    seed=st.integers(0, 2**31 - 1),
    queries=st.integers(1, 9),
    candidates=st.integers(1, 12),
    density=st.floats(0.0, 1.0),
)
def test_grouping_matches_nonzero(seed, queries, candidates, density):
    """Groups from one histogram transfer equal the obvious nonzero-based grouping."""
    generator = torch.Generator().manual_seed(seed)
    positives = torch.rand(queries, candidates, generator=generator) < density
    expected: dict[int, list[tuple[int, list[int]]]] = {}
    for q in range(queries):
        columns = torch.nonzero(positives[q]).flatten().tolist()
        if columns:
            expected.setdefault(len(columns), []).append((q, columns))
    groups = group_by_positive_count(positives)
    assert [g.num_positives for g in groups] == sorted(expected)
    for group in groups:
        got = list(zip(group.queries.tolist(), group.positive_columns.tolist(), strict=True))
        assert got == expected[group.num_positives]


def test_grouping_checks_named_tensors_for_finiteness_in_the_same_transfer():
    positives = torch.eye(3, dtype=torch.bool)
    bad = torch.tensor([1.0, float("inf")])
    with pytest.raises(
        GradlabError, match=r"^embeddings must be finite; got inf in entry 1 \(1 entry of 2\)$"
    ):
        group_by_positive_count(positives, finite={"good": torch.ones(2), "embeddings": bad})
    assert len(group_by_positive_count(positives, finite={"good": torch.ones(2)})) == 1


def test_validate_false_skips_the_finiteness_check_only():
    scores = torch.tensor([[0.0, float("nan"), 0.2]] * 2)
    positives = torch.tensor([[True, False, False]] * 2)
    with pytest.raises(GradlabError, match="scores must be finite"):
        smooth_ap(scores, positives)
    assert torch.isnan(smooth_ap(scores, positives, validate=False)).all()  # NaN in, NaN out
    with pytest.raises(GradlabError, match="positives must be a bool tensor"):
        smooth_ap(scores, positives.float(), validate=False)


@pytest.mark.parametrize("backward", ["exact", "autograd"])
def test_recorded_ranks_are_the_forward_ranks(backward):
    scores, positives = random_problem(5, 6, 9, 0.4, spread=0.1)
    stash: list = []
    ap = smooth_ap_checked(scores, positives, 0.05, None, backward, stash=stash)
    groups, ranks = stash[0]
    for group, (rank_a, rank_c) in zip(groups, ranks, strict=True):
        for row, q in enumerate(group.queries.tolist()):
            reference = smooth_ap_one_query(scores[q].tolist(), positives[q].tolist(), 0.05)
            assert (rank_a[row] / (rank_a[row] + rank_c[row])).mean().item() == pytest.approx(
                reference, abs=1e-12
            )
            assert ap[q].item() == pytest.approx(reference, abs=1e-12)


@given(
    queries=st.integers(1, 30),
    positives=st.integers(1, 12),
    candidates=st.integers(0, 40),
    budget=st.integers(1, 2000),
)
def test_chunks_cover_the_group_within_the_memory_budget(queries, positives, candidates, budget):
    # The documented bound of max_chunk_elements: a chunk of k queries holds k * n * C block
    # entries, at most the budget (or one query when one alone exceeds it), and as many
    # queries as fit, so the block count is the smallest the budget allows.
    group = PositiveGroup(torch.arange(queries), torch.zeros(queries, positives, dtype=torch.long))
    per_query = max(1, positives * candidates)  # no candidates: still one query per step
    parts = list(chunk_slices(group, candidates, budget))
    fit = max(1, budget // per_query)
    assert [(part.start, min(part.stop, queries)) for part in parts] == [
        (start, min(start + fit, queries)) for start in range(0, queries, fit)
    ]
    assert all(
        (min(p.stop, queries) - p.start) * per_query <= max(budget, per_query) for p in parts
    )


@pytest.mark.parametrize("backward", [None, "exact", "autograd"])
def test_the_exact_backward_is_the_default_and_records_one_node(backward):
    # "exact" (the default) keeps no block alive: the graph is the one closed-form node whose
    # inputs are the scores; "autograd" records torch's chunked graph instead.
    scores, positives = random_problem(2, 3, 6, 0.5, spread=0.1)
    leaf = scores.requires_grad_(True)
    options = {} if backward is None else {"backward": backward}
    ap = smooth_ap(leaf, positives, 0.05, **options)
    closed_form = "SmoothAPExact" in type(ap.grad_fn).__name__
    assert closed_form == (backward != "autograd")
    if closed_form:
        inputs = [type(node).__name__ for node, _ in ap.grad_fn.next_functions if node is not None]
        assert inputs == ["AccumulateGrad"]


def test_smooth_ap_checked_defaults_to_the_exact_backward():
    scores, positives = random_problem(2, 3, 6, 0.5, spread=0.1)
    ap = smooth_ap_checked(scores.requires_grad_(True), positives, 0.05, None)
    assert "SmoothAPExact" in type(ap.grad_fn).__name__


@pytest.mark.parametrize("backward", ["exact", "autograd"])
def test_result_stays_on_the_input_device_whatever_the_default_device(backward):
    # Internal tensors are made on the scores' device: with torch's default device elsewhere
    # (here "meta"; "cuda" with CPU scores in practice), values and gradients are unchanged.
    scores, positives = random_problem(4, 4, 9, 0.4, spread=0.1)
    candidates = torch.rand(4, 9, generator=torch.Generator().manual_seed(4)) < 0.8

    def run():
        leaf = scores.clone().requires_grad_(True)
        ap = smooth_ap(leaf, positives, 0.05, candidate_mask=candidates, backward=backward)
        (grad,) = torch.autograd.grad(ap.nan_to_num(0.0).sum(), leaf)
        return ap.detach(), grad

    assert_unchanged_under_another_default_device(run, scores.device)


@pytest.mark.parametrize("name", ["positives", "candidate_mask"])
def test_mask_shape_and_device_messages_name_the_mask(name):
    scores = torch.zeros(2, 3)
    good = torch.ones(2, 3, dtype=torch.bool)
    masks = {"positives": good, "candidate_mask": good}
    with pytest.raises(
        GradlabError,
        match=rf"^{name} must have shape \(2, 3\) \(one flag per score\); got \(2, 4\)$",
    ):
        smooth_ap(scores, **{**masks, name: torch.ones(2, 4, dtype=torch.bool)})
    # Another device ("meta" here; "cuda" in practice) is refused before any value is read.
    with pytest.raises(
        GradlabError, match=rf"^tensors must be on one device; got scores on cpu, {name} on meta$"
    ):
        smooth_ap(scores, **{**masks, name: good.to("meta")})


# --- the memory-bounded passes: groups without negatives, one block buffer ---------------------


@given(
    seed=st.integers(0, 2**31 - 1),
    queries=st.integers(1, 6),
    candidates=st.integers(1, 8),
    density=st.floats(0.0, 1.0),
    masked=st.booleans(),
)
def test_has_negatives_says_whether_some_query_of_the_group_has_a_negative(
    seed, queries, candidates, density, masked
):
    generator = torch.Generator().manual_seed(seed)
    mask = torch.rand(queries, candidates, generator=generator) < 0.8 if masked else None
    positives = torch.rand(queries, candidates, generator=generator) < density
    if mask is not None:
        positives &= mask
    for group in group_by_positive_count(positives, candidate_mask=mask):
        negatives = []  # a loop over the group's queries and their candidate columns
        for q in group.queries.tolist():
            columns = range(candidates) if mask is None else torch.nonzero(mask[q]).flatten()
            negatives.append(any(not positives[q, int(c)] for c in columns))
        assert group.has_negatives == any(negatives)


@pytest.mark.parametrize("budget", [1, 7, 40, 10_000])
@pytest.mark.parametrize("backward", ["exact", "autograd"])
def test_groups_without_negatives_and_small_chunks_keep_the_loop_values_and_gradients(
    budget, backward
):
    """Rows 0-2: every candidate positive (their group is skipped); rows 3-5: mixed."""
    scores, _ = random_problem(11, 6, 5, 0.5, spread=0.3)
    positives = torch.tensor(
        [[1, 1, 1, 1, 1]] * 3 + [[1, 0, 1, 0, 0], [0, 1, 1, 1, 0], [1, 0, 0, 0, 1]]
    ).bool()
    leaf = scores.clone().requires_grad_(True)
    ap = smooth_ap(leaf, positives, 0.1, backward=backward, max_chunk_elements=budget)
    ap.sum().backward()
    for q in range(6):
        row, flags = scores[q].tolist(), positives[q].tolist()
        assert ap[q].item() == pytest.approx(smooth_ap_one_query(row, flags, 0.1), abs=1e-12)
        want = smooth_ap_one_query_gradient(row, flags, 0.1)
        assert leaf.grad[q].tolist() == pytest.approx(want, abs=1e-12)


def hard_average_precision(scores: list[float], positives: list[bool]) -> float:
    """AP of one ranking without ties, by a loop: the mean over the positives of the share of
    positives among the candidates at or above each."""
    order = sorted(range(len(scores)), key=lambda column: -scores[column])
    found, total = 0, 0.0
    for rank, column in enumerate(order, start=1):
        if positives[column]:
            found += 1
            total += found / rank
    return total / found


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("tau", [1e-30, 0.01])
def test_scores_whose_quotient_by_tau_overflows_are_refused_and_the_bound_itself_is_not(
    dtype, tau
):
    # (s_j - s_i) / tau overflowed to inf - inf: a NaN AP and NaN gradients, in silence
    computed_in = torch.float32 if dtype == torch.bfloat16 else dtype
    half_largest = torch.finfo(computed_in).max / 2
    bound = tau * half_largest
    pattern, positives = [1.0, -1.0, 0.0, 1 / 3], [True, False, True, False]
    mask = torch.tensor([positives])
    at_bound = torch.tensor([pattern], dtype=torch.float64).mul(bound).to(dtype)
    at_bound = at_bound.clamp(-bound, bound).requires_grad_()  # rounding to dtype stays inside
    ap = smooth_ap(at_bound, mask, tau)
    ap.sum().backward()
    # far beyond the operating region the sigmoid is a step: AP is the ranking's own
    assert float(ap.detach()) == pytest.approx(hard_average_precision(pattern, positives), abs=1e-2)
    assert torch.isfinite(at_bound.grad).all()
    beyond = torch.tensor([pattern], dtype=torch.float64).mul(1.5 * bound).to(dtype)
    with pytest.raises(GradlabError) as error:
        smooth_ap(beyond, mask, tau)
    magnitude = float(beyond.abs().max())
    assert str(error.value) == (
        f"scores must lie in [-{bound:.3g}, {bound:.3g}] (|score| / tau at most "
        f"{half_largest:.3g}, half of {computed_in}'s largest value, so that the sigmoid's "
        f"arguments (s_j - s_i) / tau stay finite); got an entry of magnitude {magnitude:.3g}"
    )
