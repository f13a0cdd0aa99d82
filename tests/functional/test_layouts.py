"""Retrieval layouts: diagonal removal, the symmetric Gram product, input errors."""

import math

import pytest
import torch

import gradlab
from gradlab import GradlabError
from gradlab.functional import cross_modal_layout, drop_diagonal, in_batch_layout
from tests.helpers.default_device import assert_unchanged_under_another_default_device


@pytest.mark.parametrize("size", [1, 2, 5, 17])
def test_drop_diagonal_matches_boolean_mask(size):
    matrix = torch.randn(size, size)
    mask = ~torch.eye(size, dtype=torch.bool)
    assert torch.equal(drop_diagonal(matrix), matrix[mask].view(size, size - 1))


def test_in_batch_layout_excludes_or_includes_the_query():
    embeddings = torch.randn(5, 3, dtype=torch.float64)
    labels = torch.tensor([2, 0, 2, 1, 0])
    scores, positives, candidates = in_batch_layout(embeddings, labels)
    full_scores, full_positives, no_mask = in_batch_layout(embeddings, labels, include_query=True)
    assert scores.shape == (5, 5) and no_mask is None
    assert torch.equal(candidates, ~torch.eye(5, dtype=torch.bool))
    torch.testing.assert_close(full_scores.diagonal(), torch.ones(5, dtype=torch.float64))
    assert bool(full_positives.diagonal().all()) and not bool(positives.diagonal().any())
    assert positives.sum().item() == full_positives.sum().item() - 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((torch.zeros(4), torch.zeros(4, dtype=torch.long)), "embeddings must be 2-D"),
        ((torch.zeros(4, 2), torch.zeros(4)), "labels must have an integer dtype"),
        ((torch.zeros(4, 2), torch.zeros(3, dtype=torch.long)), r"labels must have shape \(4,\)"),
        ((torch.full((4, 2), float("inf")), torch.zeros(4, dtype=torch.long)), "finite"),
        (
            (torch.zeros(4, 0), torch.zeros(4, dtype=torch.long)),
            r"embeddings must have at least "
            r"one embedding dimension; got shape \(4, 0\)",
        ),
    ],
)
def test_in_batch_layout_errors(args, message):
    with pytest.raises(GradlabError, match=message):
        in_batch_layout(*args)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((torch.zeros(2, 3), torch.zeros(4, 2), torch.ones(2, 4, dtype=torch.bool)), "3 and 2"),
        ((torch.zeros(2, 3), torch.zeros(4, 3), torch.ones(4, 2, dtype=torch.bool)), r"\(2, 4\)"),
        ((torch.zeros(2, 3), torch.zeros(4, 3), torch.ones(2, 4)), "bool tensor"),
        ((torch.zeros(2, 3), [[0.0]], torch.ones(2, 1, dtype=torch.bool)), "torch.Tensor"),
        (
            (
                torch.zeros(2, 3),
                torch.zeros(4, 3, dtype=torch.float64),
                torch.ones(2, 4, dtype=torch.bool),
            ),
            "queries torch.float32 and candidates .*float64",
        ),
        (
            (torch.zeros(2, 0), torch.zeros(4, 0), torch.ones(2, 4, dtype=torch.bool)),
            "queries must have at least one embedding dimension",
        ),
    ],
)
def test_cross_modal_layout_errors(args, message):
    with pytest.raises(GradlabError, match=message):
        cross_modal_layout(*args)


@pytest.mark.parametrize(
    ("function", "args", "message"),
    [
        (drop_diagonal, (torch.zeros(3, 4),), r"matrix must be square; got shape \(3, 4\)"),
    ],
)
def test_matrix_helper_errors(function, args, message):
    with pytest.raises(GradlabError, match=message):
        function(*args)


def _loop_cosines(rows, columns):
    """Cosine of every row against every column vector, float64 sums by math.fsum."""

    def norm(vector):
        return math.sqrt(math.fsum(x * x for x in vector))

    return [
        [math.fsum(a * b for a, b in zip(u, v, strict=True)) / (norm(u) * norm(v))
         for v in columns]
        for u in rows
    ]  # fmt: skip


@pytest.mark.parametrize("include_query", [False, True])
def test_in_batch_layout_matches_loops(include_query):
    generator = torch.Generator().manual_seed(1)
    embeddings = torch.randn(6, 3, generator=generator, dtype=torch.float64) * 3.0
    labels = torch.tensor([4, 1, 4, 0, 1, 4])
    scores, positives, candidates = in_batch_layout(embeddings, labels, include_query)
    expected = _loop_cosines(embeddings.tolist(), embeddings.tolist())
    torch.testing.assert_close(scores, torch.tensor(expected, dtype=torch.float64))
    for q in range(6):
        for c in range(6):
            same = bool(labels[q] == labels[c])
            assert positives[q, c].item() == (same and (include_query or q != c))
            if candidates is not None:
                assert candidates[q, c].item() == (q != c)
    assert (candidates is None) == include_query


def test_cross_modal_layout_matches_loops():
    generator = torch.Generator().manual_seed(2)
    queries = torch.randn(3, 4, generator=generator, dtype=torch.float64)
    candidates = torch.randn(5, 4, generator=generator, dtype=torch.float64) * 0.1
    positives = torch.rand(3, 5, generator=generator) < 0.5
    got = cross_modal_layout(queries, candidates, positives)
    expected = _loop_cosines(queries.tolist(), candidates.tolist())
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float64))



HALF_TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 2e-2, torch.float32: 1e-6,
                  torch.float64: 1e-12}  # fmt: skip


@pytest.mark.parametrize("dtype", list(HALF_TOLERANCE))
def test_an_all_zero_row_has_cosine_zero_in_every_dtype(dtype):
    """A zero embedding (a dead unit's output) scores 0 against everything, as float32's
    ``F.normalize`` gives it; float16 gave NaN (its 1e-12 floor on the norm rounds to 0)."""
    generator = torch.Generator().manual_seed(3)
    embeddings = torch.randn(5, 4, generator=generator, dtype=torch.float64)
    embeddings[2] = 0.0
    candidates = torch.randn(3, 4, generator=generator, dtype=torch.float64)
    candidates[1] = 0.0
    rows, columns = embeddings.to(dtype), candidates.to(dtype)

    def expected(first, second):  # the loops, with a zero vector's cosine 0 by convention
        def norm(vector):
            return math.sqrt(math.fsum(x * x for x in vector))

        return torch.tensor([
            [math.fsum(a * b for a, b in zip(u, v, strict=True)) / (norm(u) * norm(v))
             if norm(u) and norm(v) else 0.0 for v in second]
            for u in first], dtype=torch.float64)  # fmt: skip

    tolerance = HALF_TOLERANCE[dtype]
    scores = in_batch_layout(rows, torch.arange(5)).scores
    torch.testing.assert_close(scores.double(), expected(rows.tolist(), rows.tolist()),
                               rtol=0, atol=tolerance)  # fmt: skip
    assert scores[2].tolist() == [0.0] * 5 and scores[:, 2].tolist() == [0.0] * 5
    crossed = cross_modal_layout(rows, columns, torch.ones(5, 3, dtype=torch.bool))
    torch.testing.assert_close(crossed.double(), expected(rows.tolist(), columns.tolist()),
                               rtol=0, atol=tolerance)  # fmt: skip
    assert crossed[:, 1].tolist() == [0.0] * 5

def test_validate_false_reads_no_value_and_lets_non_finite_embeddings_through():
    embeddings = torch.tensor([[1.0, 0.0], [math.nan, 1.0]])
    labels = torch.tensor([0, 0])
    scores, _, _ = in_batch_layout(embeddings, labels, validate=False)
    assert bool(torch.isnan(scores[1]).all())
    crossed = cross_modal_layout(embeddings, embeddings, torch.eye(2, dtype=torch.bool),
                                 validate=False)  # fmt: skip
    assert bool(torch.isnan(crossed[1]).all())


def test_layouts_stay_on_the_input_device_whatever_the_default_device():
    embeddings = torch.randn(4, 3, dtype=torch.float64)
    labels = torch.tensor([0, 1, 0, 1])
    positives = torch.eye(4, dtype=torch.bool)
    assert_unchanged_under_another_default_device(
        lambda: (in_batch_layout(embeddings, labels), drop_diagonal(embeddings @ embeddings.T),
                 cross_modal_layout(embeddings, embeddings, positives)),
        embeddings.device,
    )  # fmt: skip


LABELS4 = torch.zeros(4, dtype=torch.long)
Q23 = torch.zeros(2, 3)
C43 = torch.zeros(4, 3)
P24 = torch.ones(2, 4, dtype=torch.bool)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: in_batch_layout(torch.zeros(4), LABELS4),
         r"embeddings must be 2-D; got shape \(4,\)$"),
        (lambda: in_batch_layout(torch.zeros(4, 2, dtype=torch.long), LABELS4),
         r"embeddings must have a floating dtype; got torch.int64; pass embeddings\.float\(\)$"),
        (lambda: in_batch_layout(torch.full((4, 2), math.inf), LABELS4),
         "embeddings must be finite; got (NaN|inf) in .*$"),
        (lambda: in_batch_layout(torch.zeros(4, 0), LABELS4),
         r"embeddings must have at least one embedding dimension; got shape \(4, 0\)$"),
        (lambda: in_batch_layout(torch.zeros(4, 2), LABELS4.view(2, 2)),
         r"labels must be 1-D; got shape \(2, 2\)$"),
        (lambda: in_batch_layout(torch.zeros(4, 2), LABELS4.float()),
         r"labels must have an integer dtype; got torch.float32"
         r" \(whole-number ids: pass labels\.long\(\)\)$"),
        (lambda: in_batch_layout(torch.zeros(4, 2), LABELS4[:3]),
         r"labels must have shape \(4,\) \(one label per embedding\); got \(3,\)$"),
        (lambda: in_batch_layout(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long,
                                                                device="meta")),
         "tensors must be on one device; got embeddings on cpu, labels on meta$"),
        (lambda: cross_modal_layout(torch.zeros(2), C43, P24),
         r"queries must be 2-D; got shape \(2,\)$"),
        (lambda: cross_modal_layout(Q23.long(), C43, P24),
         r"queries must have a floating dtype; got torch.int64; pass queries\.float\(\)$"),
        (lambda: cross_modal_layout(torch.full((2, 3), math.nan), C43, P24),
         "queries must be finite; got (NaN|inf) in .*$"),
        (lambda: cross_modal_layout(Q23, torch.zeros(4), P24),
         r"candidates must be 2-D; got shape \(4,\)$"),
        (lambda: cross_modal_layout(Q23, C43.long(), P24),
         r"candidates must have a floating dtype; got torch.int64; pass candidates\.float\(\)$"),
        (lambda: cross_modal_layout(Q23, torch.full((4, 3), math.inf), P24),
         "candidates must be finite; got (NaN|inf) in .*$"),
        (lambda: cross_modal_layout(Q23, torch.zeros(4, 2), P24),
         "queries and candidates must share their embedding size; got 3 and 2$"),
        (lambda: cross_modal_layout(torch.zeros(2, 0), torch.zeros(4, 0), P24),
         r"queries must have at least one embedding dimension; got shape \(2, 0\)$"),
        (lambda: cross_modal_layout(Q23, C43.double(), P24),
         r"queries and candidates must share one floating dtype; got queries torch.float32 "
         r"and candidates torch.float64 \(cast one with .to\(dtype\)\)$"),
        (lambda: cross_modal_layout(Q23, C43, P24[0]), r"positives must be 2-D; got shape \(4,\)$"),
        (lambda: cross_modal_layout(Q23, C43, P24.float()),
         r"positives must be a bool tensor; got torch.float32"
         r" \(a 0/1 mask: pass positives\.bool\(\)\)$"),
        (lambda: cross_modal_layout(Q23, C43, P24.T),
         r"positives must have shape \(2, 4\) \(\[Q, C\]\); got \(4, 2\)$"),
        (lambda: cross_modal_layout(Q23, C43, torch.ones(2, 4, dtype=torch.bool, device="meta")),
         "tensors must be on one device; got queries on cpu, candidates on cpu, "
         "positives on meta$"),
        (lambda: drop_diagonal(torch.zeros(3)), r"matrix must be 2-D; got shape \(3,\)$"),
        (lambda: drop_diagonal(torch.zeros(3, 4)), r"matrix must be square; got shape \(3, 4\)$"),
    ],
)  # fmt: skip
def test_layout_messages_are_whole_and_name_the_argument(call, message):
    with pytest.raises(GradlabError, match="^" + message):
        call()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_unit_rows_scales_every_non_zero_row_as_f_normalize_and_a_zero_row_to_zero(dtype):
    # Rows of norms from 1e-4 to 1e2 (small ones included: a floor above them would shrink
    # them instead of scaling them to norm 1), and an all-zero row, which F.normalize's floor
    # of 1e-12 turns into 0 / 0 = NaN in float16.
    from gradlab.functional.layouts import unit_rows

    generator = torch.Generator().manual_seed(5)
    directions = torch.randn(7, 6, generator=generator, dtype=torch.float64)
    sizes = torch.tensor([1e-4, 1e-3, 1e-2, 0.1, 1.0, 1e2, 0.0], dtype=torch.float64)
    rows = (directions / directions.norm(dim=1, keepdim=True) * sizes.unsqueeze(1)).to(dtype)
    got = unit_rows(rows)
    expected = torch.nn.functional.normalize(rows[:-1], dim=1)
    assert got.dtype == dtype and torch.equal(got[:-1], expected)
    assert torch.equal(got[-1], torch.zeros(6, dtype=dtype))
    norms = got[:-1].double().norm(dim=1)
    assert bool(((norms - 1).abs() < 8 * torch.finfo(dtype).eps).all())  # unit rows indeed


@pytest.mark.parametrize(
    ("dtype", "size"),
    [(torch.float16, 1e4), (torch.float16, 2e3), (torch.float16, 1e-5), (torch.float16, 1.0),
     (torch.bfloat16, 1e37), (torch.bfloat16, 1e-20),
     (torch.float32, 1e20), (torch.float32, 1e37), (torch.float32, 1e-13), (torch.float32, 1e-30),
     (torch.float64, 1e200), (torch.float64, 1e-13), (torch.float64, 1e-200)],
)  # fmt: skip
def test_unit_rows_gives_unit_rows_whatever_their_size(dtype, size):
    # Finite rows whose norm overflows came out as zeros (a float16 batch with entries of 1e4,
    # a float32 one past 1e19, lost those items from the loss, silently), and rows whose norm
    # lies below F.normalize's floor of 1e-12 came out shorter than 1.
    from gradlab.functional.layouts import unit_rows

    generator = torch.Generator().manual_seed(6)
    directions = torch.rand(3, 64, generator=generator, dtype=torch.float64) + 0.5
    rows = (directions * size).to(dtype)
    assert torch.isfinite(rows).all() and (rows != 0).all()
    got = unit_rows(rows)
    expected = directions / directions.norm(dim=1, keepdim=True)  # the directions, in float64
    assert got.dtype == dtype
    assert torch.allclose(got.double(), expected, atol=4 * torch.finfo(dtype).eps, rtol=0)


@pytest.mark.parametrize("size", [1e20, 1e30, 1e-13, 1e-25])
@pytest.mark.parametrize("loss_class", ["SmoothAPLoss", "FastAPLoss", "FAPPYLoss",
                                        "BlackboxAPLoss"])  # fmt: skip
def test_embedding_losses_of_huge_or_tiny_float32_rows_are_those_of_their_directions(
    loss_class, size
):
    generator = torch.Generator().manual_seed(7)
    embeddings = torch.randn(8, 16, generator=generator)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    loss_fn = getattr(gradlab, loss_class)()
    plain = embeddings.clone().requires_grad_(True)
    scaled = (embeddings * size).requires_grad_(True)
    expected, got = loss_fn(plain, labels), loss_fn(scaled, labels)
    assert got.item() == pytest.approx(expected.item(), rel=1e-5, abs=1e-6)
    expected.backward()
    got.backward()
    # the unit vector is scale-free: d/d(size x) = (d/dx) / size
    assert torch.allclose(scaled.grad.double() * size, plain.grad.double(), rtol=1e-3, atol=1e-6)
    assert plain.grad.abs().max() > 1e-3


@pytest.mark.parametrize("loss_class", ["SmoothAPLoss", "FastAPLoss", "FAPPYLoss",
                                        "BlackboxAPLoss"])  # fmt: skip
def test_embedding_losses_of_rows_whose_entries_sum_past_float32_are_finite(loss_class):
    # FAPPY's loss started from embeddings.sum() * 0 and the AP losses' no-grad path added
    # one: a batch of finite entries summing past 3.4e38 gave inf * 0 = NaN, silently
    generator = torch.Generator().manual_seed(9)
    directions = torch.rand(8, 16, generator=generator) + 0.5  # all positive: the sum is huge
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    loss_fn = getattr(gradlab, loss_class)()
    huge = directions * 1e38
    assert torch.isfinite(huge).all() and not torch.isfinite(huge.sum())
    expected = loss_fn(directions, labels).item()
    assert loss_fn(huge, labels).item() == pytest.approx(expected, rel=1e-5, abs=1e-6)
    leaf = huge.clone().requires_grad_(True)
    with torch.no_grad():  # a loss that needs no graph, of embeddings that keep one
        assert loss_fn(leaf, labels).item() == pytest.approx(expected, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("loss_class", ["SmoothAPLoss", "FastAPLoss", "FAPPYLoss",
                                        "BlackboxAPLoss"])  # fmt: skip
def test_a_zero_row_gets_a_zero_gradient_and_the_others_theirs(loss_class, dtype):
    # F.normalize sends a zero row the incoming gradient over its floor: about 1e12 in
    # float32 (one SGD step threw the row away), inf in float16 (NaN in the optimizer)
    generator = torch.Generator().manual_seed(10)
    embeddings = torch.randn(8, 4, generator=generator, dtype=torch.float64)
    embeddings[0] = 0.0
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    loss_fn = getattr(gradlab, loss_class)()
    leaf = embeddings.to(dtype).clone().requires_grad_(True)
    loss_fn(leaf, labels).backward()
    assert leaf.grad[0].tolist() == [0.0] * 4
    # the other rows: the float64 gradient of the same (rounded) rows (the zero row scores 0
    # with each), to the dtype's precision relative to the largest entry
    wide = leaf.detach().double().requires_grad_(True)
    loss_fn(wide, labels).backward()
    largest = wide.grad[1:].abs().max()
    assert largest > 1e-2
    tolerance = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(dtype, 1e-5) * largest
    assert torch.allclose(leaf.grad[1:].double(), wide.grad[1:], atol=tolerance, rtol=0)


@pytest.mark.parametrize("size", [1e-7, 1e-5, 1e-3])
@pytest.mark.parametrize("loss_class", ["SmoothAPLoss", "FastAPLoss", "FAPPYLoss",
                                        "BlackboxAPLoss"])  # fmt: skip
def test_small_float16_rows_get_zero_gradients_on_a_degenerate_batch_and_theirs_else(
    loss_class, size
):
    # F.normalize's backward squares the norm: below 2^-6 that falls among float16's
    # subnormals, and a batch without a positive pair (a zero incoming gradient) got NaN
    generator = torch.Generator().manual_seed(11)
    rows = (torch.randn(8, 4, generator=generator) * size).half()
    loss_fn = getattr(gradlab, loss_class)()
    leaf = rows.clone().requires_grad_(True)
    with pytest.warns(gradlab.DegenerateBatchWarning):
        loss = loss_fn(leaf, torch.arange(8))
    loss.backward()
    assert loss.item() == 0.0 and leaf.grad.tolist() == [[0.0] * 4] * 8
    if size < 1e-3:  # the true gradient, about 1 / size, is beyond float16's 65504 there
        return
    leaf = rows.clone().requires_grad_(True)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    loss_fn(leaf, labels).backward()
    wide = rows.double().requires_grad_(True)  # the same rows, in float64
    loss_fn(wide, labels).backward()
    largest = wide.grad.abs().max()
    assert torch.allclose(leaf.grad.double(), wide.grad, atol=1e-2 * largest, rtol=0)


def test_smooth_ap_of_large_float16_embeddings_is_that_of_the_same_directions():
    generator = torch.Generator().manual_seed(7)
    embeddings = torch.randn(8, 64, generator=generator)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    loss_fn = gradlab.SmoothAPLoss(0.05)
    small = loss_fn(embeddings.half(), labels)
    large = loss_fn((embeddings * 1e4).half(), labels)  # entries up to ~3e4: finite in float16
    assert large.item() == pytest.approx(small.item(), abs=2e-3)


@pytest.mark.parametrize(("dtype", "huge", "tiny"), [(torch.float16, 3e3, None),
                                                     (torch.float32, 1e25, 1e-14),
                                                     (torch.float64, 1e160, 1e-170)])  # fmt: skip
def test_unit_rows_leaves_rows_that_fit_as_f_normalize_makes_them(dtype, huge, tiny):
    """Beside a row whose norm overflows (or lies below the floor), the other rows are
    F.normalize's bit for bit (only such a row is divided by its largest entry first); rows of
    no entries stay so."""
    from gradlab.functional.layouts import unit_rows

    generator = torch.Generator().manual_seed(8)
    rows = torch.randn(6, 64, generator=generator, dtype=torch.float64)
    rows[2] *= huge
    if tiny is not None:
        rows[4] *= tiny
    rows = rows.to(dtype)
    got = unit_rows(rows)
    plain = [0, 1, 3, 5] if tiny is not None else [0, 1, 3, 4, 5]
    assert torch.equal(got[plain], torch.nn.functional.normalize(rows[plain], dim=1))
    for rescued in (2, 4) if tiny is not None else (2,):
        assert abs(got[rescued].double().norm().item() - 1) < 4 * torch.finfo(dtype).eps
    empty = torch.zeros(3, 0, dtype=dtype)
    assert unit_rows(empty).shape == (3, 0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_rows_that_fit_get_f_normalize_s_values_and_gradient_bit_for_bit(dtype):
    """A row F.normalize handles well is divided by exactly 1: its unit vector and its gradient
    are F.normalize's, bit for bit, small norms and subnormal entries included (a rescue by a
    power of two, or any other divisor, keeps the values but not every bit of the gradient)."""
    from gradlab.functional.layouts import unit_rows

    generator = torch.Generator().manual_seed(12)
    directions = torch.randn(6, 8, generator=generator, dtype=torch.float64)
    directions = directions / directions.norm(dim=1, keepdim=True)
    sizes = {torch.float16: [0.03, 0.05, 0.5, 3.0, 40.0],  # above float16's 2^-6
             torch.bfloat16: [1e-3, 0.03, 0.5, 3.0, 40.0]}.get(dtype, [1e-5, 1e-3, 0.03, 3.0,
                                                                       4e4])  # fmt: skip
    rows = (directions[:5] * torch.tensor(sizes, dtype=torch.float64).unsqueeze(1)).to(dtype)
    subnormal = {torch.float16: 3e-7, torch.bfloat16: 1e-39, torch.float32: 1e-40,
                 torch.float64: 1e-310}[dtype]  # fmt: skip
    rows = torch.cat([rows, torch.tensor([[8.0, 8.0, subnormal, 0, 0, 0, 0, 0],
                                          [8.0, subnormal, 0, 0, 0, 0, 0, 0]], dtype=dtype)])
    assert 0 < rows[5, 2] < torch.finfo(dtype).tiny  # divided by 8, it would lose bits
    weights = torch.randn(7, 8, generator=generator, dtype=torch.float64).to(dtype)
    mine, theirs = rows.clone().requires_grad_(True), rows.clone().requires_grad_(True)
    got = unit_rows(mine)
    expected = torch.nn.functional.normalize(theirs, dim=1)
    assert torch.equal(got, expected)
    (got * weights).sum().backward()
    (expected * weights).sum().backward()
    assert torch.equal(mine.grad, theirs.grad)


def test_unit_rows_leaves_nan_and_inf_rows_to_the_callers_checks():
    """A row holding NaN or an infinite entry is not rescued (no division by its peak): it
    comes out as F.normalize makes it, for the loss's finiteness check to refuse."""
    from gradlab.functional.layouts import unit_rows

    rows = torch.tensor([[1.0, math.nan], [math.inf, 1.0], [3.0, 4.0]])
    got = unit_rows(rows)
    expected = torch.nn.functional.normalize(rows, dim=1)
    assert torch.equal(got.isnan(), expected.isnan())
    assert torch.equal(torch.nan_to_num(got), torch.nan_to_num(expected))
