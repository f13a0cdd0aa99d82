"""Gathered steps in two gloo processes against the whole batch in one: each correct variant
agrees to 1e-10 in float64, each planted bug is flagged where it lives.

Every step of the module runs in ONE start of the two processes (a module fixture): starting
them costs seconds. Every run is time-boxed by the runner (a hung process fails the test with
``TimeoutError`` instead of hanging CI); the last tests check that time box itself. The expected
locations and factors are worked out by hand in each test's comment, not read from the checker.
"""

import os
import re
import sys
from multiprocessing import resource_tracker

import pytest
import torch

import gradlab
from gradlab.equivalence import (
    AllGather,
    FullBatch,
    GradCache,
    compare,
    run_distributed,
    run_step,
    synthetic_problem,
)
from gradlab.siglip_loss import SigLIPLoss
from tests.helpers.equivalence_workers import (
    DefaultGather,
    ExitingStep,
    LocalFirstGather,
    RaisingEverywhereStep,
    RaisingLateStep,
    RaisingStep,
    SleepingStep,
)
from tests.helpers.processes import descendants

pytestmark = pytest.mark.slow

B = 16
WORLD = 2
TIME_BOX_S = 120
TIGHT = 1e-10
RANK_1_ROWS = list(range(B // WORLD, B))
LOSSES = {
    "smooth_ap": gradlab.SmoothAPLoss(tau=0.1),
    "nt_xent": gradlab.NTXentLoss(temperature=0.5),
    "max_violation": gradlab.MaxViolationTripletLoss(margin=0.2),
    "siglip": SigLIPLoss(),  # the paper's start: scale 10, bias -10, divided by the rows
    "siglip_sum": SigLIPLoss(scale=5.0, bias=-2.0, reduction="sum"),
}
I2T = gradlab.NTXentLoss(temperature=0.5, direction="i2t")


def _steps():
    steps = {}
    for name, loss in LOSSES.items():
        steps[name, "gather_with_gradient"] = AllGather(loss, gradient=True)
        steps[name, "local_loss"] = AllGather(loss, gradient=True, local_loss=True)
        steps[name, "gather_without_gradient_scaled"] = AllGather(loss, gradient=False)
        steps[name, "gradient_cache"] = GradCache(loss, chunk_size=3)  # in each process
    steps["i2t", "bug_gather_without_gradient"] = AllGather(I2T, gradient=False, local_loss=True)
    steps["siglip", "bug_gather_without_gradient"] = AllGather(
        LOSSES["siglip"], gradient=False, local_loss=True
    )
    steps["nt_xent", "bug_gather_without_gradient"] = AllGather(
        LOSSES["nt_xent"], gradient=False, local_loss=True
    )
    for name in ("nt_xent", "siglip"):
        steps[name, "bug_missing_world_size_factor"] = AllGather(
            LOSSES[name], gradient=False, loss_scale=1.0
        )
    steps["i2t", "local_loss"] = AllGather(I2T, gradient=True, local_loss=True)
    steps["i2t", "bug_wrong_gather_order"] = LocalFirstGather(I2T)
    steps["nt_xent", "gather_rows_default"] = DefaultGather(LOSSES["nt_xent"])
    return steps


@pytest.fixture(scope="module")
def runs():
    """``(name, variant) -> EquivalenceResult`` for every step of :func:`_steps`."""
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    model, batch = synthetic_problem(batch_size=B, seed=11)
    steps = _steps()
    results = run_distributed(list(steps.values()), model, batch, WORLD, timeout=TIME_BOX_S)
    references = {}
    out = {}
    for (name, variant), step, grads in zip(steps, steps.values(), results, strict=True):
        loss = I2T if name == "i2t" else LOSSES[name]
        if name not in references:
            references[name] = run_step(FullBatch(loss), model, batch)
        out[name, variant] = compare(references[name], grads, batch, candidate_name=step.name)
    return out


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("variant", ["gather_with_gradient", "local_loss",
                                     "gather_without_gradient_scaled"])  # fmt: skip
def test_each_correct_gather_agrees_to_1e_10(runs, name, variant):
    result = runs[name, variant]
    assert result.equivalent, str(result)
    assert result.world_size == WORLD
    for quantity in result.quantities:
        assert quantity.recorded and quantity.max_abs <= TIGHT, str(result)


def test_the_local_loss_of_one_direction_agrees_too(runs):
    result = runs["i2t", "local_loss"]
    assert result.equivalent and result["dL/dtheta"].max_abs <= TIGHT, str(result)


@pytest.mark.parametrize("name", list(LOSSES))
def test_gradient_caching_in_each_process_without_a_gather_is_not_the_whole_batch(runs, name):
    # Each process caches its own 8 items: their queries never meet the other process's
    # candidates, so the 2 x 8 x 8 cross-process scores are never computed.
    result = runs[name, "gradient_cache"]
    assert not result.equivalent
    assert result["dL/dscores"].unscored == 2 * (B // 2) ** 2


@pytest.mark.parametrize("name", ["i2t", "siglip"])
def test_gather_without_gradient_loses_the_other_processes_queries(runs, name):
    # Local loss (rows only) over candidates gathered without gradient: a candidate receives
    # gradient only from the queries of its own process. The scores and the queries' gradients
    # are right; every candidate's gradient misses the other process's half (SigLIP's sigmoid
    # gives every cross-process negative pair a gradient, as NT-Xent's softmax does).
    result = runs[name, "bug_gather_without_gradient"]
    assert not result.equivalent
    assert result.differing == ["dL/dtheta", "dL/dcandidates"]
    assert result["dL/dcandidates"].rows == list(range(B))
    assert result["dL/dcandidates"].ranks == [0, 1]
    assert result["dL/dscores"].max_abs <= TIGHT and result["scores"].max_abs <= TIGHT


def test_gather_without_gradient_in_both_directions_loses_both_sides(runs):
    # NT-Xent in both directions, each process its own rows (i2t) and its own columns (t2i):
    # the rows' candidates and the columns' queries come from the other process as constants.
    # A query's share of the other process's columns (t2i) is lost, as is a candidate's share
    # of the other process's rows (i2t): both embeddings' gradients miss a half on every item.
    result = runs["nt_xent", "bug_gather_without_gradient"]
    assert not result.equivalent
    assert result.differing == ["dL/dtheta", "dL/dqueries", "dL/dcandidates"]
    for side in ("dL/dqueries", "dL/dcandidates"):
        assert result[side].rows == list(range(B)) and result[side].ranks == [0, 1]
    assert result["dL/dscores"].max_abs <= TIGHT and result["scores"].max_abs <= TIGHT


@pytest.mark.parametrize("name", ["nt_xent", "siglip"])
def test_a_missing_world_size_factor_is_a_factor_of_one_half(runs, name):
    # Only a process's own rows carry gradient into its copy of the whole loss; averaging over
    # two processes without the factor 2 halves every gradient, and changes no score.
    result = runs[name, "bug_missing_world_size_factor"]
    assert not result.equivalent
    for name in ("dL/dtheta", "dL/dqueries", "dL/dcandidates", "dL/dscores"):
        assert result[name].scale == pytest.approx(1 / WORLD, abs=1e-12)
        assert result[name].scaled_agrees and not result[name].agrees
    assert result["scores"].max_abs <= TIGHT
    assert "= 0.5 x reference" in str(result)


def test_the_wrong_gather_order_is_found_on_rank_1(runs):
    # Rank 0 puts its own candidates first, which is rank order: it is right. Rank 1 puts its
    # own first too, so its queries are scored against shifted columns: its rows of the scores
    # (values and gradients) and its queries' gradients are wrong, rank 0's are not.
    result = runs["i2t", "bug_wrong_gather_order"]
    assert not result.equivalent
    for name in ("scores", "dL/dscores", "dL/dqueries"):
        assert result[name].rows == RANK_1_ROWS, (name, str(result))
        assert result[name].ranks == [1]
    assert result["scores"].columns == list(range(B))


def test_gather_rows_gathers_with_gradient_by_default(runs):
    # gather_rows(x) is documented to carry gradient back to every process's rows: the whole
    # loss in each process over rows gathered so is the whole-batch gradient (averaged over
    # the two processes, each computing all of it).
    result = runs["nt_xent", "gather_rows_default"]
    assert result.equivalent, str(result)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_hung_process_is_stopped_by_the_time_box_and_ended():
    model, batch = synthetic_problem(batch_size=4)
    resource_tracker.ensure_running()  # multiprocessing's helper, which lives on: started before
    before = set(descendants(os.getpid()))
    with pytest.raises(TimeoutError, match="still ran after 10 s"):
        run_distributed([SleepingStep(None)], model, batch, WORLD, timeout=10)
    assert set(descendants(os.getpid())) - before == set()  # the sleepers are killed, not left


def test_a_raising_process_is_reported_with_its_message():
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(RuntimeError, match="rank 1 of the distributed run raised first") as caught:
        run_distributed([RaisingStep()], model, batch, WORLD, timeout=TIME_BOX_S)
    assert "RuntimeError: planted failure in the step" in str(caught.value)
    # Rank 1's traceback ends the first part; rank 0 may or may not have failed after it (in a
    # collective rank 1 left), which adds one line "then rank 0: <its exception line>".
    assert re.search(r"RuntimeError: planted failure in the step"
                     r"(\nthen rank 0: [\w.]+(Error|Exception)\b[^\n]*)?\Z",
                     str(caught.value)), str(caught.value)  # fmt: skip


def test_processes_that_raise_together_are_all_reported():
    # Three processes raise at once: the report holds the traceback of the first and, on a
    # line of its own, the exception line of each of the other two (never a line of their
    # tracebacks' middle), whichever process was first.
    model, batch = synthetic_problem(batch_size=6)
    with pytest.raises(RuntimeError) as caught:
        run_distributed([RaisingEverywhereStep()], model, batch, 3, timeout=TIME_BOX_S)
    report = re.fullmatch(
        r"rank (\d) of the distributed run raised first:\nTraceback.*"
        r"\nRuntimeError: planted failure on rank \1"
        r"\nthen rank (\d): RuntimeError: planted failure on rank \2"
        r"\nthen rank (\d): RuntimeError: planted failure on rank \3",
        str(caught.value), flags=re.DOTALL,
    )  # fmt: skip
    assert report is not None, str(caught.value)
    assert sorted(report.groups()) == ["0", "1", "2"], str(caught.value)


def test_a_process_that_raises_a_second_after_the_first_is_reported_too():
    # Rank 0 raises at once, rank 1 a second later: the runner notices rank 0 within half a
    # second and waits for the others (FAILURE_GRACE_S, 2 s) before it stops them, so the
    # report names both. Stopping rank 1 at once would leave its failure out.
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(RuntimeError) as caught:
        run_distributed([RaisingLateStep(delay=1.0)], model, batch, WORLD, timeout=TIME_BOX_S)
    assert re.fullmatch(
        r"rank 0 of the distributed run raised first:\nTraceback.*"
        r"\nRuntimeError: planted failure on rank 0"
        r"\nthen rank 1: RuntimeError: planted failure on rank 1",
        str(caught.value), flags=re.DOTALL,
    ), str(caught.value)  # fmt: skip


def test_a_process_that_dies_without_raising_is_reported():
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(RuntimeError, match=r"^a process of the distributed run died: ") as caught:
        run_distributed([ExitingStep()], model, batch, WORLD, timeout=TIME_BOX_S)
    assert "exit code 3" in str(caught.value)  # torch's words for the process's exit
