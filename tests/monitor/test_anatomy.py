"""The anatomy quantity in a Monitor: logged values against independent computations, the
direction split, and the run header when the loss exposes no score matrix."""

import contextlib
import math

import pytest
import torch

import gradlab
from gradlab.functional import (
    gradient_anatomy,
    max_violation_triplet_loss,
    nt_xent_loss,
    smooth_ap,
)
from gradlab.monitor import Monitor, adapters, every, read_jsonl
from gradlab.monitor.anatomy import Anatomy, anatomy_values
from gradlab.monitor.batch import BatchView, ScoreCapture
from tests.reference.anatomy_loops import anatomy_one_query
from tests.reference.monitor_loops import anatomy_summary


def _scores(seed=0, queries=6, candidates=18):
    generator = torch.Generator().manual_seed(seed)
    scores = (torch.rand(queries, candidates, generator=generator) * 2 - 1).requires_grad_(True)
    positives = torch.arange(queries).unsqueeze(1) == (torch.arange(candidates) % queries)
    return scores, positives


def _log(tmp_path, loss_fn, scores, positives, inputs="scores"):
    with Monitor(tmp_path / "run", quantities=[Anatomy(every(1))]) as monitor:
        loss_fn = monitor.watch(loss_fn, inputs=inputs)
        loss_fn(scores, positives).backward()
        return monitor.step()


@pytest.mark.parametrize("margin", [0.1, 0.6])
def test_max_violation_split_by_direction_matches_the_closed_form(tmp_path, margin):
    """i2t: a query gets gradient on exactly its hardest negative iff a positive violates the
    margin against it; t2i the same over columns. Computed here with loops over the scores."""
    scores, positives = _scores()
    with torch.no_grad():  # the first three image queries rank their captions far ahead
        scores[:3] += 3.0 * positives[:3]
    record = _log(tmp_path, gradlab.MaxViolationTripletLoss(margin), scores, positives)
    rows, flags = scores.detach().tolist(), positives.tolist()
    columns, column_flags = scores.detach().T.tolist(), positives.T.tolist()
    for prefix, matrix, mask in (("i2t", rows, flags), ("t2i", columns, column_flags)):
        violated = []
        for row, row_flags in zip(matrix, mask, strict=True):
            hardest = max(s for s, p in zip(row, row_flags, strict=True) if not p)
            violated.append(any(margin - s + hardest > 0
                                for s, p in zip(row, row_flags, strict=True) if p))  # fmt: skip
        share = sum(violated) / len(violated)
        assert record[f"anatomy_{prefix}_active_negatives_mean"] == pytest.approx(share)
        assert record[f"anatomy_{prefix}_queries_without_gradient"] == pytest.approx(1 - share)
        if any(violated):
            assert record[f"anatomy_{prefix}_hardest_1pct_share"] == 1.0
    assert 0 < record["anatomy_i2t_active_negatives_mean"] < 1  # both outcomes occur


def test_a_function_on_scores_gives_row_and_column_anatomy_of_the_whole_gradient(tmp_path):
    scores, positives = _scores(1)
    record = _log(tmp_path, lambda s, p: nt_xent_loss(s, p, 0.1), scores, positives)
    leaf = scores.detach().clone().requires_grad_(True)
    nt_xent_loss(leaf, positives, 0.1).backward()
    for prefix, grad, s, p in (("i2t", leaf.grad, leaf.detach(), positives),
                               ("t2i", leaf.grad.T, leaf.detach().T, positives.T)):  # fmt: skip
        anatomy = gradient_anatomy(grad, s, p)
        expected = anatomy.active_negatives.double().mean().item()
        assert record[f"anatomy_{prefix}_active_negatives_mean"] == pytest.approx(expected)


def test_smooth_ap_loss_anatomy_is_its_exact_score_gradient(tmp_path):
    generator = torch.Generator().manual_seed(3)
    embeddings = torch.randn(16, 4, generator=generator, requires_grad=True)
    labels = torch.arange(16) % 4
    record = _log(tmp_path, gradlab.SmoothAPLoss(0.05), embeddings, labels, inputs="embeddings")
    layout = gradlab.functional.in_batch_layout(embeddings.detach().double(), labels)
    leaf = layout.scores.clone().requires_grad_(True)
    gradlab.functional.mean_ap_loss(
        gradlab.functional.smooth_ap(
            leaf, layout.positives, 0.05, candidate_mask=layout.candidate_mask
        ),
        leaf,
    ).backward()
    anatomy = gradient_anatomy(leaf.grad, leaf.detach(), layout.positives,
                               candidate_mask=layout.candidate_mask)
    assert record["anatomy_active_negatives_mean"] == pytest.approx(
        anatomy.active_negatives.double().mean().item()
    )
    assert "anatomy_i2t_active_negatives_mean" not in record  # in-batch: no direction


def test_a_loss_without_score_matrix_logs_no_anatomy_and_the_header_says_why(tmp_path):
    embeddings = torch.randn(12, 4, requires_grad=True)
    labels = torch.arange(12) % 3
    with Monitor(tmp_path / "run", preset="full", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.FastAPLoss())
        loss_fn(embeddings, labels).backward()
        record = monitor.step()
    headers, _ = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    reasons = headers[0]["not_logged"]
    assert "FastAPLoss" in reasons["anatomy"] and "this one scores inside" in reasons["anatomy"]
    assert "not SmoothAP" in reasons["gradient_agreement"]
    assert not any(k.startswith(("anatomy_", "gradient_agreement")) for k in record)
    assert "p_seed" in record  # the SmoothAP diagnostics of the scores still apply


def test_score_inputs_skip_the_embedding_quantities_with_a_reason(tmp_path):
    scores, positives = _scores(2)
    with Monitor(tmp_path / "run", preset="full", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.NTXentLoss(), inputs="scores")
        loss_fn(scores, positives).backward()
        record = monitor.step()
    headers, _ = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert set(headers[0]["not_logged"]) >= {"embedding_norm", "decomposition"}
    assert not any(k.startswith(("embedding_", "decomposition_")) for k in record)
    assert "p_cross_modal" in record and "anatomy_t2i_hardest_10pct_share" in record
    assert math.isfinite(record["anatomy_i2t_active_rank_depth"])


@pytest.mark.slow
def test_plot_draws_the_anatomy_family_for_both_directions(tmp_path):
    from gradlab.plotting.monitor import plot_run

    scores, positives = _scores(4)
    scores = torch.nn.Parameter(scores.detach())
    optimizer = torch.optim.SGD([scores], lr=0.5)
    with Monitor(tmp_path / "run", quantities=[Anatomy(every(1))]) as monitor:
        loss_fn = monitor.watch(gradlab.MaxViolationTripletLoss(0.2), inputs="scores")
        for _ in range(6):
            loss_fn(scores, positives).backward()
            optimizer.step()
            optimizer.zero_grad()
            monitor.step()
    # The optimizer updated the leaf scores in place before each step(): the anatomy still
    # describes the scores the loss saw (only the hardest negative gets gradient).
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    for direction in ("i2t", "t2i"):
        assert {r[f"anatomy_{direction}_hardest_1pct_share"] for r in records} == {1.0}
    written = {path.name for path in plot_run(tmp_path / "run", tmp_path / "figures")}
    assert {"anatomy_active_negatives.png", "anatomy_hardness.png",
            "anatomy_without_gradient.png"} <= written  # fmt: skip


def test_smooth_ap_without_a_recorded_graph_uses_the_shared_exact_gradient(tmp_path, monkeypatch):
    """Both SmoothAP paths (hook on the loss's recorded scores; the step's shared closed-form
    dL/dS when nothing was recorded) log the same anatomy."""
    import contextlib

    generator = torch.Generator().manual_seed(5)
    embeddings = torch.randn(20, 4, generator=generator, requires_grad=True)
    labels = torch.arange(20) % 5
    hooked = _log(tmp_path / "a", gradlab.SmoothAPLoss(0.05), embeddings, labels, "embeddings")
    monkeypatch.setattr(adapters, "recording", contextlib.nullcontext)
    shared = _log(tmp_path / "b", gradlab.SmoothAPLoss(0.05), embeddings, labels, "embeddings")
    assert "anatomy_active_negatives_mean" in hooked and "anatomy_active_negatives_mean" in shared
    for key, value in hooked.items():
        if key.startswith("anatomy_"):
            assert shared[key] == pytest.approx(value, rel=1e-5, nan_ok=True), key


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        (dict(absolute_threshold=-1.0), "absolute_threshold"),
        (dict(absolute_threshold=float("nan")), "absolute_threshold"),
        (dict(relative_threshold=2.0), "relative_threshold"),
        (dict(relative_threshold="0.1"), "relative_threshold"),
    ],
)
def test_bad_anatomy_options_name_the_argument(kwargs, argument):
    with pytest.raises(gradlab.GradlabError, match=argument):
        Anatomy(**kwargs)


def test_attach_after_watch_keeps_the_watched_loss_explanation(tmp_path):
    with Monitor(tmp_path / "run", quantities=[Anatomy(every(1))]) as monitor:
        monitor.watch(gradlab.NTXentLoss(), inputs="scores")
        monitor.attach(torch.nn.Linear(2, 2), labels=torch.zeros(2, dtype=torch.long))
        assert "anatomy" not in monitor.not_logged


def test_rank_depth_is_zero_for_the_hardest_and_one_for_the_easiest(tmp_path):
    """A loss on the hardest negative only gives depth 0; on the easiest only, depth 1."""
    scores, positives = _scores(6)
    negatives = scores.detach().masked_fill(positives, float("nan"))

    def easiest_only(s, p):
        easiest = negatives.nan_to_num(float("inf")).argmin(dim=1)
        return s.gather(1, easiest.unsqueeze(1)).sum()

    for loss_fn, depth in ((lambda s, p: max_violation_triplet_loss(s, p, 5.0, direction="i2t"),
                            0.0), (easiest_only, 1.0)):  # fmt: skip
        record = _log(tmp_path / str(depth), loss_fn, scores, positives)
        assert record["anatomy_i2t_active_rank_depth"] == pytest.approx(depth)
        assert record["anatomy_i2t_deepest_active_rank"] == pytest.approx(depth)


@pytest.mark.parametrize("layout", ["exclude_query", "include_query", "cross_modal"])
@pytest.mark.parametrize("recorded", [True, False])
def test_smooth_ap_anatomy_in_every_layout_with_and_without_the_loss_record(
    tmp_path, monkeypatch, layout, recorded
):
    """The anatomy of gradlab's SmoothAPLoss is that of its dL/dS, here by autograd through the
    forward, read by the anatomy loops; both the hooked record and the shared exact gradient."""
    if not recorded:
        monkeypatch.setattr(adapters, "recording", contextlib.nullcontext)
    generator = torch.Generator().manual_seed(8)
    queries = torch.randn(9, 3, generator=generator, dtype=torch.float64)
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3])
    normalized = torch.nn.functional.normalize(queries, dim=1)
    if layout == "cross_modal":
        candidates = torch.randn(5, 3, generator=generator, dtype=torch.float64)
        positives = labels.unsqueeze(1) == torch.tensor([0, 1, 2, 0, 1]).unsqueeze(0)
        arguments = (queries.clone().requires_grad_(True),)
        keywords = {"candidates": candidates, "positives": positives}
        scores = normalized @ torch.nn.functional.normalize(candidates, dim=1).T
        mask, keep, prefix = positives, torch.ones_like(positives), "anatomy_i2t_"
    else:
        arguments, keywords = (queries.clone().requires_grad_(True), labels), {}
        scores = normalized @ normalized.T
        mask = labels.unsqueeze(0) == labels.unsqueeze(1)
        keep = torch.ones_like(mask)
        if layout == "exclude_query":
            mask, keep = mask.fill_diagonal_(False), keep.fill_diagonal_(False)
        prefix = "anatomy_"
    loss_fn = gradlab.SmoothAPLoss(0.1, include_query=layout == "include_query")
    with Monitor(tmp_path, quantities=[Anatomy(every(1))]) as monitor:
        monitor.watch(loss_fn)(*arguments, **keywords).backward()
        record = monitor.step()
    leaf = scores.clone().requires_grad_(True)
    aps = smooth_ap(leaf, mask, 0.1, candidate_mask=None if keep.all() else keep,
                    backward="autograd")  # fmt: skip
    (1 - aps[~aps.isnan()].mean()).backward()
    per_query = [anatomy_one_query(leaf.grad[q].tolist(), scores[q].tolist(), mask[q].tolist(),
                                   keep[q].tolist(), 1e-10, 1e-2)
                 for q in range(scores.shape[0])]  # fmt: skip
    kept = [a for a in per_query if a["num_positives"] and a["num_negatives"]]
    for key, value in anatomy_summary(kept).items():  # every logged key
        assert record[f"{prefix}{key}"] == pytest.approx(value, rel=1e-9, abs=1e-12), key
    assert not [key for key in record if key.startswith("anatomy_") and
                not key.startswith(prefix)]  # fmt: skip


# --- the logged summary at its edges, on both paths (the step's sort or its own), against the
# anatomy loops; the quantity's schedule, argument checks and captures without gradient.

ABSOLUTE = 2.0**-20  # powers of two: "exactly at the threshold" holds in float32 as in float64
RELATIVE = 0.25
COLUMNS = 12


def _edge_batch():
    """``grad``, ``scores``, ``positives`` ``[9, 12]`` float64, one edge case per query."""
    generator = torch.Generator().manual_seed(40)
    scores = torch.rand(9, COLUMNS, generator=generator, dtype=torch.float64)
    grad = torch.randn(9, COLUMNS, generator=generator, dtype=torch.float64)
    grad *= 10.0 ** (-2 * torch.rand(9, COLUMNS, generator=generator, dtype=torch.float64))
    positives = torch.zeros(9, COLUMNS, dtype=torch.bool)
    positives[:, :2] = True
    positives[1, :11] = True  # one negative (column 11)
    positives[2, :10] = True  # two negatives (10, 11); only the lower-scored one active
    scores[2, 10], scores[2, 11] = 0.9, 0.1
    grad[2, :10], grad[2, 10], grad[2, 11] = 0.5, 0.0, 1.0
    grad[3, 2:] = 0.0  # one active negative, deep in the ranking
    grad[3, 2 + int(torch.argsort(scores[3, 2:])[0])] = 0.3
    grad[4, 2:] = 0.0  # gradient on positives only: no active negative, no negative mass
    grad[5] = 0.0  # entries exactly at the absolute and at the relative threshold
    grad[5, 0], grad[5, 3], grad[5, 4], grad[5, 5] = 1.0, RELATIVE, ABSOLUTE, -RELATIVE / 2
    grad[6, 3], grad[6, 7] = math.nan, math.nan  # NaN gradients: never active, no mass
    scores[7, 5] = math.nan  # no ranking for this query: rank statistics and shares NaN
    grad[8] = 0.0  # the largest entry exactly at the absolute threshold: no gradient at all
    grad[8, 0], grad[8, 3] = ABSOLUTE / 2, ABSOLUTE
    return grad, scores, positives


def _descending_order(scores):
    """Each row's columns by descending score, ties by column (NaN first, as a sort puts it)."""
    rows = []
    for row in scores.tolist():
        rows.append(sorted(range(len(row)), key=lambda c: (not math.isnan(row[c]), -row[c], c)))
    return torch.tensor(rows)


def _expected(grad, scores, positives, candidates):
    per_query = []
    for q in range(grad.shape[0]):
        keep = candidates[q].tolist()
        record = anatomy_one_query(grad[q].tolist(), scores[q].tolist(), positives[q].tolist(),
                                   keep, ABSOLUTE, RELATIVE)  # fmt: skip
        if any(math.isnan(s) for s, k in zip(scores[q].tolist(), keep, strict=True) if k):
            # gradient_anatomy's rule for a NaN candidate score: no ranking, counts kept
            record.update(rank_mean=math.nan, rank_max=math.nan, share_1=math.nan,
                          share_10=math.nan)  # fmt: skip
        per_query.append(record)
    kept = [a for a in per_query if a["num_positives"] > 0 and a["num_negatives"] > 0]
    return per_query, anatomy_summary(kept)


# float16 / bfloat16: no single threshold of that dtype, so the shared-order path tests
# |G| > a and |G| >= r * max separately
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("sorted_by_step", [True, False])
@pytest.mark.parametrize("nan_rows", ["some", "none"])
def test_edge_queries_on_both_paths_equal_the_loops(dtype, masked, sorted_by_step, nan_rows):
    """On a CPU float32/float64 scores are screened for NaN rows by their rows' largest scores
    first (a batch with NaN then builds the mask; one without, "none", does not), half
    precision ones build the mask of NaN candidates at once (as every dtype elsewhere)."""
    grad, scores, positives = _edge_batch()
    if nan_rows == "none":
        scores[7, 5] = 0.3
    candidates = torch.ones_like(positives)
    if masked:  # a non-candidate column per row (its NaN score in row 0 is ignored)
        candidates[torch.arange(9), (torch.arange(9) * 5 + 7) % COLUMNS] = False
        candidates[2, 10:] = True  # keep the two-negative query's negatives
        if nan_rows != "none":
            scores[0, 7] = math.nan
    grad, scores = grad.to(dtype), scores.to(dtype)
    per_query, expected = _expected(grad, scores, positives, candidates)
    # the edge cases are there (checked on the loops' records, not on the code under test)
    assert [per_query[q]["num_negatives"] for q in (1, 2)] == [1, 2]
    assert per_query[2]["rank_mean"] == 2.0 and per_query[3]["active_negatives"] == 1
    assert per_query[4]["active_negatives"] == 0 and per_query[4]["active_positives"] > 0
    assert math.isnan(per_query[4]["share_10"])
    assert per_query[8]["without"] and per_query[8]["num_negatives"] > 0
    order = _descending_order(scores) if sorted_by_step else None
    got = anatomy_values("x_", grad, scores, positives, candidates if masked else None,
                         ABSOLUTE, RELATIVE, order=order)  # fmt: skip
    got = {key: value.item() for key, value in got.items()}
    assert set(got) == {f"x_{key}" for key in expected}
    for key, value in expected.items():
        assert got[f"x_{key}"] == pytest.approx(value, rel=1e-12, abs=1e-15), key



@pytest.mark.parametrize("sorted_by_step", [True, False])
def test_a_negative_mass_below_1e_300_keeps_its_shares_on_both_paths(sorted_by_step):
    """float64 gradients of ``exp(-700)`` size (a sharp softmax) on every negative: the hardest
    shares are ratios of those masses, not the masses over a floor of 1e-300."""
    grad, scores, positives = _edge_batch()
    negatives = ~positives
    tiny = torch.rand(grad.shape, generator=torch.Generator().manual_seed(3),
                      dtype=torch.float64) * 1e-303 + 1e-304  # fmt: skip
    grad = torch.where(negatives, tiny, grad.abs().clamp(min=0.5))
    scores[7, 5] = 0.3  # every query ranked
    candidates = torch.ones_like(positives)
    _, expected = _expected(grad, scores, positives, candidates)
    assert all(0.0 < math.fsum(abs(g) for g, n in zip(row, flags, strict=True) if n) < 1e-300
               for row, flags in zip(grad.tolist(), negatives.tolist(), strict=True))  # fmt: skip
    assert 0.0 < expected["hardest_10pct_share"] < 1.0
    order = _descending_order(scores) if sorted_by_step else None
    got = anatomy_values("x_", grad, scores, positives, None, ABSOLUTE, RELATIVE, order=order)
    for key, value in expected.items():
        assert got[f"x_{key}"].item() == pytest.approx(value, rel=1e-12, nan_ok=True), key

def test_entries_at_the_thresholds():
    # q5 alone: |g| = 1 (the largest), 0.25 = RELATIVE * 1 (active: >=), 2^-20 = ABSOLUTE
    # (inactive: >), 0.125 below the relative threshold; columns 0, 1 are positives.
    grad, scores, positives = _edge_batch()
    one = anatomy_one_query(grad[5].tolist(), scores[5].tolist(), positives[5].tolist(),
                            [True] * COLUMNS, ABSOLUTE, RELATIVE)  # fmt: skip
    assert (one["active_positives"], one["active_negatives"]) == (1, 1)
    for order in (None, _descending_order(scores[5:6])):
        got = anatomy_values("x_", grad[5:6], scores[5:6], positives[5:6], None, ABSOLUTE,
                             RELATIVE, order=order)  # fmt: skip
        assert got["x_active_negatives_mean"].item() == 1.0
        assert got["x_active_positives"].item() == 1.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_an_absolute_threshold_between_two_floats_is_applied_as_torch_compares(dtype):
    """1e-10 is no float32: torch compares a float32 |G| with it rounded to float32, so the
    rounded value itself is not above it and the next float up is (float64: 1e-10 itself).
    Negatives at the float below, at and above it: one active, on both paths."""
    at = torch.tensor(1e-10, dtype=dtype)
    above = torch.nextafter(at, torch.tensor(1.0, dtype=dtype))
    below = torch.nextafter(at, torch.tensor(0.0, dtype=dtype))
    grad = torch.stack([below, at, above, above]).reshape(1, 4)
    scores = torch.tensor([[0.4, 0.3, 0.2, 0.1]], dtype=dtype)
    positives = torch.tensor([[False, False, False, True]])
    order = torch.tensor([[0, 1, 2, 3]])  # the columns by descending score
    for given in (None, order):
        got = anatomy_values("x_", grad, scores, positives, None, 1e-10, 0.0, order=given)
        assert got["x_active_negatives_mean"].item() == 1.0
        assert got["x_active_positives"].item() == 1.0
        assert got["x_deepest_active_rank"].item() == 1.0  # rank 3 of 3 negatives
        # its largest |G| is the float just above the threshold: the query has gradient
        assert got["x_queries_without_gradient"].item() == 0.0



@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_relative_threshold_of_a_small_half_precision_row_is_not_rounded(dtype):
    """float16 holds 0.01 x 8.88e-6 only as the subnormal 5.96e-8 (2^-24): an entry of that
    size, 0.67 % of the row's largest, passed the 1 % threshold. Both paths compare with the
    threshold itself (float32), as the loops do."""
    tiny = 2.0**-24
    largest = 149 * tiny  # 8.88e-6, exact in both dtypes; 1 % of it is 1.49 x 2^-24
    grad = torch.tensor([[-largest, tiny, tiny, 0.0], [-largest, 2 * tiny, tiny, 0.0]])
    grad = grad.to(dtype)
    scores = torch.tensor([[0.4, 0.3, 0.2, 0.1], [0.4, 0.3, 0.2, 0.1]], dtype=dtype)
    positives = torch.tensor([[True, False, False, False], [True, False, False, False]])
    per_query = [anatomy_one_query(grad[q].tolist(), scores[q].tolist(), positives[q].tolist(),
                                   [True] * 4, 1e-10, 0.01) for q in range(2)]  # fmt: skip
    assert [record["active_negatives"] for record in per_query] == [0, 1]  # 2^-24 < 1 % < 2^-23
    expected = anatomy_summary(per_query)
    order = torch.tensor([[0, 1, 2, 3], [0, 1, 2, 3]])  # the columns by descending score
    for given in (None, order):
        got = anatomy_values("x_", grad, scores, positives, None, 1e-10, 0.01, order=given)
        for key, value in expected.items():
            assert got[f"x_{key}"].item() == pytest.approx(value, rel=1e-12, nan_ok=True), key

def test_rank_sums_past_the_int32_range_on_the_shared_order_path():
    """One positive ranked first and 65,536 active negatives: their ranks 1..65,536 sum to
    65,536 * 65,537 / 2 > 2^31 - 1, so the mean rank (65,537 / 2, depth 1/2 by the closed
    form (mean - 1) / (N - 1)) needs a sum wider than int32."""
    columns = 65_537
    grad = torch.ones(1, columns)
    scores = torch.linspace(1.0, 0.0, columns).reshape(1, columns)
    positives = torch.zeros(1, columns, dtype=torch.bool)
    positives[0, 0] = True
    order = torch.arange(columns).reshape(1, columns)  # the columns by descending score
    assert (columns - 1) * columns // 2 > 2**31 - 1
    got = anatomy_values("x_", grad, scores, positives, None, 0.0, 0.5, order=order)
    assert got["x_active_negatives_mean"].item() == columns - 1
    assert got["x_active_rank_depth"].item() == pytest.approx(0.5, rel=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_negative_zero_absolute_threshold_is_zero_on_both_paths(dtype):
    """-0.0 passes the ``>= 0`` check: no |G| of an all-zero row is above it (its float32 bits
    carry the sign, so the next float "up" from them is a negative one, below every |G|)."""
    grad = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.0, 0.5, 0.0, 0.25]], dtype=dtype)
    scores = torch.tensor([[0.4, 0.3, 0.2, 0.1], [0.4, 0.3, 0.2, 0.1]], dtype=dtype)
    positives = torch.tensor([[True, False, False, False], [True, False, False, False]])
    per_query = [anatomy_one_query(grad[q].tolist(), scores[q].tolist(), positives[q].tolist(),
                                   [True] * 4, 0.0, 0.5) for q in range(2)]  # fmt: skip
    expected = anatomy_summary(per_query)
    assert per_query[0]["without"] and per_query[1]["active_negatives"] == 2
    order = torch.tensor([[0, 1, 2, 3], [0, 1, 2, 3]])  # the columns by descending score
    for given in (None, order):
        got = anatomy_values("x_", grad, scores, positives, None, -0.0, 0.5, order=given)
        for key, value in expected.items():
            assert got[f"x_{key}"].item() == pytest.approx(value, rel=1e-12, abs=1e-15), key


def test_anatomy_keeps_its_schedule():
    quantity = Anatomy(every(3))
    assert [quantity.should_compute(step) for step in range(1, 7)] == [
        False, False, True, False, False, True,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"absolute_threshold": -1.0},
         "absolute_threshold must be a non-negative finite number; got -1.0"),
        ({"relative_threshold": math.nan}, "relative_threshold must be a finite number in "
         "[0, 1] (a share of the query's largest |dL/dS|); got nan"),
        ({"relative_threshold": 1.5}, "relative_threshold must be a finite number in [0, 1] "
         "(a share of the query's largest |dL/dS|); got 1.5"),
        ({"relative_threshold": -0.5}, "relative_threshold must be a finite number in [0, 1] "
         "(a share of the query's largest |dL/dS|); got -0.5"),
    ],
)  # fmt: skip
def test_anatomy_threshold_errors_in_full(arguments, message):
    with pytest.raises(gradlab.GradlabError) as error:
        Anatomy(**arguments)
    assert str(error.value) == message


def test_a_relative_threshold_of_one_keeps_only_the_largest_entries():
    grad = torch.tensor([[0.5, 1.0, -1.0, 0.25]], dtype=torch.float64)
    scores = torch.tensor([[0.9, 0.8, 0.3, 0.1]], dtype=torch.float64)
    positives = torch.tensor([[True, False, False, False]])
    capture = ScoreCapture("i2t", scores, positives, grad=grad)
    batch = BatchView(embeddings=scores, positives=positives, score_captures=[capture])
    with torch.no_grad():
        got = Anatomy(relative_threshold=1.0).compute(batch)
    assert got["anatomy_i2t_active_negatives_mean"].item() == 2.0  # the two entries of |g| = 1
    assert got["anatomy_i2t_active_positives"].item() == 0.0


def test_a_capture_without_gradient_is_skipped_and_the_next_one_read():
    # e.g. a matrix recorded under no_grad by a miner before the loss's own: nothing to read in
    # it, but the anatomy of the next capture is still logged.
    generator = torch.Generator().manual_seed(41)
    scores = torch.rand(4, 6, generator=generator, dtype=torch.float64)
    grad = torch.randn(4, 6, generator=generator, dtype=torch.float64)
    positives = torch.eye(4, 6, dtype=torch.bool)
    unread = ScoreCapture("i2t", scores.clone(), positives)  # no gradient, not SmoothAP
    read = ScoreCapture("t2i", scores.T.clone(), positives.T, grad=grad.T.clone())
    batch = BatchView(embeddings=scores, positives=positives, score_captures=[unread, read])
    with torch.no_grad():
        got = {key: value.item() for key, value in Anatomy().compute(batch).items()}
    active = [anatomy_one_query(grad[q].tolist(), scores[q].tolist(), positives[q].tolist(),
                                [True] * 6, 1e-10, 1e-2)["active_negatives"]
              for q in range(4)]  # fmt: skip
    assert set(got) == {key for key in got if key.startswith("anatomy_t2i_")} and got
    assert got["anatomy_t2i_active_negatives_mean"] == pytest.approx(math.fsum(active) / 4)


def test_an_empty_batch_keeps_its_anatomy_on_the_device_of_its_scores():
    """The meta device stands in for an accelerator: a fallback made on the host would not mix."""
    scores = torch.empty(0, 5, device="meta")
    positives = torch.zeros(0, 5, dtype=torch.bool, device="meta")
    values = anatomy_values("i2t_", torch.empty(0, 5, device="meta"), scores, positives)
    assert {value.device.type for value in values.values()} == {"meta"}



@pytest.mark.parametrize("columns", [0, 1])
def test_rows_with_at_most_one_candidate_read_the_same_with_or_without_the_shared_order(columns):
    """No candidate (a cross-modal batch without any): no query has a positive and a negative,
    every statistic is NaN; one candidate: the same values from both paths."""
    generator = torch.Generator().manual_seed(5)
    scores, grad = torch.randn(3, columns, generator=generator), torch.randn(3, columns)
    positives = torch.zeros(3, columns, dtype=torch.bool)
    order = torch.zeros(3, columns, dtype=torch.long)
    shared = anatomy_values("x_", grad, scores, positives, order=order)
    own = anatomy_values("x_", grad, scores, positives)
    assert list(shared) == list(own)
    for key, value in shared.items():
        assert torch.equal(value, own[key]) or (value.isnan() and own[key].isnan()), key
    if columns == 0:
        assert all(value.isnan() for value in shared.values())

def test_the_shared_order_path_keeps_its_work_on_the_device_of_its_scores():
    """Without a workspace the shared-order path allocates its own work buffers: on the
    scores' device (meta standing in for an accelerator), never on the host."""
    scores = torch.empty(3, 5, device="meta")
    positives = torch.zeros(3, 5, dtype=torch.bool, device="meta")
    order = torch.empty(3, 5, dtype=torch.long, device="meta")
    values = anatomy_values("x_", torch.empty(3, 5, device="meta"), scores, positives,
                            order=order)  # fmt: skip
    assert {value.device.type for value in values.values()} == {"meta"}


@pytest.mark.parametrize("columns", [2048, *(pytest.param(c, marks=pytest.mark.slow)
                                     for c in (72, 2040, 4100, 4104))])  # fmt: skip
def test_large_masks_count_like_the_loops_on_the_shared_order_path(columns):
    """Masks of 2^17 entries or more whose rows hold a multiple of 8 columns (the Monitor
    counts their flags 8 at a time, in chunks past 2,040 columns) or not: the counts equal the
    loops', rows and their transposes (non-contiguous masks) alike."""
    generator = torch.Generator().manual_seed(columns)
    rows = -(-(1 << 17) // columns)
    grad = torch.randn(rows, columns, generator=generator, dtype=torch.float64)
    grad[grad.abs() < 0.8] = 0.0  # about 40 % of the entries get no gradient
    scores = torch.randn(rows, columns, generator=generator, dtype=torch.float64)
    positives = torch.rand(rows, columns, generator=generator) < 0.3
    positives[0] = True  # a row of positives only
    positives[1] = False  # and one of negatives but one: 2,047 flags of a 2,048-column row
    positives[1, 0] = True
    candidates = torch.rand(rows, columns, generator=generator) < 0.9
    for masked in (None, candidates):
        keep = torch.ones_like(positives) if masked is None else masked
        _, expected = _expected(grad, scores, positives, keep)
        got = anatomy_values("x_", grad, scores, positives, masked, ABSOLUTE, RELATIVE,
                             order=_descending_order(scores))  # fmt: skip
        for key in ("active_negatives_mean", "active_positives", "active_negative_share"):
            assert got[f"x_{key}"].item() == pytest.approx(expected[key], rel=1e-12), key
    # the same matrices stored transposed: every mask a non-contiguous view
    flipped = [t.T.contiguous().T for t in (grad, scores, positives, candidates)]
    _, expected = _expected(*flipped)
    got = anatomy_values("x_", *flipped[:3], flipped[3], ABSOLUTE, RELATIVE,
                         order=_descending_order(scores))  # fmt: skip
    assert got["x_active_negatives_mean"].item() == pytest.approx(
        expected["active_negatives_mean"], rel=1e-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_tied_negatives_rank_by_column_in_a_logged_step(tmp_path, dtype):
    """Scores from five values (ties everywhere) and a gradient on a few tied negatives only: the
    logged ranks are those of the loops, which order ties by column. A sort that is not stable
    by column (torch's unstable CPU sort of float64 rows reorders ties) ranks them otherwise."""
    generator = torch.Generator().manual_seed(11)
    scores = (torch.randint(0, 5, (16, 64), generator=generator) / 4).to(dtype)
    positives = torch.zeros(16, 64, dtype=torch.bool)
    positives[:, :2] = True
    weights = torch.zeros(16, 64, dtype=dtype)
    weights[:, 40:] = (torch.rand(16, 24, generator=generator) < 0.3).to(dtype)
    leaf = scores.clone().requires_grad_(True)
    record = _log(tmp_path, lambda s, p: (s * weights).sum(), leaf, positives)
    per_query = [anatomy_one_query(weights[q].tolist(), scores[q].tolist(),
                                   positives[q].tolist(), [True] * 64, 1e-10, 1e-2)
                 for q in range(16)]  # fmt: skip
    assert len({tuple(a["rank"]) for a in per_query}) > 1  # ranks among ties differ per row
    for key, value in anatomy_summary(per_query).items():  # every query ranks
        assert record[f"anatomy_i2t_{key}"] == pytest.approx(value, rel=1e-12), key
