"""The equivalence checker in one process: its reference, gradient caching, accumulation, the
cross-batch memory and where it says the gradients differ.

References are independent of the checker's machinery (its steps and probe): plain autograd
through the loss modules' own call forms, the hand-derived ``dL/dS`` loops of
``tests/reference/score_losses_loops.py``, the Smooth-AP loops, and counts worked out by hand.
"""

import json
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

import gradlab
from gradlab.equivalence import (
    Accumulation,
    AllGather,
    CrossBatchMemory,
    FullBatch,
    GradCache,
    GradientProbe,
    PairedBatch,
    compare,
    compare_gradients,
    run_distributed,
    run_step,
    score_objective,
    synthetic_problem,
)
from gradlab.siglip_loss import SigLIPLoss
from tests.helpers.equivalence_workers import ScaledQueryRow
from tests.helpers.hf_models import cached_replay_in_float32
from tests.reference.score_losses_loops import score_loss
from tests.reference.smooth_ap_loops import cross_modal_smooth_ap, loss_from_aps

B = 16
LOSSES = {
    "smooth_ap": lambda: gradlab.SmoothAPLoss(tau=0.1),
    "nt_xent": lambda: gradlab.NTXentLoss(temperature=0.5),
    "max_violation": lambda: gradlab.MaxViolationTripletLoss(margin=0.2),
    "siglip": lambda: SigLIPLoss(),  # scale 10, bias -10: the paper's initialisation
    "siglip_sum": lambda: SigLIPLoss(scale=5.0, bias=-2.0, reduction="sum"),
}
TIGHT = 1e-10


@pytest.fixture(scope="module")
def problem():
    return synthetic_problem(batch_size=B, seed=3)


def _plain_gradients(model, batch, loss):
    """dL/dtheta, dL/dq, dL/dc, dL/dS of the whole batch by plain autograd, no probe."""
    params = [p for _, p in model.named_parameters()]
    q = model(batch.query_inputs)
    c = model(batch.candidate_inputs)
    positives = batch.labels.unsqueeze(1) == batch.labels.unsqueeze(0)
    if isinstance(loss, gradlab.SmoothAPLoss):  # its own cross-modal call form
        value = loss(q, candidates=c, positives=positives)
        scores = None
        grads = torch.autograd.grad(value, [*params, q, c])
        return grads[: len(params)], grads[-2], grads[-1], None
    scores = F.normalize(q, dim=1) @ F.normalize(c, dim=1).T
    value = loss(scores, positives)
    grads = torch.autograd.grad(value, [*params, q, c, scores])
    return grads[: len(params)], grads[-3], grads[-2], grads[-1]


@pytest.mark.parametrize("name", list(LOSSES))
def test_the_reference_step_is_plain_autograd_of_the_whole_batch(problem, name):
    model, batch = problem
    loss = LOSSES[name]()
    grads = run_step(FullBatch(loss), model, batch)
    params, dq, dc, ds = _plain_gradients(model, batch, loss)
    for (pname, mine), theirs in zip(grads.parameters.items(), params, strict=True):
        assert torch.allclose(mine, theirs, atol=1e-13, rtol=0), pname
    assert torch.allclose(grads.queries, dq, atol=1e-13, rtol=0)
    assert torch.allclose(grads.candidates, dc, atol=1e-13, rtol=0)
    if ds is not None:
        assert torch.allclose(grads.scores, ds, atol=1e-13, rtol=0)
    assert bool(grads.scored.all())


@pytest.mark.parametrize("name", ["nt_xent", "max_violation"])
def test_the_reference_score_gradient_is_the_hand_derived_one(problem, name):
    model, batch = problem
    loss = LOSSES[name]()
    grads = run_step(FullBatch(loss), model, batch)
    positives = (batch.labels.unsqueeze(1) == batch.labels.unsqueeze(0)).tolist()
    option = 0.5 if name == "nt_xent" else 0.2
    kind = "nt_xent" if name == "nt_xent" else "triplet"
    value, grad = score_loss(kind, grads.score_values.tolist(), positives, option)
    assert grads.loss == pytest.approx(value, abs=1e-12)
    assert torch.allclose(grads.scores, torch.tensor(grad, dtype=torch.float64), atol=1e-12)


def test_the_smooth_ap_objective_is_the_loops_smooth_ap(problem):
    model, batch = problem
    with torch.no_grad():
        q, c = model(batch.query_inputs), model(batch.candidate_inputs)
    positives = batch.labels.unsqueeze(1) == batch.labels.unsqueeze(0)
    scores = F.normalize(q, dim=1) @ F.normalize(c, dim=1).T
    mine = score_objective(gradlab.SmoothAPLoss(tau=0.1))(scores, positives)
    aps = cross_modal_smooth_ap(q.tolist(), c.tolist(), positives.tolist(), 0.1)
    assert float(mine) == pytest.approx(loss_from_aps(aps), abs=1e-12)


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("chunk_size", [1, 3, B])
def test_gradient_caching_is_the_whole_batch_gradient(problem, name, chunk_size):
    model, batch = problem
    loss = LOSSES[name]()
    result = compare_gradients(FullBatch(loss), GradCache(loss, chunk_size), model, batch)
    assert result.equivalent, str(result)
    for quantity in result.quantities:
        assert quantity.recorded and quantity.max_abs <= TIGHT, str(result)


def test_gradient_caching_replays_each_chunks_random_state(problem):
    _, batch = problem
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.5),
                                torch.nn.Linear(16, 4)).double()  # fmt: skip
    loss = gradlab.NTXentLoss(temperature=0.5)

    def seeded(step):
        def run(model, batch, probe):
            torch.manual_seed(7)  # same draws from the first forward on, for both steps
            return step(model, batch, probe)

        return run

    # Without the replay the dropout masks of the re-forward would differ from pass 1's.
    grads = run_step(seeded(GradCache(loss, B)), model, batch)
    reference = run_step(seeded(FullBatch(loss)), model, batch)
    for name, value in reference.parameters.items():
        assert torch.allclose(grads.parameters[name], value, atol=1e-12), name


def _accumulated_gradient(model, batch, loss, k):
    """Sum over micro-batches of plain autograd of each micro-batch's loss / k."""
    params = [p for _, p in model.named_parameters()]
    total = [torch.zeros_like(p) for p in params]
    for part in torch.arange(B).chunk(k):
        q = model(batch.query_inputs[part])
        c = model(batch.candidate_inputs[part])
        labels = batch.labels[part]
        scores = F.normalize(q, dim=1) @ F.normalize(c, dim=1).T
        value = loss(scores, labels.unsqueeze(1) == labels.unsqueeze(0)) / k
        for acc, g in zip(total, torch.autograd.grad(value, params), strict=True):
            acc += g
    return total


@pytest.mark.parametrize("k", [2, 4, 8])
def test_accumulation_is_flagged_with_the_negatives_it_loses(problem, k):
    model, batch = problem
    loss = LOSSES["nt_xent"]()
    result = compare_gradients(FullBatch(loss), Accumulation(loss, k), model, batch)
    assert not result.equivalent
    scores = result["dL/dscores"]
    assert scores.unscored == B * B - k * (B // k) ** 2  # the off-block-diagonal pairs
    # NT-Xent gives every scored negative gradient: B - 2 per query (classes of two) in the
    # whole batch; in a micro-batch only those of its own micro-batch.
    micro_negatives = sum(
        int((batch.labels[part].unsqueeze(1) != batch.labels[part].unsqueeze(0)).sum())
        for part in torch.arange(B).chunk(k)
    )
    assert scores.negatives_with_gradient["reference"] == pytest.approx(B - 2)
    assert scores.negatives_with_gradient["candidate"] == pytest.approx(micro_negatives / B)
    # and what it measured is the accumulated gradient, by an independent sum
    grads = run_step(Accumulation(loss, k), model, batch)
    expected = _accumulated_gradient(model, batch, loss, k)
    for value, mine in zip(expected, grads.parameters.values(), strict=True):
        assert torch.allclose(mine, value, atol=1e-12)
    blocks = torch.block_diag(*[torch.ones(B // k, B // k)] * k).bool()
    assert bool((grads.scores[~blocks] == 0).all())


def test_one_micro_batch_is_the_whole_batch(problem):
    model, batch = problem
    loss = LOSSES["smooth_ap"]()
    result = compare_gradients(FullBatch(loss), Accumulation(loss, 1), model, batch)
    assert result.equivalent and result["dL/dtheta"].max_abs <= TIGHT


@pytest.mark.parametrize("name", ["nt_xent", "smooth_ap"])
def test_memory_updated_before_the_loss_is_flagged_at_the_overwritten_slots(name):
    model, batch = synthetic_problem(batch_size=B, memory_size=24, seed=5)
    loss = LOSSES[name]()
    good = compare_gradients(FullBatch(loss), CrossBatchMemory(loss, "after"), model, batch)
    assert good.equivalent and all(q.max_abs <= TIGHT for q in good.quantities), str(good)
    bad = compare_gradients(FullBatch(loss), CrossBatchMemory(loss, "before"), model, batch)
    assert not bad.equivalent
    overwritten = sorted(((batch.memory_start + torch.arange(B)) % 24).tolist())
    values = bad["scores"]
    assert values.memory_slots == overwritten and values.columns == []
    assert "memory slots 1-16" in str(bad)
    assert bad.cause == CrossBatchMemory(loss, "before").known_difference
    assert str(bad).splitlines()[-1].endswith(f"; {bad.cause})")
    assert good.cause is None and bad.to_dict()["cause"] == bad.cause


def test_the_losses_differing_too_is_said_with_both_values(problem):
    model, batch = problem
    loss = LOSSES["nt_xent"]()
    result = compare_gradients(FullBatch(loss), Accumulation(loss, 4), model, batch)
    apart = abs(result.reference_loss - result.candidate_loss)
    assert apart > result.atol + result.rtol * abs(result.reference_loss)
    relative = apart / abs(result.reference_loss)
    assert relative > 1e-4
    assert (f"; the losses differ too (reference {result.reference_loss:.6g}, candidate "
            f"{result.candidate_loss:.6g}, relative difference {relative:.1e}): the candidate "
            "computes another objective") in str(result)  # fmt: skip
    # the same loss, another gradient (one query's row scaled): the losses are not blamed
    row = compare_gradients(FullBatch(loss), ScaledQueryRow(loss, row=5), model, batch)
    assert not row.equivalent
    assert abs(row.reference_loss - row.candidate_loss) <= row.atol + row.rtol * abs(
        row.reference_loss)  # fmt: skip
    assert "the losses differ" not in str(row)


@pytest.mark.parametrize("losses", [(None, 1.0), (1.0, None), (1.0, float("nan")),
                                    (float("inf"), 1.0)])  # fmt: skip
def test_losses_not_returned_or_not_finite_are_not_said_to_differ(problem, losses):
    model, batch = problem
    loss = LOSSES["nt_xent"]()
    result = compare_gradients(FullBatch(loss), Accumulation(loss, 4), model, batch)
    result.reference_loss, result.candidate_loss = losses
    assert "the losses differ" not in str(result) and "never computed" in str(result)


def test_a_step_of_ones_own_may_say_what_makes_it_differ(problem):
    model, batch = problem
    loss = LOSSES["nt_xent"]()

    class Halved:
        known_difference = "halved on purpose"

        def __call__(self, model, batch, probe):
            return FullBatch(lambda s, p: 0.5 * score_objective(loss)(s, p))(model, batch, probe)

    class Unsaid(Halved):
        known_difference = 7  # not a text: not printed

    said = compare_gradients(FullBatch(loss), Halved(), model, batch)
    assert said.cause == "halved on purpose"
    assert str(said).splitlines()[-1].endswith("; halved on purpose)")
    assert compare_gradients(FullBatch(loss), Unsaid(), model, batch).cause is None

    class Agreeing(GradCache):
        known_difference = "never printed"  # a step that agrees has no cause to give

    agrees = compare_gradients(FullBatch(loss), Agreeing(loss, 4), model, batch)
    assert agrees.equivalent and agrees.cause is None and "never printed" not in str(agrees)


def test_a_planted_row_is_found_where_it_was_planted(problem):
    model, batch = problem
    loss = LOSSES["nt_xent"]()
    result = compare_gradients(FullBatch(loss), ScaledQueryRow(loss, row=5), model, batch)
    assert result.differing == ["dL/dtheta", "dL/dqueries"]
    assert result["dL/dqueries"].rows == [5]
    assert result["dL/dqueries"].worst["index"][0] == 5
    assert result["dL/dcandidates"].max_abs <= TIGHT
    assert result["dL/dscores"].max_abs <= TIGHT


def test_the_table_and_the_dict_say_what_differs(problem):
    model, batch = problem
    loss = LOSSES["nt_xent"]()
    result = compare_gradients(FullBatch(loss), Accumulation(loss, 4), model, batch)
    text = str(result)
    assert "verdict: NOT EQUIVALENT" in text
    assert "Accumulation(micro_batches=4)" in text and "192 scores never computed" in text
    record = json.loads(json.dumps(result.to_dict()))
    assert record["equivalent"] is False
    assert record["tolerance"] == {"atol": 1e-10, "rtol": 1e-10}
    assert record["quantities"]["dL/dscores"]["unscored"] == 192
    good = compare_gradients(FullBatch(loss), GradCache(loss, 4), model, batch)
    assert str(good).splitlines()[-2:] == [  # classes of two: what they cannot tell, said
        "verdict: EQUIVALENT",
        "note: every class of this batch holds 2 items, so losses that weigh a query by its "
        "number of positives otherwise (a mean over positive pairs, or over queries) agree on "
        "it; for a loss that takes several positives per query, compare on classes of "
        "several sizes too, adding up to the batch size: on the command line gradlab "
        "check-equivalence ... --class-sizes 2,3,4,7, in Python "
        "synthetic_problem(16, class_sizes=[2, 3, 4, 7]), or on a batch of your own, labels "
        "in classes of several sizes"]


def _mean_over_positive_pairs(scores, positives, temperature=0.1):
    """NT-Xent averaged over every positive pair at once, not per query: the same as
    gradlab's per-query mean when every query has as many positives, else not."""
    logits = scores / temperature
    log_p = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    return -(log_p * positives).sum() / positives.sum()


def test_a_reduction_over_pairs_passes_on_classes_of_one_size_with_a_note_and_fails_on_others():
    # a user's loss that averaged over positive pairs read EQUIVALENT on the default problem
    def pairs(scores, positives):
        return (_mean_over_positive_pairs(scores, positives)
                + _mean_over_positive_pairs(scores.T, positives.T))  # fmt: skip

    reference = FullBatch(gradlab.NTXentLoss(temperature=0.1))  # the pairs' temperature
    verdicts = {}
    for sizes in (None, [2, 3, 4, 7], [1, 1, 6, 8], [1] * 16):
        model, batch = synthetic_problem(16, class_sizes=sizes)
        result = compare_gradients(reference, FullBatch(pairs), model, batch)
        verdicts[str(sizes)] = (result.equivalent, result.class_size, "note:" in str(result))
        notes = [line for line in str(result).splitlines() if line.startswith("note:")]
    assert verdicts == {"None": (True, 2, True), "[2, 3, 4, 7]": (False, None, False),
                        "[1, 1, 6, 8]": (False, None, False),
                        str([1] * 16): (True, 1, True)}  # one positive per query: alike too
    assert notes == [  # the last problem's: classes of one item, in the singular
        "note: every class of this batch holds 1 item, so losses that weigh a query by its "
        "number of positives otherwise (a mean over positive pairs, or over queries) agree on "
        "it; for a loss that takes several positives per query, compare on classes of "
        "several sizes too, adding up to the batch size: on the command line gradlab "
        "check-equivalence ... --class-sizes 2,3,4,7, in Python "
        "synthetic_problem(16, class_sizes=[2, 3, 4, 7]), or on a batch of your own, labels "
        "in classes of several sizes"]


def test_a_factor_is_reported_as_a_scale(problem):
    model, batch = problem
    loss = LOSSES["smooth_ap"]()

    def halved(model, batch, probe):
        return FullBatch(lambda s, p: 0.5 * score_objective(loss)(s, p))(model, batch, probe)

    result = compare_gradients(FullBatch(loss), halved, model, batch)
    for name in ("dL/dtheta", "dL/dqueries", "dL/dcandidates", "dL/dscores"):
        assert result[name].scale == pytest.approx(0.5, abs=1e-12)
        assert not result[name].agrees and result[name].scaled_agrees
    assert result["scores"].agrees
    assert "= 0.5 x reference" in str(result)


def test_a_step_without_the_probe_is_compared_on_its_parameters(problem):
    model, batch = problem
    loss = LOSSES["nt_xent"]()

    def plain(model, batch, probe):
        q, c = model(batch.query_inputs), model(batch.candidate_inputs)
        scores = F.normalize(q, dim=1) @ F.normalize(c, dim=1).T
        value = loss(scores, batch.labels.unsqueeze(1) == batch.labels.unsqueeze(0))
        value.backward()
        return value.detach()

    result = compare_gradients(FullBatch(loss), plain, model, batch)
    assert result.equivalent
    assert [q.name for q in result.quantities if not q.recorded] == [
        "dL/dqueries", "dL/dcandidates", "dL/dscores", "scores"]  # fmt: skip
    assert "skipped" in str(result)


def test_float32_uses_its_own_tolerance(problem):
    model, batch = problem
    loss = LOSSES["nt_xent"]()
    result = compare_gradients(FullBatch(loss), GradCache(loss, 5), model, batch,
                               dtype=torch.float32)  # fmt: skip
    assert result.dtype == "float32" and (result.atol, result.rtol) == (1e-5, 1e-4)
    assert result.equivalent
    assert next(model.parameters()).dtype == torch.float64  # the caller's model is untouched


def _memory_batch():
    return synthetic_problem(batch_size=4, memory_size=2)[1]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda m, b, loss: compare_gradients(FullBatch(loss), 3, m, b),
            "candidate must be a step",
        ),
        (
            lambda m, b, loss: compare_gradients(FullBatch(loss), FullBatch(loss), "m", b),
            "model must be a torch.nn.Module; got str",
        ),
        (
            lambda m, b, loss: compare_gradients(FullBatch(loss), FullBatch(loss), m, (1, 2)),
            "batch must be a gradlab.equivalence.PairedBatch; got tuple",
        ),
        (
            lambda m, b, loss: compare_gradients(
                FullBatch(loss), FullBatch(loss), m, b, world_size=3
            ),
            "world_size must be a positive integer that divides the batch size 16; got 3",
        ),
        (
            lambda m, b, loss: compare_gradients(
                FullBatch(loss), FullBatch(loss), m, b, dtype=torch.int64
            ),
            "dtype must be a floating torch dtype; got torch.int64",
        ),
        (
            lambda m, b, loss: compare_gradients(FullBatch(loss), FullBatch(loss), m, b, atol=-1.0),
            "atol must be",
        ),
        (
            lambda m, b, loss: compare_gradients(FullBatch(loss), FullBatch(loss), m, b, timeout=0),
            "timeout must be",
        ),
        (
            lambda m, b, loss: compare_gradients(FullBatch(loss), Accumulation(loss, 3), m, b),
            "micro_batches must divide the batch size per process (16); got 3",
        ),
        (
            lambda m, b, loss: compare_gradients(FullBatch(loss), CrossBatchMemory(loss), m, b),
            "CrossBatchMemory needs a batch with a memory",
        ),
        (
            lambda m, b, loss: compare_gradients(
                FullBatch(loss), AllGather(loss), m, _memory_batch()
            ),
            "scores the batch only; got a batch with a memory of 2 entries",
        ),
        (lambda m, b, loss: GradCache(loss, chunk_size=0), "chunk_size must be a positive"),
        (lambda m, b, loss: Accumulation(loss, micro_batches=2.0), "micro_batches must be"),
        (lambda m, b, loss: AllGather(loss, gradient="yes"),
         "gradient must be True or False; got 'yes'"),
        (lambda m, b, loss: AllGather(loss, loss_scale=-2), "loss_scale must be None or a"),
        (
            lambda m, b, loss: CrossBatchMemory(loss, enqueue="never"),
            "enqueue must be one of ('after', 'before'); got 'never'",
        ),
        (lambda m, b, loss: FullBatch(42), "loss must be a gradlab loss"),
        (
            lambda m, b, loss: PairedBatch(torch.zeros(3, 2), torch.zeros(2, 2), torch.arange(3)),
            "candidate_inputs must hold one row per label (3)",
        ),
        (
            lambda m, b, loss: PairedBatch(torch.zeros(2, 2), torch.zeros(2, 2), torch.zeros(2)),
            "labels must have an integer dtype",
        ),
        (
            lambda m, b, loss: PairedBatch(
                torch.zeros(2, 2), torch.zeros(2, 2), torch.arange(2), memory=torch.zeros(3, 2)
            ),
            "memory and memory_labels go together",
        ),
        (lambda m, b, loss: synthetic_problem(batch_size=5), "batch_size must be even"),
        (lambda m, b, loss: GradientProbe(4, 4, 2).queries(torch.zeros(2, 2),
                                                            torch.tensor([0, 4])),
         "rows must hold global indices in [0, 4); got values from 0 to 4"),
        (lambda m, b, loss: GradientProbe(4, 4, 2).candidates(torch.zeros(2, 2),
                                                               torch.tensor([0])),
         "rows must give one index per row of candidates (2); got 1"),
        (lambda m, b, loss: GradientProbe(4, 4, 2).scores(torch.zeros(2, 3), torch.tensor([0, 1]),
                                                           torch.tensor([0, 1])),
         "rows and columns must index the score block of shape (2, 3); got 2 rows and 2 columns"),
        (lambda m, b, loss: GradientProbe(4, 4, 2).scores(torch.zeros(1, 1), torch.tensor([0]),
                                                           torch.tensor([0.5])),
         "columns must have an integer dtype"),
        (lambda m, b, loss: run_distributed([FullBatch(loss)], m, b, world_size=5),
         "world_size must be a positive integer that divides the batch size 16; got 5"),
        (lambda m, b, loss: run_distributed([FullBatch(loss)], m, b, timeout=-1.0),
         "timeout must be"),
        (lambda m, b, loss: run_distributed([lambda m, b, p: None], m, b),
         "steps, model and batch must be picklable"),
    ],
)
def test_bad_input_is_refused_before_any_work(problem, call, message):
    model, batch = problem
    with pytest.raises(gradlab.GradlabError) as caught:
        call(model, batch, LOSSES["nt_xent"]())
    assert message in str(caught.value)


def test_a_zero_reference_gives_inf_and_nan_as_strings_in_the_dict(problem):
    model, batch = problem
    loss = LOSSES["nt_xent"]()
    full = run_step(FullBatch(loss), model, batch)
    # dL/dtheta zero in the reference only (zero everywhere would be refused: nothing compared)
    zero_theta = replace(full, parameters={n: torch.zeros_like(v)
                                           for n, v in full.parameters.items()})  # fmt: skip
    result = compare(zero_theta, full, batch)
    record = result.to_dict()["quantities"]["dL/dtheta"]
    assert (record["relative"], record["scale"], record["agrees"]) == ("inf", "nan", False)
    json.dumps(result.to_dict(), allow_nan=False)


def test_owned_rows_count_each_row_once():
    # Two copies of one score matrix, each owning one row: the probe holds dL/dS once.
    probe = GradientProbe(size=2, columns=2, embedding_size=1)
    scores = torch.tensor([[0.1, 0.2], [0.3, 0.4]], dtype=torch.float64, requires_grad=True)
    weights = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    rows = torch.arange(2)
    first = probe.scores(scores * 1, rows, rows, owned_rows=torch.tensor([0]))
    second = probe.scores(scores * 1, rows, rows, owned_rows=torch.tensor([1]))
    ((first * weights).sum() + (second * weights).sum()).backward()
    assert probe.gradients["scores"].tolist() == weights.tolist()
    assert probe.scored.all() and probe.values.tolist() == scores.tolist()


@pytest.mark.parametrize("mini_batch_size", [1, 3, 16])
def test_sentence_transformers_cached_mnrl_is_its_whole_batch_loss(problem, mini_batch_size):
    pytest.importorskip("sentence_transformers")
    from gradlab.equivalence.sentence_transformers import CachedMNRL

    model, batch = problem
    paired = PairedBatch(batch.query_inputs, batch.candidate_inputs, torch.arange(B))
    step = CachedMNRL(scale=20.0, mini_batch_size=mini_batch_size)
    result = compare_gradients(step.reference(), step, model, paired)
    if cached_replay_in_float32():  # sentence-transformers 5.7 to 6.1: float32 replay
        assert not result.equivalent and result["dL/dtheta"].max_abs <= 1e-5, str(result)
        return
    assert result.equivalent and result["dL/dtheta"].max_abs <= TIGHT, str(result)
    # its reference, by plain autograd: softmax of 20 x cosine, the pair's own column the target
    q, c = model(paired.query_inputs), model(paired.candidate_inputs)
    logits = 20.0 * F.normalize(q, dim=1) @ F.normalize(c, dim=1).T
    expected = torch.autograd.grad(F.cross_entropy(logits, torch.arange(B)),
                                   list(model.parameters()))  # fmt: skip
    mine = run_step(step, model, paired).parameters.values()
    for value, theirs in zip(mine, expected, strict=True):
        assert torch.allclose(value, theirs, atol=1e-12)


def test_cached_mnrl_needs_one_class_per_item(problem):
    pytest.importorskip("sentence_transformers")
    from gradlab.equivalence.sentence_transformers import CachedMNRL

    model, batch = problem  # classes of two
    step = CachedMNRL(mini_batch_size=4)
    with pytest.raises(gradlab.GradlabError, match="labels must all differ"):
        compare_gradients(step.reference(), step, model, batch)


def test_a_step_that_hands_the_probe_a_no_grad_tensor_is_refused_not_reported_as_zero(problem):
    model, batch = problem
    loss = LOSSES["nt_xent"]()

    def embeddings_under_no_grad(model, batch, probe):
        queries = model(batch.query_inputs)
        with torch.no_grad():
            probe.queries(model(batch.query_inputs), batch.rows)  # a second, graph-less copy
        candidates = model(batch.candidate_inputs)
        value = loss(F.normalize(queries, dim=1) @ F.normalize(candidates, dim=1).T,
                     batch.labels.unsqueeze(1) == batch.labels.unsqueeze(0))  # fmt: skip
        value.backward()
        return value.detach()

    refused = r"^probe\.queries must be handed a tensor .* no gradient \(computed under torch"
    with pytest.raises(gradlab.GradlabError, match=refused):
        compare_gradients(FullBatch(loss), embeddings_under_no_grad, model, batch)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [  # were AttributeErrors ('NoneType' object has no attribute 'world_size', ...)
        (lambda grads, batch: (None, grads, batch),
         "reference must be the Gradients that run_step or run_distributed returns; got NoneType"),
        (lambda grads, batch: (grads, "x", batch),
         "candidate must be the Gradients that run_step or run_distributed returns; got str"),
        (lambda grads, batch: (grads, grads, None),
         "batch must be a gradlab.equivalence.PairedBatch; got NoneType"),
        (lambda grads, batch: (grads, grads, (1, 2)),
         "batch must be a gradlab.equivalence.PairedBatch; got tuple"),
    ],
)  # fmt: skip
def test_compare_refuses_what_is_not_gradients_or_a_batch(arguments, message):
    from gradlab.errors import GradlabError

    model, batch = synthetic_problem(batch_size=4)
    grads = run_step(FullBatch(gradlab.NTXentLoss()), model, batch)
    with pytest.raises(GradlabError) as caught:
        compare(*arguments(grads, batch))
    assert str(caught.value) == message
