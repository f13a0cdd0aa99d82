"""smooth_ap_decomposition against autograd (1e-10) and the seeds' terms computed by loops."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gradlab import GradlabError
from gradlab.functional import smooth_ap, smooth_ap_decomposition
from tests.helpers.default_device import assert_unchanged_under_another_default_device
from tests.reference.smooth_ap_loops import decomposition_one_pair, smooth_ap_one_query


def problem(seed, queries, candidates, dims, density):
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(queries, dims, generator=generator, dtype=torch.float64) * 0.3
    vectors = torch.randn(candidates, dims, generator=generator, dtype=torch.float64) * 0.3
    positives = torch.rand(queries, candidates, generator=generator) < density
    return query, vectors, positives


@given(
    seed=st.integers(0, 2**31 - 1),
    queries=st.integers(1, 5),
    candidates=st.integers(1, 10),
    dims=st.integers(1, 6),
    density=st.floats(0.05, 1.0),
    tau=st.sampled_from([0.01, 0.05, 0.5]),
)
@pytest.mark.slow
def test_grad_equals_autograd_of_smooth_ap(seed, queries, candidates, dims, density, tau):
    query, vectors, positives = problem(seed, queries, candidates, dims, density)
    parts = smooth_ap_decomposition(query, vectors, positives, tau)
    leaf = query.clone().requires_grad_(True)
    ap = smooth_ap(leaf @ vectors.T, positives, tau)
    (expected,) = torch.autograd.grad(ap.nan_to_num(0.0).sum(), leaf)
    has_positive = positives.any(dim=1)
    torch.testing.assert_close(parts.grad[has_positive], expected[has_positive], atol=1e-10, rtol=0)
    torch.testing.assert_close(
        (parts.ad_term + parts.cb_term)[has_positive], parts.grad[has_positive], atol=1e-15, rtol=0
    )
    assert bool(torch.isnan(parts.grad[~has_positive]).all())
    torch.testing.assert_close(parts.ap, ap.detach(), equal_nan=True, atol=1e-12, rtol=0)


@pytest.mark.slow
@given(seed=st.integers(0, 2**31 - 1))
def test_terms_match_seed_definitions_by_loops(seed):
    query, vectors, positives = problem(seed, 3, 8, 4, 0.4)
    tau = 0.1
    parts = smooth_ap_decomposition(query, vectors, positives, tau)
    for row in range(len(parts.query_index)):
        q, i = int(parts.query_index[row]), int(parts.positive_index[row])
        expected = decomposition_one_pair(
            query[q].tolist(), vectors.tolist(), positives[q].tolist(), i, tau
        )
        assert parts.A[row].item() == pytest.approx(expected["A"], abs=1e-12)
        assert parts.C[row].item() == pytest.approx(expected["C"], abs=1e-12)
        assert parts.rank_all[row].item() == pytest.approx(expected["R"], abs=1e-12)
        assert parts.B[row].tolist() == pytest.approx(expected["B"], abs=1e-12)
        assert parts.D[row].tolist() == pytest.approx(expected["D"], abs=1e-12)


@pytest.mark.slow
@given(seed=st.integers(0, 2**31 - 1))
def test_candidate_mask_matches_smooth_ap_mask(seed):
    query, vectors, positives = problem(seed, 4, 9, 3, 0.4)
    keep = torch.rand(4, 9, generator=torch.Generator().manual_seed(seed)) < 0.7
    parts = smooth_ap_decomposition(query, vectors, positives, 0.05, candidate_mask=keep)
    leaf = query.clone().requires_grad_(True)
    ap = smooth_ap(leaf @ vectors.T, positives, 0.05, candidate_mask=keep)
    (expected,) = torch.autograd.grad(ap.nan_to_num(0.0).sum(), leaf)
    defined = ~torch.isnan(ap.detach())
    torch.testing.assert_close(parts.grad[defined], expected[defined], atol=1e-10, rtol=0)
    torch.testing.assert_close(parts.ap, ap.detach(), equal_nan=True, atol=1e-12, rtol=0)


def test_single_query_and_shared_positive_vector():
    query, vectors, _ = problem(4, 1, 6, 3, 0.5)
    positives = torch.tensor([True, False, True, False, False, True])
    single = smooth_ap_decomposition(query[0], vectors, positives, 0.05)
    batch = smooth_ap_decomposition(query, vectors, positives.unsqueeze(0), 0.05)
    assert single.grad.shape == (3,) and single.ap.dim() == 0
    torch.testing.assert_close(single.grad, batch.grad[0])
    # The rows are (query, positive) pairs in row-major order of the mask.
    assert single.positive_index.tolist() == [0, 2, 5]


def test_all_positive_query_has_zero_gradient():
    query, vectors, _ = problem(5, 1, 4, 3, 1.0)
    parts = smooth_ap_decomposition(query[0], vectors, torch.ones(4, dtype=torch.bool), 0.05)
    assert parts.ap.item() == pytest.approx(1.0, abs=1e-15)
    assert torch.equal(parts.grad, torch.zeros(3, dtype=torch.float64))
    assert math.isclose(parts.C.abs().max().item(), 0.0)


Q, V, P = torch.zeros(2, 3), torch.zeros(4, 3), torch.ones(2, 4, dtype=torch.bool)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"queries": torch.zeros(2, 3, 1)}, "queries must be 1-D or 2-D"),
        ({"queries": torch.zeros(2, 3, dtype=torch.int64)}, "queries must have a floating dtype"),
        ({"queries": torch.full((2, 3), float("nan"))}, "queries must be finite"),
        ({"candidates": torch.zeros(4)}, "candidates must be 2-D"),
        (
            {"candidates": torch.zeros(4, 5)},
            "queries and candidates must share their embedding size; got 3 and 5",
        ),
        (
            {"candidates": torch.zeros(4, 3, dtype=torch.float64)},
            "queries and candidates must share a dtype",
        ),
        ({"positives": torch.ones(2, 4)}, "positives must be a bool tensor"),
        ({"positives": torch.ones(3, 4, dtype=torch.bool)}, r"positives must have shape \(2, 4\)"),
        ({"positives": torch.ones(5, dtype=torch.bool)}, r"positives must have shape \(2, 4\)"),
        ({"tau": 0}, r"tau must be a finite number in \[1e-30, inf\)"),
        ({"candidate_mask": torch.ones(2, 4)}, "candidate_mask must be a bool tensor"),
        ({"candidate_mask": torch.ones(2, 5, dtype=torch.bool)}, "candidate_mask must have shape"),
    ],
)
def test_error_table(kwargs, message):
    arguments = {"queries": Q, "candidates": V, "positives": P, **kwargs}
    with pytest.raises(GradlabError, match="^" + message):  # each message starts with its name
        smooth_ap_decomposition(**arguments)


@pytest.mark.parametrize("tau", [1e-31, 1e-40])
def test_a_tau_below_smooth_ap_s_bound_is_refused_not_turned_into_nan(tau):
    # 1/tau overflows float32 below about 3e-39: B, D and the gradient were NaN without a word;
    # smooth_ap and SmoothAPLoss refuse tau < 1e-30, and so does the decomposition now
    with pytest.raises(GradlabError, match=r"^tau must be a finite number in \[1e-30, inf\)"):
        smooth_ap_decomposition(Q.float(), V.float(), P, tau)
    with pytest.raises(GradlabError, match=r"^tau must be a finite number in \[1e-30, inf\)"):
        smooth_ap(Q.float() @ V.float().T, P, tau)


def test_the_smallest_tau_gives_finite_terms_in_float32():
    query, vectors, positives = problem(3, 3, 8, 4, 0.5)
    positives[:, 0] = True
    parts = smooth_ap_decomposition(query.float(), vectors.float(), positives, 1e-30)
    for name in ("A", "C", "B", "D", "grad"):
        assert torch.isfinite(getattr(parts, name)).all(), name


def test_ap_and_gradient_against_the_loops_with_a_shared_candidate_mask():
    # A [C] candidate mask applies to every query, like its [Q, C] expansion; AP from loops
    # over the kept candidates, the gradient from the seeds' terms summed by loops.
    query, vectors, positives = problem(6, 3, 7, 4, 0.5)
    keep = torch.tensor([True, True, False, True, True, False, True])
    shared = smooth_ap_decomposition(query, vectors, positives, 0.1, candidate_mask=keep)
    expanded = smooth_ap_decomposition(
        query, vectors, positives, 0.1, candidate_mask=keep.expand(3, -1)
    )
    torch.testing.assert_close(shared.grad, expanded.grad, equal_nan=True, rtol=0, atol=0)
    kept = keep.nonzero().flatten().tolist()
    for q in range(3):
        flags = [bool(positives[q, c]) for c in kept]
        scores = [float(query[q] @ vectors[c]) for c in kept]
        expected_ap = smooth_ap_one_query(scores, flags, 0.1)
        if math.isnan(expected_ap):
            assert math.isnan(shared.ap[q].item()) and bool(torch.isnan(shared.grad[q]).all())
            continue
        assert shared.ap[q].item() == pytest.approx(expected_ap, abs=1e-12)
        gradient = [0.0] * 4
        members = [i for i, flag in enumerate(flags) if flag]
        for i in members:
            terms = decomposition_one_pair(query[q].tolist(), vectors[kept].tolist(), flags, i, 0.1)
            a, c, r = terms["A"], terms["C"], terms["R"]
            for k in range(4):
                gradient[k] += (a * terms["D"][k] - c * terms["B"][k]) / r**2 / len(members)
        assert shared.grad[q].tolist() == pytest.approx(gradient, abs=1e-12)


def test_result_stays_on_the_input_device_whatever_the_default_device():
    query, vectors, positives = problem(7, 2, 6, 3, 0.5)
    assert_unchanged_under_another_default_device(
        lambda: smooth_ap_decomposition(query, vectors, positives, 0.05), query.device
    )


def test_error_messages_name_both_arguments_and_what_they_got():
    with pytest.raises(
        GradlabError,
        match=r"^queries and candidates must share a dtype; got torch.float32 and torch.float64$",
    ):
        smooth_ap_decomposition(Q, V.double(), P)
    with pytest.raises(
        GradlabError, match=r"^queries and candidates must share their embedding size; got 3 and 5$"
    ):
        smooth_ap_decomposition(Q, torch.zeros(4, 5), P)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"candidates": torch.zeros(4, 3, dtype=torch.int64)},
         "candidates must have a floating dtype"),
        ({"candidates": torch.full((4, 3), float("inf"))}, "candidates must be finite"),
        (
            {"positives": torch.ones(2, 5, dtype=torch.bool)},
            r"positives must have shape \(2, 4\) \(\[C\] or \[Q, C\]\); got \(2, 5\)$",
        ),
        (
            {"candidate_mask": torch.ones(2, 5, dtype=torch.bool)},
            r"candidate_mask must have shape \(2, 4\) \(\[C\] or \[Q, C\]\); got \(2, 5\)$",
        ),
        # A mask on another device ("meta" here: query and candidates on meta cannot be
        # checked for finiteness, which comes first).
        ({"positives": P.to("meta")}, "tensors must be on one device; got queries on cpu, "
                                      "candidates on cpu, positives on meta$"),
        ({"candidate_mask": torch.ones(2, 4, dtype=torch.bool, device="meta")},
         "tensors must be on one device; got queries on cpu, candidate_mask on meta$"),
        # a [C] mask of the wrong length: named before it is expanded to [Q, C]
        ({"candidate_mask": torch.ones(5, dtype=torch.bool)},
         r"candidate_mask must have shape \(4,\) \(\[C\] or \[Q, C\]\); got \(5,\)$"),
    ],
)  # fmt: skip
def test_messages_name_the_argument(kwargs, message):
    arguments = {"queries": Q, "candidates": V, "positives": P, **kwargs}
    with pytest.raises(GradlabError, match=rf"^{message}"):
        smooth_ap_decomposition(**arguments)


def test_terms_that_overflow_float32_are_refused_and_float64_computes_them():
    # a tie of two candidates 2e10 apart at tau 1e-30: D = sigma'(0) / tau x (v_i - v_j)
    # = 0.25e30 x 2e10 = 5e39, past float32; the terms came back inf and NaN in silence
    tau = 1e-30
    queries = torch.tensor([[1.0, 0.0]])
    candidates = torch.tensor([[1.0, 1e10], [1.0, -1e10], [0.5, 0.0]])
    positives = torch.tensor([[True, False, False]])
    wide = smooth_ap_decomposition(queries.double(), candidates.double(), positives, tau)
    assert float(wide.D[0, 1]) == pytest.approx(0.25 / tau * 2e10, rel=1e-12)
    with pytest.raises(GradlabError) as error:
        smooth_ap_decomposition(queries, candidates, positives, tau)
    assert str(error.value) == (
        "smooth_ap_decomposition overflows torch.float32 on these inputs (its scores q . v_j "
        f"reach 1 at tau {tau:g}): its terms are not finite; scale the embeddings down "
        "(normalise them for cosine scores) or pass float64 tensors"
    )
    with pytest.raises(GradlabError, match=r"\(its scores q \. v_j themselves are not finite\)"):
        smooth_ap_decomposition(queries * 1e30, candidates * 1e20, positives, 0.1)
