"""gradlab.functional.diagnostics against the loops of tests/reference (seed 000, Eq. 1, 8-14).

References are plain floats: smooth AP and ``dAP/ds`` by the quotient rule over loops, the seeds'
``A``, ``C``, ``B``, ``D`` per positive by loops, norms and cosines by ``math.fsum``. Everything
runs in float64; sums of a few dozen O(1) terms, so ``1e-12`` absolute is ~``1e3`` ulps of slack.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import pytest
import torch

from gradlab.errors import GradlabError
from gradlab.functional.diagnostics import (
    decomposition_norms,
    in_batch_decomposition,
    smooth_ap_terms,
    term_norms,
)
from gradlab.functional.smooth_ap import group_by_positive_count
from tests.helpers.default_device import assert_unchanged_under_another_default_device
from tests.reference.smooth_ap_loops import (
    decomposition_one_pair,
    smooth_ap_one_query,
    smooth_ap_one_query_gradient,
)

TOL = 1e-12
EPS64 = torch.finfo(torch.float64).eps


def _unit(vector):
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [x / norm for x in vector]


def _terms_by_loops(query, vectors, positives, tau):
    """``(ap, ad_term, cb_term, dAP/ds)`` of one query (NaNs and zeros without a positive)."""
    dims = len(query)
    scores = [math.fsum(a * b for a, b in zip(query, v, strict=True)) for v in vectors]
    positive_indices = [i for i, flag in enumerate(positives) if flag]
    if not positive_indices:
        return math.nan, [math.nan] * dims, [math.nan] * dims, [0.0] * len(vectors)
    ad, cb = [0.0] * dims, [0.0] * dims
    for i in positive_indices:
        pair = decomposition_one_pair(query, vectors, positives, i, tau)
        squared = pair["R"] ** 2
        for k in range(dims):
            ad[k] += pair["A"] * pair["D"][k] / squared / len(positive_indices)
            cb[k] -= pair["C"] * pair["B"][k] / squared / len(positive_indices)
    ap = smooth_ap_one_query(scores, positives, tau)
    return ap, ad, cb, smooth_ap_one_query_gradient(scores, positives, tau)


def _batch(seed, size=10, dims=4, classes=4):
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(size, dims, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, classes, (size,), generator=generator)
    return embeddings, labels


def _assert_row(got, expected):
    if all(math.isnan(x) for x in expected):
        assert torch.isnan(got).all()
    else:
        assert got.tolist() == pytest.approx(expected, abs=TOL)


# --- in_batch_decomposition ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("include_query", [False, True])
def test_in_batch_decomposition_matches_the_loops(seed, include_query):
    embeddings, labels = _batch(seed)
    labels[-1] = 99  # a query without positives (unless it is its own)
    tau = 0.2
    parts = in_batch_decomposition(embeddings, labels, tau, include_query)
    unit = [_unit(row) for row in embeddings.tolist()]
    for q, label in enumerate(labels.tolist()):
        kept = [c for c in range(len(unit)) if include_query or c != q]
        vectors = [unit[c] for c in kept]
        positives = [labels[c].item() == label for c in kept]
        ap, ad, cb, score_grad = _terms_by_loops(unit[q], vectors, positives, tau)
        if math.isnan(ap):
            assert math.isnan(parts.ap[q].item())
            assert torch.isnan(parts.grad[q]).all()
            continue
        assert parts.ap[q].item() == pytest.approx(ap, abs=TOL)
        _assert_row(parts.ad_term[q], ad)
        _assert_row(parts.cb_term[q], cb)
        # dAP/dq with the candidates fixed: sum_j dAP/ds_qj v_j (another path than A, B, C, D)
        grad = [math.fsum(g * v[k] for g, v in zip(score_grad, vectors, strict=True))
                for k in range(len(ad))]  # fmt: skip
        _assert_row(parts.grad[q], grad)
    if not include_query:
        assert math.isnan(parts.ap[-1].item())


def test_in_batch_decomposition_defaults_to_tau_one_hundredth_without_the_query():
    embeddings, labels = _batch(11, size=6, classes=2)
    embeddings = embeddings * 0.01 + torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    default = in_batch_decomposition(embeddings, labels)
    unit = [_unit(row) for row in embeddings.tolist()]
    for q in range(len(unit)):
        kept = [c for c in range(len(unit)) if c != q]
        positives = [labels[c] == labels[q] for c in kept]
        scores = [math.fsum(a * b for a, b in zip(unit[q], unit[c], strict=True)) for c in kept]
        expected = smooth_ap_one_query(scores, positives, 0.01)
        assert default.ap[q].item() == pytest.approx(expected, abs=TOL)
    # the case can tell the default apart: tau = 0.1 gives other values
    assert not torch.allclose(default.ap, in_batch_decomposition(embeddings, labels, 0.1).ap)


@pytest.mark.parametrize(
    ("argument", "embeddings", "labels"),
    [
        ("embeddings", torch.zeros(4, 3, dtype=torch.long), torch.zeros(4, dtype=torch.long)),
        ("embeddings", torch.zeros(4), torch.zeros(4, dtype=torch.long)),
        ("embeddings", torch.full((4, 3), math.nan), torch.zeros(4, dtype=torch.long)),
        ("labels", torch.ones(4, 3), torch.zeros(4)),
        ("labels", torch.ones(4, 3), torch.zeros(4, 1, dtype=torch.long)),
        ("labels", torch.ones(4, 3), torch.zeros(3, dtype=torch.long)),
    ],
)
def test_in_batch_decomposition_refuses_bad_input_by_name(argument, embeddings, labels):
    with pytest.raises(GradlabError, match=f"^{argument} "):
        in_batch_decomposition(embeddings, labels)


# --- decomposition_norms ------------------------------------------------------------------------


def _norms_by_loops(ad, cb, grad):
    ad_norm = math.sqrt(math.fsum(x * x for x in ad))
    cb_norm = math.sqrt(math.fsum(x * x for x in cb))
    both = ad_norm * cb_norm
    return {
        "ad_norm": ad_norm,
        "cb_norm": cb_norm,
        "grad_norm": math.sqrt(math.fsum(x * x for x in grad)),
        "ad_share": ad_norm / (ad_norm + cb_norm) if ad_norm + cb_norm > 0 else math.nan,
        "ratio": ad_norm / cb_norm if cb_norm > 0 else math.nan,
        "cosine": math.fsum(a * b for a, b in zip(ad, cb, strict=True)) / both
        if both > 0
        else math.nan,
    }


def _check_norms(norms, rows):
    assert sorted(norms) == ["ad_norm", "ad_share", "cb_norm", "cosine", "grad_norm", "ratio"]
    for name, values in norms.items():
        assert values.shape == (len(rows),), name
        for got, row in zip(values.tolist(), rows, strict=True):
            expected = _norms_by_loops(*row)[name]
            if math.isnan(expected):
                assert math.isnan(got), name
            else:
                assert got == pytest.approx(expected, rel=1e-14, abs=0.0), name


def test_decomposition_norms_match_the_loops_and_drop_queries_without_gradient():
    embeddings, labels = _batch(3, size=12)
    labels[0] = 77  # no positive: NaN gradient, dropped
    parts = in_batch_decomposition(embeddings, labels, 0.3)
    norms = decomposition_norms(parts)
    rows = [(parts.ad_term[q].tolist(), parts.cb_term[q].tolist(), parts.grad[q].tolist())
            for q in range(12) if not math.isnan(parts.grad[q, 0].item())]  # fmt: skip
    listed = labels.tolist()
    with_positive = sum(1 for q, label in enumerate(listed) if listed.count(label) > 1)
    assert len(rows) == with_positive and 0 < with_positive < 12
    _check_norms(norms, rows)


def test_decomposition_norms_of_vanishing_terms_are_nan_where_documented():
    """Rows built by hand: both terms, only CB, only AD, neither, tiny and parallel terms."""
    ad = [[3.0, 4.0], [0.0, 0.0], [1.0, 0.0], [0.0, 0.0], [1e-3, 0.0], [0.5, 0.5]]
    cb = [[0.0, -2.0], [0.6, 0.8], [0.0, 0.0], [0.0, 0.0], [2e-3, 0.0], [-1.0, -1.0]]
    ad_t, cb_t = torch.tensor(ad, dtype=torch.float64), torch.tensor(cb, dtype=torch.float64)
    grad_t = ad_t + cb_t
    grad_t[3] = math.nan  # a query without positives: dropped
    parts = in_batch_decomposition(*_batch(0, size=6))._replace(
        ad_term=ad_t, cb_term=cb_t, grad=grad_t
    )
    keep = [0, 1, 2, 4, 5]
    rows = [(ad[q], cb[q], grad_t[q].tolist()) for q in keep]
    _check_norms(decomposition_norms(parts), rows)
    single = parts._replace(ad_term=ad_t[4], cb_term=cb_t[4], grad=grad_t[4])  # a [d] query
    _check_norms(decomposition_norms(single), [rows[3]])


# --- smooth_ap_terms ----------------------------------------------------------------------------


def _cross_problem(seed, queries=7, candidates=9, dims=3):
    generator = torch.Generator().manual_seed(seed)
    query = torch.nn.functional.normalize(
        torch.randn(queries, dims, generator=generator, dtype=torch.float64), dim=1
    )
    vectors = torch.nn.functional.normalize(
        torch.randn(candidates, dims, generator=generator, dtype=torch.float64), dim=1
    )
    positives = torch.rand(queries, candidates, generator=generator) < 0.35
    positives[0] = False  # no positive
    positives[1] = True  # no negative
    positives[2, :] = False
    positives[2, 4] = True  # exactly one positive
    keep = torch.rand(queries, candidates, generator=generator) < 0.8
    keep[2, 4] = True
    return query, vectors, positives, keep


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("chunk", [1, 40, 1 << 20])
def test_smooth_ap_terms_match_the_loops(seed, masked, chunk):
    query, vectors, positives, keep = _cross_problem(seed)
    candidates = keep if masked else None
    relevant = positives & keep if masked else positives
    tau = 0.15
    terms = smooth_ap_terms(query @ vectors.T, relevant, tau, vectors, candidate_mask=candidates,
                            max_chunk_elements=chunk)  # fmt: skip
    _assert_terms_of_the_loops(terms, query, vectors, relevant, keep if masked else None, tau)


def _assert_terms_of_the_loops(terms, query, vectors, positives, keep, tau):
    """Each query's AP, AD and CB terms and dAP/ds against the loops over its kept columns
    (``keep`` None: every column), positives flagged by ``positives``."""
    for q in range(query.shape[0]):
        kept = [c for c in range(vectors.shape[0]) if keep is None or keep[q, c]]
        flags = [bool(positives[q, c]) for c in kept]
        ap, ad, cb, score_grad = _terms_by_loops(query[q].tolist(),
                                                 [vectors[c].tolist() for c in kept], flags, tau)
        if math.isnan(ap):
            assert math.isnan(terms.ap[q].item())
        else:
            assert terms.ap[q].item() == pytest.approx(ap, abs=TOL)
        _assert_row(terms.ad_term[q], ad)
        _assert_row(terms.cb_term[q], cb)
        full = [0.0] * vectors.shape[0]
        for c, value in zip(kept, score_grad, strict=True):
            full[c] = value
        assert terms.score_grad[q].tolist() == pytest.approx(full, abs=TOL)


def test_smooth_ap_terms_read_a_recorded_split_with_the_forwards_ranks():
    """``column_weights_split`` (with ``forward``): no sigmoid block, the terms are the split's
    products with the vectors and dAP/ds its difference, rows of queries without an AP NaN."""
    query, vectors, positives, _ = _cross_problem(8)
    scores = query @ vectors.T
    own = smooth_ap_terms(scores, positives, 0.15, vectors)
    split = torch.randn(2, *scores.shape, dtype=torch.float64,
                        generator=torch.Generator().manual_seed(1))  # fmt: skip
    expected_ad, expected_cb = split[0] @ vectors, -(split[1] @ vectors)
    expected_grad = split[0] - split[1]
    terms = smooth_ap_terms(scores, positives, 0.15, vectors, forward=own.forward,
                            column_weights_split=split.clone())  # fmt: skip
    undefined = torch.isnan(own.ap)
    assert bool(undefined.any()) and not bool(undefined.all())  # both kinds of rows
    torch.testing.assert_close(terms.ap, own.ap, equal_nan=True, rtol=0.0, atol=0.0)
    torch.testing.assert_close(terms.score_grad, expected_grad, rtol=0.0, atol=0.0)
    torch.testing.assert_close(terms.ad_term[~undefined], expected_ad[~undefined])
    torch.testing.assert_close(terms.cb_term[~undefined], expected_cb[~undefined])
    assert bool(terms.ad_term[undefined].isnan().all() & terms.cb_term[undefined].isnan().all())


def test_smooth_ap_terms_a_positive_outside_the_mask_is_no_candidate():
    """A positive flagged where ``candidate_mask`` is False is neither positive nor negative, as
    in smooth_ap: the terms are the loops' over the kept columns (they were those of a ranking
    that counted it as a positive)."""
    query, vectors, positives, keep = _cross_problem(6)
    assert bool((positives & ~keep).any())  # the problem flags some
    terms = smooth_ap_terms(query @ vectors.T, positives, 0.15, vectors, candidate_mask=keep)
    _assert_terms_of_the_loops(terms, query, vectors, positives, keep, 0.15)


def _terms_arguments():
    query, vectors, positives, keep = _cross_problem(7)
    return {"scores": query @ vectors.T, "positives": positives, "tau": 0.15, "vectors": vectors,
            "candidate_mask": keep}


@pytest.mark.parametrize("change, message", [
    ({"tau": -1.0}, "tau must be a finite number in [1e-30, inf) (1/tau must stay finite in "
                    "float32); got -1.0"),
    ({"tau": 0.0}, "tau must be a finite number in [1e-30, inf) (1/tau must stay finite in "
                   "float32); got 0.0"),
    ({"positives": "double"}, "positives must be a bool tensor; got torch.float64"
                              " (a 0/1 mask: pass positives.bool())"),
    ({"vectors": "first 4"}, "vectors must have shape (9, 3) (one vector per candidate, a column "
                             "of scores); got (4, 3)"),
    ({"vectors": "float32"}, "vectors must have the dtype of scores (torch.float64); got "
                             "torch.float32"),
    ({"scores": "nan"}, "scores must be finite; got NaN in row 3 (1 row of 7)"),
    ({"vectors": "inf"}, "vectors must be finite; got inf in row 1 (1 row of 9)"),
    ({"scores": "row"}, "scores must be 2-D; got shape (9,)"),
    ({"scores": "half"}, "scores must be float32 or float64 (cast float16 and bfloat16 to "
                         "float32 first); got torch.float16"),
    ({"max_chunk_elements": 0}, "max_chunk_elements must be a positive integer; got 0"),
    ({"candidate_mask": "narrow"}, "candidate_mask must have shape (7, 9) (one flag per score); "
                                   "got (7, 8)"),
    ({"column_weights_split": "zeros"}, "column_weights_split is read with the ranks of forward: "
                                        "pass forward too, or neither"),
    ({"buffer": 3}, "buffer must be None or a callable(name, shape, dtype) -> tensor; got int 3"),
    ({"vectors": "row"}, "vectors must be 2-D; got shape (3,)"),
    ({"vectors": "int"}, "vectors must have a floating dtype; got torch.int64"
                         "; pass vectors.float()"),
    ({"vectors": "list"}, "vectors must be a torch.Tensor; got list"
                          "; pass torch.as_tensor(vectors)"),
    ({"vectors": "meta"}, "tensors must be on one device; got scores on cpu, vectors on meta"),
])  # fmt: skip
def test_smooth_ap_terms_refuses_bad_arguments(change, message):
    arguments = _terms_arguments()
    for name, how in change.items():
        value = arguments.get(name)
        if how == "double":
            arguments[name] = value.double()
        elif how == "first 4":
            arguments[name] = value[:4]
        elif how == "float32":
            arguments[name] = value.float()
        elif how == "nan":
            arguments[name] = value.clone()
            arguments[name][3, 2] = math.nan
        elif how == "inf":
            arguments[name] = value.clone()
            arguments[name][1, 0] = math.inf
        elif how == "row":
            arguments[name] = value[0]
        elif how == "half":
            arguments[name] = value.half()
        elif how == "narrow":
            arguments[name] = value[:, :8]
        elif how == "zeros":
            arguments[name] = torch.zeros(2, 7, 9, dtype=torch.float64)
        elif how == "int":
            arguments[name] = value.long()
        elif how == "list":
            arguments[name] = value.tolist()
        elif how == "meta":
            arguments[name] = value.to("meta")
        else:
            arguments[name] = how
    with pytest.raises(GradlabError) as caught:
        smooth_ap_terms(**arguments)
    assert str(caught.value) == message


@pytest.mark.parametrize("masked", [False, True])
def test_smooth_ap_terms_in_given_buffers_match_the_loops(masked):
    """Work buffers handed in hold leftovers (NaN here): every entry the terms read is written
    first, also where some query has no positive (several groups: rows left to zero)."""
    query, vectors, positives, keep = _cross_problem(4)
    candidates = keep if masked else None
    relevant = positives & keep if masked else positives
    given = {}

    def buffer(name, shape, dtype):
        given[name] = torch.full(shape, math.nan, dtype=dtype)
        return given[name]

    terms = smooth_ap_terms(query @ vectors.T, relevant, 0.15, vectors, candidate_mask=candidates,
                            max_chunk_elements=40, buffer=buffer)  # fmt: skip
    assert set(given) == {"terms split", "terms block"}
    assert terms.score_grad.data_ptr() == given["terms split"].data_ptr()
    assert given["terms split"].shape == (2, 7, 9)  # the docstring's [2, Q, C] split
    assert not bool(given["terms block"].isnan().all())  # the sigmoid block was written there
    # the budget bounds the block: one query's rows at a time (2 positives x 9 candidates)
    # against every query of a group of 7 at once
    two = torch.zeros_like(positives)
    two[:, :2] = True
    smooth_ap_terms(query @ vectors.T, two, 0.15, vectors, max_chunk_elements=1, buffer=buffer)
    assert given["terms block"].numel() == 2 * 9
    smooth_ap_terms(query @ vectors.T, two, 0.15, vectors, buffer=buffer)
    assert given["terms block"].numel() == 7 * 2 * 9
    for q in range(query.shape[0]):
        kept = [c for c in range(vectors.shape[0]) if not masked or keep[q, c]]
        flags = [bool(relevant[q, c]) for c in kept]
        _, ad, _, score_grad = _terms_by_loops(query[q].tolist(),
                                               [vectors[c].tolist() for c in kept], flags, 0.15)
        _assert_row(terms.ad_term[q], ad)
        full = [0.0] * vectors.shape[0]
        for c, value in zip(kept, score_grad, strict=True):
            full[c] = value
        assert terms.score_grad[q].tolist() == pytest.approx(full, abs=TOL)


def test_smooth_ap_terms_reuses_the_ranks_of_a_forward():
    """With ``forward`` given, AP and the coefficients come from its ranks (nothing recomputed):
    ranks of another temperature give that temperature's AP, while the slopes stay at ``tau``."""
    query, vectors, positives, _ = _cross_problem(5)
    scores = query @ vectors.T
    own = smooth_ap_terms(scores, positives, 0.15, vectors)
    again = smooth_ap_terms(scores, positives, 0.15, vectors, forward=own.forward)
    for field in ("ap", "score_grad", "ad_term", "cb_term"):
        torch.testing.assert_close(getattr(again, field), getattr(own, field), equal_nan=True,
                                   rtol=0.0, atol=0.0)  # fmt: skip
    other = smooth_ap_terms(scores, positives, 0.6, vectors)
    mixed = smooth_ap_terms(scores, positives, 0.15, vectors, forward=other.forward)
    torch.testing.assert_close(mixed.ap, other.ap, equal_nan=True, rtol=0.0, atol=0.0)
    assert not torch.allclose(mixed.score_grad, own.score_grad)
    # the forward's ranks are the seeds' A and C per positive, grouped by positive count
    groups, ranks = own.forward
    assert [g.num_positives for g in groups] == [
        g.num_positives for g in group_by_positive_count(positives)
    ]
    for group, (rank_a, rank_c) in zip(groups, ranks, strict=True):
        for row, q in enumerate(group.queries.tolist()):
            for col, i in enumerate(group.positive_columns[row].tolist()):
                pair = decomposition_one_pair(query[q].tolist(), vectors.tolist(),
                                              positives[q].tolist(), i, 0.15)  # fmt: skip
                assert rank_a[row, col].item() == pytest.approx(pair["A"], abs=TOL)
                assert rank_c[row, col].item() == pytest.approx(pair["C"], abs=TOL)


def _exact_norms(ad, cb):
    """Norms by ``math.hypot`` (scaled, no underflow) and the cosine from exact rationals."""
    ad_norm, cb_norm = math.hypot(*ad), math.hypot(*cb)
    exact_ad, exact_cb = [Fraction(x) for x in ad], [Fraction(x) for x in cb]
    dot = sum(a * b for a, b in zip(exact_ad, exact_cb, strict=True))
    squared = dot * dot / (sum(a * a for a in exact_ad) * sum(b * b for b in exact_cb))
    return {
        "ad_norm": ad_norm,
        "cb_norm": cb_norm,
        "ad_share": ad_norm / (ad_norm + cb_norm),
        "ratio": ad_norm / cb_norm,
        "cosine": math.sqrt(float(squared)) * (1 if dot >= 0 else -1),
    }


@pytest.mark.parametrize(
    ("dtype", "scale"),
    [
        (torch.float64, 1e-170),
        (torch.float64, 1e160),
        (torch.float32, 1e-22),
        (torch.float32, 1e19),
    ],
)
def test_decomposition_norms_of_tiny_or_huge_terms_do_not_underflow_or_overflow(dtype, scale):
    """Terms whose squares leave the dtype's range (sigmoid tails at a small tau give AD and
    CB terms of exp(-|D|/tau)): their norms, share, ratio and cosine are still the true ones,
    not 0 or NaN ("vanishing") or inf. Tolerance: a few ulps of the dtype."""
    ad = [[1.0, 0.0, -2.0], [3.0, 4.0, 0.0]]
    cb = [[0.5, 0.5, 0.5], [-6.0, -8.0, 1e-3]]
    ad_t, cb_t = torch.tensor(ad, dtype=dtype) * scale, torch.tensor(cb, dtype=dtype) * scale
    parts = in_batch_decomposition(*_batch(0, size=2))._replace(
        ad_term=ad_t, cb_term=cb_t, grad=ad_t + cb_t
    )
    norms = decomposition_norms(parts)
    rel = 8 * torch.finfo(dtype).eps
    for q in range(2):
        expected = _exact_norms(ad_t[q].tolist(), cb_t[q].tolist())
        for name, value in expected.items():
            assert norms[name][q].item() == pytest.approx(value, rel=rel, abs=0.0), (name, q)


def test_in_batch_decomposition_says_how_many_labels_it_expects():
    with pytest.raises(
        GradlabError, match=r"^labels must have shape \(4,\) \(one label per embedding\)"
    ):
        in_batch_decomposition(torch.ones(4, 3), torch.zeros(3, dtype=torch.long))


def test_in_batch_decomposition_refuses_meta_labels_by_name():
    # labels on meta (embeddings on meta would stop at their finiteness check, a host read)
    labels = torch.zeros(4, dtype=torch.long, device="meta")
    with pytest.raises(GradlabError, match=r"^labels is a meta tensor \(a shape without values\)"):
        in_batch_decomposition(torch.ones(4, 3), labels)


@pytest.mark.parametrize("include_query", [False, True])
def test_in_batch_decomposition_stays_on_the_input_device(include_query):
    embeddings, labels = _batch(12, size=6)
    assert_unchanged_under_another_default_device(
        lambda: in_batch_decomposition(embeddings, labels, 0.1, include_query), embeddings.device
    )


@pytest.mark.parametrize("masked", [False, True])
def test_smooth_ap_terms_stays_on_the_input_device(masked):
    query, vectors, positives, keep = _cross_problem(13)
    candidates = keep if masked else None
    relevant = positives & keep if masked else positives

    def terms():
        result = smooth_ap_terms(
            query @ vectors.T, relevant, 0.2, vectors, candidate_mask=candidates
        )
        return result.ap, result.score_grad, result.ad_term, result.cb_term

    assert_unchanged_under_another_default_device(terms, query.device)


def test_term_norms_keep_every_row_and_default_grad_to_the_sum_of_the_terms():
    ad = [[3.0, 4.0, 0.0], [math.nan, 0.0, 1.0], [1e-160, -2e-160, 0.0], [0.0, 0.0, 0.0]]
    cb = [[0.0, -2.0, 1.0], [1.0, 1.0, 1.0], [3e-160, 0.0, 1e-160], [0.0, 0.0, 0.0]]
    ad_t, cb_t = torch.tensor(ad, dtype=torch.float64), torch.tensor(cb, dtype=torch.float64)
    norms = term_norms(ad_t, cb_t)
    for name, values in norms.items():  # a NaN in AD: NaN wherever AD enters
        assert values.shape == (4,), name
        assert math.isnan(values[1].item()) == (name != "cb_norm"), name
    assert norms["cb_norm"][1].item() == pytest.approx(math.sqrt(3.0))
    _check_norms({name: values[[0, 3]] for name, values in norms.items()},
                 [(ad[q], cb[q], [a + b for a, b in zip(ad[q], cb[q], strict=True)])
                  for q in (0, 3)])  # fmt: skip
    tiny = _exact_norms(ad[2], cb[2])
    for name, value in tiny.items():
        assert norms[name][2].item() == pytest.approx(value, rel=8 * EPS64, abs=0.0), name
    grad = [a + b for a, b in zip(ad[2], cb[2], strict=True)]
    assert norms["grad_norm"][2].item() == pytest.approx(math.hypot(*grad), rel=8 * EPS64)
    given = term_norms(ad_t, cb_t, grad=torch.ones(4, 3, dtype=torch.float64))
    assert given["grad_norm"].tolist() == pytest.approx([math.sqrt(3.0)] * 4)


def test_term_norms_read_nothing_back():
    """On meta tensors any host read (``.item()``, ``bool()``, masked indexing) would raise."""
    ad, cb = torch.randn(5, 3, device="meta"), torch.randn(5, 3, device="meta")
    norms = term_norms(ad, cb)
    assert all(values.shape == (5,) and values.is_meta for values in norms.values())


def test_term_norms_of_empty_and_infinite_terms():
    empty = term_norms(
        torch.zeros(2, 0, dtype=torch.float64), torch.zeros(2, 0, dtype=torch.float64)
    )
    assert empty["ad_norm"].tolist() == [0.0, 0.0] and empty["grad_norm"].tolist() == [0.0, 0.0]
    for name in ("ad_share", "ratio", "cosine"):
        assert torch.isnan(empty[name]).all(), name
    ad = torch.tensor([[math.inf, 0.0], [2e-170, 0.0]], dtype=torch.float64)
    cb = torch.tensor([[1.0, 0.0], [0.0, 3e-170]], dtype=torch.float64)
    norms = term_norms(ad, cb)
    assert norms["ad_norm"].tolist() == [math.hypot(math.inf, 0.0), pytest.approx(2e-170)]
    assert norms["ratio"].tolist() == [math.inf, pytest.approx(2 / 3)]
    assert norms["cosine"][1].item() == 0.0  # orthogonal, not "vanishing"
    one = term_norms(torch.tensor([[-1e-170]], dtype=torch.float64),
                     torch.tensor([[2e-170]], dtype=torch.float64))  # fmt: skip
    assert (one["ad_norm"].item(), one["cb_norm"].item()) == (1e-170, 2e-170)
    assert (one["ratio"].item(), one["cosine"].item()) == (0.5, -1.0)


def test_term_norms_of_empty_terms_keep_the_dtype_and_device():
    for dtype in (torch.bfloat16, torch.float32, torch.float64):
        empty = term_norms(torch.zeros(3, 0, dtype=dtype), torch.zeros(3, 0, dtype=dtype))
        assert all(values.dtype == dtype for values in empty.values()), dtype
    ad, cb = torch.zeros(2, 0), torch.zeros(2, 0)
    assert_unchanged_under_another_default_device(
        lambda: tuple(term_norms(ad, cb).values()), ad.device
    )


def test_decomposition_norms_report_the_norm_of_the_decompositions_own_gradient():
    """``grad_norm`` is ``|parts.grad|``, the gradient the decomposition computed, whatever
    ``ad_term + cb_term`` gives (here a gradient replaced by hand)."""
    parts = in_batch_decomposition(*_batch(2, size=8, classes=2), 0.3)
    doubled = parts._replace(grad=parts.grad * 2.0 + 1.0)
    norms = decomposition_norms(doubled)
    rows = [row for row in doubled.grad.tolist() if not math.isnan(row[0])]
    assert norms["grad_norm"].tolist() == pytest.approx([math.hypot(*row) for row in rows])


@pytest.mark.parametrize("include_query", ["no", 1, None])
def test_include_query_that_is_not_a_bool_is_refused(include_query):
    # "no" is truthy: it switched the query in
    with pytest.raises(GradlabError, match=rf"^include_query must be True or False; got "
                                           rf"{re.escape(repr(include_query))}$"):  # fmt: skip
        in_batch_decomposition(torch.randn(4, 3), torch.tensor([0, 0, 1, 1]),
                               include_query=include_query)  # fmt: skip


@pytest.mark.parametrize("parts", [{"A": 1}, None, (1, 2, 3)])
def test_decomposition_norms_refuses_what_is_not_a_decomposition(parts):
    # an AttributeError on .ad_term before
    with pytest.raises(GradlabError) as raised:
        decomposition_norms(parts)
    assert str(raised.value) == (
        "parts must be a SmoothAPDecomposition (what in_batch_decomposition or "
        f"smooth_ap_decomposition returns); got {type(parts).__name__}")


def test_in_batch_decomposition_refuses_embeddings_without_a_dimension():
    # cosine scores of [B, 0] embeddings: none; the losses refuse them alike
    with pytest.raises(GradlabError, match=r"^embeddings must have at least one embedding "):
        in_batch_decomposition(torch.zeros(8, 0), torch.arange(8) % 4)


def test_the_cosine_of_the_two_summands_is_minus_1_when_they_cancel():
    # decomposition_cosine's meaning (docs/monitor.md): cosine of AD and -CB, the summands of
    # dAP/dq; equal AD and CB cancel to a zero gradient and read -1, not 1
    ad = torch.tensor([[3.0, 4.0]], dtype=torch.float64)
    cancelling = term_norms(ad, -ad)  # cb_term = -CB with CB = AD
    assert cancelling["cosine"].item() == pytest.approx(-1.0) and cancelling["grad_norm"] == 0
    adding = term_norms(ad, ad / 5)
    assert adding["cosine"].item() == pytest.approx(1.0) and adding["grad_norm"].item() == 6.0
