"""Under torch.distributed (two gloo ranks): what the ranks' Monitors agree on, and who says it.

* A schedule of the user's own that raises on rank 1 alone, past the 4,096 steps the ranks
  compare at their first ``monitor.step()``, left rank 0 waiting at that step in a collective
  rank 1 never joined (under DDP, until the process group timed out). The ranks now compare
  their schedules again when those steps run out, and disable the quantity on every rank from
  the step where they part.
* The header's ``gathered`` said true above a first record that held the ``"disabled"`` note
  alone: no batch had been logged, gathered or not.
* The warnings of the run folder's stale file, of a tau other than the loss's, of a quantity
  a watched loss cannot serve and of ``every=`` replacing the quantities' own schedules were
  given by every rank, each with the same words.
* A quantity disabled on rank 0, which alone writes, was still computed on rank 1 at every
  logged step, and the batch gathered for it.
"""

import json

import pytest
import torch

import gradlab
from gradlab.monitor import Monitor, read_jsonl
from tests.helpers.processes import run_two_ranks
from tests.helpers.ranks_agree import (
    RAISES_AT,
    RESUMED_AT,
    boundary_strict_worker,
    dropped_worker,
    first_note_worker,
    horizon_worker,
    warnings_worker,
    went_back_worker,
)


def _spawn(tmp_path, worker, what):
    """Two ranks of ``worker``; returns what each rank wrote."""
    run_two_ranks(worker, (str(tmp_path / "init"), str(tmp_path)), what)
    return [json.loads((tmp_path / f"out_{rank}.json").read_text()) for rank in range(2)]


@pytest.mark.slow
def test_a_schedule_that_raises_on_one_rank_past_the_compared_steps_hangs_no_rank(tmp_path):
    ranks = _spawn(tmp_path, horizon_worker, "a schedule raising on rank 1 past step 4095")
    assert [rank["error"] for rank in ranks] == [None, None]
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    logged = [0, *range(RESUMED_AT, RAISES_AT)]
    assert [(r["step"], "loss" in r) for r in records] == [
        *((step, True) for step in logged), (RAISES_AT, False)]  # fmt: skip
    why = (f"its schedule answers differently on the ranks for step {RAISES_AT} (rank 0 logs "
           "it, rank 1 raises): under torch.distributed a schedule must answer alike on every "
           "rank")  # fmt: skip
    assert records[-1]["disabled"] == {
        "loss": f"step {RAISES_AT}: disabled on every rank: {why}"}
    # the group's finding, said once by rank 0; rank 1's own error, said where it is known
    told = [w for w in ranks[0]["warnings"] if "answers differently" in w]
    assert len(told) == 1 and told[0].startswith(
        f"gradlab.Monitor: step 4096: quantity 'loss': {why}")
    assert f"disabled on every rank from step {RAISES_AT} on" in told[0]
    assert ranks[1]["warnings"] == [
        f"gradlab.Monitor: the schedule of quantity 'loss' raises for step {RAISES_AT} on "
        "rank 1: RuntimeError: no entry for this step"]


@pytest.mark.slow
def test_a_header_above_a_note_alone_does_not_say_the_batch_was_gathered(tmp_path):
    _spawn(tmp_path, first_note_worker, "a first record of the note alone")
    headers, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert sorted(records[0]) == ["disabled", "step"]  # the run's first record: no value
    assert [r["step"] for r in records[1:]] == [1, 2]
    # no batch was logged when the header was written: it cannot say whether one is gathered
    assert headers[0]["distributed"] == {"world_size": 2, "mode": "auto", "gathered": None}


def _prepare_a_run_with_a_stale_file(folder) -> None:
    """Steps 0-5 logged to metrics.jsonl and metrics.csv; then the loop went back to step 2
    with the JSONL sink alone: metrics.csv ends at step 5, the run's latest part at step 3."""
    def train(monitor, steps):
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.1))
        for _ in range(steps):
            embeddings = torch.randn(8, 4, requires_grad=True)
            loss_fn(embeddings, torch.arange(8) % 2).backward()
            monitor.step()

    with Monitor(folder, preset="cheap", every=1, sinks=["jsonl", "csv"]) as monitor:
        train(monitor, 6)
    monitor = Monitor(folder, preset="cheap", every=1, resume=True)
    monitor.step_count = 2
    with pytest.warns(UserWarning, match="training went back to an earlier checkpoint"):
        with monitor:
            train(monitor, 2)


@pytest.mark.slow
def test_warnings_of_the_folder_and_of_the_watched_losses_are_given_by_rank_0_alone(tmp_path):
    _prepare_a_run_with_a_stale_file(tmp_path / "run")
    ranks = _spawn(tmp_path, warnings_worker, "warnings of the whole group")
    said = ("resumes after step 3", "tau=0.05 differs from",
            "the embedding_mean quantity, which you passed", "every=1 replaces the schedules")
    for words in said:
        assert len([w for w in ranks[0]["warnings"] if words in w]) == 1, (words, ranks[0])
    assert not [w for w in ranks[1]["warnings"] if any(words in w for words in said)]


@pytest.mark.slow
def test_a_quantity_disabled_on_rank_0_is_computed_and_gathered_for_on_no_rank(tmp_path):
    ranks = _spawn(tmp_path, dropped_worker, "a quantity disabled on rank 0")
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [sorted(r) for r in records] == [["counted_calls", "loss", "step"],
                                            ["disabled", "loss", "step"]]  # fmt: skip
    # rank 1 read and computed its copy at steps 0 and 1 (it learns of rank 0's at step 2's
    # agreement), not at steps 2 and 3; and the loss, logged at steps 0 and 1 alone, is the
    # only reason left to gather a batch
    assert [(rank["at_calls"], rank["computes"]) for rank in ranks] == [(2, 2), (3, 2)]
    assert [rank["float_gathers"] for rank in ranks] == [2, 2]


@pytest.mark.slow
def test_a_quantity_disabled_on_rank_0_stays_left_out_after_the_loop_goes_back(tmp_path):
    # disabled on rank 0 at step 1 (rank 1 learns of it at step 2's agreement); the loop then
    # goes back to step 1: the quantity, disabled for the rest of the run on both ranks, was
    # read and gathered for again at steps before the one the ranks had agreed on
    ranks = _spawn(tmp_path, went_back_worker, "a loop gone back past a quantity left out")
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1]  # step 1: the note of rank 0's copy alone
    assert "counted_calls" in records[1]["disabled"]
    # gathered at steps 0 and 1 alone (the loss, and rank 0's copy that raised there)
    assert [rank["float_gathers"] for rank in ranks] == [2, 2]
    assert [rank["computes"] for rank in ranks] == [2, 2]


@pytest.mark.slow
def test_strict_raises_on_every_rank_for_a_schedule_that_parts_at_the_first_uncompared_step(
        tmp_path):  # fmt: skip
    # the ranks compared the next 4,096 steps only at step 4096's step(), after its watched
    # call had asked the schedule: rank 1 raised there alone, and rank 0 waited for it in the
    # comparison until the process group timed out
    ranks = _spawn(tmp_path, boundary_strict_worker, "strict=True at the first step uncompared")
    for rank in ranks:
        assert rank["error"] is not None and "strict=True raises, on every rank" in rank["error"]
        assert "for step 4096 (rank 0 logs it, rank 1 raises)" in rank["error"]
